"""No reference a reader of the repository cannot follow: internal tracker numbers stay out.

A tracker number ("issue 17", "stop 23", "milestone", "(#34)") points at a list the
repository does not carry; a file says the thing itself instead. Every text file git tracks
is read, except this one (it spells the forms). References a reader can follow stay
allowed: an issue's URL (``https://github.com/temporalio/sdk-python/issues/300``), and
``#`` followed by digits where it is no reference (CSS colours ``#222``).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

#: this file spells the forms it looks for, so it is not read
THIS_FILE = Path(__file__).resolve().relative_to(REPO).as_posix()
#: the forms a tracker reference takes; each names what it is, so a hit says what to rewrite
TRACKER_REF = re.compile(
    r"""
      \b(?:issue|issues|stop|ticket|pr)\s*\#?\s*\d+\b     # issue 17, issue #17, stop 23, PR 5
    | \bmilestones?\b                                    # milestone, milestones
    | \b(?:pull\ request|bug|see|fixes|closes)\s+\#\d+\b  # pull request #3, see #12, fixes #4
    | \(\#\d+\)                                          # (#34)
    """,
    re.IGNORECASE | re.VERBOSE,
)


def _tracked_text_files() -> dict[str, str]:
    """Path -> content of every file git tracks that reads as UTF-8 text."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=False)
    assert listed.returncode == 0, f"git ls-files failed: {listed.stderr.decode(errors='replace')}"
    files: dict[str, str] = {}
    for name in filter(None, listed.stdout.decode().split("\0")):
        path = REPO / name
        if name == THIS_FILE or not path.is_file():  # this file, or one deleted but not yet committed
            continue
        try:
            files[name] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # a binary file
            continue
    return files


def test_no_tracked_file_cites_a_tracker_number() -> None:
    files = _tracked_text_files()
    assert len(files) > 100, "git ls-files listed almost nothing: not the repository?"
    hits = [
        f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
        for name, text in files.items()
        for m in TRACKER_REF.finditer(text)
    ]
    assert not hits, "say the thing itself instead of a tracker reference:\n" + "\n".join(hits)


@pytest.mark.parametrize(
    "text",
    [
        "the experience library (issue 17)",
        "see issue #20",
        "done in stop 23",
        "(issue 17, item 7)",
        "the next milestone",
        "Milestones: M1",
        "fixed in (#34)",
        "closes #12",
        "PR 41 added it",
    ],
)
def test_the_pattern_catches_tracker_references(text: str) -> None:
    assert TRACKER_REF.search(text), text


@pytest.mark.parametrize(
    "text",
    [
        "https://github.com/temporalio/sdk-python/issues/300",
        "h1 { border-bottom: 2px solid #444; color: #222; }",
        "proposals[2]: the same instance as an earlier item",
        "the run stops at 3 generations; a non-stop loop",
        "stop sequences (named presets); provider_options.stop",
        "an issue with the engine; the issues it raises",
        "docker stop container-1",
        "tissue 5",
    ],
)
def test_the_pattern_leaves_other_words_alone(text: str) -> None:
    assert not TRACKER_REF.search(text), text
