"""The main job's wall-time budget: a generation starts only when it is predicted to fit."""

from __future__ import annotations

from mindforge.cli.quickstart import next_fits


def test_the_next_generation_starts_only_when_the_longest_so_far_still_fits() -> None:
    # 300 s spent, generations of 200 and 260 s so far: the next is guessed at 260 s
    assert next_fits(300.0, [200.0, 260.0], 560.0)
    assert not next_fits(300.0, [200.0, 260.0], 559.0)
    assert not next_fits(300.0, [260.0, 200.0], 559.0)  # the longest, not the last
    assert next_fits(10_000.0, [5_000.0], 0.0)  # 0: no budget


def test_the_default_budget_and_generations_are_in_the_help() -> None:
    import typer
    from typer.testing import CliRunner

    from mindforge.cli.quickstart import quickstart_command

    app = typer.Typer()
    app.command()(quickstart_command)
    text = CliRunner().invoke(app, ["--help"], terminal_width=200, env={"COLUMNS": "200"}).output
    assert "--time-budget" in text and "900" in text and "--generations" in text
