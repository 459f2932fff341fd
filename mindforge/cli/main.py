"""Entry point of the ``mindforge`` command; each sub-app lives in its own module."""

from __future__ import annotations

import typer

from mindforge.cli import dev, hcp, lineage, policy, schedule, tasks
from mindforge.cli.eval import eval_command
from mindforge.cli.quickstart import quickstart_command
from mindforge.cli.report import report_command
from mindforge.cli.worker import worker_command

app = typer.Typer(
    name="mindforge",
    help="MindForge: improve a model-harness pair generation after generation.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(dev.app, name="dev")
app.add_typer(tasks.app, name="tasks")
app.add_typer(hcp.app, name="hcp")
app.add_typer(policy.app, name="policy")
app.add_typer(lineage.app, name="lineage")
app.add_typer(schedule.app, name="schedule")
app.command("eval")(eval_command)
app.command("worker")(worker_command)
app.command("quickstart")(quickstart_command)
app.command("report")(report_command)


def main() -> None:
    """Run the CLI; a MindForge input or infrastructure error prints one clear line and exits 2."""
    import sys

    from rich.console import Console
    from rich.markup import escape

    from mindforge.errors import MindForgeError

    try:
        app(standalone_mode=True)
    except MindForgeError as exc:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    main()
