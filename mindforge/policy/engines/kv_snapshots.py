"""Prompt KV snapshots shared between llama.cpp slots: a prompt prefilled once serves every slot.

An Update draw asks for ``group_size`` rollouts of one prompt at once, and each slot that
starts one would prefill the whole prompt itself: ``benchmarks/bench_rollouts.py`` measured
177 of 544 prompt tokens computed per rollout at concurrency 2 (groups of 4), against 89
at concurrency 1, and prefill was the largest part of a rollout's model time. Instead,
after a slot prefills a prompt with at least :data:`MIN_NEW_TOKENS` new tokens, it copies
its sequence's KV cells out (``llama_state_seq_get_data``: the cells only, no logits,
about 23 KB a token for SmolLM2-135M) under the prompt's tokens and adapter; a slot whose
own cache shares less of a later prompt copies the snapshot in
(``llama_state_seq_set_data``) and prefills only the rest - what llama.cpp's own server does
with its host-memory prompt cache (``--cache-ram``). Storage, longest-prefix lookup and
least-recently-used eviction by bytes are llama-cpp-python's ``LlamaRAMCache``.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: a prompt is snapshotted when its slot computed at least this many of its tokens
MIN_NEW_TOKENS = 64
#: a snapshot (or another slot's prefill) is used when it covers this many more tokens than the slot's own cache
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

    def save(self, llm: Any, tokens: list[int], adapter: str | None) -> int:
        """Copy sequence 0 of ``llm``'s context (which holds exactly ``tokens``) under ``tokens``.

        Returns:
            the snapshot's size in bytes.

        Raises:
            RuntimeError: llama.cpp copied more bytes than it said the sequence holds.
        """
        import llama_cpp
        from llama_cpp.llama_cache import LlamaRAMCache

        size = llama_cpp.llama_state_seq_get_size(llm.ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        n = llama_cpp.llama_state_seq_get_data(llm.ctx, buf, size, 0)
        if n > size:
            raise RuntimeError(f"llama.cpp copied {n} bytes of a {size}-byte sequence state")
        state = llama_cpp.LlamaState(
            input_ids=np.asarray(tokens, dtype=np.intc),
            scores=np.empty((0, 0), dtype=np.single),
            n_tokens=len(tokens),
            llama_state=ctypes.string_at(buf, n),
            llama_state_size=n,
            seed=0,
        )
        with self._lock:
            cache = self._caches.setdefault(adapter, LlamaRAMCache(capacity_bytes=self.capacity_bytes))
            cache[tuple(tokens)] = state
        return n

    def drop(self, adapter: str | None) -> None:
        """Forget every snapshot taken under ``adapter`` (its weights are unloaded)."""
        with self._lock:
            self._caches.pop(adapter, None)


def restore(llm: Any, state: Any) -> None:
    """Replace ``llm``'s sequence 0 by the snapshot ``state``; its next ``generate`` reuses the shared prefix.

    Raises:
        RuntimeError: llama.cpp refused the snapshot (the slot is left empty, as after a reset).
    """
    import llama_cpp

    llm.reset()
    llm._ctx.kv_cache_seq_rm(0, 0, -1)
    buf = (ctypes.c_uint8 * state.llama_state_size).from_buffer_copy(state.llama_state)
    if llama_cpp.llama_state_seq_set_data(llm.ctx, buf, state.llama_state_size, 0) == 0:
        llm._ctx.kv_cache_seq_rm(0, 0, -1)
        raise RuntimeError("llama.cpp could not load a prompt snapshot into this slot")
    llm.input_ids[: state.n_tokens] = state.input_ids
    llm.n_tokens = state.n_tokens
    llm._requires_eval = True  # logits are not in the snapshot: generate() evaluates the last token again
