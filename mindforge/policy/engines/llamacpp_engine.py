"""An inference-only policy engine on llama.cpp (``llama-cpp-python``), same API as the transformers one.

Optional: install the ``llamacpp`` extra (``llama-cpp-python`` compiles from source, a
few minutes). Serves a GGUF base model with runtime LoRA adapters for inference-only
trials (Expansion, held-out runs); training stays on transformers + PEFT.

- **Prompt**: the transformers tokenizer read from the same GGUF applies the chat
  template, so a request gets the same prompt token ids as from the transformers engine
  on that GGUF; the ids go to llama.cpp as they are.
- **Batching**: ``contexts`` llama.cpp contexts (one per CPU by default) of ``parallel``
  sequences each; each context decodes all its running requests together, step by step
  (continuous batching: :mod:`mindforge.policy.engines.llamacpp_decoder`), so concurrent
  trials share each step's pass over the weights. A context computes on one thread: ggml
  synchronises the threads of one computation with spinning barriers, so on a machine whose
  cores are also busy with sandboxes one thread descheduled stalls the other
  (``benchmarks/bench_rollouts.py --ceiling`` measures one and two threads on a loaded
  machine); contexts of one thread each never wait on each other. A request goes to the
  context that holds most of its prompt, net of load (:meth:`LlamaCppEngine._route`).
- **Weights**: served as the GGUF holds them, or re-stored as ``Q8_0`` (``weights``), which
  llama.cpp multiplies faster on CPUs with 8-bit dot products; the conversion
  (``llama_model_quantize``) is done once and cached beside the other derived models.
- **Generation**: each request's own llama.cpp sampler chain (greedy at temperature 0,
  else top-p, temperature and a seeded draw; a grammar first for a JSON-schema
  ``response_format``); a reply ends at EOS (kept in ``token_ids``, as the transformers
  engine does), a stop string, its first complete action (``stop_at_action``) or its budget.
- **Logprobs**: read from the raw logits of the request's batch row (before temperature
  and top-p, as vLLM returns by default), exact for the served weights.
- **Prefix cache**: a sequence keeps the KV cells of its last request; a request goes to
  the free sequence sharing the longest prefix (under the same adapter), or copies in
  another sequence's or a stored snapshot's cells (:mod:`mindforge.policy.engines.kv_snapshots`);
  rollouts of one prompt that arrive together prefill it once. Each reply says how much
  it reused: ``usage.prompt_tokens_details.cached_tokens`` (OpenAI's field) and a
  ``timings`` object in llama.cpp server's shape (``cache_n``, ``prompt_n``,
  ``prompt_ms``, ``predicted_n``, ``predicted_ms``) plus ``queue_ms``, ``host_ms`` and
  ``shared_n``, which ``benchmarks/bench_rollouts.py`` reads.
- **Adapters**: ``/v1/load_lora_adapter`` converts the PEFT directory to a GGUF LoRA
  (:mod:`mindforge.policy.engines.gguf_lora`) and loads it into the model
  (``llama_adapter_lora_init``); a step runs the requests of one adapter
  (``llama_set_adapters_lora`` applies to the whole context), so an adapter applies to
  its own requests only.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import random
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from mindforge.policy.engines.completion import (
    PolicyRequestError,
    completion_budget,
    prompt_token_ids,
    reply_body,
    unknown_model,
)
from mindforge.policy.engines.gguf_lora import AdapterConversionError, peft_to_gguf_lora
from mindforge.policy.engines.kv_snapshots import KVSnapshots
from mindforge.policy.engines.llamacpp_decoder import BatchedDecoder, DecodeCancelled, DecodeRequest
from mindforge.policy.server.protocol import AdapterRegistry, ChatCompletionRequest, adapter_sha256

#: weight formats the engine serves: the GGUF's own, or re-stored as Q8_0
Weights = Literal["gguf", "q8_0"]
#: prompt tokens one queued or running request is worth when a request picks a context (:meth:`LlamaCppEngine._route`)
LOAD_TOKENS = 64

_LOG_CALLBACK: Any = None  # llama.cpp's log sink, kept alive for the process


class LlamaCppEngine:
    """A GGUF base model on llama.cpp plus LoRA adapters loaded at run time.

    Args:
        gguf_path: the base model's GGUF file.
        served_name: the base model's name in ``/v1/models`` and requests.
        contexts: llama.cpp contexts, each with its own decoding loop; default
            ``cpus // n_threads``.
        parallel: sequences decoded together in each context (llama.cpp server's
            ``--parallel``); a request beyond them waits for one to finish.
        n_threads: CPU threads of each context's steps.
        n_ctx: context window of each sequence in tokens; default the GGUF's training context.
        step_tokens: the most tokens one step evaluates (decoded tokens plus prompt chunks).
        weights: ``gguf`` serves the file's tensors; ``q8_0`` re-stores them as Q8_0 first
            (cached under ``cache_dir``).
        cache_dir: where the re-stored weights go; default beside ``gguf_path`` in a
            temporary folder of this process.
        share_prefills: copy KV cells between sequences and keep prompt snapshots.
        snapshot_bytes: the most bytes of prompt snapshots kept per adapter.
        flash_attn: llama.cpp's fused attention kernel (on by default: prefill about 1.25x
            faster on one CPU thread, decoding about the same; ``benchmarks/bench_rollouts.py``).

    Attributes:
        base_name, model_path, max_model_len, adapters, tokenizer, eos_ids: as on
            :class:`mindforge.policy.engines.engine.PolicyEngine`.
        decoder: the batching loop (:class:`BatchedDecoder`).

    Raises:
        ImportError: ``llama_cpp`` is not installed (the ``llamacpp`` extra).
        FileNotFoundError: no file at ``gguf_path``.
        ValueError: ``parallel`` below 1.
        RuntimeError: llama.cpp could not load the model or make the context.
    """

    def __init__(
        self,
        gguf_path: str | Path,
        *,
        served_name: str,
        contexts: int | None = None,
        parallel: int = 8,
        n_threads: int = 1,
        n_ctx: int | None = None,
        step_tokens: int = 512,
        weights: Weights = "q8_0",
        cache_dir: str | Path | None = None,
        share_prefills: bool = True,
        snapshot_bytes: int = 512 << 20,
        flash_attn: bool = True,
    ) -> None:
        import llama_cpp
        from transformers import AutoTokenizer

        path = Path(gguf_path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such GGUF file")
        if parallel < 1 or n_threads < 1 or (contexts is not None and contexts < 1):
            raise ValueError(f"contexts, parallel, n_threads must be at least 1: {contexts}, {parallel}, {n_threads}")
        self._lib = lib = llama_cpp
        _quiet_llama_logs(lib)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        self._tmp = tempfile.TemporaryDirectory(prefix="mindforge-llamacpp-")
        served = path if weights == "gguf" else restore_weights(path, Path(cache_dir or self._tmp.name), weights)
        self._model = lib.llama_model_load_from_file(str(served).encode(), lib.llama_model_default_params())
        if not self._model:
            raise RuntimeError(f"llama.cpp could not load {served}")
        per_seq = n_ctx or int(lib.llama_model_n_ctx_train(self._model))
        count = contexts or max(1, (os.cpu_count() or 1) // n_threads)
        self._ctxs = [self._context(per_seq, parallel, n_threads, step_tokens, flash_attn) for _ in range(count)]
        vocab = lib.llama_model_get_vocab(self._model)
        self.n_vocab = int(lib.llama_vocab_n_tokens(vocab))
        self.max_model_len = int(lib.llama_n_ctx_seq(self._ctxs[0]))
        self.base_name = served_name
        self.model_path = str(path)
        self.served_path = str(served)
        self.parallel = parallel * count
        self.adapters = AdapterRegistry()
        self._adapter_ptrs: dict[str, Any] = {}
        self._grammars: dict[str, str] = {}
        self._lock = threading.Lock()  # adapter loads and unloads, one at a time
        eos = {int(lib.llama_vocab_eos(vocab))}
        if self.tokenizer.eos_token_id is not None:
            eos.add(int(self.tokenizer.eos_token_id))
        self.eos_ids = sorted(eos)
        snapshots = KVSnapshots(snapshot_bytes) if share_prefills else None
        self.decoders = [
            BatchedDecoder(
                lib, ctx, vocab, n_seq=parallel, n_vocab=self.n_vocab, eos_ids=self.eos_ids,
                decode_text=lambda ids: str(self.tokenizer.decode(ids, skip_special_tokens=True)),
                step_tokens=step_tokens, snapshots=snapshots, adapters=self._adapter_ptrs,
            )
            for ctx in self._ctxs
        ]

    def _context(self, per_seq: int, parallel: int, threads: int, step_tokens: int, flash_attn: bool) -> Any:
        """One llama.cpp context: ``parallel`` sequences of ``per_seq`` tokens, a split KV cache, ``threads`` threads.

        Raises:
            RuntimeError: llama.cpp could not make it.
        """
        lib = self._lib
        params = lib.llama_context_default_params()
        params.n_ctx, params.n_seq_max, params.kv_unified = per_seq * parallel, parallel, False
        params.n_batch = params.n_ubatch = step_tokens
        params.n_threads = params.n_threads_batch = threads
        params.flash_attn_type = (
            lib.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn else lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )
        ctx = lib.llama_init_from_model(self._model, params)
        if not ctx:
            raise RuntimeError(f"llama.cpp could not make a context of {parallel} x {per_seq} tokens")
        return ctx

    @property
    def decoder(self) -> BatchedDecoder:
        """The first context's decoder (the only one with ``contexts=1``)."""
        return self.decoders[0]

    @property
    def prefix_hits(self) -> list[int]:
        """Per recent request (of every context), the prompt tokens it did not compute (own cells or copied in)."""
        return [n for d in self.decoders for n in d.prefix_hits]

    def close(self) -> None:
        """Stop the decoders and free the contexts, the adapters, the model and the re-stored weights."""
        for decoder in self.decoders:
            decoder.close()
        lib = self._lib
        for ctx in self._ctxs:
            lib.llama_free(ctx)
        for ptr in self._adapter_ptrs.values():
            lib.llama_adapter_lora_free(ptr)
        self._adapter_ptrs.clear()
        lib.llama_model_free(self._model)
        self._tmp.cleanup()

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
        with self._lock:
            try:
                state = self.adapters.check_load(name, sha)
            except ValueError as exc:
                raise PolicyRequestError(400, str(exc), "InvalidUserInput") from exc
            if state == "same":
                return f"Success: LoRA adapter '{name}' is already loaded with the same weights."
            out = Path(self._tmp.name) / f"{sha[:24]}.gguf"
            try:
                peft_to_gguf_lora(adapter_dir, self.model_path, out)
            except AdapterConversionError as exc:
                raise PolicyRequestError(400, f"cannot load adapter '{name}' into llama.cpp: {exc}") from exc
            ptr = self._lib.llama_adapter_lora_init(self._model, str(out).encode())  # the model's, no context's
            if not ptr:
                raise PolicyRequestError(400, f"llama.cpp could not load adapter '{name}' converted from '{path}'")
            self._adapter_ptrs[name] = ptr
            self.adapters.add(name, str(adapter_dir), sha)
        return f"Success: LoRA adapter '{name}' added successfully."

    def unload_adapter(self, name: str) -> str:
        """Unload adapter ``name`` once no request uses it.

        Raises:
            PolicyRequestError: 404 when no adapter of that name is loaded.
        """
        with self._lock:
            if name not in self.adapters.loaded:
                raise PolicyRequestError(404, f"The lora adapter '{name}' cannot be found.", "NotFoundError")
            self.adapters.remove(name)  # new requests for it are refused from now on
            for decoder in self.decoders:  # each context drops it once its requests under it have ended
                decoder.call(functools.partial(decoder.forget_adapter, name), when_idle_of=name)
            ptr = self._adapter_ptrs.pop(name, None)
            if ptr is not None:
                self._lib.llama_adapter_lora_free(ptr)
        return f"Success: LoRA adapter '{name}' removed successfully."

    def model_names(self) -> list[str]:
        """The base name followed by the loaded adapter names."""
        return [self.base_name, *self.adapters.loaded]

    # ---------------------------------------------------------------- completion

    def submit(
        self, req: ChatCompletionRequest, on_done: Callable[[], None] | None = None
    ) -> tuple[DecodeRequest, list[int]]:
        """Queue one chat completion; wait on the returned request's ``done``, then call :meth:`reply`.

        Args:
            req: the request.
            on_done: called on the decoder's thread once the request is done (see
                :class:`~mindforge.policy.engines.llamacpp_decoder.DecodeRequest`).

        Returns:
            ``(the queued decode request, the prompt's token ids)``.

        Raises:
            PolicyRequestError: 404 for an unknown model, 400 for a prompt that does not
                fit the context window, a template failure or a schema with no grammar.
        """
        prompt = prompt_token_ids(self.tokenizer, req)
        max_new = completion_budget(req, len(prompt), self.max_model_len)
        adapter = None if req.model == self.base_name else req.model
        if adapter is not None and adapter not in self.adapters.loaded:
            raise unknown_model(req.model)
        job = DecodeRequest(
            prompt=prompt,
            adapter=adapter,
            max_new=max_new,
            temperature=1.0 if req.temperature is None else req.temperature,
            top_p=1.0 if req.top_p is None else req.top_p,
            seed=req.seed if req.seed is not None else random.getrandbits(31),
            grammar=self._grammar(req),
            stops=req.stop_list,
            action_format=req.stop_at_action,
            logprobs_k=(req.top_logprobs or 0) if req.logprobs else None,
            on_done=on_done,
        )
        self._route(job).submit(job)
        return job, prompt

    def reply(self, req: ChatCompletionRequest, job: DecodeRequest) -> dict[str, Any]:
        """The ``chat.completion`` body of a finished ``job`` (see :meth:`submit`).

        Raises:
            PolicyRequestError: 404 when the adapter was unloaded before the request ran;
                500 when llama.cpp failed or the engine closed; 499 when it was cancelled.
        """
        if isinstance(job.error, KeyError):
            raise unknown_model(req.model)
        if isinstance(job.error, DecodeCancelled):
            raise PolicyRequestError(499, "the request was cancelled", "Cancelled")
        if job.error is not None:
            raise PolicyRequestError(500, f"generation failed: {job.error}", "InternalServerError")
        first = job.first or job.ended
        timings = {
            "cache_n": job.cached + job.shared,
            "prompt_n": len(job.prompt) - job.cached - job.shared,
            "shared_n": job.shared,
            "queue_ms": (job.admitted - job.asked) * 1000.0,
            "prompt_ms": (first - job.admitted) * 1000.0,
            "predicted_ms": (job.ended - first) * 1000.0,
            "predicted_n": len(job.completion),
            "host_ms": job.host_sec * 1000.0,
        }
        return reply_body(
            req,
            prompt=job.prompt,
            completion=job.completion,
            tokenizer=self.tokenizer,
            eos_ids=self.eos_ids,
            max_new=job.max_new,
            logprobs=job.logprobs if req.logprobs else None,
            cached_tokens=job.cached + job.shared,
            timings=timings,
        )

    def chat(self, req: ChatCompletionRequest) -> dict[str, Any]:
        """Answer one chat completion request (blocks until it is decoded).

        Returns:
            the ``chat.completion`` body; logprobs of the raw distribution, EOS kept in
            ``token_ids``.

        Raises:
            PolicyRequestError: see :meth:`submit` and :meth:`reply`.
        """
        job, _prompt = self.submit(req)
        job.done.wait()
        return self.reply(req, job)

    def cancel(self, job: DecodeRequest) -> None:
        """Drop a queued or running request (its client went away); its sequence is freed at the next step."""
        for decoder in self.decoders:
            decoder.cancel(job)

    def _route(self, job: DecodeRequest) -> BatchedDecoder:
        """The context whose cells or requests save ``job`` the most prompt compute, net of its load.

        Cost of a context: the prompt tokens it would compute (the prompt less the longest
        prefix its sequences hold or its running requests are prefilling under the same
        adapter) plus :data:`LOAD_TOKENS` for each request it already has. So a trial's next
        turn and a GRPO group's rollouts go where their prompt is, and unrelated requests
        spread over the contexts.
        """
        return min(
            self.decoders,
            key=lambda d: len(job.prompt) - d.affinity(job.prompt, job.adapter) + LOAD_TOKENS * d.load(),
        )

    def _grammar(self, req: ChatCompletionRequest) -> str | None:
        """The GBNF grammar of the request's JSON schema (cached per schema), or None.

        Raises:
            PolicyRequestError: 400 when llama.cpp cannot turn the schema into a grammar.
        """
        schema = req.json_schema
        if schema is None:
            return None
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            from llama_cpp.llama_grammar import json_schema_to_gbnf

            try:
                self._grammars[key] = json_schema_to_gbnf(key)
            except (ValueError, RuntimeError, KeyError) as exc:
                raise PolicyRequestError(
                    400, f"response_format.json_schema: no grammar: {exc}", "invalid_request_error"
                ) from exc
        return self._grammars[key]


def restore_weights(gguf: Path, cache_dir: Path, weights: str) -> Path:
    """``gguf`` re-stored in another tensor type by llama.cpp (``llama_model_quantize``), cached by content.

    Re-storing a Q4_1 file as Q8_0 keeps its values to within Q8_0's rounding (a 32-value
    block of 16 levels, re-scaled to 255) and lets llama.cpp take its 8-bit matrix kernels.

    Args:
        gguf: the source GGUF file.
        cache_dir: folder of the re-stored file (made when missing).
        weights: ``q8_0``.

    Returns:
        the path of the re-stored file (an existing one is reused).

    Raises:
        ValueError: an unknown ``weights``.
        RuntimeError: llama.cpp failed to write it.
    """
    import hashlib

    import llama_cpp

    ftypes = {"q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0}
    if weights not in ftypes:
        raise ValueError(f"unknown weights {weights!r}; choose gguf or {', '.join(ftypes)}")
    digest = hashlib.sha256()
    with gguf.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    out = cache_dir / f"{gguf.stem}.{weights}.{digest.hexdigest()[:16]}.gguf"
    if out.is_file():
        return out
    cache_dir.mkdir(parents=True, exist_ok=True)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize, params.nthread = ftypes[weights], True, os.cpu_count() or 1
    part = out.with_suffix(f".part{os.getpid()}")
    if llama_cpp.llama_model_quantize(str(gguf).encode(), str(part).encode(), ctypes.byref(params)) != 0:
        part.unlink(missing_ok=True)
        raise RuntimeError(f"llama.cpp could not re-store {gguf} as {weights}")
    part.replace(out)
    return out


def _quiet_llama_logs(lib: Any) -> None:
    """Start llama.cpp's backends once, and send its own log lines nowhere (the engine reports what matters)."""
    global _LOG_CALLBACK
    if _LOG_CALLBACK is None:
        lib.llama_backend_init()
        _LOG_CALLBACK = lib.llama_log_callback(lambda *_args: None)
        lib.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))
