"""Audit-guided priors: which edits are worth trying first for a failure, given its audit.

The audit names what stood in the way (:mod:`mindforge.audit`); this table maps each
audit rule (and the limit that fired) to edit tags (:meth:`Edit.tags`) with an affinity
level: 2 = the evidence points straight at the edit (the missing tool the model asked
for, the observation cap that cut the output), 1 = the edit addresses that kind of
failure, 0 = unrelated. The allocator turns the level into a prior success rate.
"""

from __future__ import annotations

from collections.abc import Iterable

from mindforge.search.state import SearchTask

#: audit rule -> edit tag -> affinity level
RULE_AFFINITY: dict[str, dict[str, int]] = {
    "config.tool_missing": {"tools": 1},
    "config.output_cut": {"observation_raise": 2, "error_output": 1, "skill:show_lines.sh": 1, "truncation": 1},
    "config.limit_while_progressing": {"plan": 1, "single_command": 1},
    # replies the harness could not use: the action format and worked examples in it are
    # the direct levers (a small model that cannot keep to JSON writes a bare command
    # line), then stop sequences and the reply length
    "config.parse_failure": {
        "format": 2,
        "examples": 2,
        "stop": 1,
        "reply_tokens_lower": 1,
        "reply_tokens_raise": 1,
        "sampling": 1,
        "prompt": 1,
    },
    "config.context_overflow": {"observation_lower": 2, "tools_fewer": 1, "observation_terse": 1},
    "config.error_output_hidden": {"error_output": 2},
    "model.wrong_answer": {"plan": 1, "verify": 1, "skills": 1, "prompt": 1},
    "model.finished_on_errors": {"verify": 1, "error_output": 1, "skills": 1, "prompt": 1, "exit_code": 1},
    # the model repeats one action until the turn limit: one command, then the verifier
    "model.stuck": {"single_command": 2, "plan": 1, "sampling": 1, "prompt": 1, "error_output": 1},
    "model.no_transcript": {"plan": 1, "verify": 1, "skills": 1, "prompt": 1},
}
#: failure class of the audited trial -> edit tag -> affinity level (the three unusable
#: replies share the rule ``config.parse_failure``; the class tells them apart)
CLASS_AFFINITY: dict[str, dict[str, int]] = {
    # cut by max_tokens: a small model rambles past its action; a stop sequence or an
    # action grammar (constrained decoding) ends the reply where the action does
    "truncated_reply": {"stop": 2, "constrained": 2, "reply_tokens_raise": 1, "reply_tokens_lower": 1},
    # empty: a stop sequence may fire first (remove it); examples show what to write
    "empty_reply": {"stop_off": 2, "examples": 2},
    "parse_error": {"format": 2, "examples": 2},
}
#: limit fired -> edit tag -> affinity level (added to the rule's)
LIMIT_AFFINITY: dict[str, dict[str, int]] = {
    "max_turns": {"turns_raise": 2},
    "agent_timeout": {"time_lower": 1, "plan": 1},
    "token_budget": {"observation_lower": 1, "tools_fewer": 1},
    "context_window": {"observation_lower": 2},
}
#: affinity level -> prior success rate of a cell
PRIOR_MEAN: dict[int, float] = {0: 0.05, 1: 0.25, 2: 0.6}


def task_affinity_table(task: SearchTask) -> dict[str, int]:
    """Edit tag -> affinity level for one failing task (its rule, failure class, limits and hints)."""
    table = dict(RULE_AFFINITY.get(task.rule, {}))
    if task.rule == "config.parse_failure":
        for tag, level in CLASS_AFFINITY.get(task.failure_class, {}).items():
            table[tag] = max(table.get(tag, 0), level)
    for limit in task.limits_fired:
        for tag, level in LIMIT_AFFINITY.get(limit, {}).items():
            table[tag] = max(table.get(tag, 0), level)
    for hint in task.hints:
        table[hint] = 2
    return table


def affinity(table: dict[str, int], tags: Iterable[str]) -> int:
    """The highest affinity level of any of ``tags`` (0 when none match)."""
    return max((table.get(tag, 0) for tag in tags), default=0)
