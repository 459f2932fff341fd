"""README is a newcomer's first screen and the docs site builds: the detail lives in ``docs/``.

- README.md stays under 12,000 characters and shows the two commands exactly as CI runs
  the test one (``.ci/run`` calls ``deploy/test.sh``);
- ``mkdocs build --strict`` passes (a broken link or anchor, or a page left out of the
  navigation in ``mkdocs.yml``, fails it), and ``deploy/test.sh`` runs it;
- the CLI guide (``docs/cli.md``) names every ``mindforge`` command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, require_module

README_MAX_CHARS = 12_000


def test_readme_is_a_first_screen_with_the_two_commands() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme) <= README_MAX_CHARS, f"README.md has {len(readme)} characters; move detail into docs/"
    assert "```bash\n./deploy/main.sh\n```" in readme
    assert "```bash\n./deploy/test.sh\n```" in readme
    assert "bash deploy/test.sh" in (REPO / ".ci" / "run").read_text(encoding="utf-8")


def test_the_docs_site_builds_strict(tmp_path: Path) -> None:
    require_module("mkdocs", "the test extra installs it (deploy/setup.sh: pip install -e '.[test]')")
    require_module("material", "the test extra installs mkdocs-material (deploy/setup.sh: pip install -e '.[test]')")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "site" / "index.html").is_file()


def test_the_test_command_builds_the_docs_strict() -> None:
    lines = (REPO / "deploy" / "test.sh").read_text(encoding="utf-8").splitlines()
    builds = [line for line in lines if "mkdocs build" in line and not line.lstrip().startswith("#")]
    assert len(builds) == 1 and "--strict" in builds[0]
    assert "--quiet" not in builds[0] and " -q" not in builds[0], "--quiet hides the warnings --strict fails on"


def _command_paths(command, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every leaf command under ``command`` as its words (``("lineage", "start")``)."""
    subcommands = getattr(command, "commands", None)
    if not subcommands:
        return [prefix]
    return [path for name, sub in subcommands.items() for path in _command_paths(sub, (*prefix, name))]


def test_the_cli_guide_names_every_command() -> None:
    from typer.main import get_command

    from mindforge.cli.main import app

    paths = _command_paths(get_command(app))
    assert len(paths) > 20, "the CLI walk found almost no commands"
    guide = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    missing = [" ".join(p) for p in paths if f"`mindforge {' '.join(p)}`" not in guide]
    assert not missing, f"docs/cli.md does not name: {missing}"
