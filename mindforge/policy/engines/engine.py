"""One base model on transformers with named PEFT LoRA adapters, generating chat completions.

This module imports torch, transformers and peft at the top: import it lazily (the
server does so inside :func:`mindforge.policy.server.server.load_engine`).

Concurrent requests are batched: a :class:`~mindforge.policy.engines.batcher.Batcher` thread
collects the requests that arrive together (or while the model is busy) and runs each
group with the same sampling settings as one left-padded ``generate`` call
(:mod:`mindforge.policy.engines.batch_generate`), rows with different adapters together through
PEFT's mixed-adapter batch inference. Budgets, stop strings and EOS stay exact per row.
Grouping is by sampling settings (greedy; or temperature and top-p), because
``generate`` takes one generation config per call; a seeded sampling request runs alone,
since rows of one batch draw from one random stream and its sample would depend on its
batch mates. Adapter loads and unloads take the same lock as a running batch.

Why not transformers' continuous batching (``init_continuous_batching``, 5.x): it returns
only the chosen token's logprob, of the processed (temperature/top-p) distribution, has
no top logprobs, no stop strings and no per-request PEFT adapter, all of which the API
serves.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

from mindforge.policy.engines.batch_generate import Row, generate_rows
from mindforge.policy.engines.batcher import Batcher
from mindforge.policy.engines.completion import (
    PolicyRequestError,
    completion_budget,
    prompt_token_ids,
    reply_body,
    unknown_model,
)
from mindforge.policy.engines.prefix_cache import PrefixCache, supports_prefix_cache
from mindforge.policy.server.protocol import (
    AdapterRegistry,
    ChatCompletionRequest,
    adapter_sha256,
)

__all__ = ["PolicyEngine", "PolicyRequestError", "resolve_device"]


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when available, else ``cpu``; anything else is returned as is."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


@dataclass
class _Job:
    req: ChatCompletionRequest
    prompt: list[int]
    max_new: int


class PolicyEngine:
    """A loaded base model plus the LoRA adapters loaded at run time.

    Args:
        model_path: a local model directory or a hub id (already reachable or cached).
        served_name: the base model's name in ``/v1/models`` and requests.
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
        local_files_only: never contact the hub.
        gguf_file: a GGUF file name inside ``model_path`` to load (dequantised by
            transformers) instead of safetensors weights.
        max_batch: most requests per ``generate`` call.
        batch_wait_sec: longest wait (seconds) for batch mates once concurrent requests
            were seen (see :mod:`mindforge.policy.engines.batcher`).
        prefix_cache_mb: memory for the KV states of recent replies, reused by a
            request that extends one (MiB; 0 turns reuse off; also off for models with
            sliding-window layers). See :mod:`mindforge.policy.engines.prefix_cache`.

    Attributes:
        base_name: ``served_name``.
        max_model_len: context window in tokens (prompt + completion).
        adapters: the adapter registry (name -> path, sha256).
        batcher: the request batcher (``batcher.batch_sizes`` lists every batch's rows).
        prefix_cache: the reply KV store, or None when off.
    """

    def __init__(
        self,
        model_path: str,
        *,
        served_name: str,
        device: str = "auto",
        local_files_only: bool = False,
        gguf_file: str | None = None,
        max_batch: int = 8,
        batch_wait_sec: float = 0.25,
        prefix_cache_mb: int = 512,
    ):
        self.device = resolve_device(device)
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        extra = {"gguf_file": gguf_file} if gguf_file else {}
        self.tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=local_files_only, **extra)
        base = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype, local_files_only=local_files_only, **extra)
        self.model: Any = base.to(self.device).eval()  # type: ignore[arg-type]  # transformers' @wraps(Module.to) types the method unbound
        self.base_name = served_name
        self.model_path = str(model_path)
        self.max_model_len = int(
            getattr(base.config, "max_position_embeddings", None) or self.tokenizer.model_max_length
        )
        self.adapters = AdapterRegistry()
        self.lock = threading.Lock()
        eos = self.model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self.tokenizer.eos_token_id is not None:
            eos_ids.add(self.tokenizer.eos_token_id)
        self.eos_ids = sorted(eos_ids)
        reuse = prefix_cache_mb > 0 and supports_prefix_cache(self.model)
        self.prefix_cache = PrefixCache(prefix_cache_mb * 2**20) if reuse else None
        self.batcher: Batcher[_Job, Any] = Batcher(
            self._run_batch, key=_batch_key, max_batch=max_batch, wait_sec=batch_wait_sec, name="policy-batcher"
        )

    def close(self) -> None:
        """Stop the batcher thread (requests already queued are answered first)."""
        self.batcher.close()

    # ----------------------------------------------------------------- adapters

    def load_adapter(self, name: str, path: str) -> str:
        """Load a PEFT LoRA adapter directory under ``name``.

        Returns:
            vLLM's plain-text success line.

        Raises:
            PolicyRequestError: 404 when ``path`` holds no adapter; 400 when the name is
                the base model's, was used for different weights, or PEFT cannot load it.
        """
        adapter_dir = Path(path)
        if not (adapter_dir / "adapter_config.json").is_file():
            raise PolicyRequestError(404, f"No adapter found at '{path}' (no adapter_config.json)", "NotFoundError")
        if name == self.base_name:
            raise PolicyRequestError(400, f"adapter name '{name}' is the base model's name", "InvalidUserInput")
        sha = adapter_sha256(adapter_dir)
        with self.lock:
            try:
                state = self.adapters.check_load(name, sha)
            except ValueError as exc:
                raise PolicyRequestError(400, str(exc), "InvalidUserInput") from exc
            if state == "same":
                return f"Success: LoRA adapter '{name}' is already loaded with the same weights."
            try:
                if isinstance(self.model, PeftModel):
                    self.model.load_adapter(str(adapter_dir), adapter_name=name)
                else:
                    self.model = PeftModel.from_pretrained(self.model, str(adapter_dir), adapter_name=name)
                self.model.eval()
            except Exception as exc:  # PEFT raises many types for a bad adapter
                raise PolicyRequestError(400, f"cannot load adapter '{name}' from '{path}': {exc}") from exc
            self.adapters.add(name, str(adapter_dir), sha)
        return f"Success: LoRA adapter '{name}' added successfully."

    def unload_adapter(self, name: str) -> str:
        """Unload adapter ``name``.

        Raises:
            PolicyRequestError: 404 when no adapter of that name is loaded.
        """
        with self.lock:
            if name not in self.adapters.loaded:
                raise PolicyRequestError(404, f"The lora adapter '{name}' cannot be found.", "NotFoundError")
            self.model.delete_adapter(name)
            self.adapters.remove(name)
            if self.prefix_cache is not None:
                self.prefix_cache.drop(name)
            if not self.adapters.loaded:
                # PEFT cannot run a PeftModel with no adapter: go back to the plain base model
                self.model = self.model.unload().eval()
        return f"Success: LoRA adapter '{name}' removed successfully."

    def model_names(self) -> list[str]:
        """The base name followed by the loaded adapter names."""
        return [self.base_name, *self.adapters.loaded]

    # ---------------------------------------------------------------- completion

    def chat(self, req: ChatCompletionRequest) -> dict[str, Any]:
        """Answer one chat completion request (blocks until its batch has run).

        Logprobs are those of the raw model distribution (before temperature and top-p),
        as vLLM returns by default; the stop token (EOS) is included in ``token_ids``.

        Args:
            req: the request; ``req.model`` must be the base name or a loaded adapter.

        Returns:
            the ``chat.completion`` body.

        Raises:
            PolicyRequestError: 404 for an unknown model, 400 for a prompt that does not
                fit the context window or a template failure.
        """
        prompt = prompt_token_ids(self.tokenizer, req)
        max_new = completion_budget(req, len(prompt), self.max_model_len)
        if req.model != self.base_name and req.model not in self.adapters.loaded:
            raise unknown_model(req.model)
        return self.batcher.submit(_Job(req, prompt, max_new))

    def _generation_config(self, req: ChatCompletionRequest):
        cfg = copy.deepcopy(self.model.generation_config)
        cfg.min_new_tokens = None
        cfg.max_length = None
        cfg.eos_token_id = self.eos_ids
        cfg.pad_token_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_ids[0]
        temperature = req.temperature if req.temperature is not None else (cfg.temperature or 1.0)
        if temperature <= 0.0:
            cfg.do_sample, cfg.temperature, cfg.top_p, cfg.top_k = False, None, None, None
        else:
            cfg.do_sample, cfg.temperature = True, temperature
            if req.top_p is not None:
                cfg.top_p = req.top_p
        cfg.stop_strings = None  # per row, see batch_generate.RowStops
        return cfg

    def _run_batch(self, jobs: list[_Job]) -> list[Any]:
        """Generate for one group of jobs with equal sampling settings (the batcher's callback)."""
        with self.lock:
            out: list[Any] = [None] * len(jobs)
            live = []
            for i, job in enumerate(jobs):
                if job.req.model != self.base_name and job.req.model not in self.adapters.loaded:
                    out[i] = unknown_model(job.req.model)  # unloaded while it was queued
                else:
                    live.append(i)
            if not live:
                return out
            rows = [self._row(jobs[i]) for i in live]
            first = jobs[live[0]].req
            if first.seed is not None:
                torch.manual_seed(first.seed)
            results = generate_rows(
                self.model,
                rows,
                generation_config=self._generation_config(first),
                tokenizer=self.tokenizer,
                eos_ids=self.eos_ids,
                device=self.device,
                prefix_cache=self.prefix_cache,
            )
        for i, res in zip(live, results, strict=True):
            job = jobs[i]
            out[i] = reply_body(
                job.req,
                prompt=job.prompt,
                completion=res.completion,
                tokenizer=self.tokenizer,
                eos_ids=self.eos_ids,
                max_new=job.max_new,
                logprobs=res.logprobs,
            )
        return out

    def _row(self, job: _Job) -> Row:
        req = job.req
        return Row(
            prompt=job.prompt,
            max_new=job.max_new,
            stop=req.stop_list,
            adapter=None if req.model == self.base_name else req.model,
            top_logprobs=(req.top_logprobs or 0) if req.logprobs else None,
            stop_at_action=req.stop_at_action,
        )


def _batch_key(job: _Job) -> Hashable:
    """Requests with equal keys share a ``generate`` call: same sampling settings, no seed."""
    req = job.req
    if req.temperature is not None and req.temperature <= 0.0:
        return ("greedy",)
    if req.seed is not None:
        return ("seeded", id(job))  # alone: its sample must not depend on batch mates
    return ("sample", req.temperature, req.top_p)
