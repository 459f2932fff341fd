"""A simulated unlock problem for measuring the allocator offline (benchmarks and unit tests).

Not used by the product. Each task is unlocked by one particular harness property (a
tool, a hook, a skill, an observation-cap raise, ...): under a contract that has it, a
noisy policy succeeds with probability ``p_unlocked`` (< 1); otherwise with
``p_locked`` (about 0). Combination kinds need two properties together; the
small-model kind ``combo:command+example`` (its replies fail to parse under the JSON
baseline; it needs the ``command`` action format and a worked example) fails as a wrong
answer, not a parse failure, once its format is a shell one: the oracle reports that
audit rule, as the real audit would, so the search sees the stepping stone. The outcome
oracle stands in for the sandbox and the scripted
policy so that hundreds of attempts run in seconds, and everything else - the base
evaluation's transcripts, their audits (:func:`mindforge.audit.audit_trial`), the
candidates, the allocator and its state - is the real code.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mindforge.audit import audit_trial
from mindforge.experience import EntryValidation, ExperienceSnapshot, Provenance, make_entry
from mindforge.hcp import SHELL_FORMATS, HCPContract, WorkedExample, derive, load_contract
from mindforge.hcp.examples import ExampleStep
from mindforge.search.candidates import CandidateError, materialize
from mindforge.search.edits import operator_edits, snapshot_edit
from mindforge.search.state import (
    CellResult,
    SearchState,
    SearchTask,
    StepPlan,
    StepResults,
)
from mindforge.search.tasks import search_tasks_from_audits
from mindforge.trials.record import FailureClass, LimitFired, TrialRecord

Predicate = Callable[[HCPContract, HCPContract], bool]
REPO = Path(__file__).resolve().parents[1]


def _skill(name: str) -> Predicate:
    return lambda root, c: f"skills/{name}" in c.skills.paths


#: unlock kind -> predicate(root, contract): does the contract unlock the task?
UNLOCKS: dict[str, Predicate] = {
    "tool:read_file": lambda root, c: "read_file" in c.tools.allow,
    "tool:write_file": lambda root, c: "write_file" in c.tools.allow,
    "observation": lambda root, c: c.tools.max_observation_bytes >= 4 * root.tools.max_observation_bytes,
    "turns": lambda root, c: c.workspace.max_turns >= 2 * root.workspace.max_turns,
    "format": lambda root, c: c.tools.action_format != root.tools.action_format,
    "plan": lambda root, c: c.hooks.plan_first,
    "verify": lambda root, c: c.hooks.verify_before_finish,
    "error_output": lambda root, c: c.hooks.on_command_error == "full",
    "temperature": lambda root, c: c.provider_options.temperature <= 0.3,
    "skill:run_tests.sh": _skill("run_tests.sh"),
    "skill:find_files.sh": _skill("find_files.sh"),
    "skill:show_tree.sh": _skill("show_tree.sh"),
    "skill:show_lines.sh": _skill("show_lines.sh"),
}
#: the simulation's worked examples (op ``add_example`` through ``SearchConfig.examples``):
#: placeholders about nothing, so no simulated figure depends on what an example says
SIM_EXAMPLES: list[WorkedExample] = [
    WorkedExample(
        name=f"sim_{i:02d}", instruction=f"Simulated chore number {i}.", steps=[ExampleStep(command=f"echo sim-{i}")]
    )
    for i in range(10)
]
#: kinds ``combo:<format>+example:<name>``: unlocked by that action format plus the one
#: named example (the example must match the task), e.g. ``combo:command+example:sim_03``
MATCHING_EXAMPLE = re.compile(r"^combo:(?P<format>\w+)\+example:(?P<name>[\w.-]+)$")


def _has_examples(root: HCPContract, c: HCPContract) -> bool:
    return bool(c.resources.examples)


#: kinds that need two edits together (not in the default mix: the benchmark's tasks need one);
#: ``combo:fenced_bash+example`` is a world where another format than ``command`` plus an example unlocks
COMBO_UNLOCKS: dict[str, Predicate] = {
    "combo:read_file+plan": lambda root, c: "read_file" in c.tools.allow and c.hooks.plan_first,
    "combo:command+example": lambda root, c: c.tools.action_format == "command" and _has_examples(root, c),
    "combo:fenced_bash+example": lambda root, c: c.tools.action_format == "fenced_bash" and _has_examples(root, c),
}
_SHELL_STEP: Predicate = lambda root, c: c.tools.action_format in SHELL_FORMATS  # noqa: E731 - a table entry
#: combination kind -> predicate of the first step: under such a contract the task
#: still fails, but as a wrong answer (``model.wrong_answer``) instead of its base failure
STEPPING: dict[str, Predicate] = {
    "combo:command+example": _SHELL_STEP,
    "combo:fenced_bash+example": _SHELL_STEP,
}
#: combination kind -> (predicate, share): under a contract with only the other half of
#: the pair, that share of the failed attempts (drawn per trial) gets past the base
#: failure too - on SmolLM2 a worked example alone makes some JSON replies parse - so a
#: full stepping stone competes with many partial ones
PARTIAL_STEPPING: dict[str, tuple[Predicate, float]] = {
    "combo:command+example": (_has_examples, 0.5),
    "combo:fenced_bash+example": (_has_examples, 0.5),
}


def matching_kind(action_format: str, example: str) -> str:
    """The kind of a task unlocked by ``action_format`` plus the example named ``example`` only."""
    return f"combo:{action_format}+example:{example}"


def unlock_predicate(kind: str) -> Predicate:
    """Whether a contract unlocks a task of this kind (:data:`UNLOCKS`, :data:`COMBO_UNLOCKS`, or a
    :data:`MATCHING_EXAMPLE` kind: the format plus the named example)."""
    match = MATCHING_EXAMPLE.match(kind)
    if match:
        fmt, name = match["format"], match["name"]
        return lambda root, c: c.tools.action_format == fmt and c.resources.example(name) is not None
    return UNLOCKS.get(kind) or COMBO_UNLOCKS[kind]


def _family(kind: str) -> str:
    """The kind whose stepping tables apply (a matching-example kind steps like ``combo:<format>+example``)."""
    match = MATCHING_EXAMPLE.match(kind)
    return f"combo:{match['format']}+example" if match else kind
#: the audit rule of a failed attempt past a stepping stone
STEPPED_RULE = "model.wrong_answer"


class UnlockTask(BaseModel):
    """A simulated task: its hash, id and the harness property that unlocks it."""

    task_hash: str
    task_id: str
    kind: str


def make_unlock_tasks(n_tasks: int, kinds: list[str] | None = None) -> list[UnlockTask]:
    """``n_tasks`` tasks cycling through the unlock kinds (all of :data:`UNLOCKS` by default;
    :data:`COMBO_UNLOCKS` kinds may be named too)."""
    kinds = kinds or list(UNLOCKS)
    out = []
    for i in range(n_tasks):
        kind = kinds[i % len(kinds)]
        task_id = f"unlock-{i:03d}-{kind.replace(':', '-').replace('+', '-').replace('.sh', '')}"
        out.append(UnlockTask(task_hash=hashlib.sha256(task_id.encode()).hexdigest(), task_id=task_id, kind=kind))
    return out


def _ev(event: str, **fields: Any) -> dict[str, Any]:
    return {"event": event, **fields}


def _actions(commands: list[str], exit_code: int = 0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for turn, command in enumerate(commands, 1):
        out.append(_ev("reply", turn=turn, finish_reason="stop"))
        out.append(_ev("action", turn=turn, tool="bash", arguments={"command": command}))
        out.append(
            _ev(
                "observation",
                turn=turn,
                content=f"exit code {exit_code}\nstdout:\n{command} done\n[turn {turn}/30; 99 s left]",
            )
        )
    return out


def base_transcript(kind: str) -> tuple[list[dict[str, Any]], FailureClass, LimitFired | None]:
    """The transcript of a failed base-evaluation trial of a task of this kind, with its class and limit.

    Each kind fails the way such a task fails under a harness that lacks the unlocking
    property: the model asks for the missing tool; the key line is cut from the output;
    turns run out while the model makes progress; replies cannot be parsed; the model
    loops; or it simply finishes with a wrong answer.
    """
    finish = [_ev("reply", turn=9, finish_reason="stop"), _ev("action", turn=9, tool="finish", arguments={})]
    if kind == "format" or (kind.startswith("combo:") and "example" in kind):
        bad = [
            _ev("unusable_reply", failure_class="parse_error", reason="no JSON action found", count=i)
            for i in (1, 2, 3)
        ]
        return bad, FailureClass.PARSE_ERROR, None
    if kind.startswith(("tool:", "combo:")):
        tool = kind.split(":", 1)[1].split("+")[0]
        reason = f"tool '{tool}' is not available; available tools: bash, finish"
        events = _actions(["ls"]) + [_ev("unusable_reply", failure_class="parse_error", reason=reason, count=1)]
        return events + _actions(["cat notes.txt"]) + finish, FailureClass.TASK_FAILED, None
    if kind == "observation":
        cut = "exit code 0\nstdout:\nhead\n[... 81234 bytes omitted ...]\ntail\n[turn 3/30; 90 s left]"
        events = _actions(["ls", "./build.sh"]) + [_ev("observation", turn=3, content=cut)]
        return events + finish, FailureClass.TASK_FAILED, None
    if kind == "turns":
        return _actions([f"step {i}" for i in range(12)]), FailureClass.MAX_TURNS, LimitFired.MAX_TURNS
    if kind == "temperature":
        return _actions(["make"] * 8, exit_code=2), FailureClass.MAX_TURNS, LimitFired.MAX_TURNS
    if kind == "error_output":
        return _actions(["ls"]) + _actions(["make", "make test"], exit_code=2) + finish, FailureClass.TASK_FAILED, None
    return _actions(["ls", "cat README", "echo fix > out.txt"]) + finish, FailureClass.TASK_FAILED, None


def base_search_tasks(tasks: list[UnlockTask], root: HCPContract, attempts: int = 2) -> list[SearchTask]:
    """Audit simulated base-evaluation failures of every task and return the failing tasks for search."""
    records, audits = [], {}
    for task in tasks:
        events, cls, limit = base_transcript(task.kind)
        for attempt in range(attempts):
            record = TrialRecord(
                trial_id=f"base-{task.task_id}-{attempt}",
                run_id="base",
                task_id=task.task_id,
                task_hash=task.task_hash,
                agent="model",
                contract_hash=root.content_hash,
                attempt=attempt,
                reward=0.0,
                failure_class=cls,
                limit_fired=limit,
                num_turns=10,
            )
            records.append(record)
            audits[record.trial_id] = audit_trial(record, events, contract=root)
    return search_tasks_from_audits(records, audits)


class UnlockOracle:
    """Outcome oracle of the unlock problem: executes a :class:`StepPlan` in-process.

    Args:
        root: the search root.
        tasks: the simulated tasks.
        p_unlocked: success probability under an unlocking contract (< 1: a noisy policy).
        p_locked: success probability otherwise.
        seed: with the trial id, seeds each outcome (reproducible).
        tokens_per_attempt / wall_sec_per_attempt: the cost reported per trial.
        report_rules: report :data:`STEPPED_RULE` as the audit rule of a failure past a
            stepping stone (False: no rule is ever reported, an ablation).
    """

    def __init__(
        self,
        root: HCPContract,
        tasks: list[UnlockTask],
        *,
        p_unlocked: float = 0.6,
        p_locked: float = 0.0,
        seed: int = 0,
        tokens_per_attempt: int = 3000,
        wall_sec_per_attempt: float = 30.0,
        report_rules: bool = True,
    ) -> None:
        self.root, self.seed, self.report_rules = root, seed, report_rules
        self.kinds = {t.task_hash: t.kind for t in tasks}
        self.p_unlocked, self.p_locked = p_unlocked, p_locked
        self.tokens, self.wall_sec = tokens_per_attempt, wall_sec_per_attempt
        self.contracts: dict[str, HCPContract] = {root.content_hash: root}
        self.edit_keys: dict[str, tuple[str, ...]] = {root.content_hash: ()}
        self.executed: list[str] = []

    def unlocks(self, task_hash: str, contract: HCPContract) -> bool:
        """Whether ``contract`` has the property that unlocks the task."""
        return unlock_predicate(self.kinds[task_hash])(self.root, contract)

    def failure_rule(self, task_hash: str, contract: HCPContract, trial_id: str = "") -> str:
        """The audit rule reported for a failed attempt: :data:`STEPPED_RULE` past a stepping stone, else ``""``.

        Past a partial stepping stone (:data:`PARTIAL_STEPPING`) the rule is reported on
        its share of the attempts, drawn from (seed, trial id).
        """
        if not self.report_rules:
            return ""
        kind = _family(self.kinds[task_hash])
        stepping = STEPPING.get(kind)
        if stepping is not None and stepping(self.root, contract):
            return STEPPED_RULE
        if kind in PARTIAL_STEPPING:
            partial, share = PARTIAL_STEPPING[kind]
            if partial(self.root, contract) and self._draw(f"{trial_id}:step") < share:
                return STEPPED_RULE
        return ""

    def contract(self, state: SearchState, plan: StepPlan, contract_hash: str) -> HCPContract:
        """The contract with this hash among the state's and the plan's candidates."""
        if contract_hash not in self.contracts:
            cand = next(c for c in [*state.candidates, *plan.new_candidates] if c.contract_hash == contract_hash)
            self.contracts[contract_hash] = materialize(self.root, cand.edits)
            self.edit_keys[contract_hash] = cand.edit_keys
        return self.contracts[contract_hash]

    def probability(self, task_hash: str, contract_hash: str) -> float:
        """The pass probability of one trial of the task under a known contract (``p_unlocked`` or ``p_locked``)."""
        return self.p_unlocked if self.unlocks(task_hash, self.contracts[contract_hash]) else self.p_locked

    def outcome(self, trial_id: str, unlocked: bool) -> float:
        """The reward (1.0 or 0.0) of one trial, drawn from (seed, trial id)."""
        p = self.p_unlocked if unlocked else self.p_locked
        return 1.0 if self._draw(trial_id) < p else 0.0

    def _draw(self, key: str) -> float:
        """A uniform draw in [0, 1) from (seed, key): the same key always draws the same number."""
        digest = hashlib.sha256(f"{self.seed}:{key}".encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big")).random()

    def execute(self, state: SearchState, plan: StepPlan) -> StepResults:
        """Run every planned cell (recording its trial id in :attr:`executed`)."""
        results = []
        for cell in plan.cells:
            contract = self.contract(state, plan, cell.contract_hash)
            reward = 1.0 if self._draw(cell.trial_id) < self.probability(cell.task_hash, cell.contract_hash) else 0.0
            self.executed.append(cell.trial_id)
            results.append(
                CellResult(
                    trial_id=cell.trial_id,
                    task_hash=cell.task_hash,
                    contract_hash=cell.contract_hash,
                    attempt=cell.attempt,
                    reward=reward,
                    tokens=self.tokens,
                    wall_sec=self.wall_sec,
                    rule="" if reward >= 1.0 else self.failure_rule(cell.task_hash, contract, cell.trial_id),
                )
            )
        return StepResults(step=plan.step, results=results)


# ---------------------------------------------------------------- worlds of the racing search

#: audit kinds whose base failures point the audit away from the library (no ``examples``
#: or ``experience`` tag ranks high): the global-fix world gives no hint of its fix
UNHINTED_KINDS: list[str] = [
    "observation", "turns", "plan", "verify", "error_output", "temperature",
    "skill:run_tests.sh", "skill:find_files.sh", "skill:show_tree.sh", "skill:show_lines.sh",
]  # fmt: skip
#: pass rates a decoy edit gets, one drawn per edit and seed
DECOY_RATES = (0.0, 0.02)


def sim_snapshot() -> ExperienceSnapshot:
    """The simulation's experience library: three validated placeholder entries about nothing.

    What an entry says never matters here: the world's oracle decides what the library
    does (:class:`WorldOracle`), so no simulated figure depends on its text.
    """
    validation = EntryValidation(rewards=[1.0, 1.0], replay_trial_ids=["sim-r0", "sim-r1"])
    entries = [
        make_entry(
            instruction=f"Simulated chore number {i}.", steps=[ExampleStep(command=f"echo sim-{i}", output="")],
            provenance=Provenance.ORACLE, trial_id="oracle", task_id=f"sim-{i}", task_hash=f"h-sim-{i}",
        ).with_validation(validation)
        for i in range(3)
    ]  # fmt: skip
    return ExperienceSnapshot(entries=tuple(entries))


def plain_root() -> HCPContract:
    """Today's world's root: the shipped baseline with bash and finish only (``bench_search.py``'s since its start)."""
    base = load_contract(REPO / "hcp_contracts" / "baseline.toml")
    changes = {"tools.allow": ["bash", "finish"]}
    return derive(base, name="bench", revision="1.0.0", edit="tools: bash and finish only", changes=changes)


@dataclass
class World:
    """One simulated search problem: its root, tasks, and what lifts them.

    Attributes:
        name: the world's name in tables.
        root: the search root.
        tasks: the tasks (their ``kind`` decides their base audit, and their own unlock
            when ``own_unlocks``).
        failing: the tasks for search, audited from their base transcripts.
        p_unlocked: pass rate under a contract that has a task's own unlocking property.
        own_unlocks: whether tasks have their own unlocking edit (today's world).
        fix_key: the edit key of the global fix (a contract whose chain carries it
            passes every task at ``fix_p``), or None.
        fix_p: the global fix's pass rate.
        decoys: edit key -> pass rate of a contract whose chain carries it (every task).
        snapshot_json: the lineage's library the search may move to (op ``experience_snapshot``), or None.
    """

    name: str
    root: HCPContract
    tasks: list[UnlockTask]
    failing: list[SearchTask]
    p_unlocked: float
    own_unlocks: bool
    fix_key: str | None
    fix_p: float
    decoys: dict[str, float]
    snapshot_json: str | None

    def has_fix(self, edit_keys: tuple[str, ...]) -> bool:
        """Whether a chain carries the global fix."""
        return self.fix_key is not None and self.fix_key in edit_keys

    def probability(self, task: UnlockTask, contract: HCPContract, edit_keys: tuple[str, ...]) -> float:
        """The pass probability of one trial: the best of its own unlock, the fix and any decoy it carries."""
        p = self.p_unlocked if self.own_unlocks and unlock_predicate(task.kind)(self.root, contract) else 0.0
        if self.has_fix(edit_keys):
            p = max(p, self.fix_p)
        return max([p, *(self.decoys.get(k, 0.0) for k in edit_keys)])

    def true_rate(self, contract: HCPContract, edit_keys: tuple[str, ...]) -> float:
        """A contract's pass rate over the failing tasks (the mean of the per-task probabilities)."""
        by_hash = {t.task_hash: t for t in self.tasks}
        total = sum(self.probability(by_hash[t.task_hash], contract, edit_keys) for t in self.failing)
        return total / len(self.failing)


def _library_key(snapshot_json: str) -> str:
    return snapshot_edit(snapshot_json).key


def _decoys(root: HCPContract, seed: int, keys: list[str]) -> dict[str, float]:
    rng = random.Random(f"decoys:{seed}")
    return {k: rng.choice(DECOY_RATES) for k in keys}


def today_world(n_tasks: int = 39, p: float = 0.6, *, library: bool = False) -> World:
    """Today's world (``bench_search.py``'s since its start): each task unlocked by its own edit at ``p``, hinted by
    the audit (13 kinds); with ``library``, the lineage also has a library that lifts nothing."""
    root = plain_root()
    tasks = make_unlock_tasks(n_tasks)
    return World(
        name="today" + (" + idle library" if library else ""), root=root, tasks=tasks,
        failing=base_search_tasks(tasks, root), p_unlocked=p, own_unlocks=True, fix_key=None, fix_p=0.0, decoys={},
        snapshot_json=sim_snapshot().to_json() if library else None,
    )  # fmt: skip


def global_world(seed: int, fix_p: float, *, n_tasks: int = 24, fix: str = "library", mixed: bool = False) -> World:
    """One edit lifts every failing task at ``fix_p``; every other edit is a decoy at 0 or 0.02.

    The root is the main job's (``smollm2.toml``): its 34 operator edits and the move to
    the lineage's library make the 35 single edits. The tasks' base failures are audited
    from kinds that do not point at the library (:data:`UNHINTED_KINDS`): the audit gives
    no hint of the fix.

    Args:
        seed: draws the decoys' rates (and, with ``fix="operator"``, which edit is the fix).
        fix_p: the fix's pass rate on every task.
        n_tasks: failing tasks.
        fix: ``library`` (the real world's fix: the lineage's library) or ``operator``
            (a uniformly drawn operator edit; the library is then a decoy too).
        mixed: also unlock each task by its own edit at 0.6 (the mix of both worlds).
    """
    root = load_contract(REPO / "hcp_contracts" / "smollm2.toml")
    snapshot = sim_snapshot().to_json()
    library = _library_key(snapshot)
    operator = [e.key for e in operator_edits(root)]
    rng = random.Random(f"fix:{seed}")
    fix_key = library if fix == "library" else rng.choice(operator)
    decoys = _decoys(root, seed, [k for k in [*operator, library] if k != fix_key])
    tasks = make_unlock_tasks(n_tasks, UNHINTED_KINDS)
    name = ("mixed" if mixed else "global") + ("" if fix == "library" else ", fix off the shortlist")
    return World(
        name=f"{name}, p={fix_p}", root=root, tasks=tasks, failing=base_search_tasks(tasks, root), p_unlocked=0.6,
        own_unlocks=mixed, fix_key=fix_key, fix_p=fix_p, decoys=decoys, snapshot_json=snapshot,
    )  # fmt: skip


class WorldOracle(UnlockOracle):
    """The outcome oracle of a :class:`World`: a trial passes with the world's probability.

    Args:
        world: the world.
        seed: with the trial id, seeds each outcome (reproducible).
    """

    def __init__(self, world: World, *, seed: int = 0) -> None:
        super().__init__(world.root, world.tasks, p_unlocked=world.p_unlocked, seed=seed)
        self.world = world
        self.by_hash = {t.task_hash: t for t in world.tasks}

    def probability(self, task_hash: str, contract_hash: str) -> float:
        """The world's pass probability of the task under a known contract."""
        task, contract = self.by_hash[task_hash], self.contracts[contract_hash]
        return self.world.probability(task, contract, self.edit_keys[contract_hash])

    def true_rate(self, contract_hash: str) -> float:
        """A known contract's pass rate over the failing tasks."""
        return self.world.true_rate(self.contracts[contract_hash], self.edit_keys[contract_hash])


def best_single_rate(world: World) -> tuple[str, float]:
    """The single edit (operator or the library move) with the highest pass rate, and that rate (the oracle's pick)."""
    best, rate = "", -1.0
    for edit in operator_edits(world.root, (), world.snapshot_json):
        try:
            contract = materialize(world.root, [edit])
        except CandidateError:  # an edit that changes nothing on this root (compact examples, none shown)
            continue
        r = world.true_rate(contract, (edit.key,))
        if r > rate:
            best, rate = edit.key, r
    return best, rate
