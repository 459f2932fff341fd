"""One base model on transformers with named PEFT LoRA adapters, generating chat completions.

This module imports torch, transformers and peft at the top: import it lazily (the
server does so inside :func:`mindforge.policy.server.load_engine`).

Requests are serialised with a lock: one model, one request at a time (adapters are
switched per request with ``set_adapter`` / ``disable_adapter``, which mutate the model).
"""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path
from typing import Any

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

from mindforge.policy.protocol import (
    AdapterRegistry,
    ChatCompletionRequest,
    adapter_sha256,
    completion_body,
    logprob_entry,
    message_text,
    parse_tool_calls,
)


class PolicyRequestError(Exception):
    """A request the engine refuses; carries the HTTP status and OpenAI error type."""

    def __init__(self, status: int, message: str, err_type: str = "BadRequestError", param: str | None = None):
        super().__init__(message)
        self.status = status
        self.err_type = err_type
        self.param = param


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when available, else ``cpu``; anything else is returned as is."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as chat templates expect them: text content, tool-call arguments as dicts."""
    out = []
    for msg in messages:
        msg = dict(msg)
        msg["content"] = message_text(msg.get("content"))
        calls = []
        for call in msg.get("tool_calls") or []:
            call = copy.deepcopy(call)
            fn = call.get("function", {})
            if isinstance(fn.get("arguments"), str):
                try:
                    fn["arguments"] = json.loads(fn["arguments"])
                except ValueError:
                    pass  # keep the raw string; templates print it as is or quoted
            calls.append(call)
        if calls:
            msg["tool_calls"] = calls
        out.append(msg)
    return out


class PolicyEngine:
    """A loaded base model plus the LoRA adapters loaded at run time.

    Args:
        model_path: a local model directory or a hub id (already reachable or cached).
        served_name: the base model's name in ``/v1/models`` and requests.
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
        local_files_only: never contact the hub.

    Attributes:
        base_name: ``served_name``.
        max_model_len: context window in tokens (prompt + completion).
        adapters: the adapter registry (name -> path, sha256).
    """

    def __init__(self, model_path: str, *, served_name: str, device: str = "auto", local_files_only: bool = False):
        self.device = resolve_device(device)
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        self.tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=local_files_only)
        base = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype, local_files_only=local_files_only)
        self.model: Any = base.to(self.device).eval()
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
            if not self.adapters.loaded:
                # PEFT cannot run a PeftModel with no adapter: go back to the plain base model
                self.model = self.model.unload().eval()
        return f"Success: LoRA adapter '{name}' removed successfully."

    def model_names(self) -> list[str]:
        """The base name followed by the loaded adapter names."""
        return [self.base_name, *self.adapters.loaded]

    # ---------------------------------------------------------------- completion

    def _prompt_ids(self, req: ChatCompletionRequest) -> list[int]:
        try:
            text = self.tokenizer.apply_chat_template(
                _template_messages(req.messages), tools=req.tools or None, add_generation_prompt=True, tokenize=False
            )
        except Exception as exc:  # jinja2 TemplateError and friends
            raise PolicyRequestError(400, f"chat template failed: {exc}", param="messages") from exc
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _generation_config(self, req: ChatCompletionRequest, max_new: int):
        cfg = copy.deepcopy(self.model.generation_config)
        cfg.max_new_tokens = max_new
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
        cfg.stop_strings = req.stop_list or None
        cfg.output_logits = True
        cfg.return_dict_in_generate = True
        return cfg

    def chat(self, req: ChatCompletionRequest) -> dict[str, Any]:
        """Answer one chat completion request.

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
        prompt = self._prompt_ids(req)
        room = self.max_model_len - len(prompt)
        if room < 1:
            raise PolicyRequestError(
                400,
                f"This model's maximum context length is {self.max_model_len} tokens. However, your messages "
                f"resulted in {len(prompt)} tokens. Please reduce the length of the messages.",
                param="messages",
            )
        max_new = min(req.token_limit or room, room)
        with self.lock:
            if req.model != self.base_name and req.model not in self.adapters.loaded:
                raise PolicyRequestError(404, f"The model `{req.model}` does not exist.", "NotFoundError", "model")
            cfg = self._generation_config(req, max_new)
            if req.seed is not None:
                torch.manual_seed(req.seed)
            input_ids = torch.tensor([prompt], device=self.device)
            kwargs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "generation_config": cfg}
            with torch.inference_mode():
                if req.model == self.base_name and isinstance(self.model, PeftModel):
                    with self.model.disable_adapter():
                        out = self.model.generate(**kwargs, tokenizer=self.tokenizer)
                else:
                    if req.model != self.base_name:
                        self.model.set_adapter(req.model)
                    out = self.model.generate(**kwargs, tokenizer=self.tokenizer)
        completion = out.sequences[0, len(prompt) :].tolist()
        return self._body(req, prompt, completion, out.logits, max_new)

    def _body(self, req: ChatCompletionRequest, prompt: list[int], completion: list[int], logits, max_new: int):
        # generate pads nothing for a single sequence, but be safe about trailing pads
        completion = completion[: len(logits)]
        text = self.tokenizer.decode(completion, skip_special_tokens=True)
        finish = "stop"
        cut = [text.find(s) for s in req.stop_list if s in text]
        if cut:
            text = text[: min(cut)]
        elif not (completion and completion[-1] in self.eos_ids) and len(completion) >= max_new:
            finish = "length"
        content, calls = parse_tool_calls(text)
        if calls and finish == "stop":
            finish = "tool_calls"
        entries = None
        if req.logprobs:
            entries = []
            k = req.top_logprobs or 0
            for step, token_id in enumerate(completion):
                row = torch.log_softmax(logits[step][0].float(), dim=-1)
                top = []
                if k:
                    vals, idx = torch.topk(row, k)
                    top = [(self.tokenizer.decode([i]), float(v)) for v, i in zip(vals.tolist(), idx.tolist())]
                entries.append(logprob_entry(self.tokenizer.decode([token_id]), float(row[token_id]), top))
        return completion_body(
            model=req.model,
            content=content,
            tool_calls=calls,
            finish_reason=finish,
            prompt_token_ids=prompt,
            completion_token_ids=completion,
            logprobs=entries,
            return_token_ids=req.return_token_ids,
        )
