"""One padded ``generate`` call for several chat requests, each row with its own limits.

Imports torch and transformers at the top: import it lazily (the engine does).

transformers' ``generate`` takes one generation config per call: one ``max_new_tokens``,
one list of stop strings. Rows here differ in both, so the call runs to the largest
budget and :class:`RowStops` (a ``StoppingCriteria``) ends each row at its own budget, its
own stop strings (transformers' :class:`~transformers.StopStringCriteria` on that row) or
EOS, and records where each row ended; ``generate`` pads a finished row from then on.
Rows are left-padded (decoder-only models continue from the right end).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from transformers import StoppingCriteria, StoppingCriteriaList, StopStringCriteria

from mindforge.policy.engines.completion import TokenLogprobs, action_complete
from mindforge.policy.engines.prefix_cache import PrefixCache, batch_cache, row_states


@dataclass
class Row:
    """One request's part of a batch.

    Attributes:
        prompt: prompt token ids, shape (prompt_tokens,).
        max_new: completion budget (tokens).
        stop: stop strings (may be empty).
        adapter: PEFT adapter name, or None for the base weights.
        top_logprobs: alternatives per token to return (0: only the chosen token's), or
            None for no logprobs at all.
        stop_at_action: the request's action format: the row ends where its first action
            is complete (:func:`mindforge.policy.engines.completion.action_complete`).
    """

    prompt: list[int]
    max_new: int
    stop: list[str] = field(default_factory=list)
    adapter: str | None = None
    top_logprobs: int | None = None
    stop_at_action: str | None = None


@dataclass
class RowResult:
    """What one row generated: token ids (incl. the EOS that ended it) and their logprobs."""

    completion: list[int]
    logprobs: list[TokenLogprobs] | None


class RowStops(StoppingCriteria):
    """Per-row stopping: each row's own budget, stop strings, EOS ids and first action.

    Args:
        prompt_len: padded prompt length of the batch (tokens).
        rows: the batch's rows, in order.
        eos_ids: token ids that end a reply.
        tokenizer: the tokenizer, for :class:`~transformers.StopStringCriteria`.

    Attributes:
        ends: per row, the sequence length (prompt_len + completion tokens) at which it
            ended, or None while it runs.
    """

    def __init__(self, prompt_len: int, rows: Sequence[Row], eos_ids: Sequence[int], tokenizer: Any) -> None:
        self.prompt_len = prompt_len
        self.max_new = [r.max_new for r in rows]
        self.stops = [StopStringCriteria(tokenizer=tokenizer, stop_strings=r.stop) if r.stop else None for r in rows]
        self.eos_ids = set(eos_ids)
        self.actions = [r.stop_at_action for r in rows]
        self.tokenizer = tokenizer
        self.ends: list[int | None] = [None] * len(rows)

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        length = input_ids.shape[1]
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        last = input_ids[:, -1].tolist()
        for i, end in enumerate(self.ends):
            if end is None:
                stop = self.stops[i]
                if (
                    length - self.prompt_len >= self.max_new[i]
                    or last[i] in self.eos_ids
                    or (stop is not None and bool(stop(input_ids[i : i + 1], scores)[0]))
                    or self._action_done(i, input_ids)
                ):
                    self.ends[i] = length
            done[i] = self.ends[i] is not None
        return cast(torch.BoolTensor, done)  # a bool-dtype tensor, which transformers annotates as BoolTensor


    def _action_done(self, row: int, input_ids: torch.LongTensor) -> bool:
        """Whether row ``row``'s completion so far holds its whole first action."""
        fmt = self.actions[row]
        if fmt is None:
            return False
        text = self.tokenizer.decode(input_ids[row, self.prompt_len :].tolist(), skip_special_tokens=True)
        return action_complete(fmt, text)


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``input_ids`` and ``attention_mask``, each shape (batch, longest prompt), padded on the left."""
    width = max(len(p) for p in prompts)
    ids = [[pad_id] * (width - len(p)) + list(p) for p in prompts]
    mask = [[0] * (width - len(p)) + [1] * len(p) for p in prompts]
    return torch.tensor(ids, device=device), torch.tensor(mask, device=device)


def row_logprobs(logits: Sequence[torch.Tensor], row: int, completion: Sequence[int], k: int) -> list[TokenLogprobs]:
    """Logprobs of the raw distribution (before temperature/top-p) for one row.

    Args:
        logits: ``generate``'s ``output_logits``: one tensor per step, shape (batch, vocab).
        row: the row index.
        completion: the row's token ids, shape (n,); step ``s`` produced ``completion[s]``.
        k: alternatives per token (0 for none).

    Returns:
        per token: its logprob and the top ``k`` ``(token id, logprob)`` pairs.
    """
    if not completion:
        return []
    steps = torch.log_softmax(torch.stack([logits[s][row] for s in range(len(completion))]).float(), dim=-1)
    chosen = steps.gather(-1, torch.tensor(list(completion), device=steps.device).unsqueeze(-1)).squeeze(-1).tolist()
    if not k:
        return [(lp, []) for lp in chosen]
    vals, idx = torch.topk(steps, k, dim=-1)
    return [(lp, list(zip(i, v, strict=True))) for lp, i, v in zip(chosen, idx.tolist(), vals.tolist(), strict=True)]


def generate_rows(
    model: Any,
    rows: Sequence[Row],
    *,
    generation_config: Any,
    tokenizer: Any,
    eos_ids: Sequence[int],
    device: str,
    prefix_cache: PrefixCache | None = None,
) -> list[RowResult]:
    """Run ``rows`` as one left-padded ``generate`` call.

    Args:
        model: a transformers causal LM, or a PEFT model (then rows may name different
            adapters: PEFT's mixed-adapter batch inference, ``adapter_names`` with
            ``"__base__"`` for base-weight rows).
        rows: the batch, all sharing ``generation_config``'s sampling settings.
        generation_config: sampling settings; ``max_new_tokens`` is set here to the
            largest row budget, ``output_logits`` / ``return_dict_in_generate`` on.
        tokenizer: for stop strings.
        eos_ids: token ids that end a reply.
        device: where the tensors go.
        prefix_cache: where to look up each row's cached prompt prefix and store its
            states afterwards (:mod:`mindforge.policy.engines.prefix_cache`); None for no reuse.

    Returns:
        one :class:`RowResult` per row, in order.

    Raises:
        ValueError: a row names an adapter while ``model`` is not a PEFT model.
    """
    pad_id = generation_config.pad_token_id
    input_ids, attention_mask = left_pad([r.prompt for r in rows], pad_id, device)
    width = input_ids.shape[1]
    stops = RowStops(width, rows, eos_ids, tokenizer)
    generation_config.max_new_tokens = max(r.max_new for r in rows)
    generation_config.output_logits = True
    generation_config.return_dict_in_generate = True
    kwargs: dict[str, Any] = {}
    if hasattr(model, "peft_config"):
        kwargs["adapter_names"] = [r.adapter or "__base__" for r in rows]
    elif any(r.adapter for r in rows):
        raise ValueError("rows name adapters but the model has none loaded")
    if prefix_cache is not None:
        past, cols = batch_cache([prefix_cache.match(r.adapter, r.prompt) for r in rows], [len(r.prompt) for r in rows])
        prefix_cache.hits.extend(max(0, cols - (width - len(r.prompt))) for r in rows)
        if past is not None:
            kwargs["cache"] = past  # transformers 5 name of past_key_values
    with torch.inference_mode():
        out = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            generation_config=generation_config,
            stopping_criteria=StoppingCriteriaList([stops]),
            **kwargs,
        )
    results = []
    for i, row in enumerate(rows):
        end = stops.ends[i] or out.sequences.shape[1]
        completion = out.sequences[i, width:end].tolist()[: len(out.logits)]
        lps = None if row.top_logprobs is None else row_logprobs(out.logits, i, completion, row.top_logprobs)
        results.append(RowResult(completion, lps))
        if prefix_cache is not None and completion:
            # states of prompt + completion[:-1]: the last token was never fed back
            seen = row.prompt + completion[:-1]
            prefix_cache.put(row.adapter, seen, row_states(out.cache, i, width - len(row.prompt), len(seen)))
    return results
