"""``mindforge worker``: run the Temporal worker(s) for the orchestration and sandbox queues."""

from __future__ import annotations

import asyncio
import logging

import typer


def worker_command(
    queue: list[str] = typer.Option(["orchestration", "sandbox"], "--queue", help="orchestration and/or sandbox"),
    graceful_shutdown_sec: float = typer.Option(30.0, help="Seconds in-flight activities get on SIGTERM."),
) -> None:
    """Poll Temporal until SIGTERM/SIGINT; trials fan out to Ray (settings' ray_address)."""
    from workers.main import run_worker

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(run_worker(queues=queue, graceful_shutdown_sec=graceful_shutdown_sec))
