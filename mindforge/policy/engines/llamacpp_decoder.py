"""Continuous batching on one llama.cpp context: every running request decodes in the same ``llama_decode`` step.

Decoding one sequence of a 135M model reads all its weights for one token; a step that
decodes several sequences reads them once for all of them (Yu et al. 2022, "Orca: A
Distributed Serving System for Transformer-Based Generative Models", OSDI: iteration-level
scheduling; vLLM and llama.cpp's own server do the same). So the engine keeps one context
with ``n_seq`` llama.cpp sequences, a split (non-unified) KV cache - each sequence attends
over its own cells only, which ``benchmarks/bench_rollouts.py --ceiling`` (its "unified KV" row)
measured several times faster than one unified cache for unrelated prompts - and one loop
thread that, step by step:

1. **admits** queued requests to free sequences: the free sequence whose cells (under the
   same adapter) share the longest prefix with the prompt; when another sequence or a
   stored snapshot shares :data:`MIN_GAIN_TOKENS` more, its cells are copied in
   (``llama_state_seq_get_data`` / ``set_data``); a request whose prompt another running
   request is still prefilling waits for it and then copies it (the rollouts of a GRPO
   group), so a shared prompt is computed once;
2. **plans** one batch under one adapter (llama.cpp applies LoRA adapters per context):
   one token for each decoding request, then prompt chunks of the prefilling ones up to
   ``step_tokens``; a request joins at the next step and leaves when it is done;
3. **decodes** it, then **samples** each request whose tokens were all evaluated with its
   own sampler chain (seeded, so a reply does not depend on its batch mates' sampling),
   reads its logprob from the raw logits, and ends it at EOS, a stop string, its first
   complete action (``stop_at_action``) or its budget.

A cancelled request (its client went away) is dropped at the next step and its sequence
freed. Everything that touches the context runs on the loop thread; other threads queue
work and wait on events.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mindforge.policy.engines.completion import TokenLogprobs, action_complete
from mindforge.policy.engines.kv_snapshots import MIN_GAIN_TOKENS, MIN_NEW_TOKENS, KVSnapshots, common_prefix

#: steps the loop keeps one adapter's requests on the context while another adapter's wait
ADAPTER_TURN_STEPS = 8


class DecodeCancelled(Exception):
    """The request was cancelled before it finished (its client went away)."""


@dataclass(eq=False)
class DecodeRequest:
    """One completion to run: what to generate, and (filled in by the decoder) what came out.

    Attributes:
        prompt: prompt token ids, shape (prompt_tokens,).
        adapter: the loaded adapter's name, or None for the base weights.
        max_new: completion budget (tokens).
        temperature: 0 for greedy, else the sampling temperature.
        top_p: nucleus mass in (0, 1].
        seed: the sampler's seed.
        grammar: GBNF text the reply must follow, or None.
        stops: stop strings; the reply ends once its text holds one.
        action_format: ``stop_at_action``: end once the first action is complete.
        logprobs_k: alternatives per token to return (0: the chosen token's only), or None
            for no logprobs.
        completion: generated token ids (incl. the EOS that ended the reply).
        logprobs: per completion token, its logprob and the top ``logprobs_k``.
        cached: prompt tokens found in the request's own sequence.
        shared: prompt tokens copied in from another sequence or a snapshot.
        asked / admitted / first / ended: ``time.perf_counter()`` marks (seconds).
        host_sec: seconds of per-token Python work (sampling call, logprobs, stop checks).
        error: what ended the request instead of a reply.
        done: set when the request has a reply or an error.
        on_done: called (on the decoder's thread) right after ``done`` is set, e.g. to wake
            an asyncio task.
    """

    prompt: list[int]
    adapter: str | None
    max_new: int
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0
    grammar: str | None = None
    stops: list[str] = field(default_factory=list)
    action_format: str | None = None
    logprobs_k: int | None = None
    completion: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprobs] = field(default_factory=list)
    cached: int = 0
    shared: int = 0
    asked: float = field(default_factory=time.perf_counter)
    admitted: float = 0.0
    first: float = 0.0
    ended: float = 0.0
    host_sec: float = 0.0
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)
    on_done: Callable[[], None] | None = None
    cancelled: bool = False
    # the loop's own state
    seq: _Seq | None = None
    todo: list[int] = field(default_factory=list)
    leader: DecodeRequest | None = None
    sampler: Any = None
    computed: int = 0


@dataclass(eq=False)
class _Seq:
    """One llama.cpp sequence: the tokens whose KV cells it holds (positions 0..n-1) and their adapter."""

    seq_id: int
    tokens: list[int] = field(default_factory=list)
    adapter: str | None = None
    request: DecodeRequest | None = None
    used_at: float = 0.0


class BatchedDecoder:
    """The loop thread over one llama.cpp context with ``n_seq`` sequences (see the module docstring).

    Args:
        lib: the ``llama_cpp`` module.
        ctx: a context made with ``n_seq_max = n_seq`` and a split KV cache.
        vocab: the model's vocabulary (grammar samplers need it).
        n_seq: parallel sequences.
        n_vocab: logits per token.
        eos_ids: token ids that end a reply.
        decode_text: completion token ids -> text (stop strings and actions are checked on it).
        step_tokens: the most tokens one step evaluates (the batch's size).
        snapshots: the store of prompt snapshots, or None to share nothing across time.
        adapters: adapter name -> ``llama_adapter_lora_p`` (the engine adds and removes entries
            through :meth:`call`).
    """

    def __init__(
        self,
        lib: Any,
        ctx: Any,
        vocab: Any,
        *,
        n_seq: int,
        n_vocab: int,
        eos_ids: list[int],
        decode_text: Callable[[list[int]], str],
        step_tokens: int,
        snapshots: KVSnapshots | None,
        adapters: dict[str, Any],
    ) -> None:
        self._lib, self._ctx, self._vocab = lib, ctx, vocab
        self._mem = lib.llama_get_memory(ctx)
        self.n_vocab = n_vocab
        self._eos = set(eos_ids)
        self._decode_text = decode_text
        self.step_tokens = step_tokens
        self._snapshots = snapshots
        self.adapters = adapters
        self._seqs = [_Seq(i) for i in range(n_seq)]
        self._batch = lib.llama_batch_init(step_tokens, 0, 1)
        self._queue: deque[DecodeRequest] = deque()
        self._calls: deque[tuple[Callable[[], Any], list[Any], threading.Event]] = deque()
        self._running: list[DecodeRequest] = []
        self._cond = threading.Condition()
        self._closing = False
        self._adapter: str | None = None
        self._turn_steps = 0
        #: per recent request: prompt tokens it did not compute (own cells or copied in): tests, benchmarks
        self.prefix_hits: deque[int] = deque(maxlen=1000)
        #: steps run and tokens they evaluated (benchmarks read the mean batch)
        self.steps = 0
        self.step_token_total = 0
        self._thread = threading.Thread(target=self._loop, name="llamacpp-decoder", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ other threads

    def submit(self, req: DecodeRequest) -> None:
        """Queue ``req``; its ``done`` event is set when it has a reply or an error."""
        with self._cond:
            if self._closing:
                raise RuntimeError("the decoder is closed")
            self._queue.append(req)
            self._cond.notify_all()

    def cancel(self, req: DecodeRequest) -> None:
        """Drop ``req`` at the next step (its sequence is freed); it ends with :class:`DecodeCancelled`."""
        with self._cond:
            req.cancelled = True
            self._cond.notify_all()

    def call(self, fn: Callable[[], Any], *, when_idle_of: str | None = None) -> Any:
        """Run ``fn`` on the loop thread between steps and return its result (or raise its error).

        Args:
            fn: what to run (it may touch the context and the model).
            when_idle_of: wait until no queued or running request uses this adapter (an unload).
        """
        box: list[Any] = [when_idle_of, None, None]
        event = threading.Event()
        with self._cond:
            self._calls.append((fn, box, event))
            self._cond.notify_all()
        event.wait()
        if box[2] is not None:
            raise box[2]
        return box[1]

    def affinity(self, prompt: list[int], adapter: str | None) -> int:
        """The longest prefix of ``prompt`` this context holds or is computing under ``adapter`` (tokens).

        Read from another thread: a heuristic for routing, which a step in between can only
        make stale, never wrong.
        """
        with self._cond:
            held = [s.tokens for s in self._seqs if s.adapter == adapter]
            busy = [r.prompt for r in (*self._running, *self._queue) if r.adapter == adapter]
        return max((common_prefix(tokens, prompt) for tokens in (*held, *busy)), default=0)

    def load(self) -> int:
        """Requests queued or running on this context."""
        with self._cond:
            return len(self._running) + len(self._queue)

    def forget_adapter(self, name: str) -> None:
        """(On the loop thread, through :meth:`call`.) Drop every cell and snapshot computed under adapter ``name``.

        The caller frees the adapter's weights afterwards; no request uses it by then
        (``call(..., when_idle_of=name)``).
        """
        for seq in self._seqs:
            if seq.adapter == name:
                self._lib.llama_memory_seq_rm(self._mem, seq.seq_id, -1, -1)
                seq.tokens, seq.adapter = [], None
        if self._snapshots is not None:
            self._snapshots.drop(name)
        if self._adapter == name:
            self._set_adapter(None)

    def close(self) -> None:
        """Stop the loop (queued and running requests end with an error) and free the batch."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()
        self._lib.llama_batch_free(self._batch)

    # ------------------------------------------------------------------ the loop

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closing or self._queue or self._running or self._calls)
                if self._closing:
                    break
                calls = self._ready_calls()
                queued = list(self._queue)
                self._queue.clear()
            for fn, box, event in calls:
                try:
                    box[1] = fn()
                except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
                    box[2] = exc
                event.set()
            try:
                for i, req in enumerate(queued):
                    if not self._admit(req):
                        with self._cond:  # no free sequence: these wait, in their order, for one
                            self._queue.extendleft(reversed(queued[i:]))
                        break
                self._drop_cancelled()
                self._step()
            except Exception as exc:  # noqa: BLE001 - a failed step fails its requests, never the loop
                error = RuntimeError(f"the decoder's step failed: {type(exc).__name__}: {exc}")
                for req in [*self._running, *(r for r in queued if not r.done.is_set() and r not in self._queue)]:
                    self._finish(req, error, reset=True)
        for req in [*self._running, *self._queue]:
            self._finish(req, RuntimeError("the policy engine closed"))

    def _ready_calls(self) -> list[tuple[Callable[[], Any], list[Any], threading.Event]]:
        """Calls that may run now (under the lock): an adapter's unload waits for its requests to end."""
        busy = {r.adapter for r in (*self._running, *self._queue)}
        ready = [c for c in self._calls if c[1][0] is None or c[1][0] not in busy]
        for c in ready:
            self._calls.remove(c)
        return ready

    def _drop_cancelled(self) -> None:
        for req in [r for r in self._running if r.cancelled]:
            self._finish(req, DecodeCancelled("cancelled"))

    # ------------------------------------------------------------------ admission

    def _admit(self, req: DecodeRequest) -> bool:
        """Give ``req`` a sequence, reuse or copy in the cells of its prompt's prefix, or let it wait for a leader.

        Returns:
            False when no sequence is free (``req`` is not admitted), else True (also for a
            request ended here: cancelled, or its adapter no longer loaded).
        """
        if req.cancelled:
            self._finish(req, DecodeCancelled("cancelled"))
            return True
        if req.adapter is not None and req.adapter not in self.adapters:
            self._finish(req, KeyError(req.adapter))
            return True
        free = [s for s in self._seqs if s.request is None]
        if not free:
            return False
        prompt = req.prompt
        seq = max(free, key=lambda s: (common_prefix(s.tokens, prompt) if s.adapter == req.adapter else -1, -s.used_at))
        seq.request, req.seq = req, seq
        req.admitted = time.perf_counter()
        req.sampler = self._sampler(req)
        self._running.append(req)
        need = len(prompt) - MIN_NEW_TOKENS
        leader = next(
            (
                r for r in self._running
                if r is not req and r.leader is None and r.adapter == req.adapter and r.todo and r.first == 0.0
                and common_prefix(r.prompt, prompt) >= need
            ),
            None,
        )  # fmt: skip
        if self._snapshots is not None and leader is not None:
            req.leader = leader  # prefilling the same prompt: wait, then copy its cells
            return True
        self._place(req)
        return True

    def _place(self, req: DecodeRequest) -> None:
        """Set ``req``'s sequence to the longest usable prefix of its prompt, then queue the rest for prefill."""
        seq, prompt = req.seq, req.prompt
        assert seq is not None
        own = common_prefix(seq.tokens, prompt) if seq.adapter == req.adapter else 0
        shared = 0
        if self._snapshots is not None:
            donor = max(
                (s for s in self._seqs if s is not seq and s.adapter == req.adapter),
                key=lambda s: common_prefix(s.tokens, prompt),
                default=None,
            )
            from_seq = common_prefix(donor.tokens, prompt) if donor is not None else 0
            hit = self._snapshots.best(prompt, req.adapter)
            from_snap = hit.shared if hit is not None else 0
            best = max(from_seq, from_snap)
            if best >= own + MIN_GAIN_TOKENS:
                if from_seq >= from_snap and donor is not None:
                    data = self._seq_data(donor.seq_id)
                else:
                    assert hit is not None
                    data = hit.state.llama_state
                if self._load_seq(seq.seq_id, data):
                    shared, own = best, 0
                    seq.tokens = list(prompt[:best])
        keep = min(max(own, shared), len(prompt) - 1)  # at least the last prompt token is evaluated: its logits
        self._lib.llama_memory_seq_rm(self._mem, seq.seq_id, keep, -1)
        seq.tokens = seq.tokens[:keep] if shared else list(prompt[:keep])
        seq.adapter = req.adapter
        req.cached, req.shared = (0, keep) if shared else (keep, 0)
        self.prefix_hits.append(keep)
        req.todo = list(prompt[keep:])

    def _seq_data(self, seq_id: int) -> bytes:
        size = self._lib.llama_state_seq_get_size(self._ctx, seq_id)
        buf = (ctypes.c_uint8 * size)()
        n = self._lib.llama_state_seq_get_data(self._ctx, buf, size, seq_id)
        return ctypes.string_at(buf, n)

    def _load_seq(self, seq_id: int, data: bytes) -> bool:
        """Replace sequence ``seq_id``'s cells by ``data``; False (the sequence left empty) when llama.cpp refuses."""
        self._lib.llama_memory_seq_rm(self._mem, seq_id, -1, -1)
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if self._lib.llama_state_seq_set_data(self._ctx, buf, len(data), seq_id) == 0:
            self._lib.llama_memory_seq_rm(self._mem, seq_id, -1, -1)
            self._seqs[seq_id].tokens = []
            return False
        return True

    def _sampler(self, req: DecodeRequest) -> Any:
        """The request's sampler chain: its grammar, then greedy, or top-p, temperature and a seeded draw."""
        lib = self._lib
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        if req.grammar is not None:
            grammar = lib.llama_sampler_init_grammar(self._vocab, req.grammar.encode(), b"root")
            lib.llama_sampler_chain_add(chain, grammar)
        if req.temperature <= 0.0:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_greedy())
        else:
            if req.top_p < 1.0:
                lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_p(req.top_p, 1))
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_temp(req.temperature))
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_dist(req.seed & 0xFFFFFFFF))
        return chain

    # ------------------------------------------------------------------ one step

    def _step(self) -> None:
        """Start followers whose leader has prefilled, then evaluate one batch under one adapter."""
        for req in [r for r in self._running if r.leader is not None]:
            lead = req.leader
            if lead is None or lead.first or lead.done.is_set() or lead not in self._running:
                req.leader = None
                self._place(req)
        ready = [r for r in self._running if r.leader is None and r.todo]
        if not ready:
            return
        adapter = self._pick_adapter(ready)
        group = [r for r in ready if r.adapter == adapter]
        plan = self._plan(group)
        self._set_adapter(adapter)
        rc = self._decode(plan)
        if rc != 0:
            for req, _ in plan:
                self._finish(req, RuntimeError(f"llama_decode failed (code {rc})"), reset=True)
            return
        self.steps += 1
        self.step_token_total += sum(n for _, n in plan)
        self._after(plan)

    def _pick_adapter(self, ready: list[DecodeRequest]) -> str | None:
        """The current adapter while it has work and others have not waited :data:`ADAPTER_TURN_STEPS` steps."""
        adapters = {r.adapter for r in ready}
        if self._adapter in adapters and (len(adapters) == 1 or self._turn_steps < ADAPTER_TURN_STEPS):
            self._turn_steps += 1
            return self._adapter
        others = [r for r in ready if r.adapter != self._adapter] or ready
        self._turn_steps = 1
        return min(others, key=lambda r: r.admitted).adapter

    def _plan(self, group: list[DecodeRequest]) -> list[tuple[DecodeRequest, int]]:
        """(request, tokens of its ``todo`` to evaluate): each decoding request, then prompt chunks, oldest first."""
        budget = self.step_tokens
        plan = []
        decoding = [r for r in group if r.first]
        prefilling = sorted((r for r in group if not r.first), key=lambda r: r.admitted)
        for req in [*decoding, *prefilling]:
            n = min(len(req.todo), budget)
            if n <= 0:
                break
            plan.append((req, n))
            budget -= n
        return plan

    def _set_adapter(self, adapter: str | None) -> None:
        if adapter == self._adapter:
            return
        lib = self._lib
        if adapter is None:
            rc = lib.llama_set_adapters_lora(self._ctx, None, 0, None)
        else:
            ptrs = (lib.llama_adapter_lora_p_ctypes * 1)(self.adapters[adapter])
            rc = lib.llama_set_adapters_lora(self._ctx, ptrs, 1, (ctypes.c_float * 1)(1.0))
        if rc != 0:
            raise RuntimeError(f"llama.cpp could not set adapter {adapter!r} (code {rc})")
        self._adapter = adapter

    def _decode(self, plan: list[tuple[DecodeRequest, int]]) -> int:
        batch, i = self._batch, 0
        for req, n in plan:
            seq = req.seq
            assert seq is not None
            pos = len(seq.tokens)
            for j, token in enumerate(req.todo[:n]):
                batch.token[i] = token
                batch.pos[i] = pos + j
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = seq.seq_id
                batch.logits[i] = j == len(req.todo) - 1  # the request's last token: sample after it
                i += 1
        batch.n_tokens = i
        return int(self._lib.llama_decode(self._ctx, batch))

    def _after(self, plan: list[tuple[DecodeRequest, int]]) -> None:
        """Move each request's evaluated tokens into its sequence; sample the ones that were all evaluated."""
        row = 0
        for req, n in plan:
            seq = req.seq
            assert seq is not None
            seq.tokens.extend(req.todo[:n])
            req.computed += n if not req.first else 0
            complete = n == len(req.todo)
            req.todo = req.todo[n:]
            row += n
            if not complete:
                continue
            started = time.perf_counter()
            if not req.first:
                req.first = started
                self._snapshot(req)
            token = int(self._lib.llama_sampler_sample(req.sampler, self._ctx, row - 1))
            req.completion.append(token)
            if req.logprobs_k is not None:
                req.logprobs.append(self._logprob(row - 1, token, req.logprobs_k))
            finished = self._finished(req, token)
            req.host_sec += time.perf_counter() - started
            if finished:
                self._finish(req)
            else:
                req.todo = [token]

    def _finished(self, req: DecodeRequest, token: int) -> bool:
        if token in self._eos or len(req.completion) >= req.max_new:
            return True
        if not req.stops and req.action_format is None:
            return False
        text = self._decode_text(req.completion)
        return any(s in text for s in req.stops) or action_complete(req.action_format, text)

    def _logprob(self, row: int, token: int, k: int) -> TokenLogprobs:
        """Logprob of ``token`` and the top ``k`` under the raw logits of batch row ``row``."""
        ptr = self._lib.llama_get_logits_ith(self._ctx, row)
        logits = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).astype(np.float64)
        logits -= logits.max()
        logp = logits - np.log(np.exp(logits).sum())
        top: list[tuple[int, float]] = []
        if k:
            idx = np.argpartition(-logp, k)[:k] if k < len(logp) else np.arange(len(logp))
            idx = idx[np.argsort(-logp[idx])]
            top = [(int(i), float(logp[i])) for i in idx]
        return float(logp[token]), top

    def _snapshot(self, req: DecodeRequest) -> None:
        """Store the prompt's cells (the sequence holds exactly the prompt now) when it computed enough of them."""
        if self._snapshots is None or req.computed < MIN_NEW_TOKENS or req.seq is None:
            return
        self._snapshots.put(req.prompt, req.adapter, self._seq_data(req.seq.seq_id))

    def _finish(self, req: DecodeRequest, error: BaseException | None = None, *, reset: bool = False) -> None:
        """End ``req``: free its sequence (its cells kept for later prefixes unless ``reset``), wake its caller."""
        req.error = error
        req.ended = time.perf_counter()
        if req.sampler is not None:
            self._lib.llama_sampler_free(req.sampler)
            req.sampler = None
        seq = req.seq
        if seq is not None:
            if reset or error is not None:
                self._lib.llama_memory_seq_rm(self._mem, seq.seq_id, -1, -1)
                seq.tokens = []
            seq.request, seq.used_at = None, req.ended
        if req in self._running:
            self._running.remove(req)
        for other in self._running:
            if other.leader is req:
                other.leader = None
                self._place(other)
        req.done.set()
        if req.on_done is not None:
            req.on_done()
