"""The embedded policy server: an OpenAI-compatible HTTP API over transformers + PEFT.

One base model (CPU, or CUDA in bf16 when available) and any number of LoRA adapters
loaded and unloaded by name at run time, as vLLM does with ``--enable-lora`` and
``VLLM_ALLOW_RUNTIME_LORA_UPDATING``. Endpoints: ``GET /v1/models``,
``POST /v1/chat/completions``, ``POST /v1/load_lora_adapter``,
``POST /v1/unload_lora_adapter`` (shapes in :mod:`mindforge.policy.server.protocol`).

Why not ``transformers serve``: we checked transformers' own OpenAI-compatible server
(docs "Serve CLI", and ``transformers/cli/serving/`` of the installed 5.x release). It
serves chat completions and loads models by name, but it rejects ``logprobs`` and
``top_logprobs`` (listed as unsupported fields), returns no token ids, and has no
runtime LoRA load/unload by adapter name. GRPO needs all three, so this module serves
the same API itself, with vLLM's field names, and a deployment at scale swaps it for
vLLM without touching the callers.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import SecretStr

from mindforge.errors import MindForgeError
from mindforge.policy.server.auth import as_secret, check_bind, settings_key
from mindforge.policy.server.protocol import (
    ChatCompletionRequest,
    LoadLoRAAdapterRequest,
    UnloadLoRAAdapterRequest,
    error_response,
    install_error_handlers,
    model_card,
)
from mindforge.policy.server.runner import ServerHandle, serve_app

DEFAULT_MODEL = "smollm2"
TINY = "tiny"


class HubUnreachableError(MindForgeError, RuntimeError):
    """The model is neither local nor cached, and the Hugging Face hub cannot be reached."""

    def __init__(self, model: str) -> None:
        self.model = model
        super().__init__(
            f"cannot reach the Hugging Face hub to load {model}; use --model smollm2 for the bundled "
            "SmolLM2-135M-Instruct (offline), or --model tiny for the offline tiny model that exercises the loop "
            "but will not solve tasks"
        )


def _hub_reachable(timeout_sec: float = 5.0) -> bool:
    import httpx
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    try:
        httpx.head(constants.ENDPOINT, timeout=timeout_sec, follow_redirects=True)
    except httpx.HTTPError:
        return False
    return True


ENGINES = ("transformers", "llamacpp")


def load_engine(
    model: str, device: str = "auto", served_name: str | None = None, engine: str = "transformers",
    llamacpp: dict[str, Any] | None = None,
):
    """Load the base model behind the server.

    Args:
        model: a model spec (see :func:`mindforge.policy.engines.models.resolve_model`):
            ``tiny``, ``smollm2``, a local ``.gguf`` file, a local model directory, or a
            hub id (used from the local cache, else downloaded).
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N`` (transformers engine only).
        served_name: name in ``/v1/models``; default the resolved model's stable name
            (``tiny``, ``SmolLM2-135M-Instruct.Q4_1``, the GGUF file's stem, or
            ``model`` as given for a directory or hub id).
        engine: ``transformers`` (training-grade: transformers + PEFT, the default) or
            ``llamacpp`` (inference only, on the model's GGUF file; the optional
            ``llamacpp`` extra). Both serve the same weights: the trainer's copy is the
            GGUF file dequantised.
        llamacpp: keyword arguments of the llama.cpp engine (``contexts``, ``parallel``,
            ``weights``; :class:`mindforge.policy.engines.llamacpp_engine.LlamaCppEngine`).

    Returns:
        a :class:`mindforge.policy.engines.engine.PolicyEngine` or a
        :class:`mindforge.policy.engines.llamacpp_engine.LlamaCppEngine`.

    Raises:
        HubUnreachableError: a hub id that is not cached while the hub cannot be reached.
        ModelSpecError: ``model`` names no loadable local model (the reason says why).
        ValueError: an unknown ``engine``, or ``llamacpp`` with a model that has no GGUF file.
        ImportError: ``llamacpp`` without ``llama-cpp-python`` installed.
    """
    from mindforge.policy.engines.models import ModelSource, resolve_model

    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    resolved = resolve_model(model)
    if engine == "llamacpp":
        if not resolved.gguf_path:
            raise ValueError(f"the llamacpp engine serves a GGUF file; {model!r} resolves to none")
        from mindforge.policy.engines.llamacpp_engine import LlamaCppEngine
        from mindforge.settings import get_settings

        return LlamaCppEngine(
            Path(resolved.gguf_path), served_name=served_name or resolved.name,
            cache_dir=get_settings().data_dir / "models", **(llamacpp or {}),
        )
    local_only = True
    if resolved.source == ModelSource.TINY:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the tiny model never needs the hub
    elif resolved.source == ModelSource.HUB:
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(model, "config.json"), str):  # not cached
            if not _hub_reachable():
                raise HubUnreachableError(model)
            local_only = False
    # torch, transformers and peft are imported only now that a model is to be loaded
    from mindforge.policy.engines.engine import PolicyEngine

    try:
        return PolicyEngine(
            resolved.hf_dir, served_name=served_name or resolved.name, device=device, local_files_only=local_only
        )
    except OSError as exc:
        if not local_only and "connect" in str(exc).lower():
            raise HubUnreachableError(model) from exc
        raise


def create_app(engine: Any) -> FastAPI:
    """The FastAPI app over a loaded engine (:func:`load_engine`).

    Concurrent chat requests meet in the engine: the transformers engine batches them
    (its ``chat`` runs in the thread pool); the llama.cpp engine queues them on its
    decoder (``submit``), and a request whose client disconnects is cancelled there.
    """
    from mindforge.policy.engines.completion import PolicyRequestError

    app = FastAPI(title="MindForge policy server")
    app.state.engine = engine
    install_error_handlers(app)

    @app.exception_handler(PolicyRequestError)
    async def _refused(_request, exc: PolicyRequestError) -> JSONResponse:
        return error_response(exc.status, str(exc), exc.err_type, exc.param)

    @app.get("/v1/models")
    def list_models() -> dict:
        cards = [model_card(engine.base_name, root=engine.model_path, max_model_len=engine.max_model_len)]
        for name, (path, _sha) in list(engine.adapters.loaded.items()):
            cards.append(model_card(name, root=path, parent=engine.base_name))
        return {"object": "list", "data": cards}

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok"}

    @app.post("/v1/chat/completions")
    async def chat_completions(req: ChatCompletionRequest, request: Request) -> dict:
        if not hasattr(engine, "submit"):
            return await run_in_threadpool(engine.chat, req)
        return await _submitted(engine, req, request)

    @app.post("/v1/load_lora_adapter", response_class=PlainTextResponse)
    def load_lora_adapter(req: LoadLoRAAdapterRequest) -> str:
        return engine.load_adapter(req.lora_name, req.lora_path)

    @app.post("/v1/unload_lora_adapter", response_class=PlainTextResponse)
    def unload_lora_adapter(req: UnloadLoRAAdapterRequest) -> str:
        return engine.unload_adapter(req.lora_name)

    return app


#: seconds between checks of whether a waiting client is still connected
DISCONNECT_POLL_SEC = 0.5


async def _submitted(engine: Any, req: ChatCompletionRequest, request: Request) -> dict:
    """Queue ``req`` on an engine that decodes in the background, and answer when it is done.

    A client that goes away (its timeout fired: an agent's deadline) gets its request
    cancelled, so its sequence is freed for the trials still running.
    """
    loop = asyncio.get_running_loop()
    finished = loop.create_future()

    def settle() -> None:
        if not finished.done():
            finished.set_result(None)

    def wake() -> None:
        loop.call_soon_threadsafe(settle)

    job, _prompt = await run_in_threadpool(engine.submit, req, wake)
    while not finished.done():
        await asyncio.wait({finished}, timeout=DISCONNECT_POLL_SEC)
        if not finished.done() and await request.is_disconnected():
            engine.cancel(job)
            await finished
    return engine.reply(req, job)


def start_policy_server(
    model: str = TINY,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    device: str = "auto",
    served_name: str | None = None,
    engine: str = "transformers",
    api_key: SecretStr | str | None = None,
    llamacpp: dict[str, Any] | None = None,
) -> ServerHandle:
    """Load ``model`` and serve it from a background thread of this process.

    Args:
        model: see :func:`load_engine`.
        host: address to listen on; beyond loopback only with an API key.
        port: TCP port; 0 picks a free one (read it from the handle).
        device: see :func:`load_engine`.
        served_name: the base model's name in requests; default the resolved name (see
            :func:`load_engine`).
        engine: see :func:`load_engine`.
        api_key: the key clients must send (``Authorization: Bearer``); None: settings'
            ``policy_api_key`` (:mod:`mindforge.policy.server.auth`).
        llamacpp: the llama.cpp engine's keyword arguments (see :func:`load_engine`).

    Returns:
        a handle with ``.base_url`` (``http://host:port/v1``), ``.app.state.engine`` and
        ``.stop()``.

    Raises:
        UnprotectedBindError: ``host`` is beyond loopback and there is no key (checked
            before the model is loaded).
        HubUnreachableError, ModelSpecError: see :func:`load_engine`.
    """
    key = as_secret(api_key) if api_key is not None else settings_key()
    check_bind(host, key)
    return ServerHandle(create_app(load_engine(model, device, served_name, engine, llamacpp)), host, port, api_key=key)


def serve(
    model: str,
    host: str,
    port: int,
    device: str = "auto",
    served_name: str | None = None,
    engine: str = "transformers",
    api_key: SecretStr | str | None = None,
    llamacpp: dict[str, Any] | None = None,
) -> None:
    """Load ``model`` and serve it in the foreground until interrupted.

    Args:
        host: address to listen on; beyond loopback only with an API key.
        served_name: the base model's name in requests and ``/v1/models`` (vLLM's
            ``--served-model-name``); default the resolved name (see :func:`load_engine`).
        engine: ``transformers`` or ``llamacpp`` (see :func:`load_engine`).
        api_key: the key clients must send; None: settings' ``policy_api_key``.
        llamacpp: the llama.cpp engine's keyword arguments (see :func:`load_engine`).

    Raises:
        UnprotectedBindError: ``host`` is beyond loopback and there is no key (checked
            before the model is loaded).
        HubUnreachableError, ModelSpecError: see :func:`load_engine`.
    """
    key = as_secret(api_key) if api_key is not None else settings_key()
    check_bind(host, key)
    serve_app(create_app(load_engine(model, device, served_name, engine, llamacpp)), host, port, key)


def main(argv: list[str] | None = None) -> int:
    """``python -m mindforge.policy.server --model M --host H --port P [options]``.

    Options: ``--device D``, ``--served-model-name N``, ``--engine E``; for the llama.cpp
    engine ``--contexts N`` (default one per CPU), ``--parallel N`` (sequences per
    context) and ``--weights gguf|q8_0``. The API key comes from settings
    (``MINDFORGE_POLICY_API_KEY``), never from the command line.
    """
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m mindforge.policy.server")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--engine", choices=ENGINES, default="transformers")
    parser.add_argument("--contexts", type=int, default=None)
    parser.add_argument("--parallel", type=int, default=None)
    parser.add_argument("--weights", choices=["gguf", "q8_0"], default=None)
    ns = parser.parse_args(argv)
    llamacpp = {k: v for k, v in (("contexts", ns.contexts), ("parallel", ns.parallel), ("weights", ns.weights)) if v}
    try:
        serve(ns.model, ns.host, ns.port, ns.device, ns.served_model_name, ns.engine, llamacpp=llamacpp)
    except MindForgeError as exc:  # UnprotectedBindError, HubUnreachableError, ModelSpecError
        print(exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
