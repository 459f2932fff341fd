"""Family proposals: the pair picks task families and their parameters, as JSON under a grammar.

Used when the contract's ``prompts.discovery_mode`` is ``families`` (small models that
cannot write a whole task). The request carries the reply's JSON Schema
(:func:`reply_schema`) as OpenAI's
``response_format={"type": "json_schema", ...}``: the llama.cpp engine turns it into a
grammar, so every reply parses; an engine without constrained decoding (transformers)
answers free text, which is parsed and rejected with the reason when it does not follow
the schema. Each proposal is rendered into a :class:`~mindforge.discovery.schema.TaskProposal`
and then staged and checked like a free-text proposal.

The prompt shows the families (name, category, what an instance asks, parameter schema),
the current pair's pass rate per family on the search split, and asks for instances a
little harder than the ones the pair solves. It is written from the families alone,
never from bundled tasks.
"""

from __future__ import annotations

import json
from typing import Any

import openai

from mindforge.discovery.families import Family
from mindforge.discovery.proposal import (
    MalformedReply,
    PoolSummary,
    ProposalOutcome,
    _whole,
    ask_policy,
    reply_items,
)
from mindforge.discovery.records import RejectReason
from mindforge.errors import InputError


def reply_schema(families: dict[str, Family], k: int, *, for_grammar: bool = False) -> dict[str, Any]:
    """The JSON Schema of a family-proposal reply: ``{"proposals": [{"family", "params"}, ...]}``.

    Args:
        families: the families the model may choose from.
        k: proposals asked for (the list holds exactly ``k``).
        for_grammar: write bounded integers as ``enum`` lists, because llama.cpp's
            JSON-schema-to-grammar conversion ignores ``minimum``/``maximum``; the
            schema then admits exactly the values the family's schema does.

    Returns:
        The schema (a dict).
    """
    options = []
    for name, family in sorted(families.items()):
        params = json.loads(json.dumps(family.params_schema))
        if for_grammar:
            for spec in params.get("properties", {}).values():
                spec.pop("description", None)
                if spec.get("type") == "integer":
                    spec["enum"] = list(range(int(spec.pop("minimum")), int(spec.pop("maximum")) + 1))
                    spec.pop("type")
        options.append({
            "type": "object",
            "properties": {"family": {"const": name}, "params": params},
            "required": ["family", "params"],
            "additionalProperties": False,
        })
    item: dict[str, Any] = {"anyOf": options} if len(options) > 1 else options[0]
    return {
        "type": "object",
        "properties": {"proposals": {"type": "array", "items": item, "minItems": k, "maxItems": k}},
        "required": ["proposals"],
        "additionalProperties": False,
    }


def render_family_prompt(
    contract: Any, families: dict[str, Family], summary: PoolSummary, k: int
) -> list[dict[str, str]]:
    """The chat messages asking for ``k`` family instances.

    Args:
        contract: the current pair's HCP contract; ``prompts.discovery`` is the system message.
        families: the families to choose from.
        summary: the pool summary; its ``families`` field gives pass rates per family.
        k: instances to propose (>= 1).

    Returns:
        ``[{"role": "system", ...}, {"role": "user", ...}]``.

    Raises:
        ValueError: ``k`` < 1.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    lines = ["Task families (name [category]: what an instance asks. Parameters):"]
    lines += [f"- {f.prompt_line()}" for _, f in sorted(families.items())]
    lines += ["", "The agent's results on instances in the pool, by family (solved / tried):"]
    rates = summary.families
    if rates:
        for name, rate in sorted(rates.items()):
            levels = ", ".join(f"{lvl} {s}/{n}" for lvl, (s, n) in sorted(rate.items()))
            lines.append(f"- {name}: {levels}")
    else:
        lines.append("- (no family instances tried yet)")
    lines += [
        "",
        f"Propose exactly {k} new instance{'s' if k > 1 else ''}: choose a family and its parameters. "
        "Prefer families and parameters a little harder than the instances the agent solves "
        "(larger sizes, deeper nesting, the option that needs more care), and vary the families.",
        "",
        'Reply with one JSON object and nothing else: {"proposals": [{"family": NAME, "params": {...}}, ...]} '
        f"with exactly {k} item{'s' if k > 1 else ''}; params has every parameter of the family and no other key.",
    ]
    return [
        {"role": "system", "content": contract.prompts.discovery},
        {"role": "user", "content": "\n".join(lines)},
    ]


def parse_family_reply(text: str, families: dict[str, Family], *, k: int) -> list[ProposalOutcome]:
    """Parse a reply into rendered proposals; whatever does not follow the schema is rejected.

    Args:
        text: the reply text.
        families: the families by name.
        k: proposals asked for.

    Returns:
        One outcome per item in reply order (``malformed`` with the reason for an unknown
        family, parameters outside the family's schema, an item past the first ``k``, or
        a repeated instance); a single ``index == -1`` outcome when the reply as a whole
        is not ``{"proposals": [...]}``.
    """
    try:
        items = reply_items(text.strip(), "proposals")
    except MalformedReply as exc:
        return _whole(str(exc))
    outcomes: list[ProposalOutcome] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        out = ProposalOutcome(index=index)
        name = item.get("family") if isinstance(item, dict) else None
        family = families.get(name) if isinstance(name, str) else None
        if index >= k:
            out.reason, out.detail = RejectReason.MALFORMED, f"proposals[{index}]: only {k} were asked for"
        elif not isinstance(item, dict) or set(item) != {"family", "params"}:
            out.reason, out.detail = RejectReason.MALFORMED, f"proposals[{index}]: keys must be 'family' and 'params'"
        elif family is None:
            out.reason, out.detail = RejectReason.MALFORMED, f"proposals[{index}].family: unknown family {name!r}"
        else:
            out.family, out.params = family.name, item["params"] if isinstance(item["params"], dict) else {}
            try:
                out.proposal = family.render(item["params"])
                out.task_id = out.proposal.task_id
            except InputError as exc:
                out.reason = RejectReason.MALFORMED
                out.detail = f"proposals[{index}].{exc.field or 'params'}: {exc.reason}"
            if out.proposal is not None and out.task_id in seen:
                out.proposal, out.reason = None, RejectReason.MALFORMED
                out.detail = f"proposals[{index}]: the same instance as an earlier item ({out.task_id})"
        if out.task_id:
            seen.add(out.task_id)
        outcomes.append(out)
    return outcomes


def request_family_proposals(
    client: openai.OpenAI | str | None,
    contract: Any,
    summary: PoolSummary,
    k: int,
    families: dict[str, Family],
    *,
    max_tokens: int | None = None,
    timeout_sec: float = 600.0,
    reply_path: Any = None,
) -> list[ProposalOutcome]:
    """Ask the endpoint for ``k`` family instances under the reply's JSON-schema grammar.

    Args:
        client: an ``openai.OpenAI`` client, a base URL, or None (the contract's endpoint).
        contract: the current pair's HCP contract.
        summary: the pool summary (pass rates per family).
        k: instances to ask for (>= 1).
        families: the families to choose from.
        max_tokens: completion limit in tokens (default: 96 per instance plus 64, at
            least the contract's ``model.max_tokens``).
        timeout_sec: limit of the model call, seconds.
        reply_path: where to write the request and the raw reply as JSON, or None.

    Returns:
        The outcomes as :func:`parse_family_reply`.

    Raises:
        DiscoveryEndpointError: the endpoint did not answer.
    """
    schema = reply_schema(families, k, for_grammar=True)
    limit = max_tokens or max(contract.model.max_tokens, 64 + 96 * k)
    text = ask_policy(
        client, contract, render_family_prompt(contract, families, summary, k), max_tokens=limit,
        timeout_sec=timeout_sec, reply_path=reply_path,
        response_format={"type": "json_schema", "json_schema": {"name": "family_proposals", "schema": schema}},
    )
    if text is None:
        return _whole(f"reply cut at the completion limit of {limit} tokens")
    return parse_family_reply(text, families, k=k)
