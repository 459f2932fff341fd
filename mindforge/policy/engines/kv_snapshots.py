"""Prompt KV snapshots shared between llama.cpp sequences: a prompt prefilled once serves every later request.

An Update draw asks for ``group_size`` rollouts of one prompt at once, and each sequence
that starts one would prefill the whole prompt itself (the version of
``benchmarks/bench_rollouts.py`` at commit cc6b2ff measured 177 of 544 prompt tokens
computed per rollout at concurrency 2, groups of 4, against 89 at concurrency 1), and
prefill is the largest part of a rollout's model time. Instead,
after a sequence prefills a prompt with at least :data:`MIN_NEW_TOKENS` new tokens, its
KV cells are copied out (``llama_state_seq_get_data``: the cells only, no logits, about
23 KB a token for SmolLM2-135M) under the prompt's tokens and adapter; a sequence whose
own cells share less of a later prompt copies the snapshot in
(``llama_state_seq_set_data``) and prefills only the rest - what llama.cpp's own server does
with its host-memory prompt cache (``--cache-ram``). Storage, longest-prefix lookup and
least-recently-used eviction by bytes are llama-cpp-python's ``LlamaRAMCache``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: a prompt is snapshotted when its sequence computed at least this many of its tokens
MIN_NEW_TOKENS = 64
#: a snapshot (or another sequence's cells) is used when it covers this many more tokens than the sequence's own
MIN_GAIN_TOKENS = 64


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """The number of leading tokens ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):  # the shorter list bounds the common prefix
        if x != y:
            break
        n += 1
    return n


@dataclass(frozen=True)
class Hit:
    """A stored snapshot that covers ``shared`` tokens of the prompt asked about."""

    shared: int
    state: Any  # llama_cpp.LlamaState holding one sequence's KV cells


class KVSnapshots:
    """Snapshots of prompts' KV cells, per adapter, bounded in bytes (thread-safe).

    Args:
        capacity_bytes: the most bytes of KV cells kept per adapter (least recently used
            go first).
    """

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self._caches: dict[str | None, Any] = {}
        self._lock = threading.Lock()

    def best(self, prompt: list[int], adapter: str | None) -> Hit | None:
        """The snapshot sharing the longest prefix with ``prompt`` under ``adapter``, or None."""
        with self._lock:
            cache = self._caches.get(adapter)
            if cache is None:
                return None
            try:
                state = cache[tuple(prompt)]
            except KeyError:
                return None
        return Hit(common_prefix(state.input_ids.tolist(), prompt), state)

    def put(self, tokens: list[int], adapter: str | None, data: bytes) -> int:
        """Store one sequence's cells ``data`` (``llama_state_seq_get_data``), which hold exactly ``tokens``.

        Returns:
            the snapshot's size in bytes.
        """
        import llama_cpp
        from llama_cpp.llama_cache import LlamaRAMCache

        state = llama_cpp.LlamaState(
            input_ids=np.asarray(tokens, dtype=np.intc),
            scores=np.empty((0, 0), dtype=np.single),
            n_tokens=len(tokens),
            llama_state=data,
            llama_state_size=len(data),
            seed=0,
        )
        with self._lock:
            cache = self._caches.setdefault(adapter, LlamaRAMCache(capacity_bytes=self.capacity_bytes))
            cache[tuple(tokens)] = state
        return len(data)

    def drop(self, adapter: str | None) -> None:
        """Forget every snapshot taken under ``adapter`` (its weights are unloaded)."""
        with self._lock:
            self._caches.pop(adapter, None)
