"""Checks for git-recover-branch: main and feature/search point at the original lost commits.

Commit ids are stable because the build fixes every author, committer and date.
"""

import subprocess

MAIN_TIP = "616159b734e8b2d73c07b8229f475744d4be0182"  # "Add config file"
SEARCH_TIP = "b956c10331c9c4bbb335f4b86e562e9ea0753eb5"  # "Add search tests"
ABANDONED = "1fb9bc1a5cce2667a6fefc48ce41b10c3e289f8f"  # "WIP: try fuzzy matching"


def git(*args: str) -> str:
    res = subprocess.run(["git", "-C", "/app/project", *args], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_main_restored():
    assert git("rev-parse", "refs/heads/main") == MAIN_TIP


def test_feature_branch_restored():
    assert git("rev-parse", "refs/heads/feature/search") == SEARCH_TIP
    history = git("log", "--format=%s", "feature/search").splitlines()
    assert history == ["Add search tests", "Add search CLI", "Add search index", "Add parser", "Initial commit"]


def test_abandoned_work_not_on_any_branch():
    assert git("branch", "--contains", ABANDONED, "--format=%(refname)") == ""


def test_no_extra_refs():
    refs = set(git("for-each-ref", "--format=%(refname)", "refs/heads", "refs/tags").split())
    assert refs == {"refs/heads/main", "refs/heads/feature/search"}


def test_main_checked_out_clean():
    assert git("symbolic-ref", "--short", "HEAD") == "main"
    assert git("status", "--porcelain") == ""
    assert git("show", "HEAD:config.toml") == "[search]"
