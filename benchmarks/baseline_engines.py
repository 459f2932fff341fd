"""Baselines the rollout benchmarks measure the product's llama.cpp engine against, in the same run.

:class:`SlotEngine` is the engine as it was before continuous batching (MindForge up to
commit cc6b2ff): ``slots`` independent ``llama_cpp.Llama`` instances, one request each at
a time, each decoding on ``cpus // slots`` threads, a request sent to the free slot whose
cached tokens share the longest prefix with its prompt. Its prompt-snapshot sharing is left
out (the benchmark's batches share no prompts across slots). It answers the same
``chat(ChatCompletionRequest)`` with the same reply body and timings, so
``benchmarks/bench_rollouts.py`` can serve it behind the same HTTP API. Benchmark code
only: nothing in the product imports it.
"""

from __future__ import annotations

import os
import random
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from mindforge.policy.engines.completion import (
    TokenLogprobs,
    action_complete,
    completion_budget,
    prompt_token_ids,
    reply_body,
)
from mindforge.policy.engines.kv_snapshots import common_prefix
from mindforge.policy.server.protocol import AdapterRegistry, ChatCompletionRequest


class SlotEngine:
    """One ``Llama`` per slot, one request per slot at a time (the engine before batching).

    Args:
        gguf_path: the GGUF file.
        served_name: the base model's name in requests.
        slots: concurrent requests.
        n_ctx: context window per slot (tokens); default the GGUF's.
        stop_at_action: honour the request's ``stop_at_action`` (the early stop); False
            decodes to EOS, a stop string or the cap, as before that change.
    """

    def __init__(
        self, gguf_path: str | Path, *, served_name: str, slots: int = 2, n_ctx: int | None = None,
        stop_at_action: bool = False,
    ) -> None:
        import llama_cpp
        from transformers import AutoTokenizer

        path = Path(gguf_path)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        threads = max(1, (os.cpu_count() or 1) // slots)
        self._llms = [
            llama_cpp.Llama(str(path), n_ctx=n_ctx or 0, n_threads=threads, n_threads_batch=threads, verbose=False)
            for _ in range(slots)
        ]
        self.max_model_len = int(self._llms[0].n_ctx())
        self.n_vocab = int(self._llms[0].n_vocab())
        self.base_name, self.model_path = served_name, str(path)
        self.adapters = AdapterRegistry()
        self.eos_ids = sorted({int(self._llms[0].token_eos()), int(self.tokenizer.eos_token_id)})
        self.stop_at_action = stop_at_action
        self._free = list(self._llms)
        self._cond = threading.Condition()

    def close(self) -> None:
        """Free the models."""
        for llm in self._llms:
            llm.close()

    def model_names(self) -> list[str]:
        """The base name (this baseline loads no adapters)."""
        return [self.base_name]

    @contextmanager
    def _slot(self, prompt: list[int]) -> Any:
        with self._cond:
            self._cond.wait_for(lambda: bool(self._free))
            llm = max(self._free, key=lambda s: common_prefix(s._input_ids.tolist(), prompt))
            self._free.remove(llm)
        try:
            yield llm
        finally:
            with self._cond:
                self._free.append(llm)
                self._cond.notify_all()

    def chat(self, req: ChatCompletionRequest) -> dict[str, Any]:
        """Answer one request on a free slot (blocks); the reply body of the product's engines."""
        prompt = prompt_token_ids(self.tokenizer, req)
        max_new = completion_budget(req, len(prompt), self.max_model_len)
        asked = time.perf_counter()
        with self._slot(prompt) as llm:
            queue_ms = (time.perf_counter() - asked) * 1000.0
            cached = min(common_prefix(llm._input_ids.tolist(), prompt), len(prompt) - 1)
            completion, logprobs, timings = self._generate(llm, req, prompt, max_new)
        timings.update(cache_n=cached, prompt_n=len(prompt) - cached, shared_n=0, queue_ms=queue_ms)
        return reply_body(
            req, prompt=prompt, completion=completion, tokenizer=self.tokenizer, eos_ids=self.eos_ids,
            max_new=max_new, logprobs=logprobs if req.logprobs else None, cached_tokens=cached, timings=timings,
        )

    def _generate(
        self, llm: Any, req: ChatCompletionRequest, prompt: list[int], max_new: int
    ) -> tuple[list[int], list[TokenLogprobs], dict[str, float]]:
        llm.set_seed(req.seed if req.seed is not None else random.getrandbits(31))
        temperature = 1.0 if req.temperature is None else req.temperature
        gen = llm.generate(
            prompt, temp=temperature, top_p=1.0 if req.top_p is None else req.top_p, top_k=0, min_p=0.0,
            typical_p=1.0, repeat_penalty=1.0,
        )
        completion: list[int] = []
        logprobs: list[TokenLogprobs] = []
        start = time.perf_counter()
        first = host = 0.0
        action = req.stop_at_action if self.stop_at_action else None
        try:
            for token in gen:
                got = time.perf_counter()
                first = first or got
                completion.append(int(token))
                if req.logprobs:
                    logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(self.n_vocab,)).astype(np.float64)
                    logits -= logits.max()
                    logprobs.append((float(logits[token] - np.log(np.exp(logits).sum())), []))
                text = str(self.tokenizer.decode(completion, skip_special_tokens=True))
                done = token in self.eos_ids or len(completion) >= max_new
                done = done or any(s in text for s in req.stop_list) or action_complete(action, text)
                host += time.perf_counter() - got
                if done:
                    break
        finally:
            gen.close()
        end = time.perf_counter()
        first = first or end
        timings = {
            "prompt_ms": (first - start) * 1000.0, "predicted_ms": (end - first) * 1000.0,
            "predicted_n": len(completion), "host_ms": host * 1000.0,
        }
        return completion, logprobs, timings
