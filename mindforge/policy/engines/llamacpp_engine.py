"""An inference-only policy engine on llama.cpp (``llama-cpp-python``), same API as the transformers one.

Optional: install the ``llamacpp`` extra (``llama-cpp-python`` compiles from source, a
few minutes). Serves a GGUF base model with runtime LoRA adapters for inference-only
trials (Expansion, held-out runs); training stays on transformers + PEFT.

- **Prompt**: the transformers tokenizer read from the same GGUF applies the chat
  template, so a request gets the same prompt token ids as from the transformers engine
  on that GGUF; the ids go to llama.cpp as they are.
- **Generation**: ``Llama.generate`` drives llama.cpp's sampler chain set to the request
  (greedy at temperature 0, else temperature and top-p only: top-k, min-p, typical and
  repeat penalty off); this module stops each reply at EOS (kept in ``token_ids``, as
  the transformers engine does), at a stop string, or at the budget.
- **Logprobs**: read after each token from the context's logits (``llama_get_logits``,
  the raw distribution before temperature/top-p, as vLLM returns by default), so the
  request's chosen-token logprob and its ``top_logprobs`` are exact for the Q4 model.
- **Concurrency**: ``slots`` independent ``Llama`` instances (each its own context and
  KV cache, the weights mmapped once by the OS), one request per slot at a time;
  llama.cpp releases the GIL while it decodes, so slots run in parallel.
- **Prefix cache**: a slot keeps the KV cache of its last request and ``Llama.generate``
  reuses its longest common prefix; a request goes to the free slot whose last tokens
  (under the same adapter) share the longest prefix with its prompt, so a trial's next
  turn finds its earlier turns already evaluated. Each reply says how much it reused:
  ``usage.prompt_tokens_details.cached_tokens`` (OpenAI's field) and a ``timings`` object
  in llama.cpp server's shape (``cache_n``, ``prompt_n``, ``prompt_ms``, ``predicted_n``,
  ``predicted_ms``) plus ``queue_ms``, ``host_ms`` and ``shared_n``, which
  ``benchmarks/bench_rollouts.py`` reads to say where a trial's generation time goes.
- **Shared prefills**: a prompt one slot prefilled is copied into another slot instead of
  being computed again (:mod:`mindforge.policy.engines.kv_snapshots`); a request waits for
  another slot's prefill of (nearly) the same prompt, as the rollouts of a GRPO group ask.
- **Adapters**: ``/v1/load_lora_adapter`` converts the PEFT directory to a GGUF LoRA
  (:mod:`mindforge.policy.engines.gguf_lora`) and loads it into every slot's model
  (``llama_adapter_lora_init``); a request sets its adapter on its slot's context
  (``llama_set_adapters_lora``, none for the base model), and a slot whose adapter
  changes drops its KV cache, which depends on the adapter.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import random
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mindforge.policy.engines.completion import (
    PolicyRequestError,
    TokenLogprobs,
    completion_budget,
    prompt_token_ids,
    reply_body,
    unknown_model,
)
from mindforge.policy.engines.gguf_lora import AdapterConversionError, peft_to_gguf_lora
from mindforge.policy.engines.kv_snapshots import MIN_GAIN_TOKENS, MIN_NEW_TOKENS, KVSnapshots, common_prefix, restore
from mindforge.policy.server.protocol import (
    AdapterRegistry,
    ChatCompletionRequest,
    adapter_sha256,
)


@dataclass
class _Slot:
    llm: Any  # llama_cpp.Llama
    adapters: dict[str, Any] = field(default_factory=dict)  # name -> llama_adapter_lora_p of this slot's model
    adapter: str | None = None  # the adapter its KV cache was computed with

    def tokens(self) -> list[int]:
        return self.llm._input_ids.tolist()


#: the longest a request waits for another slot's prefill of a prompt it shares (seconds)
SHARE_WAIT_SEC = 60.0


class LlamaCppEngine:
    """A GGUF base model on llama.cpp plus LoRA adapters loaded at run time.

    Args:
        gguf_path: the base model's GGUF file.
        served_name: the base model's name in ``/v1/models`` and requests.
        slots: concurrent requests (one ``Llama`` instance each).
        n_threads: CPU threads per slot for decoding; default ``max(1, cpus // slots)``.
            Decoding one token is bound by memory traffic and gains nothing from more
            threads on a 2-core machine (93 tok/s with 1 or 2 for SmolLM2-135M Q4_1).
        n_threads_batch: CPU threads per slot for prefill. Default: every CPU for a
            request that finds every other slot free (prefill scales with threads: 167 ->
            345 tok/s from 1 to 2 for SmolLM2-135M, and the other rollouts of a GRPO group
            wait for it), else ``n_threads`` (with two slots busy on 2 cores, prefill on
            every core slows the other slot's decoding). A number fixes it.
        share_prefills: slots share prompt prefills
            (:mod:`mindforge.policy.engines.kv_snapshots`): a request waits for another
            slot's prefill of (nearly) the same prompt, then copies it in.
        snapshot_bytes: the most bytes of prompt snapshots kept per adapter.
        n_ctx: context window in tokens; default the GGUF's training context.

    Attributes:
        base_name, model_path, max_model_len, adapters, tokenizer, eos_ids: as on
            :class:`mindforge.policy.engines.engine.PolicyEngine`.

    Raises:
        ImportError: ``llama_cpp`` is not installed (the ``llamacpp`` extra).
        FileNotFoundError: no file at ``gguf_path``.
    """

    def __init__(
        self,
        gguf_path: str | Path,
        *,
        served_name: str,
        slots: int = 2,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        n_ctx: int | None = None,
        share_prefills: bool = True,
        snapshot_bytes: int = 512 << 20,
    ) -> None:
        import llama_cpp
        from transformers import AutoTokenizer

        path = Path(gguf_path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such GGUF file")
        if slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        self._llama_cpp = llama_cpp
        self.tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        cpus = os.cpu_count() or 1
        threads = n_threads or max(1, cpus // slots)
        batch_threads = n_threads_batch or threads
        self._cpus, self._threads = cpus, threads
        self._adaptive_prefill = n_threads_batch is None and share_prefills
        self._slots = [
            _Slot(
                llama_cpp.Llama(
                    str(path), n_ctx=n_ctx or 0, n_threads=threads, n_threads_batch=batch_threads, verbose=False
                )
            )
            for _ in range(slots)
        ]
        first = self._slots[0].llm
        self.max_model_len = int(first.n_ctx())
        self.n_vocab = int(first.n_vocab())
        self.base_name = served_name
        self.model_path = str(path)
        self.adapters = AdapterRegistry()
        self._grammars: dict[str, Any] = {}
        eos = {int(first.token_eos())}
        if self.tokenizer.eos_token_id is not None:
            eos.add(int(self.tokenizer.eos_token_id))
        self.eos_ids = sorted(eos)
        self._free = list(self._slots)
        self._cond = threading.Condition()
        self._gguf_dir = tempfile.TemporaryDirectory(prefix="mindforge-lora-gguf-")
        #: per recent request: prompt tokens whose KV cache its slot held or copied in (tests, benchmarks)
        self.prefix_hits: deque[int] = deque(maxlen=1000)
        self._snapshots = KVSnapshots(snapshot_bytes) if share_prefills else None
        #: claim -> (adapter, prompt) while a request prefills (or is about to) a prompt others may share
        self._prefilling: dict[int, tuple[str | None, list[int]]] = {}
        self._claims = itertools.count()

    def close(self) -> None:
        """Free the models and the converted adapter files."""
        with self._all_slots():
            for slot in self._slots:
                slot.llm.close()
        self._gguf_dir.cleanup()

    # ------------------------------------------------------------------ slots

    @contextmanager
    def _slot_for(self, adapter: str | None, prompt: list[int]) -> Iterator[_Slot]:
        """The free slot sharing the longest prefix with ``prompt`` under ``adapter`` (waits for one)."""
        with self._cond:
            self._cond.wait_for(lambda: bool(self._free))
            slot = max(self._free, key=lambda s: common_prefix(s.tokens(), prompt) if s.adapter == adapter else -1)
            self._free.remove(slot)
        try:
            yield slot
        finally:
            with self._cond:
                self._free.append(slot)
                self._cond.notify_all()

    @contextmanager
    def _all_slots(self) -> Iterator[None]:
        """Every slot, once the requests running on them are done (for adapter loads and unloads)."""
        with self._cond:
            self._cond.wait_for(lambda: len(self._free) == len(self._slots))
            taken, self._free = self._free, []
        try:
            yield
        finally:
            with self._cond:
                self._free = taken
                self._cond.notify_all()

    def _set_adapter(self, slot: _Slot, adapter: str | None) -> None:
        lib = self._llama_cpp
        if adapter is None:
            rc = lib.llama_set_adapters_lora(slot.llm.ctx, None, 0, None)
        else:
            ptrs = (lib.llama_adapter_lora_p_ctypes * 1)(slot.adapters[adapter])
            rc = lib.llama_set_adapters_lora(slot.llm.ctx, ptrs, 1, (ctypes.c_float * 1)(1.0))
        if rc != 0:
            raise RuntimeError(f"llama.cpp could not set adapter {adapter!r} (code {rc})")
        if slot.adapter != adapter:
            slot.llm.reset()  # its KV cache was computed with other weights
            slot.adapter = adapter

    # ----------------------------------------------------------------- adapters

    def load_adapter(self, name: str, path: str) -> str:
        """Convert the PEFT LoRA adapter at ``path`` to GGUF and load it under ``name``.

        Returns:
            vLLM's plain-text success line.

        Raises:
            PolicyRequestError: 404 when ``path`` holds no adapter; 400 when the name is
                the base model's, was used for different weights, the adapter cannot be
                converted (DoRA, rsLoRA, ... see :mod:`mindforge.policy.engines.gguf_lora`), or
                llama.cpp refuses it.
        """
        adapter_dir = Path(path)
        if not (adapter_dir / "adapter_config.json").is_file():
            raise PolicyRequestError(404, f"No adapter found at '{path}' (no adapter_config.json)", "NotFoundError")
        if name == self.base_name:
            raise PolicyRequestError(400, f"adapter name '{name}' is the base model's name", "InvalidUserInput")
        sha = adapter_sha256(adapter_dir)
        with self._all_slots():
            try:
                state = self.adapters.check_load(name, sha)
            except ValueError as exc:
                raise PolicyRequestError(400, str(exc), "InvalidUserInput") from exc
            if state == "same":
                return f"Success: LoRA adapter '{name}' is already loaded with the same weights."
            out = Path(self._gguf_dir.name) / f"{sha[:24]}.gguf"
            try:
                peft_to_gguf_lora(adapter_dir, self.model_path, out)
            except AdapterConversionError as exc:
                raise PolicyRequestError(400, f"cannot load adapter '{name}' into llama.cpp: {exc}") from exc
            for slot in self._slots:
                ptr = self._llama_cpp.llama_adapter_lora_init(slot.llm.model, str(out).encode())
                if not ptr:
                    self._free_adapter(name)
                    raise PolicyRequestError(400, f"llama.cpp could not load adapter '{name}' converted from '{path}'")
                slot.adapters[name] = ptr
            self.adapters.add(name, str(adapter_dir), sha)
        return f"Success: LoRA adapter '{name}' added successfully."

    def _free_adapter(self, name: str) -> None:
        if self._snapshots is not None:
            self._snapshots.drop(name)
        for slot in self._slots:
            ptr = slot.adapters.pop(name, None)
            if ptr is None:
                continue
            if slot.adapter == name:
                self._set_adapter(slot, None)
            self._llama_cpp.llama_adapter_lora_free(ptr)

    def unload_adapter(self, name: str) -> str:
        """Unload adapter ``name`` from every slot.

        Raises:
            PolicyRequestError: 404 when no adapter of that name is loaded.
        """
        with self._all_slots():
            if name not in self.adapters.loaded:
                raise PolicyRequestError(404, f"The lora adapter '{name}' cannot be found.", "NotFoundError")
            self._free_adapter(name)
            self.adapters.remove(name)
        return f"Success: LoRA adapter '{name}' removed successfully."

    def model_names(self) -> list[str]:
        """The base name followed by the loaded adapter names."""
        return [self.base_name, *self.adapters.loaded]

    # ---------------------------------------------------------------- completion

    def chat(self, req: ChatCompletionRequest) -> dict[str, Any]:
        """Answer one chat completion request (waits for a free slot).

        Returns:
            the ``chat.completion`` body; logprobs of the raw distribution, EOS kept in
            ``token_ids``.

        Raises:
            PolicyRequestError: 404 for an unknown model, 400 for a prompt that does not
                fit the context window or a template failure.
        """
        prompt = prompt_token_ids(self.tokenizer, req)
        max_new = completion_budget(req, len(prompt), self.max_model_len)
        adapter = None if req.model == self.base_name else req.model
        asked = time.perf_counter()
        claim = self._claim_prefill(adapter, prompt)
        try:
            with self._slot_for(adapter, prompt) as slot:
                if adapter is not None and adapter not in slot.adapters:
                    raise unknown_model(req.model)
                self._set_adapter(slot, adapter)
                shared, snapshot = self._share_prefill(slot, adapter, prompt, claim)
                queue_ms = (time.perf_counter() - asked) * 1000.0
                # llama.cpp re-evaluates at least the last prompt token to get its logits
                cached = min(common_prefix(slot.tokens(), prompt), len(prompt) - 1)
                self.prefix_hits.append(cached)
                completion, logprobs, timings = self._generate(slot, req, prompt, max_new, claim if snapshot else None)
        finally:
            self._end_prefill(claim)
        timings.update(cache_n=cached, prompt_n=len(prompt) - cached, shared_n=shared, queue_ms=queue_ms)
        return reply_body(
            req,
            prompt=prompt,
            completion=completion,
            tokenizer=self.tokenizer,
            eos_ids=self.eos_ids,
            max_new=max_new,
            logprobs=logprobs if req.logprobs else None,
            cached_tokens=cached,
            timings=timings,
        )

    def _claim_prefill(self, adapter: str | None, prompt: list[int]) -> int | None:
        """Wait while another request prefills (nearly) this prompt, then claim its prefill if still needed.

        (Nearly) the same: it shares all but ``MIN_NEW_TOKENS`` of ``prompt`` - the rollouts
        of one GRPO group. The wait holds no slot and lasts at most :data:`SHARE_WAIT_SEC`;
        the request then copies the prompt in rather than computing it again, and the
        prefill it waited for had every core (see :meth:`_share_prefill`). A prefill that
        shares less is not waited for: that would idle a core to save part of a prompt.

        The wait and the claim are one step under the lock, so of requests that arrive
        together exactly one claims and the rest wait for it; a claim is taken before the
        request has a slot, so one that finds its slot's own cache covers the prompt gives
        it back at once (:meth:`_share_prefill`).

        Returns:
            the claim (give it to :meth:`_end_prefill`), or None when prefills are not
            shared or a stored snapshot already leaves fewer than ``MIN_NEW_TOKENS`` to compute.
        """
        if self._snapshots is None:
            return None
        need = len(prompt) - MIN_NEW_TOKENS
        with self._cond:
            self._cond.wait_for(
                lambda: (
                    not any(a == adapter and common_prefix(p, prompt) >= need for a, p in self._prefilling.values())
                ),
                timeout=SHARE_WAIT_SEC,
            )
            hit = self._snapshots.best(prompt, adapter)
            if hit is not None and hit.shared >= need:
                return None
            claim = next(self._claims)
            self._prefilling[claim] = (adapter, prompt)
            return claim

    def _share_prefill(
        self, slot: _Slot, adapter: str | None, prompt: list[int], claim: int | None
    ) -> tuple[int, bool]:
        """Copy in a stored prefill of ``prompt`` when it covers more than ``slot``'s own cache; set prefill threads.

        Loads the stored snapshot sharing the most with ``prompt`` if it beats the slot's
        own cache by ``MIN_GAIN_TOKENS``. A slot that will still compute ``MIN_NEW_TOKENS``
        or more snapshots the prompt once prefilled and keeps the request's ``claim`` till
        then, so requests for the same prompt wait for it; otherwise the claim is given back.
        Without a fixed ``n_threads_batch``, the prefill runs on every CPU when every other
        slot is free (a lone request, or one whose group waits for it), else on the slot's
        share.

        Returns:
            ``(tokens copied in from a snapshot, 0 when none; whether to snapshot the
            prompt once it is prefilled)``.
        """
        if self._snapshots is None:
            return 0, False
        own = common_prefix(slot.tokens(), prompt)
        with self._cond:
            hit = self._snapshots.best(prompt, adapter)
            use = hit is not None and hit.shared >= own + MIN_GAIN_TOKENS
            start = hit.shared if hit is not None and use else own
            snapshot = len(prompt) - start >= MIN_NEW_TOKENS
            if not snapshot and claim is not None and self._prefilling.pop(claim, None) is not None:
                self._cond.notify_all()
            alone = len(self._free) == len(self._slots) - 1
        if self._adaptive_prefill:
            batch = self._cpus if alone else self._threads
            self._llama_cpp.llama_set_n_threads(slot.llm.ctx, self._threads, batch)
        if hit is None or not use:
            return 0, snapshot
        try:
            restore(slot.llm, hit.state)
        except RuntimeError:
            return 0, snapshot  # the slot was reset: it prefills the whole prompt
        return hit.shared, snapshot

    def _end_prefill(self, claim: int | None) -> None:
        """The request holding ``claim`` no longer prefills: wake the requests waiting to share its prompt."""
        if claim is None:
            return
        with self._cond:
            if self._prefilling.pop(claim, None) is not None:
                self._cond.notify_all()

    def _generate(
        self, slot: _Slot, req: ChatCompletionRequest, prompt: list[int], max_new: int, claim: int | None = None
    ) -> tuple[list[int], list[TokenLogprobs], dict[str, float]]:
        """Sample one reply on ``slot``; with a ``claim``, store the prompt's KV cells once prefilled and end it.

        Returns:
            ``(completion token ids, per-token logprobs, timings)``: ``prompt_ms`` is the
            time to the first token (prefill of the uncached prompt tokens and the first
            sample), ``predicted_ms`` the rest, ``predicted_n`` the completion tokens, and
            ``host_ms`` the part of both spent in this module's per-token Python (logprobs
            and stop-string checks), all in milliseconds.
        """
        llm = slot.llm
        temperature = 1.0 if req.temperature is None else req.temperature
        llm.set_seed(req.seed if req.seed is not None else random.getrandbits(31))
        k = (req.top_logprobs or 0) if req.logprobs else 0
        stops, eos = req.stop_list, set(self.eos_ids)
        completion: list[int] = []
        logprobs: list[TokenLogprobs] = []
        gen = llm.generate(
            prompt,
            grammar=self._grammar(req),
            temp=temperature,
            top_p=1.0 if req.top_p is None else req.top_p,
            top_k=0,
            min_p=0.0,
            typical_p=1.0,
            repeat_penalty=1.0,
        )
        start = time.perf_counter()
        first = host = 0.0
        try:
            for token in gen:
                got = time.perf_counter()
                if not completion:
                    first = got
                    if claim is not None and self._snapshots is not None:
                        self._snapshots.save(llm, prompt, slot.adapter)  # the context holds exactly the prompt
                        self._end_prefill(claim)
                completion.append(int(token))
                if req.logprobs:
                    logprobs.append(self._token_logprobs(llm, int(token), k))
                if token in eos or len(completion) >= max_new:
                    host += time.perf_counter() - got
                    break
                if stops and any(s in self.tokenizer.decode(completion, skip_special_tokens=True) for s in stops):
                    host += time.perf_counter() - got
                    break
                host += time.perf_counter() - got
        finally:
            gen.close()
        end = time.perf_counter()
        first = first or end
        timings = {
            "prompt_ms": (first - start) * 1000.0,
            "predicted_ms": (end - first) * 1000.0,
            "predicted_n": len(completion),
            "host_ms": host * 1000.0,
        }
        return completion, logprobs, timings

    def _grammar(self, req: ChatCompletionRequest) -> Any:
        """The llama.cpp grammar of the request's JSON schema (cached per schema), or None.

        Raises:
            PolicyRequestError: 400 when llama.cpp cannot turn the schema into a grammar.
        """
        schema = req.json_schema
        if schema is None:
            return None
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            from llama_cpp import LlamaGrammar

            try:
                self._grammars[key] = LlamaGrammar.from_json_schema(key, verbose=False)
            except (ValueError, RuntimeError, KeyError) as exc:
                raise PolicyRequestError(
                    400, f"response_format.json_schema: no grammar: {exc}", "invalid_request_error"
                ) from exc
        return self._grammars[key]

    def _token_logprobs(self, llm: Any, token: int, k: int) -> TokenLogprobs:
        """Logprob of ``token`` and the top ``k`` under the logits that produced it (raw distribution)."""
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(self.n_vocab,)).astype(np.float64)
        logits -= logits.max()
        logp = logits - np.log(np.exp(logits).sum())
        top: list[tuple[int, float]] = []
        if k:
            idx = np.argpartition(-logp, k)[:k]
            idx = idx[np.argsort(-logp[idx])]
            top = [(int(i), float(logp[i])) for i in idx]
        return float(logp[token]), top
