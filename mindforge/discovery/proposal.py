"""Proposal: ask the current pair for new tasks, and parse its reply strictly.

The prompt is two messages: the contract's ``prompts.discovery`` text as the system
message (versioned and hashed with the contract), and a user message with a summary of
the pool (categories, tasks the pair solves and fails, failure classes of the last
audit), the request for K tasks and :data:`REPLY_FORMAT`. The reply format lives here,
beside its parser, so that the two cannot drift apart.

A reply that is not the required JSON is rejected as a whole; a task inside it that does
not follow :class:`~mindforge.discovery.schema.TaskProposal` is rejected on its own,
with the reason. Nothing is patched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import openai
from pydantic import BaseModel, Field, ValidationError

from mindforge.discovery.records import Rejection, RejectReason
from mindforge.discovery.schema import DEFAULT_RULES, ProposalRules, TaskProposal
from mindforge.errors import InfraError
from mindforge.tasks.loader import dotted
from mindforge.tasks.model import Task

#: longest one-line instruction head shown in the pool summary, in characters
HEAD_CHARS = 160

# a backslash at a line end continues the line: the test_sh example is one line of the prompt
REPLY_FORMAT = """\
Reply format (this replaces any other reply format described earlier): exactly one JSON
object and nothing else, no prose and no code fence:

{{"tasks": [{{"task_id": "csv-merge-dedupe",
             "instruction": "Merge /app/data/a.csv and /app/data/b.csv into ...",
             "category": "data-transformation",
             "difficulty": "medium",
             "dockerfile": "FROM {base}\\nWORKDIR /app\\nCOPY data/ /app/data/\\n",
             "files": {{"data/a.csv": "id,name\\n1,x\\n", "data/b.csv": "id,name\\n2,y\\n"}},
             "test_sh": "#!/usr/bin/env bash\\nmkdir -p /logs/verifier\\nif \
python3 -m pytest -q /tests/test_outputs.py; then echo 1 > /logs/verifier/reward.txt; \
else echo 0 > /logs/verifier/reward.txt; fi\\n",
             "test_files": {{"test_outputs.py": "def test_merged():\\n    ...\\n"}},
             "solve_sh": "#!/usr/bin/env bash\\nset -euo pipefail\\n..."}}]}}

Rules for each task (a task breaking one is rejected, not repaired):
- all nine keys are required and no other key is allowed; "files" and "test_files"
  may be {{}}; every value is a string (the two maps: path -> file text);
- task_id: lowercase letters, digits and hyphens, 3 to 48 characters, unique in the reply;
- category: a lowercase slug; difficulty: "easy", "medium" or "hard";
- dockerfile: every FROM line names {bases}; RUN apt-get install and pip install are
  allowed; it is built with environment/ as the context, so COPY the paths of "files";
- files: paths relative to environment/, without ".." and not starting with "/";
- test_sh runs as `bash /tests/test.sh` after the agent has finished, with the
  test_files beside it in /tests; it writes 1 to /logs/verifier/reward.txt when the
  task is done and 0 otherwise;
- solve_sh runs once from the image's working directory and must make the tests pass;
  the tests must never read /solution or solve.sh;
- the instruction must not contain the expected output or an answer file verbatim;
- at most {max_files} files in "files" and "test_files" together, at most
  {max_file_bytes} bytes per file and {max_total_bytes} bytes in all; instruction at
  most {max_instruction_chars} characters."""


class TaskHead(BaseModel):
    """A pool task in one line: id, category and the start of its instruction."""

    task_id: str
    category: str = ""
    head: str


class PoolSummary(BaseModel):
    """What the model is told about the pool.

    Attributes:
        categories: category -> number of pool tasks.
        solved: tasks the current pair solved (at least once) in the last run.
        failed: tasks the current pair attempted and never solved.
        untried: pool tasks without results for the current pair.
        failure_classes: failure class -> count, from the last audit.
        families: family -> difficulty level -> ``(solved, tried)`` over the pool's
            family instances the pair tried (shown in family proposals).
    """

    categories: dict[str, int] = Field(default_factory=dict)
    solved: list[TaskHead] = Field(default_factory=list)
    failed: list[TaskHead] = Field(default_factory=list)
    untried: list[TaskHead] = Field(default_factory=list)
    failure_classes: dict[str, int] = Field(default_factory=dict)
    families: dict[str, dict[str, tuple[int, int]]] = Field(default_factory=dict)


class ProposalOutcome(BaseModel):
    """One parsed item of a reply: a proposal, or why there is none.

    Attributes:
        index: position in the reply's ``tasks`` list; -1 when the reply as a whole
            was unusable.
        task_id: the proposed id, where one could be read (else ``""``).
        proposal: the checked proposal, or None when rejected.
        reason: ``malformed`` when rejected, else None.
        detail: the defect, naming the key path.
        family / params: the family and parameters of a family proposal (else empty).
    """

    index: int
    task_id: str = ""
    proposal: TaskProposal | None = None
    reason: RejectReason | None = None
    detail: str = ""
    family: str = ""
    params: dict[str, Any] = Field(default_factory=dict)

    def rejection(self) -> Rejection:
        """This outcome as a rejection record (only for rejected outcomes)."""
        return Rejection(task_id=self.task_id, reason=self.reason or RejectReason.MALFORMED, detail=self.detail)


class DiscoveryEndpointError(InfraError):
    """The policy endpoint failed to answer the proposal request (retrying may help)."""


def instruction_head(text: str, limit: int = HEAD_CHARS) -> str:
    """The first non-empty line of an instruction, markdown marks dropped, at most ``limit`` chars."""
    for line in text.splitlines():
        line = re.sub(r"`|\*\*", "", line).lstrip("#> \t").strip()
        line = " ".join(line.split())
        if line:
            return line if len(line) <= limit else line[: limit - 3].rstrip() + "..."
    return ""


def summarise_pool(
    tasks: Sequence[Task],
    *,
    solved: Iterable[str] = (),
    failed: Iterable[str] = (),
    failure_classes: Mapping[str, int] | None = None,
) -> PoolSummary:
    """Build the pool summary from loaded tasks and the pair's last results.

    Args:
        tasks: the pool's tasks.
        solved: ids of tasks the pair solved at least once.
        failed: ids of tasks the pair attempted and never solved.
        failure_classes: failure class -> count, from the last audit.

    Returns:
        The summary; tasks in neither set are listed as untried.
    """
    solved_ids, failed_ids = set(solved), set(failed) - set(solved)
    summary = PoolSummary(failure_classes=dict(failure_classes or {}))
    for task in tasks:
        category = task.config.metadata.category
        summary.categories[category] = summary.categories.get(category, 0) + 1
        head = TaskHead(task_id=task.id, category=category, head=instruction_head(task.instruction))
        bucket = (
            summary.solved if task.id in solved_ids else summary.failed if task.id in failed_ids else summary.untried
        )
        bucket.append(head)
        family = (task.config.metadata.model_extra or {}).get("family")
        if isinstance(family, str) and (task.id in solved_ids or task.id in failed_ids):
            level = task.config.metadata.difficulty
            solved_n, tried_n = summary.families.setdefault(family, {}).get(level, (0, 0))
            summary.families[family][level] = (solved_n + (task.id in solved_ids), tried_n + 1)
    return summary


def _heads(title: str, heads: list[TaskHead], max_examples: int) -> list[str]:
    lines = [f"{title} ({len(heads)}):"]
    lines += [f"- {h.task_id} [{h.category}]: {h.head}" for h in heads[:max_examples]]
    if len(heads) > max_examples:
        lines.append(f"- ... and {len(heads) - max_examples} more")
    if not heads:
        lines.append("- (none)")
    return lines


def render_proposal_prompt(
    contract: Any, pool_summary: PoolSummary, k: int, *, rules: ProposalRules = DEFAULT_RULES, max_examples: int = 12
) -> list[dict[str, str]]:
    """The chat messages asking for ``k`` new tasks.

    Args:
        contract: the current pair's :class:`~mindforge.hcp.HCPContract`; its
            ``prompts.discovery`` text is the system message.
        pool_summary: what the model is told about the pool.
        k: tasks to propose (>= 1).
        rules: base images and size limits the reply format states.
        max_examples: the most task lines shown per list (solved, failed, untried).

    Returns:
        ``[{"role": "system", ...}, {"role": "user", ...}]``.

    Raises:
        ValueError: ``k`` < 1.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    s = pool_summary
    cats = ", ".join(f"{name} {n}" for name, n in sorted(s.categories.items(), key=lambda kv: (-kv[1], kv[0])))
    classes = ", ".join(f"{name} {n}" for name, n in sorted(s.failure_classes.items(), key=lambda kv: (-kv[1], kv[0])))
    lines = ["The current task pool.", f"Categories (tasks per category): {cats or '(none)'}", ""]
    lines += _heads("Tasks the agent solves", s.solved, max_examples) + [""]
    lines += _heads("Tasks the agent fails", s.failed, max_examples) + [""]
    if s.untried:
        lines += _heads("Tasks not tried yet", s.untried, max_examples) + [""]
    lines += [f"Failure classes in the last audit: {classes or '(none)'}", ""]
    lines.append(
        f"Propose exactly {k} new task{'s' if k > 1 else ''}, each a little harder than what the agent already "
        "solves and different from every task above."
    )
    lines += ["", _reply_format(rules)]
    return [
        {"role": "system", "content": contract.prompts.discovery},
        {"role": "user", "content": "\n".join(lines)},
    ]


def _reply_format(rules: ProposalRules) -> str:
    return REPLY_FORMAT.format(
        base=rules.allowed_bases[0],
        bases=" or ".join(rules.allowed_bases),
        max_files=rules.max_files,
        max_file_bytes=rules.max_file_bytes,
        max_total_bytes=rules.max_total_bytes,
        max_instruction_chars=rules.max_instruction_chars,
    )


_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(?P<body>.*)\n```\Z", re.DOTALL)


def _whole(detail: str) -> list[ProposalOutcome]:
    return [ProposalOutcome(index=-1, reason=RejectReason.MALFORMED, detail=detail)]


class MalformedReply(ValueError):
    """A Discovery reply that is not ``{"<key>": [...]}`` (the message says why)."""


def reply_items(body: str, key: str) -> list[Any]:
    """The non-empty list under the single key ``key`` of a JSON reply.

    Raises:
        MalformedReply: the body is not JSON, not an object with exactly that key, or the
            value is not a non-empty list.
    """
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise MalformedReply(f"reply is not JSON: {exc}") from exc
    if not isinstance(data, dict) or set(data) != {key}:
        got = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise MalformedReply(f"reply must be an object with the single key {key!r} (got {got})")
    items = data[key]
    if not isinstance(items, list) or not items:
        raise MalformedReply(f"{key!r} must be a non-empty list")
    return items


def parse_proposals(text: str, *, k: int, rules: ProposalRules = DEFAULT_RULES) -> list[ProposalOutcome]:
    """Parse a reply into proposals, rejecting whatever does not follow the format.

    The reply must be one JSON object ``{"tasks": [...]}`` (a reply that is exactly one
    fenced code block is read as its content). Each item is checked against
    :class:`TaskProposal` under ``rules``; items past the first ``k`` and repeated
    task ids are rejected.

    Args:
        text: the reply text.
        k: tasks asked for.
        rules: base images and size limits.

    Returns:
        One outcome per item, in reply order; a single outcome with ``index == -1``
        when the reply as a whole is unusable.
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced["body"]
    if not body:
        return _whole("empty reply")
    try:
        items = reply_items(body, "tasks")
    except MalformedReply as exc:
        return _whole(str(exc))
    outcomes: list[ProposalOutcome] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        task_id = item.get("task_id") if isinstance(item, dict) else None
        out = ProposalOutcome(index=index, task_id=task_id if isinstance(task_id, str) else "")
        if index >= k:
            out.reason, out.detail = RejectReason.MALFORMED, f"tasks[{index}]: only {k} tasks were asked for"
        elif out.task_id and out.task_id in seen:
            out.reason, out.detail = RejectReason.MALFORMED, f"tasks[{index}].task_id: {out.task_id!r} repeated"
        else:
            try:
                out.proposal = TaskProposal.model_validate(item, context={"rules": rules})
            except ValidationError as exc:
                out.reason, out.detail = RejectReason.MALFORMED, _validation_detail(index, exc)
        if out.task_id:
            seen.add(out.task_id)
        outcomes.append(out)
    return outcomes


def _validation_detail(index: int, exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    first = errors[0]
    where = dotted((f"tasks[{index}]", *first["loc"])).replace(".[", "[")
    reason = first["msg"].removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {reason}{more}"


def _client(client: openai.OpenAI | str | None, contract: Any, timeout_sec: float) -> openai.OpenAI:
    if isinstance(client, openai.OpenAI):
        return client
    from mindforge.agent.endpoint import resolve_endpoint

    base_url, api_key = resolve_endpoint(contract, client)
    return openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=2, timeout=timeout_sec)


def ask_policy(
    client: openai.OpenAI | str | None,
    contract: Any,
    messages: list[dict[str, str]],
    *,
    max_tokens: int,
    timeout_sec: float,
    reply_path: Path | None,
    response_format: dict[str, Any] | None = None,
) -> str | None:
    """One Discovery request to the policy endpoint: the reply text, or None when cut at ``max_tokens``.

    The model name sent is ``model.adapter`` or else ``model.id``, sampled with the
    contract's provider options (temperature, top_p, seed).

    Args:
        client: an ``openai.OpenAI`` client, a base URL, or None (see :func:`request_proposals`).
        contract: the current pair's HCP contract.
        messages: the chat messages.
        max_tokens: completion limit in tokens.
        timeout_sec: limit of the model call, in seconds.
        reply_path: where to write the request and the raw reply as JSON (audit), or None.
        response_format: an OpenAI ``response_format`` (a JSON schema the server turns
            into a grammar), or None.

    Raises:
        DiscoveryEndpointError: the endpoint did not answer (connection, HTTP error, timeout).
    """
    opts = contract.provider_options
    kwargs: dict[str, Any] = {
        "model": contract.model.adapter or contract.model.id,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": opts.temperature,
        "top_p": opts.top_p,
    }
    if response_format is not None:
        kwargs["response_format"] = response_format
    if opts.seed is not None:
        kwargs["seed"] = opts.seed
    try:
        resp = _client(client, contract, timeout_sec).chat.completions.create(**kwargs, timeout=timeout_sec)
    except openai.APIError as exc:
        raise DiscoveryEndpointError(f"proposal request to model {kwargs['model']!r} failed: {exc}") from exc
    choice = resp.choices[0]
    text = choice.message.content or ""
    if reply_path is not None:
        reply_path.parent.mkdir(parents=True, exist_ok=True)
        record = {"request": kwargs, "reply": text, "finish_reason": choice.finish_reason}
        reply_path.write_text(json.dumps(record, indent=2), encoding="utf-8")
    return None if choice.finish_reason == "length" else text


def request_proposals(
    client: openai.OpenAI | str | None,
    contract: Any,
    summary: PoolSummary,
    k: int,
    *,
    rules: ProposalRules = DEFAULT_RULES,
    max_tokens: int | None = None,
    timeout_sec: float = 600.0,
    reply_path: Path | None = None,
) -> list[ProposalOutcome]:
    """Ask the policy endpoint for ``k`` tasks and parse the reply.

    Args:
        client: an ``openai.OpenAI`` client, a base URL (``.../v1``), or None for the
            contract's ``model.base_url_env`` variable, else settings' ``policy_url``.
        contract: the current pair's HCP contract; the model name sent is
            ``model.adapter`` or else ``model.id``, sampled with its provider options.
        summary: the pool summary.
        k: tasks to ask for (>= 1).
        rules: base images and size limits.
        max_tokens: completion limit in tokens; default the contract's ``model.max_tokens``.
        timeout_sec: limit of the model call, in seconds.
        reply_path: where to write the messages and the raw reply as JSON (audit), or None.

    Returns:
        The outcomes as :func:`parse_proposals`; a reply cut at ``max_tokens`` is one
        whole-reply ``malformed`` outcome.

    Raises:
        DiscoveryEndpointError: the endpoint did not answer (connection, HTTP error, timeout).
        ValueError: ``k`` < 1.
    """
    messages = render_proposal_prompt(contract, summary, k, rules=rules)
    limit = max_tokens or contract.model.max_tokens
    text = ask_policy(client, contract, messages, max_tokens=limit, timeout_sec=timeout_sec, reply_path=reply_path)
    if text is None:
        return _whole(f"reply cut at the completion limit of {limit} tokens")
    return parse_proposals(text, k=k, rules=rules)
