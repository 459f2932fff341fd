"""The model's ceiling on this machine: llama.cpp's tokens a second at full batch, prefill and decode.

Measured with ``llama_decode`` directly (no sampling, no HTTP, no Python per token), on
contexts made as :class:`mindforge.policy.engines.llamacpp_engine.LlamaCppEngine` makes
them: ``cpus // threads`` contexts of ``sequences`` sequences each, a split KV cache,
``step_tokens``-token batches, every context in its own thread and all of them at once (as
the engine's decoders run). Per context:

- **prefill**: two prompts of ``depth`` tokens, evaluated in ``step_tokens`` chunks into two
  sequences (logits only for a prompt's last token, as the engine asks);
- **decode**: the first prompt's cells copied into every other sequence
  (``llama_state_seq_get_data`` / ``set_data``, as the engine shares a prefix), then
  ``decode_steps`` steps that each evaluate one token of every sequence (``sequences``
  tokens a step, logits for each), at a context depth of ``depth`` tokens.

Rates are the tokens of all contexts over the slowest context's seconds (they start
together). Token ids are arbitrary: the cost does not depend on them.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_LOG_SINK: Any = None  # llama.cpp's log callback, kept alive for the process


@dataclass(frozen=True)
class CeilingConfig:
    """One configuration: the weights (``q8_0`` re-stored, or ``gguf``: the file's Q4_1), threads a context,
    llama.cpp's flash attention, and a unified KV cache (one buffer every sequence attends over) or a split one."""

    weights: str
    threads: int
    flash_attn: bool = True
    unified: bool = False

    def label(self, cpus: int) -> str:
        """E.g. ``Q8_0, 2 contexts x 1 thread``, with ``no flash attention`` / ``unified KV`` where they differ."""
        contexts = max(1, cpus // self.threads)
        kind = "Q8_0" if self.weights == "q8_0" else "Q4_1"
        text = f"{kind}, {contexts} context{'s' * (contexts > 1)} x {self.threads} thread{'s' * (self.threads > 1)}"
        return text + (", no flash attention" if not self.flash_attn else "") + (", unified KV" if self.unified else "")


@dataclass
class TokenRates:
    """Tokens a second of the whole machine for one configuration."""

    config: CeilingConfig
    prefill_tps: float
    decode_tps: float


def _context(lib: Any, model: Any, sequences: int, per_seq: int, config: CeilingConfig, step_tokens: int) -> Any:
    params = lib.llama_context_default_params()
    params.n_ctx, params.n_seq_max, params.kv_unified = per_seq * sequences, sequences, config.unified
    params.n_batch = params.n_ubatch = step_tokens
    params.n_threads = params.n_threads_batch = config.threads
    params.flash_attn_type = (
        lib.LLAMA_FLASH_ATTN_TYPE_ENABLED if config.flash_attn else lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
    )
    ctx = lib.llama_init_from_model(model, params)
    if not ctx:
        raise RuntimeError(f"llama.cpp could not make a context of {sequences} x {per_seq} tokens")
    return ctx


def _fill(batch: Any, rows: list[tuple[int, int, int, bool]]) -> None:
    """Put ``(token, position, sequence, logits)`` rows into ``batch``."""
    for i, (token, pos, seq, logits) in enumerate(rows):
        batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, pos, 1
        batch.seq_id[i][0], batch.logits[i] = seq, logits
    batch.n_tokens = len(rows)


def _run_context(
    lib: Any, ctx: Any, barrier: threading.Barrier, shape: tuple[int, int, int, int], out: list[tuple[float, float]]
) -> None:
    """Prefill then decode on one context (see the module docstring); appends ``(prefill s, decode s)`` to ``out``."""
    sequences, depth, decode_steps, step_tokens = shape
    batch = lib.llama_batch_init(max(step_tokens, sequences), 0, 1)
    try:
        prompt = [100 + (37 * i) % 20000 for i in range(depth)]
        barrier.wait()
        started = time.perf_counter()
        for seq in (0, 1):
            for at in range(0, depth, step_tokens):
                chunk = prompt[at : at + step_tokens]
                _fill(batch, [(t, at + j, seq, at + j == depth - 1) for j, t in enumerate(chunk)])
                if lib.llama_decode(ctx, batch) != 0:
                    raise RuntimeError("llama_decode failed in prefill")
        prefill = time.perf_counter() - started
        size = lib.llama_state_seq_get_size(ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        n = lib.llama_state_seq_get_data(ctx, buf, size, 0)
        for seq in range(2, sequences):
            if lib.llama_state_seq_set_data(ctx, buf, n, seq) == 0:
                raise RuntimeError("llama.cpp refused a sequence's cells")
        barrier.wait()
        started = time.perf_counter()
        for step in range(decode_steps):
            _fill(batch, [(100 + step, depth + step, seq, True) for seq in range(sequences)])
            if lib.llama_decode(ctx, batch) != 0:
                raise RuntimeError("llama_decode failed in decode")
        out.append((prefill, time.perf_counter() - started))
    except BaseException:
        barrier.abort()  # the other contexts stop waiting for this one
        raise
    finally:
        lib.llama_batch_free(batch)


def measure(
    config: CeilingConfig, gguf: Path, cache_dir: Path, *, cpus: int | None = None, sequences: int = 8,
    depth: int = 1024, decode_steps: int = 32, step_tokens: int = 512,
) -> TokenRates:
    """The whole machine's prefill and decode tokens a second for ``config``.

    Args:
        config: weights and threads a context.
        gguf: the model's GGUF file (Q4_1 for SmolLM2).
        cache_dir: where the Q8_0 re-stored file is cached (the engine's cache).
        cpus: CPUs to fill (default all): ``cpus // threads`` contexts.
        sequences: sequences a context (the engine's ``parallel``).
        depth: prompt tokens a sequence, and the context depth of the decode steps.
        decode_steps: decode steps a context.
        step_tokens: the most tokens a prefill batch (the engine's ``step_tokens``).

    Returns:
        the rates, tokens a second.

    Raises:
        RuntimeError: llama.cpp failed to load, make a context or decode.
    """
    import llama_cpp as lib

    from mindforge.policy.engines.llamacpp_engine import restore_weights

    global _LOG_SINK
    if _LOG_SINK is None:
        lib.llama_backend_init()
        _LOG_SINK = lib.llama_log_callback(lambda *_args: None)
        lib.llama_log_set(_LOG_SINK, ctypes.c_void_p(0))
    served = gguf if config.weights == "gguf" else restore_weights(gguf, cache_dir, config.weights)
    model = lib.llama_model_load_from_file(str(served).encode(), lib.llama_model_default_params())
    if not model:
        raise RuntimeError(f"llama.cpp could not load {served}")
    count = max(1, (cpus or os.cpu_count() or 1) // config.threads)
    per_seq = -(-(depth + decode_steps + 16) // 256) * 256
    ctxs = [_context(lib, model, sequences, per_seq, config, step_tokens) for _ in range(count)]
    try:
        barrier = threading.Barrier(count)
        out: list[tuple[float, float]] = []  # filled by the threads
        shape = (sequences, depth, decode_steps, step_tokens)
        workers = [threading.Thread(target=_run_context, args=(lib, c, barrier, shape, out)) for c in ctxs]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        if len(out) != count:
            raise RuntimeError("a context failed to decode (see the thread's traceback)")
        prefill = max(p for p, _ in out)
        decode = max(d for _, d in out)
        return TokenRates(config, count * 2 * depth / prefill, count * sequences * decode_steps / decode)
    finally:
        for ctx in ctxs:
            lib.llama_free(ctx)
        lib.llama_model_free(model)
