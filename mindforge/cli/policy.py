"""``mindforge policy``: serve the embedded OpenAI-compatible policy server, build the tiny model."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

app = typer.Typer(
    help="The policy endpoint: an OpenAI-compatible server with runtime LoRA adapters.", no_args_is_help=True
)


@app.command()
def serve(
    model: str = typer.Option(
        "smollm2",
        "--model",
        "-m",
        help="'smollm2' (bundled SmolLM2-135M-Instruct), 'tiny' (offline random weights: exercises the loop, "
        "solves nothing), a local .gguf file, a local model directory, or a hub id.",
    ),
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        help="Address to listen on. Beyond loopback (e.g. 0.0.0.0) it needs an API key, MINDFORGE_POLICY_API_KEY, "
        "which clients then send as 'Authorization: Bearer <key>'.",
    ),
    port: int = typer.Option(8000, "--port", "-p", min=0, max=65535, help="TCP port."),
    device: str = typer.Option("auto", "--device", help="auto (CUDA when available, else CPU), cpu, cuda, cuda:N."),
    served_model_name: str = typer.Option(
        None,
        "--served-model-name",
        help="Name the base model answers to (as vLLM's flag), e.g. a contract's model.id; default the model's "
        "stable name (tiny, SmolLM2-135M-Instruct.Q4_1, a GGUF file's stem, else --model).",
    ),
    engine: str = typer.Option(
        "transformers",
        "--engine",
        help="transformers (default; transformers + PEFT) or llamacpp (inference only, --model a .gguf file; "
        "needs the optional 'llamacpp' extra).",
    ),
    contexts: int = typer.Option(
        None, "--contexts", min=1, help="llamacpp: contexts, each decoding its requests together (default: one a CPU)."
    ),
    parallel: int = typer.Option(
        None, "--parallel", min=1, help="llamacpp: sequences decoded together in each context (default 8)."
    ),
    weights: str = typer.Option(
        None, "--weights", help="llamacpp: 'q8_0' (default: the GGUF re-stored as Q8_0, faster on CPUs) or 'gguf'."
    ),
) -> None:
    """Serve one base model and its LoRA adapters on /v1 (chat completions, models, load/unload adapter)."""
    from mindforge.errors import MindForgeError
    from mindforge.policy.engines.models import resolve_model
    from mindforge.policy.server.auth import check_bind, settings_key
    from mindforge.policy.server.server import ENGINES
    from mindforge.policy.server.server import serve as run_server

    console = Console(stderr=True)
    if engine not in ENGINES:
        why = f"unknown engine {engine!r} (choose {', '.join(ENGINES)})"
        console.print(f"[red]error:[/] {escape(why)}", highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    try:
        check_bind(host, settings_key())  # before the model is loaded
        resolved = resolve_model(model)  # converts a GGUF file on first use; the server reuses the copy
        if engine == "llamacpp" and not resolved.gguf_path:
            why = f"--engine llamacpp serves a GGUF file; --model {model!r} is not one"
            console.print(f"[red]error:[/] {escape(why)}", highlight=False, soft_wrap=True)
            raise typer.Exit(2)
        name = served_model_name or resolved.name
        where = resolved.gguf_path if engine == "llamacpp" else resolved.hf_dir
        console.print(
            f"loading {escape(model)} ({resolved.source}, {escape(str(where))}) with {engine} on {escape(device)}; "
            f"serving it as {escape(name)} on http://{host}:{port}/v1",
            highlight=False,
            soft_wrap=True,
        )
        options = {"contexts": contexts, "parallel": parallel, "weights": weights}
        run_server(
            model, host, port, device, served_model_name, engine,
            llamacpp={k: v for k, v in options.items() if v is not None},
        )
    except MindForgeError as exc:  # UnprotectedBindError, HubUnreachableError, ModelSpecError
        console.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except ImportError as exc:
        if engine != "llamacpp":
            raise
        msg = (
            f"the llamacpp engine cannot be imported ({exc}); "
            "install the optional extra: pip install 'mindforge[llamacpp]'"
        )
        console.print(f"[red]error:[/] {escape(msg)}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@app.command("build-tiny")
def build_tiny(
    out: Path = typer.Option(None, "--out", "-o", help="Directory (default: the cache under the data dir)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random weights."),
) -> None:
    """Build the tiny offline model (random weights, local BPE tokenizer) and print its directory."""
    from mindforge.policy.doubles.tiny import build_tiny_model, ensure_tiny_model

    path = build_tiny_model(out, seed=seed) if out else ensure_tiny_model(seed=seed)
    typer.echo(str(path))
