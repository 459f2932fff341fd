"""Redirected to a file, the CLI writes plain lines: no spinner, no redrawn progress bar.

The main job (``mindforge quickstart``) waits on its lineage with :func:`status_line` and
switches libraries' tqdm bars off with :func:`quiet_progress_bars` when its output is not a
terminal; the trial-batch bar of ``eval`` and ``tasks discover`` is off there too.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import pytest
from rich.console import Console

from mindforge.cli.output import PROGRESS_BAR_SWITCHES, quiet_progress_bars, status_line
from tests.conftest import REPO

#: Rich's spinner frames are Braille patterns; a redraw is a carriage return or an escape sequence
SPINNER_OR_REDRAW = re.compile("[\u2800-\u28ff]|\r|\x1b")


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=120, soft_wrap=True), out


def test_into_a_file_the_status_is_a_plain_line_per_change() -> None:
    console, out = _console(terminal=False)
    with status_line(console, "lineage-x: starting") as set_status:
        for text in ["lineage-x: running generation 0", "lineage-x: running generation 0", "lineage-x: done [ok]"]:
            set_status(text)
    lines = out.getvalue().splitlines()
    assert [re.sub(r" \(\d+ s\)$", "", line) for line in lines] == [
        "lineage-x: starting", "lineage-x: running generation 0", "lineage-x: done [ok]",
    ]  # fmt: skip
    assert all(re.search(r" \(\d+ s\)$", line) for line in lines)  # each line says when
    assert not SPINNER_OR_REDRAW.search(out.getvalue())


def test_on_a_terminal_the_status_is_a_spinner() -> None:
    console, out = _console(terminal=True)
    with status_line(console, "lineage-x: starting") as set_status:
        set_status("lineage-x: running generation 0")
    assert SPINNER_OR_REDRAW.search(out.getvalue())  # the check above can fail


def test_a_disabled_status_prints_nothing() -> None:
    console, out = _console(terminal=False)
    with status_line(console, "lineage-x: starting", enabled=False) as set_status:
        set_status("lineage-x: running")
    assert out.getvalue() == ""


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


@pytest.mark.parametrize(
    ("stdout_tty", "stderr_tty", "quiet"), [(True, True, False), (False, True, True), (True, False, True)]
)
def test_progress_bars_go_quiet_only_when_a_stream_is_redirected(monkeypatch, stdout_tty, stderr_tty, quiet) -> None:
    for name in PROGRESS_BAR_SWITCHES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "stdout", _Stream(stdout_tty))
    monkeypatch.setattr(sys, "stderr", _Stream(stderr_tty))
    assert quiet_progress_bars() is quiet
    assert all((os.environ.get(name) == value) is quiet for name, value in PROGRESS_BAR_SWITCHES.items())


def test_a_value_the_user_set_is_kept(monkeypatch) -> None:
    monkeypatch.setenv("TQDM_DISABLE", "0")
    monkeypatch.setattr(sys, "stdout", _Stream(False))
    quiet_progress_bars()
    assert os.environ["TQDM_DISABLE"] == "0"


def test_a_tqdm_bar_writes_nothing_once_quieted(tmp_path) -> None:
    """In a real process with its output in files: tqdm (what transformers' GGUF conversion draws) stays silent."""
    script = (
        "from mindforge.cli.output import quiet_progress_bars\n"
        "assert quiet_progress_bars()\n"
        "from tqdm.auto import tqdm\n"
        "print(sum(tqdm(range(50), desc='Converting and de-quantizing GGUF tensors...')))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in PROGRESS_BAR_SWITCHES}
    with (tmp_path / "out").open("w") as out, (tmp_path / "err").open("w") as err:
        done = subprocess.run([sys.executable, "-c", script], cwd=REPO, stdout=out, stderr=err, env=env, timeout=120)
    assert done.returncode == 0, (tmp_path / "err").read_text()
    assert (tmp_path / "out").read_text() == "1225\n"
    assert (tmp_path / "err").read_text() == ""


def test_the_trial_batch_bar_is_off_when_stderr_is_not_a_terminal(monkeypatch) -> None:
    from mindforge.cli import common

    console, _ = _console(terminal=False)
    monkeypatch.setattr(common, "console", console)
    assert common.task_progress(True).disable
    terminal, _ = _console(terminal=True)
    monkeypatch.setattr(common, "console", terminal)
    assert not common.task_progress(True).disable
