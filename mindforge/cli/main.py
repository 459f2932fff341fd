"""Entry point of the ``mindforge`` command; each sub-app lives in its own module."""

from __future__ import annotations

import logging
import os
import sys
import traceback

import typer

from mindforge.cli import cluster, dev, hcp, lineage, policy, schedule, tasks
from mindforge.cli.eval import eval_command
from mindforge.cli.quickstart import quickstart_command
from mindforge.cli.report import report_command
from mindforge.cli.usage import use_usage_help
from mindforge.cli.worker import worker_command

app = typer.Typer(
    name="mindforge",
    help="MindForge: improve a model-harness pair generation after generation.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(dev.app, name="dev")
app.add_typer(cluster.app, name="cluster")
app.add_typer(tasks.app, name="tasks")
app.add_typer(hcp.app, name="hcp")
app.add_typer(policy.app, name="policy")
app.add_typer(lineage.app, name="lineage")
app.add_typer(schedule.app, name="schedule")
app.command("eval")(eval_command)
app.command("worker")(worker_command)
app.command("quickstart")(quickstart_command)
app.command("report")(report_command)
use_usage_help(app)  # --help shows what a command does, not its docstring's Raises: section


def main() -> None:
    """Run the CLI; a MindForge input or infrastructure error prints one clear line and exits 2."""
    from rich.console import Console
    from rich.markup import escape

    from mindforge.errors import MindForgeError

    code: int | str | None
    try:
        app(standalone_mode=True)
        code = 0
    except MindForgeError as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        code = 2
    except SystemExit as exc:
        code = exc.code
    except Exception:  # noqa: BLE001 - a bug: the traceback and status 1, as the interpreter gives them
        traceback.print_exc()
        code = 1
    _exit(code)


def _exit(code: int | str | None) -> None:
    """End the process with ``code``, skipping interpreter teardown once Temporal's client has been loaded.

    The Temporal client's Rust core keeps threads that may call into Python while the
    interpreter finalizes; the process then aborts (``Fatal Python error:
    PyGILState_Release``, status 134) after the command has done its work and printed its
    output (https://github.com/temporalio/sdk-python/issues/300). A script must be able to trust the exit
    status, so after such a command the streams are flushed and the process exits at
    once. Every ``finally`` block and context manager of the command has run by then;
    of the exit handlers that are skipped, the two that matter are run first: logging's
    and Ray's (a driver connected to Ray is disconnected, and a local Ray cluster it
    started is stopped).
    """
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"): print it, as the interpreter would
        print(code, file=sys.stderr)
        code = 1
    if "temporalio.client" not in sys.modules:
        sys.exit(code)
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
