"""Keep the KV cache of recent replies so that a trial's next turn skips its shared prefix.

Imports torch and transformers at the top: import it lazily (the engine does).

An agent trial's turn ``k + 1`` prompt is turn ``k``'s prompt, its reply and the tool
output: everything up to the reply was already run through the model. After each batch
the engine stores every row's key/value states (prompt plus reply, minus the last token,
which was never fed back) under the row's adapter; the next request with the same
adapter takes the longest stored common token prefix (transformers' documented cache
re-use: ``generate`` continues from a ``DynamicCache`` passed as ``cache``, formerly
``past_key_values``, and computes only the tokens after it).

Batched rows are left-padded to one width ``T``: row ``i`` (``n_i`` prompt tokens, ``c_i``
of them cached) starts at column ``a_i = T - n_i``. The batch cache covers columns
``[0, C)`` with ``C = min_i (a_i + c_i)``: per row, zeros for its pad columns (masked by
the attention mask, as pads always are) then its first ``C - a_i`` cached states. Keys
carry their rotary positions, which count real tokens only, so a state cached under one
padding is valid under another.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from mindforge.policy.engines.kv_snapshots import common_prefix

#: key and value states per layer, each shape (1, kv_heads, tokens, head_dim)
Layers = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass
class _Entry:
    adapter: str | None
    tokens: list[int]
    layers: Layers
    nbytes: int


def supports_prefix_cache(model: Any) -> bool:
    """Whether every layer of ``model`` keeps full-attention states (no sliding window), so prefixes can be reused."""
    cache = DynamicCache(config=model.config)
    return bool(cache.layers) and all(type(layer) is DynamicLayer for layer in cache.layers)


class PrefixCache:
    """Least-recently-used store of per-row KV states, matched by longest common token prefix.

    Args:
        max_bytes: the most the stored states may take (bytes); older entries go first.

    Attributes:
        hits: per batch row, the prompt tokens whose states came from the store (tests, benchmarks).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._bytes = 0
        self._next = 0
        self.hits: list[int] = []

    def match(self, adapter: str | None, prompt: Sequence[int]) -> tuple[Layers | None, int]:
        """The stored states sharing the longest prefix with ``prompt`` under ``adapter``.

        Returns:
            ``(layers, c)``: states whose first ``c`` tokens equal ``prompt[:c]`` (``c`` at
            most ``len(prompt) - 1``: the last prompt token is always run, for its logits),
            or ``(None, 0)``.
        """
        best, best_len = None, 0
        for key, entry in self._entries.items():
            if entry.adapter == adapter:
                n = min(common_prefix(entry.tokens, prompt), len(prompt) - 1)
                if n > best_len:
                    best, best_len = key, n
        if best is None:
            return None, 0
        self._entries.move_to_end(best)
        return self._entries[best].layers, best_len

    def put(self, adapter: str | None, tokens: list[int], layers: Layers) -> None:
        """Store ``layers`` (states of ``tokens``).

        Entries it extends are dropped, then the oldest past ``max_bytes``.
        """
        nbytes = sum(k.nbytes + v.nbytes for k, v in layers)
        if nbytes > self.max_bytes or not tokens:
            return
        for key, entry in list(self._entries.items()):
            if entry.adapter == adapter and common_prefix(entry.tokens, tokens) == len(entry.tokens):
                self._pop(key)
        self._entries[self._next] = _Entry(adapter, list(tokens), layers, nbytes)
        self._next += 1
        self._bytes += nbytes
        while self._bytes > self.max_bytes:
            self._pop(next(iter(self._entries)))

    def drop(self, adapter: str | None) -> None:
        """Forget every entry of ``adapter`` (it was unloaded)."""
        for key in [k for k, e in self._entries.items() if e.adapter == adapter]:
            self._pop(key)

    def _pop(self, key: int) -> None:
        self._bytes -= self._entries.pop(key).nbytes


def batch_cache(
    rows: Sequence[tuple[Layers | None, int]], prompt_lens: Sequence[int]
) -> tuple[DynamicCache | None, int]:
    """One left-padded ``DynamicCache`` for a batch from each row's cached prefix (see the module docstring).

    Args:
        rows: per row, ``(layers, c)`` from :meth:`PrefixCache.match`.
        prompt_lens: per row, its prompt length ``n_i`` (tokens).

    Returns:
        ``(cache, C)``: the cache of ``C`` columns, or ``(None, 0)``.
    """
    width = max(prompt_lens)
    pads = [width - n for n in prompt_lens]
    cols = min(a + c for a, (_, c) in zip(pads, rows, strict=True))
    template = next((layers for layers, c in rows if layers is not None), None)
    if cols <= 0 or template is None:
        return None, 0
    data = []
    for layer_idx, (k0, _) in enumerate(template):
        keys, values = [], []
        for a, (layers, _) in zip(pads, rows, strict=True):
            real = cols - a
            k_pad = k0.new_zeros((1, k0.shape[1], cols - max(real, 0), k0.shape[3]))
            if real > 0:
                if layers is None:  # real <= c, and a row without cached layers has c = 0
                    raise ValueError(f"a row with {real} cached columns has no cached layers")
                k, v = layers[layer_idx]
                keys.append(torch.cat([k_pad, k[:, :, :real]], dim=2))
                values.append(torch.cat([k_pad, v[:, :, :real]], dim=2))
            else:
                keys.append(k_pad)
                values.append(k_pad)
        data.append((torch.cat(keys), torch.cat(values)))
    return DynamicCache(ddp_cache_data=data), cols


def row_states(cache: DynamicCache, row: int, start: int, length: int) -> Layers:
    """Row ``row``'s states for columns ``[start, start + length)``, copied out of the batch cache.

    Raises:
        TypeError: a layer is not a filled full-attention layer (see :func:`supports_prefix_cache`).
    """
    out: Layers = []
    for layer in cache.layers:
        if not isinstance(layer, DynamicLayer) or layer.keys is None or layer.values is None:
            raise TypeError(f"prefix reuse needs filled full-attention cache layers, not {type(layer).__name__}")
        out.append(
            (layer.keys[row : row + 1, :, start : start + length].clone(),
             layer.values[row : row + 1, :, start : start + length].clone())
        )
    return out
