"""Model-proposed prompt edits: ask the policy endpoint for ``append_system_prompt`` text.

Given the audits of the tasks that still fail (failure class, owner, rule and a line of
evidence each), the model is asked for one short instruction to append to the system
prompt. The reply is parsed strictly; a bad reply is rejected with a reason and never
becomes a candidate.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from mindforge.hcp import HCPContract
from mindforge.replies import ReplyFormatError, load_json_object
from mindforge.search.candidates import CandidateError, apply_edit
from mindforge.search.edits import MAX_PROMPT_CHARS, Edit

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

#: shortest accepted prompt text, in characters
MIN_PROMPT_CHARS = 20
#: audits shown to the model per request
MAX_AUDITS_SHOWN = 20

PROPOSAL_SYSTEM_PROMPT = """\
You improve the harness of an AI agent that solves terminal tasks in a Linux container.
Below are audits of tasks the agent still fails: for each, the failure class, who owns
the failure, the rule that decided it and a line of evidence. Write ONE short
instruction (one to four sentences, under {max_chars} characters) to append to the
agent's system prompt that would help it on these tasks. Do not mention specific task
names or answers. Reply with exactly one JSON object and nothing else:
{{"append_system_prompt": "<the instruction>", "rationale": "<one sentence>"}}"""


class AuditSummary(BaseModel):
    """What a prompt proposal is told about one failing task.

    Attributes:
        task_id: the task's id.
        failure_class / owner / rule: the audit verdict.
        detail: one line of evidence (cut to 300 characters).
    """

    task_id: str
    failure_class: str
    owner: str
    rule: str
    detail: str = Field(default="", max_length=300)


class PromptRequest(BaseModel):
    """A request for one model-proposed prompt edit for a cluster of failing tasks.

    Attributes:
        cluster: the cluster (``owner:rule``) the tasks share.
        audits: the audits shown to the model.
    """

    cluster: str
    audits: list[AuditSummary]


class PromptProposal(BaseModel):
    """The outcome of one proposal call.

    Attributes:
        edit: the accepted ``append_prompt`` edit, or None when rejected.
        rejected: why the reply was rejected, or None.
        raw: the reply text (cut to 2000 characters).
    """

    edit: Edit | None = None
    rejected: str | None = None
    raw: str = ""


class PromptReplyError(ValueError):
    """The model's reply is not a usable prompt edit."""


def parse_prompt_reply(text: str) -> str:
    """The ``append_system_prompt`` text of a strict reply.

    Accepts exactly one JSON object (optionally inside one ```json fence) whose keys are
    ``append_system_prompt`` and, optionally, ``rationale``; the text must be a string
    of :data:`MIN_PROMPT_CHARS` to :data:`~mindforge.search.edits.MAX_PROMPT_CHARS`
    characters without braces placeholders.

    Raises:
        PromptReplyError: anything else, with the reason.
    """
    try:
        obj = load_json_object(text)
    except ReplyFormatError as exc:
        raise PromptReplyError(str(exc)) from None
    extra = set(obj) - {"append_system_prompt", "rationale"}
    if "append_system_prompt" not in obj or extra:
        raise PromptReplyError(f"keys must be append_system_prompt (and rationale), got {sorted(obj)}")
    prompt = obj["append_system_prompt"]
    if not isinstance(prompt, str):
        raise PromptReplyError(f"append_system_prompt is a {type(prompt).__name__}, not a string")
    prompt = prompt.strip()
    if not MIN_PROMPT_CHARS <= len(prompt) <= MAX_PROMPT_CHARS:
        raise PromptReplyError(
            f"append_system_prompt has {len(prompt)} characters, not {MIN_PROMPT_CHARS}..{MAX_PROMPT_CHARS}"
        )
    if re.search(r"\{[a-z_]+\}", prompt):
        raise PromptReplyError("append_system_prompt contains a {placeholder}")
    return prompt


def proposal_messages(request: PromptRequest) -> list[ChatCompletionMessageParam]:
    """The chat messages of a proposal call."""
    lines = [
        f"- {a.task_id}: {a.failure_class}, owner {a.owner}, rule {a.rule}: {a.detail}"
        for a in request.audits[:MAX_AUDITS_SHOWN]
    ]
    return [
        {"role": "system", "content": PROPOSAL_SYSTEM_PROMPT.format(max_chars=MAX_PROMPT_CHARS)},
        {"role": "user", "content": f"Failing tasks (cluster {request.cluster}):\n" + "\n".join(lines)},
    ]


def check_prompt_edit(root: HCPContract, text: str) -> Edit:
    """The ``append_prompt`` edit for ``text``, checked to derive a valid child of ``root``.

    Raises:
        PromptReplyError: the child would be invalid or unchanged (e.g. a secret in the
            text, or text already in the prompt).
    """
    edit = Edit(op="append_prompt", value=text)
    try:
        apply_edit(root, edit)
    except CandidateError as exc:
        raise PromptReplyError(str(exc)) from None
    return edit


def propose_prompt_edit(
    root: HCPContract,
    request: PromptRequest,
    *,
    base_url: str,
    model: str,
    api_key: str = "EMPTY",
    timeout_sec: float = 120.0,
    temperature: float = 0.7,
) -> PromptProposal:
    """Ask the policy endpoint (OpenAI-compatible, ``openai`` SDK) for a prompt edit.

    Args:
        root: the search root the edit will apply to.
        request: the cluster and its audits.
        base_url: endpoint base URL (``.../v1``).
        model: the model or adapter name to ask.
        api_key: API key for the endpoint.
        timeout_sec: limit on the call, in seconds.
        temperature: sampling temperature of the call.

    Returns:
        the proposal: an accepted edit, or ``rejected`` with the reason (bad reply, or an
        endpoint error - a proposal is optional, the search goes on without it).
    """
    import openai

    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=1, timeout=timeout_sec)
    try:
        resp = client.chat.completions.create(
            model=model, messages=proposal_messages(request), temperature=temperature, max_tokens=768
        )
    except openai.APIError as exc:
        return PromptProposal(rejected=f"endpoint error: {type(exc).__name__}: {str(exc)[:300]}")
    raw = resp.choices[0].message.content or ""
    try:
        edit = check_prompt_edit(root, parse_prompt_reply(raw))
    except PromptReplyError as exc:
        return PromptProposal(rejected=str(exc), raw=raw[:2000])
    return PromptProposal(edit=edit, raw=raw[:2000])
