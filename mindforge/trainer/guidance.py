"""Off-policy guidance: a validated experience entry joins a group the policy failed.

On-policy GRPO learns only from tasks the policy sometimes passes: a group whose
rollouts all fail has zero advantage everywhere. A small model passes few tasks, so
the curriculum is a handful of tasks and the adapter learns those and little else.
LUFFY (Yan et al. 2025, "Learning to Reason under Off-Policy Guidance",
arXiv:2504.14945) adds an off-policy trace that solves the task to the group of
on-policy rollouts ("mixed-policy GRPO"): the group's advantages then push the
successful trace up and the policy's own failures down, and the policy learns tasks
it never solved by itself.

MindForge's off-policy trace is a **guide**: the conversation the harness would have had
if the model had typed the commands of the task's own entry in the lineage's experience
library. The entry is the task's reference solution or one of the pair's own passed
trials, from the **search split** only, and was kept only after its commands, replayed
with no model in fresh sandboxes, passed the verifier every time
(:mod:`mindforge.experience.validation`): its reward is that verified 1.0. The guide is
rendered under the training contract exactly as a live trial is: the same system
prompt, the same retrieved examples (BM25, never the task's own entry), the instruction
through the contract's template, each command as a reply in the contract's action
format followed by its recorded output, and the finish reply. Only the replies carry
loss; everything else is context, as in every sample.

A guide must be something the policy could have produced under the contract, so an
entry guides only when (:func:`guide_blocker`): the contract uses no hook that asks for
text the entry does not have (``plan_first``, ``verify_before_finish``); its commands fit
the action format (one line each for ``command``) and ``workspace.max_turns``; and each
reply fits ``model.max_tokens`` (checked on the tokenised sample by the trainer:
:func:`check_guide_sample`).

The objective gives guide tokens no PPO clip and no IcePop band (the guide was not
sampled from a policy whose ratio they bound) and, by default, the advantage-weighted
log-likelihood ``-A log p`` (:mod:`mindforge.trainer.objective` says why LUFFY's
shaped weight, the other choice, lost to the failures' pushes on SmolLM2).

Pure: the contract, the experience snapshot, the agent's prompt rendering and the ATIF
exporter; no torch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from mindforge.agent import prompts
from mindforge.agent.actions import tool_schemas
from mindforge.agent.atif_export import context_steps
from mindforge.atif import (
    MINDFORGE_EXTRA_KEY,
    Agent,
    FinalMetrics,
    Observation,
    ObservationResult,
    Step,
    ToolCall,
    Trajectory,
)
from mindforge.experience.contract import contract_snapshot, shown_entries
from mindforge.experience.entry import ExperienceEntry, Provenance
from mindforge.payloads.training import GuideRef
from mindforge.sandbox.base import ExecResult
from mindforge.trainer.errors import SampleDropped
from mindforge.trainer.samples import SampleSet, TrainingSample, trajectory_to_sample

#: ``agent.name`` of a guide trajectory (a live trial's is ``mindforge-hcp``)
GUIDE_AGENT = "mindforge-guide"
#: provenance order when a task has several entries: the pair's own success first (it is
#: nearer the policy's own distribution), then the reference solution
_PROVENANCE_ORDER = {Provenance.MODEL: 0, Provenance.ORACLE: 1}


def guide_blocker(contract: Any, entry: ExperienceEntry) -> str | None:
    """Why ``entry`` cannot guide under ``contract``, or None when it can.

    Args:
        contract: the training contract (:class:`mindforge.hcp.HCPContract`).
        entry: a validated experience entry.

    Returns:
        ``"hooks"`` (``plan_first`` or ``verify_before_finish`` asks for text the entry
        lacks), ``"no_bash"`` (the contract offers no ``bash`` tool), ``"multi_line"`` (the
        ``command`` format takes one line a reply) or ``"too_many_turns"`` (more commands
        than ``workspace.max_turns``); None when it fits.
    """
    if contract.hooks.plan_first or contract.hooks.verify_before_finish:
        return "hooks"
    if "bash" not in contract.tools.allow:
        return "no_bash"
    if contract.tools.action_format == "command" and entry.multi_line:
        return "multi_line"
    if contract.workspace.mode == "single_command":
        return None  # the commands are joined into one reply with &&
    if len(entry.steps) > contract.workspace.max_turns:
        return "too_many_turns"
    return None


def guide_entries(contract: Any) -> dict[str, ExperienceEntry]:
    """Task hash -> the entry that guides it under ``contract`` (empty without an experience snapshot).

    A task with several entries that fit takes the pair's own (``model``) entry before the
    reference solution, then the one with fewest commands, then the smallest entry id.

    Raises:
        InputError: the contract's embedded snapshot is not a valid snapshot document.
    """
    snapshot = contract_snapshot(contract)
    if snapshot is None:
        return {}
    best: dict[str, ExperienceEntry] = {}
    for entry in snapshot.entries:
        if guide_blocker(contract, entry) is not None:
            continue
        rank = (_PROVENANCE_ORDER[entry.provenance], len(entry.steps), entry.entry_id)
        held = best.get(entry.task_hash)
        if held is None or rank < (_PROVENANCE_ORDER[held.provenance], len(held.steps), held.entry_id):
            best[entry.task_hash] = entry
    return best


def guide_ref(entry: ExperienceEntry, snapshot_id: str) -> GuideRef:
    """The reference a selected group carries to its guide (the entry, from snapshot ``snapshot_id``)."""
    return GuideRef(
        entry_id=entry.entry_id, task_hash=entry.task_hash, provenance=str(entry.provenance),
        source_trial_id=entry.trial_id, snapshot_id=snapshot_id,
    )


def _replies(contract: Any, entry: ExperienceEntry) -> list[tuple[str, dict[str, Any], str]]:
    """``(tool, arguments, observation text)`` of each reply the guide makes, the finish last ("" observation)."""
    steps = [(s.command.strip(), s.output, s.exit_code) for s in entry.steps]
    if contract.workspace.mode == "single_command":
        last = entry.steps[-1]
        steps = [(" && ".join(c for c, _o, _e in steps), last.output, last.exit_code)]
    out: list[tuple[str, dict[str, Any], str]] = []
    for command, output, exit_code in steps:
        text = prompts.format_bash_observation(contract, ExecResult(exit_code=exit_code, stdout=output))
        out.append(("bash", {"command": command}, text))
    finish = "finish" in contract.tools.allow and contract.workspace.mode == "multi_turn"
    if finish and len(steps) < contract.workspace.max_turns:
        out.append(("finish", {}, ""))
    return out


def _agent_step(contract: Any, step_id: int, ts: str, turn: int, reply: tuple[str, dict[str, Any], str],
                timeout_sec: float) -> Step:
    """One guide reply as an agent step whose messages rebuild exactly what a live trial's chat holds.

    In the text formats (``json``, ``fenced_bash``, ``command``) the model's turn is plain
    text and the observation comes back as a user message, so the step has no native tool
    call and its observation no ``source_call_id`` (the parsed action is under
    ``extra["mindforge"]["action"]``); in ``tool_calls`` it has the call and the tool result.
    An observation's content is the message the model is shown (``Observation from bash:``
    and ``Output:`` wrappers included), which is what the trainer re-renders.
    """
    tool, arguments, text = reply
    call_id = f"guide_{turn}"
    message = prompts.render_action(contract, tool, arguments, call_id)
    if text and contract.tools.show_turn_budget:
        text = text + "\n" + prompts.budget_line(turn, contract.workspace.max_turns, timeout_sec)
    native = contract.tools.action_format == "tool_calls"
    calls = [ToolCall(tool_call_id=call_id, function_name=tool, arguments=arguments)] if native else None
    # the finish reply ends the phase with no observation, as in the live loop
    content = prompts.observation_message(contract, tool, text, call_id)["content"] if text else ""
    results = [ObservationResult(source_call_id=call_id if native else None, content=content)] if text else []
    return Step(
        step_id=step_id, timestamp=ts, source="agent", model_name=contract.model.adapter or contract.model.id,
        message=message.get("content") or "", tool_calls=calls,
        observation=Observation(results=results) if results else None,
        extra={MINDFORGE_EXTRA_KEY: {"guide": True, "action": {"tool": tool, "arguments": arguments}}},
    )


def guide_trajectory(
    contract: Any, *, task_id: str, task_hash: str, instruction: str, entry: ExperienceEntry, ts: str,
    timeout_sec: float = 0.0,
) -> Trajectory:
    """The ATIF trajectory of ``entry`` guiding one task under ``contract``.

    The context steps hold what a live trial of this task is shown first (system prompt,
    retrieved examples, instruction: the exporter's own
    :func:`mindforge.agent.atif_export.context_steps`); then one agent step per reply -
    each command in the contract's action format with its recorded output as the
    observation, then the finish reply. Agent steps carry no token ids or log-probs: the
    trainer re-tokenises the chat with the template. ``agent.name`` is
    :data:`GUIDE_AGENT`, and ``extra["mindforge"]["guide"]`` names the entry, its
    provenance, the trial it came from and the contract's reply limit.

    Args:
        contract: the training contract (its harness renders the guide).
        task_id / task_hash / instruction: the task being guided.
        entry: the task's own validated entry (:func:`guide_entries`).
        ts: ISO-8601 timestamp written on the steps (when the guide was built).
        timeout_sec: the task's agent timeout (seconds), for the turn-budget line
            (``tools.show_turn_budget``); a guide takes no time, so it shows it whole.

    Returns:
        a valid ATIF trajectory.

    Raises:
        ValueError: ``entry`` is another task's, or cannot guide under ``contract``
            (:func:`guide_blocker`).
    """
    if entry.task_hash != task_hash:
        raise ValueError(f"entry {entry.entry_id} is task {entry.task_hash[:12]}'s, not {task_hash[:12]}'s")
    blocker = guide_blocker(contract, entry)
    if blocker is not None:
        raise ValueError(f"entry {entry.entry_id} cannot guide under {contract.ref}: {blocker}")
    shown = shown_entries(contract, instruction=instruction, task_id=task_id, task_hash=task_hash)
    messages = [
        {"role": "system", "content": prompts.render_system_prompt(contract, list(contract.skills.paths or []))},
        *prompts.render_examples(contract, [e.to_example() for e in shown]),
        {"role": "user", "content": prompts.render_instruction(contract, instruction)},
    ]
    steps: list[Step] = []

    def add(**fields: Any) -> Step:
        steps.append(Step(step_id=len(steps) + 1, **fields))
        return steps[-1]

    context_steps(messages, ts, add)
    for turn, reply in enumerate(_replies(contract, entry), start=1):
        steps.append(_agent_step(contract, len(steps) + 1, ts, turn, reply, timeout_sec))
    guide = {
        "entry_id": entry.entry_id, "provenance": str(entry.provenance), "source_trial_id": entry.trial_id,
        "max_tokens": contract.model.max_tokens,
    }
    experience = contract.resources.experience
    return Trajectory(
        session_id=f"guide-{entry.entry_id.removeprefix('exp-')}-{contract.content_hash[:12]}",
        agent=Agent(
            name=GUIDE_AGENT, version=f"{contract.mindforge.name}@{contract.mindforge.revision}",
            model_name=contract.model.id, tool_definitions=tool_schemas(list(contract.tools.allow)),
            extra={MINDFORGE_EXTRA_KEY: {"adapter": contract.model.adapter, "contract_hash": contract.content_hash}},
        ),
        steps=steps,
        final_metrics=FinalMetrics(total_prompt_tokens=0, total_completion_tokens=0, total_steps=len(steps)),
        extra={
            MINDFORGE_EXTRA_KEY: {
                "task_id": task_id, "failure_class": None, "limit_fired": None, "detail": "guide",
                "agent_steps": sum(1 for st in steps if st.source == "agent" and not st.is_copied_context),
                "experience_snapshot": experience.snapshot if experience is not None else "",
                "experience_entries": [e.entry_id for e in shown],
                "guide": guide,
            }
        },
    )


def is_guide(trajectory: Trajectory) -> bool:
    """True when ``trajectory`` is a guide (:func:`guide_trajectory`), not a trial's."""
    return trajectory.agent.name == GUIDE_AGENT


def reply_spans(loss_mask: list[int]) -> list[int]:
    """Lengths of the runs of 1 in ``loss_mask`` (one run per model reply), in order."""
    spans, run = [], 0
    for m in loss_mask:
        if m:
            run += 1
        elif run:
            spans.append(run)
            run = 0
    if run:
        spans.append(run)
    return spans


def check_guide_sample(sample: TrainingSample, trajectory: Trajectory) -> TrainingSample:
    """The guide's sample marked off-policy, with the teacher's log-probs (0: it chose each token surely).

    Args:
        sample: the re-tokenised sample of a guide trajectory.
        trajectory: that trajectory (its ``extra["mindforge"]["guide"]["max_tokens"]`` is
            the contract's reply limit).

    Returns:
        the sample with ``off_policy`` True and ``rollout_logprobs`` 0 on its model tokens.

    Raises:
        SampleDropped: ``guide_reply_too_long`` when a reply (its end-of-turn token
            included) needs more tokens than ``model.max_tokens``: the policy could not
            have written it under the contract.
    """
    guide = ((trajectory.extra or {}).get(MINDFORGE_EXTRA_KEY) or {}).get("guide") or {}
    limit = guide.get("max_tokens")
    longest = max(reply_spans(sample.loss_mask), default=0)
    if limit is not None and longest > int(limit):
        raise SampleDropped("guide_reply_too_long", f"a reply of {longest} tokens > model.max_tokens {limit}")
    zeros = [0.0] * len(sample.input_ids)
    return sample.model_copy(update={"off_policy": True, "rollout_logprobs": zeros, "has_rollout_logprobs": True})


def build_guide_samples(
    items: Iterable[tuple[Trajectory, float, str]], *, tokenizer: Any, max_seq_len: int | None = None
) -> SampleSet:
    """Off-policy samples of guide trajectories, counting drops by reason.

    Args:
        items: ``(guide trajectory, reward, group_id)`` triples.
        tokenizer: the policy's tokenizer (guides are re-tokenised with its chat template).
        max_seq_len: drop samples longer than this (tokens).

    Returns:
        the kept samples (``off_policy`` True) and ``dropped`` counts by reason (the
        reasons of :func:`mindforge.trainer.samples.trajectory_to_sample`, and
        ``guide_reply_too_long``).
    """
    samples: list[TrainingSample] = []
    dropped: Counter[str] = Counter()
    for trajectory, reward, group_id in items:
        try:
            sample = trajectory_to_sample(trajectory, reward, group_id, tokenizer=tokenizer, max_seq_len=max_seq_len)
            samples.append(check_guide_sample(sample, trajectory))
        except SampleDropped as exc:
            dropped[exc.reason] += 1
    return SampleSet(samples=samples, dropped=dict(dropped))
