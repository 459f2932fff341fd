"""Mining candidate entries: from search-split reference solutions and passed search-split trials.

Two sources, both on the lineage's **search** split only (the caller passes each task's
split, and anything else is refused with :class:`SplitRefused`):

- a task's reference solution, ``solution/solve.sh``: its command lines, without the
  shebang, ``set`` lines, comments and blank lines (a line ending in ``\\``, a here-document
  and a compound block ``if .. fi``, ``for/while/until .. done``, ``case .. esac``, ``{ .. }``
  stay one command); provenance ``oracle``, trial id ``oracle``;
- a passed trial's transcript: the ``bash`` commands it ran that exited 0, in order
  (a trial that used another tool than ``bash`` and ``finish`` is not mined); provenance
  ``model``.

Candidates carry no outputs yet: the validation replay records them
(:mod:`mindforge.experience.validation`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mindforge.errors import InputError
from mindforge.experience.entry import ORACLE_TRIAL, ExperienceEntry, Provenance, make_entry
from mindforge.hcp.examples import ExampleStep

#: the one split experience may come from
SEARCH_SPLIT = "search"

_HEREDOC_RE = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_OPEN_RE = re.compile(r"(?:^|[;&|(]\s*|\bthen\s+|\bdo\s+|\belse\s+)(if|for|while|until|case)\b")
_CLOSE_RE = re.compile(r"(?:^|[;&|]\s*|\s)(fi|done|esac)\b")
_SET_RE = re.compile(r"set(\s+[-+].*)?")


class SplitRefused(InputError):
    """Experience was offered from a task that is not on the lineage's search split.

    Args:
        task_id: the task.
        split: the split it is on (``selection``, ``sealed``, or ``none`` when not in the pool).
        lineage: the lineage whose library refused it.
    """

    def __init__(self, task_id: str, split: str, lineage: str) -> None:
        self.task_id, self.split, self.lineage = task_id, split, lineage
        super().__init__(
            f"task {task_id}",
            "split",
            f"is on the {split!r} split of lineage {lineage!r}; experience comes from the search split only",
        )


def check_search_split(task_id: str, split: str | None, lineage: str) -> None:
    """Raise :class:`SplitRefused` unless ``split`` is ``search``."""
    if split != SEARCH_SPLIT:
        raise SplitRefused(task_id, split or "none", lineage)


def solution_commands(text: str) -> list[str]:
    """The commands of a ``solve.sh``: shebang, ``set`` lines, comments and blank lines dropped.

    Args:
        text: the script.

    Returns:
        the commands in order; a multi-line construct (continuation, here-document,
        compound block) is one command with its lines joined by newlines.
    """
    commands: list[str] = []
    buf: list[str] = []
    heredoc: str | None = None
    depth = 0
    for raw in text.splitlines():
        line = raw.rstrip()
        if heredoc is not None:
            buf.append(raw)
            if line.strip() == heredoc:
                heredoc = None
        else:
            stripped = line.strip()
            if not buf and (not stripped or stripped.startswith("#") or _SET_RE.fullmatch(stripped)):
                continue
            if not stripped and buf and depth == 0:
                continue
            buf.append(line)
            code = _strip_comment(stripped)
            depth += len(_OPEN_RE.findall(code)) + (1 if code.endswith("{") else 0)
            depth -= len(_CLOSE_RE.findall(code)) + (1 if code.startswith("}") else 0)
            match = _HEREDOC_RE.search(code)
            if match:
                heredoc = match.group(2)
                continue
            if code.endswith("\\"):
                continue
        if heredoc is None and depth <= 0 and buf:
            commands.append("\n".join(buf).strip())
            buf, depth = [], 0
    if buf:
        commands.append("\n".join(buf).strip())
    return [c for c in commands if c]


def _strip_comment(code: str) -> str:
    # a '#' after white space starts a comment (quotes are not tracked: good enough for
    # counting block keywords; the replay decides whether the command works)
    return re.split(r"(?:^|\s)#", code, maxsplit=1)[0].rstrip()


def mine_solution(
    *, task_id: str, task_hash: str, instruction: str, solve_sh: Path, split: str | None, lineage: str
) -> ExperienceEntry | None:
    """A candidate ``oracle`` entry from a search-split task's reference solution.

    Args:
        task_id / task_hash / instruction: the task.
        solve_sh: its ``solution/solve.sh``.
        split: the task's split in the lineage's pool.
        lineage: the lineage (named in the refusal).

    Returns:
        the candidate, or None when the script has no command.

    Raises:
        SplitRefused: the task is not on the search split.
        InputError: the script cannot be read.
    """
    check_search_split(task_id, split, lineage)
    try:
        text = solve_sh.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(solve_sh, "", f"cannot read the reference solution: {exc}") from None
    commands = solution_commands(text)
    if not commands:
        return None
    return make_entry(
        instruction=instruction,
        steps=[ExampleStep(command=c) for c in commands],
        provenance=Provenance.ORACLE,
        trial_id=ORACLE_TRIAL,
        task_id=task_id,
        task_hash=task_hash,
    )


def trial_commands(events: list[dict[str, Any]]) -> list[str] | None:
    """The ``bash`` commands a trial ran that exited 0, in order; None if it used other tools.

    Args:
        events: the trial's transcript events (``mindforge.agent.transcript``).
    """
    commands: list[str] = []
    pending: str | None = None
    for ev in events:
        kind = ev.get("event")
        if kind == "action":
            tool = ev.get("tool")
            if tool == "finish":
                continue
            if tool != "bash":
                return None
            pending = str((ev.get("arguments") or {}).get("command", ""))
        elif kind == "observation" and pending is not None:
            if ev.get("exit_code") == 0 and pending.strip():
                commands.append(pending.strip())
            pending = None
    return commands


def mine_trial(
    *,
    trial_id: str,
    passed: bool,
    task_id: str,
    task_hash: str,
    instruction: str,
    contract_hash: str,
    generation: int,
    events: list[dict[str, Any]],
    split: str | None,
    lineage: str,
) -> ExperienceEntry | None:
    """A candidate ``model`` entry from a passed search-split trial.

    Returns:
        the candidate, or None when the trial did not pass, ran no successful command,
        or used a tool other than ``bash`` and ``finish``.

    Raises:
        SplitRefused: the task is not on the search split.
    """
    check_search_split(task_id, split, lineage)
    if not passed:
        return None
    commands = trial_commands(events)
    if not commands:
        return None
    return make_entry(
        instruction=instruction,
        steps=[ExampleStep(command=c) for c in commands],
        provenance=Provenance.MODEL,
        trial_id=trial_id,
        task_id=task_id,
        task_hash=task_hash,
        contract_hash=contract_hash,
        generation=generation,
    )
