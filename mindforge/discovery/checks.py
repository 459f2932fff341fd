"""Static checks on a materialised proposal, run before anything is built.

* **Near-duplicates** of pool tasks, two ways. Instructions are normalised (Unicode
  NFKC, lower case, every run of non-alphanumeric characters a single separator) into
  word tokens; two instructions are near-duplicates when either the token-set Jaccard
  index or difflib's ``SequenceMatcher.ratio`` over the token sequences reaches
  :data:`SIMILARITY_THRESHOLD` (0.8). Jaccard catches reordered copies, the ratio
  catches copies with a few words changed. Tests are duplicates when the ``tests/``
  folders hash alike (:func:`mindforge.tasks.hashing.content_hash`: relative paths
  and bytes).
* **Tests that read the reference solution**: any file under ``tests/`` that mentions
  ``/solution`` or ``solve.sh``. The solution is never present when the tests run for
  the agent, so such tests cannot judge the agent's work.
* **The answer in the instruction**: a candidate answer is a text of at least two
  non-empty lines and :data:`MIN_ANSWER_CHARS` non-blank characters that the reference
  solution writes (a here-document body, a quoted string, or the script itself) or that
  the tests expect (a string literal, a list of string literals joined by newlines, a
  quoted string or here-document in a shell test, or a whole data file under
  ``tests/``). It is an answer in the instruction when the instruction contains it
  verbatim, compared line by line with surrounding blanks ignored; text that also
  appears in the environment's files is input data, not an answer, and is skipped.
  Single-line expectations are not checked: instructions legitimately quote the exact
  strings a program must print.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import re
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import BaseModel, Field

from mindforge.discovery.records import Rejection, RejectReason
from mindforge.tasks.hashing import content_hash, iter_task_files
from mindforge.tasks.model import Task

#: instructions at least this similar (Jaccard or difflib ratio over tokens) are near-duplicates
SIMILARITY_THRESHOLD = 0.8
#: the fewest non-blank characters of a candidate answer
MIN_ANSWER_CHARS = 16

_NON_WORD = re.compile(r"[^0-9a-z]+")
_SOLUTION_REF = re.compile(r"/solution\b|\bsolve\.sh\b")
_HEREDOC = re.compile(
    r"<<-?[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1[^\n]*\n(.*?)\n[ \t]*\2[ \t]*$", re.DOTALL | re.MULTILINE
)
_QUOTED = re.compile(r"'([^']*)'|\"((?:[^\"\\]|\\.)*)\"", re.DOTALL)
_MAX_TEXT_BYTES = 1 << 20


def instruction_tokens(text: str) -> list[str]:
    """Normalised word tokens of an instruction (NFKC, lower case, alphanumeric runs)."""
    return [t for t in _NON_WORD.split(unicodedata.normalize("NFKC", text).lower()) if t]


def instruction_similarity(a: list[str], b: list[str], *, prune_below: float = 0.0) -> float:
    """Similarity in [0, 1] of two token lists: the larger of token-set Jaccard and difflib ratio.

    Args:
        a / b: token lists from :func:`instruction_tokens`.
        prune_below: when difflib's cheap upper bounds show its ratio stays below this
            value, the ratio is not computed (the Jaccard index is returned); 0 = exact.
    """
    sa, sb = set(a), set(b)
    if not sa and not sb:
        return 1.0
    jaccard = len(sa & sb) / len(sa | sb)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    # ratio <= quick_ratio <= real_quick_ratio: skip the quadratic ratio when a bound is low
    if matcher.real_quick_ratio() < prune_below or matcher.quick_ratio() < prune_below:
        return jaccard
    return max(jaccard, matcher.ratio())


def hash_tests_dir(task: Task) -> str:
    """Content hash of the task's ``tests/`` folder (relative paths and bytes)."""
    return content_hash(task.tests_dir)


def task_family(task: Task) -> str:
    """The task family a task is an instance of (``[metadata] family``), or ``""``."""
    family = (task.config.metadata.model_extra or {}).get("family")
    return family if isinstance(family, str) else ""


def instance_key(task: Task) -> str:
    """sha256 of the normalised instruction tokens and the reference solution's text."""
    solve = task.solution_dir / "solve.sh"
    text = solve.read_text(encoding="utf-8", errors="replace") if solve.is_file() else ""
    doc = " ".join(instruction_tokens(task.instruction)) + "\0" + "\n".join(_lines(text).splitlines())
    return hashlib.sha256(doc.encode("utf-8")).hexdigest()


#: how a rejection names a selection or sealed pool task (never by its id)
HELD_OUT_NAME = "a held-out (selection or sealed) pool task"


class PoolEntry(BaseModel):
    """What the duplicate checks need of one pool task.

    ``family`` and ``instance_key`` (:func:`instance_key`) are set for family instances.

    Attributes:
        held_out: the task is on the selection or sealed split: a rejection it causes
            does not name it, so no record (and no later Discovery prompt) does.
    """

    task_id: str
    tokens: list[str]
    tests_hash: str
    family: str = ""
    instance_key: str = ""
    held_out: bool = False

    @property
    def shown(self) -> str:
        """The task as a rejection may name it."""
        return HELD_OUT_NAME if self.held_out else f"pool task {self.task_id!r}"


class PoolIndex(BaseModel):
    """The pool as the duplicate checks see it (small: ids, tokens, hashes)."""

    entries: list[PoolEntry] = Field(default_factory=list)

    @classmethod
    def from_tasks(cls, tasks: Iterable[Task], held_out: Iterable[str] = ()) -> PoolIndex:
        """Index loaded tasks.

        Args:
            tasks: the pool's tasks, every split.
            held_out: ids of those on the selection or sealed split (see :class:`PoolEntry`).
        """
        index, hidden = cls(), set(held_out)
        for task in tasks:
            index.add(task, held_out=task.id in hidden)
        return index

    def add(self, task: Task, held_out: bool = False) -> None:
        """Add a task (e.g. one just admitted, so that a later proposal cannot duplicate it)."""
        family = task_family(task)
        self.entries.append(
            PoolEntry(
                task_id=task.id, tokens=instruction_tokens(task.instruction), tests_hash=hash_tests_dir(task),
                family=family, instance_key=instance_key(task) if family else "",
                held_out=held_out,
            )
        )

    def ids(self) -> set[str]:
        """The task ids in the pool."""
        return {e.task_id for e in self.entries}

    def find_duplicate(self, task: Task, threshold: float = SIMILARITY_THRESHOLD) -> Rejection | None:
        """The first pool task that ``task`` duplicates (same tests, or a near-identical instruction).

        Instances of one family share their wording by design, so between them the test
        is stricter than similarity: an instance duplicates another of its family when
        their instructions and reference solutions are equal (:func:`instance_key`);
        against every other pool task the instruction similarity applies as usual.

        Args:
            task: the proposed task.
            threshold: similarity at or above which instructions are near-duplicates.

        Returns:
            A ``duplicate_tests`` or ``duplicate_instruction`` rejection, or None.
        """
        mine = hash_tests_dir(task)
        for entry in self.entries:
            if entry.tests_hash == mine:
                return Rejection(
                    task_id=task.id,
                    reason=RejectReason.DUPLICATE_TESTS,
                    detail=f"tests/ identical to {entry.shown}",
                )
        family = task_family(task)
        if family:
            key = instance_key(task)
            for entry in self.entries:
                if entry.family == family and entry.instance_key == key:
                    return Rejection(
                        task_id=task.id,
                        reason=RejectReason.DUPLICATE_INSTRUCTION,
                        detail=f"instruction and solution equal {entry.shown} (family {family!r})",
                    )
        tokens = instruction_tokens(task.instruction)
        best, best_entry = 0.0, None
        for entry in self.entries:
            if family and entry.family == family:
                continue
            score = instruction_similarity(tokens, entry.tokens, prune_below=max(threshold, best))
            if score > best:
                best, best_entry = score, entry
        if best >= threshold and best_entry is not None:
            return Rejection(
                task_id=task.id,
                reason=RejectReason.DUPLICATE_INSTRUCTION,
                detail=f"instruction {best:.2f} similar to {best_entry.shown} (threshold {threshold:g})",
            )
        return None


def _text_files(root: Path) -> Iterator[tuple[str, str]]:
    if not root.is_dir():
        return
    for rel, full in iter_task_files(root):
        if full.is_symlink() or full.stat().st_size > _MAX_TEXT_BYTES:
            continue
        yield rel, full.read_bytes().decode("utf-8", errors="replace")


def find_solution_reads(task: Task) -> Rejection | None:
    """A rejection when a file under ``tests/`` refers to the reference solution, else None."""
    for rel, text in _text_files(task.tests_dir):
        for number, line in enumerate(text.splitlines(), start=1):
            match = _SOLUTION_REF.search(line)
            if match:
                return Rejection(
                    task_id=task.id,
                    reason=RejectReason.TESTS_READ_SOLUTION,
                    detail=f"tests/{rel} line {number} refers to {match[0]!r}: {line.strip()[:120]}",
                )
    return None


def _lines(text: str) -> str:
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def _answer_like(text: str) -> bool:
    normal = _lines(text)
    return normal.count("\n") >= 1 and len("".join(normal.split())) >= MIN_ANSWER_CHARS


def _shell_candidates(text: str) -> Iterator[str]:
    for match in _HEREDOC.finditer(text):
        yield match[3]
    for match in _QUOTED.finditer(text):
        body = match[1] if match[1] is not None else match[2]
        yield body
        if "\\n" in body:
            yield body.replace("\\n", "\n").replace("\\t", "\t")


def _python_candidates(text: str) -> Iterator[str]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        yield from _shell_candidates(text)
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value
        elif isinstance(node, (ast.List, ast.Tuple)):
            items = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(items) >= 2 and len(items) == len(node.elts):
                yield "\n".join(items)


def answer_candidates(task: Task) -> list[tuple[str, str]]:
    """Texts that look like answers: ``(where, text)`` from the solution and the tests."""
    found: list[tuple[str, str]] = []
    for rel, text in _text_files(task.solution_dir):
        found.append((f"solution/{rel}", "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))))
        found += [(f"solution/{rel}", c) for c in _shell_candidates(text)]
    for rel, text in _text_files(task.tests_dir):
        if rel.endswith(".py"):
            found += [(f"tests/{rel}", c) for c in _python_candidates(text)]
        elif rel.endswith(".sh") or "." not in rel.rsplit("/", 1)[-1]:
            found += [(f"tests/{rel}", c) for c in _shell_candidates(text)]
        else:
            found.append((f"tests/{rel}", text))
    return [(where, text) for where, text in found if _answer_like(text)]


def find_answer_in_instruction(task: Task) -> Rejection | None:
    """A rejection when the instruction contains an answer verbatim (see the module docstring), else None."""
    instruction = _lines(task.instruction)
    flat_instruction = " ".join(instruction.split())
    env_texts = [_lines(text) for _rel, text in _text_files(task.environment_dir)]
    for where, text in answer_candidates(task):
        normal = _lines(text)
        if normal in instruction or " ".join(normal.split()) in flat_instruction:
            if any(normal in env for env in env_texts):
                continue  # input data quoted in the instruction, not an answer
            lines = normal.splitlines()
            return Rejection(
                task_id=task.id,
                reason=RejectReason.ANSWER_IN_INSTRUCTION,
                detail=(
                    f"the instruction contains {where}'s expected text verbatim "
                    f"({len(lines)} lines from {lines[0][:60]!r})"
                ),
            )
    return None


def static_checks(task: Task, pool: PoolIndex, *, threshold: float = SIMILARITY_THRESHOLD) -> Rejection | None:
    """All static checks, cheapest and most specific first.

    Order: tests read the solution, answer in the instruction, identical tests,
    near-duplicate instruction.

    Args:
        task: the materialised proposal.
        pool: the pool (and tasks admitted earlier in the same run).
        threshold: near-duplicate similarity threshold.

    Returns:
        The first rejection found, or None when every check passes.
    """
    return find_solution_reads(task) or find_answer_in_instruction(task) or pool.find_duplicate(task, threshold)
