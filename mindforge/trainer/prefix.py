"""A group's shared prompt run once, its keys and values served to every row, under activation checkpointing too.

The G rollouts of a GRPO group share their whole first prompt (system turn, worked
examples, instruction), which with a library of examples is most of each row. Causal
attention makes that prefix's keys and values the same for every row, so one forward of
the prefix (batch 1) and one of the rows' suffixes against its KV cache give the same
logits and gradients as the rows run whole, for ``prefix + B x suffix`` tokens instead of
``B x (prefix + suffix)``.

**Why a cache of its own.** Activation checkpointing replays each decoder layer's forward
in the backward pass. transformers' ``DynamicCache`` *appends* on every ``update``, so a
replay would see a cache twice as long as the first pass did (transformers therefore
drops the cache of a checkpointed layer unless the layer is marked
``_can_checkpoint_with_cache``, meant for layers that only read it). The two layer caches
here make ``update`` idempotent, which is what that mark asks for:

- :class:`_Recorder` (the prefix pass) *replaces* the layer's keys and values with the ones
  given, and returns them unchanged: a replay records the same states again;
- :class:`_Reader` (the suffix pass) holds the prefix's keys and values expanded over the
  batch and returns them with the suffix's appended, storing nothing: a replay reads what
  the first pass read.

Gradients reach the prefix through the tensors the suffix pass read (``expand`` sums the
rows' gradients), so the prefix's LoRA weights get the same update as with whole rows.
A transformers release that still drops the cache (no ``_can_checkpoint_with_cache``)
is detected - the recorder stays empty or the reader unread - and the caller runs the rows
whole instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import torch
from transformers.cache_utils import Cache, DynamicLayer
from transformers.modeling_layers import GradientCheckpointingLayer


class _Recorder(DynamicLayer):
    """One layer's prefix keys and values, as the prefix pass computed them (replaced, never appended)."""

    def __init__(self) -> None:
        super().__init__()
        self.recorded: tuple[torch.Tensor, torch.Tensor] | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        self.device, self.is_initialized = key_states.device, True
        self.keys, self.values = key_states, value_states
        self.recorded = (key_states, value_states)
        return key_states, value_states


class _Reader(DynamicLayer):
    """The prefix's keys and values for every row; ``update`` appends the suffix's to them and stores nothing.

    Args:
        keys / values: shape (B, kv_heads, prefix, head_dim), the recorder's expanded over the batch.
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        super().__init__()
        self.device, self.is_initialized = keys.device, True
        self.keys, self.values = keys, values
        self.prefix = (keys, values)
        self.reads = 0

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        self.reads += 1
        keys, values = self.prefix
        return torch.cat([keys, key_states], dim=-2), torch.cat([values, value_states], dim=-2)


@contextmanager
def _cache_through_checkpoints(model: torch.nn.Module) -> Iterator[None]:
    """Mark the model's checkpointed layers as safe to keep a cache (ours never grows on a replay).

    The mark is read when a layer's forward starts (the replay reuses the arguments the
    first pass was given), so it is needed during the forward passes only.
    """
    layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    before = [m.__dict__.get("_can_checkpoint_with_cache") for m in layers]
    for m in layers:
        m._can_checkpoint_with_cache = True
    try:
        yield
    finally:
        for m, value in zip(layers, before, strict=True):
            if value is None:
                del m._can_checkpoint_with_cache
            else:
                m._can_checkpoint_with_cache = value


def shared_prefix_logits(
    model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, keep: int, prefix: int
) -> torch.Tensor | None:
    """The last ``keep`` positions' logits, the rows' common first ``prefix`` tokens run once.

    Args:
        model: a causal LM (PEFT-wrapped or not), checkpointed or not.
        input_ids / attention_mask: shape (B, L), right-padded; every row's first
            ``prefix`` tokens are the same and real.
        keep: positions whose logits are returned, counted from the end (``<= L - prefix``).
        prefix: length of the shared prefix in tokens.

    Returns:
        logits of shape (B, keep, vocab), or None when the model did not use the cache
        (the caller then runs the rows whole).
    """
    rows = input_ids.shape[0]
    recorders = [_Recorder() for _ in range(_num_layers(model))]
    with _cache_through_checkpoints(model):
        model(input_ids=input_ids[:1, :prefix], cache=_cache(recorders), use_cache=False, logits_to_keep=1)
        recorded = [r.recorded for r in recorders]
        if not recorders or any(r is None for r in recorded):
            return None
        readers = [
            _Reader(keys.expand(rows, -1, -1, -1), values.expand(rows, -1, -1, -1))
            for keys, values in (r for r in recorded if r is not None)
        ]
        out = model(
            input_ids=input_ids[:, prefix:], attention_mask=attention_mask, cache=_cache(readers), use_cache=False,
            logits_to_keep=keep,
        )
    if not all(r.reads for r in readers):
        return None
    return out.logits


def _num_layers(model: torch.nn.Module) -> int:
    """The decoder's layer count (its config's ``num_hidden_layers``; PEFT forwards ``config``)."""
    return int(cast(Any, model).config.num_hidden_layers)


def _cache(layers: list[_Recorder] | list[_Reader]) -> Cache:
    """A transformers ``Cache`` over our layer caches (one per decoder layer, by index)."""
    return Cache(layers=cast(list[Any], layers))
