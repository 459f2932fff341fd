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
from typing import Any

from pydantic import BaseModel

from mindforge.audit import audit_trial
from mindforge.hcp import SHELL_FORMATS, HCPContract, WorkedExample
from mindforge.hcp.examples import ExampleStep
from mindforge.search.candidates import materialize
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
        return self.contracts[contract_hash]

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
            reward = self.outcome(cell.trial_id, self.unlocks(cell.task_hash, contract))
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
