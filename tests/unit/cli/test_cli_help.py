"""``--help`` of every registered command shows usage text, never the docstring's Google sections."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from mindforge.cli.main import app
from mindforge.cli.usage import usage_text

runner = CliRunner()
SECTIONS = ("Args:", "Arguments:", "Returns:", "Raises:", "Yields:", "Attributes:")


def _command_paths(command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [path]
    if hasattr(command, "commands"):  # a group (Typer ships its own copy of click's classes)
        for name, sub in command.commands.items():
            paths += _command_paths(sub, (*path, name))
    return paths


PATHS = _command_paths(typer.main.get_command(app))


def test_every_command_is_found():
    names = {" ".join(p) for p in PATHS}
    # a sample from each kind of registration: sub-app commands, top-level commands, a late one
    assert {"lineage start", "lineage list", "dev status", "hcp show", "report", "eval", "tasks discover"} <= names
    assert len(PATHS) > 25


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "mindforge")
def test_help_has_usage_and_no_docstring_sections(path):
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.stdout
    for section in SECTIONS:
        assert section not in result.stdout, f"`mindforge {' '.join(path)} --help` shows {section}"


def test_report_help_keeps_the_summary():
    result = runner.invoke(app, ["report", "--help"], env={"COLUMNS": "200"})
    assert "Write a lineage report" in result.stdout and "InputError" not in result.stdout


def test_usage_text_drops_sections_and_keeps_the_prose():
    doc = """Build each task and give a verdict.

    Exits 1 when any task is not valid.

    Args:
        paths: task directories.
            Continued on a second line.

    Raises:
        InputError: a bad path.
    Trailing prose stays.
    """
    assert (
        usage_text(doc)
        == "Build each task and give a verdict.\n\nExits 1 when any task is not valid.\n\nTrailing prose stays."
    )
    assert usage_text(None) == "" and usage_text("One line.") == "One line."
    # a word ending in a colon inside prose is not a section header
    assert usage_text("Ports:  the ones in use: 8000.") == "Ports:  the ones in use: 8000."
