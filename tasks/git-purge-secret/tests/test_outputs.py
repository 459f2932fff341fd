"""Checks for git-purge-secret: credentials gone from every object, history otherwise intact.

EXPECTED holds, for each branch (oldest commit first), the subject|author|email|author-date
of every commit and each file's mode and the sha256 prefix of its content with credential
lines (``AWS_ACCESS_KEY_ID=`` / ``AWS_SECRET_ACCESS_KEY=``) dropped, taken from the original
repository; ``tree`` is each branch tip's tree id, which must not change.
"""

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

REPO = Path("/app/repo")
KEY_ID = "AKIAZ7QXMINDFORGE42"
SECRET = "q9Vt3Kx7/Lm2PwR8+YsN4bJd6HcF0gTzUeA1oIiE"
CRED = re.compile(r"AWS_(ACCESS_KEY_ID|SECRET_ACCESS_KEY)=")
EXPECTED = json.loads(
    "{\"feature/metrics\":{\"commits\":[[\"Initial commit|Dana Ortiz|dana@example.com|2024-03-01T09:00:00+"
    "00:00\",{\"README.md\":[\"100644\",\"9e417ddb907f671c\"],\"app/__init__.py\":[\"100644\",\"e3b0c44298fc1c14\""
    "],\"app/main.py\":[\"100644\",\"5e2570b1daf8d6d4\"]}],[\"Add config loader|Dana Ortiz|dana@example.com|"
    "2024-03-02T10:15:00+00:00\",{\"README.md\":[\"100644\",\"9e417ddb907f671c\"],\"app/__init__.py\":[\"100644"
    "\",\"e3b0c44298fc1c14\"],\"app/config.py\":[\"100644\",\"29f4a27b05e46b77\"],\"app/main.py\":[\"100644\",\"5e2"
    "570b1daf8d6d4\"]}],[\"Add production settings and deploy script|Dana Ortiz|dana@example.com|2024-0"
    "3-03T16:40:00+00:00\",{\"README.md\":[\"100644\",\"9e417ddb907f671c\"],\"app/__init__.py\":[\"100644\",\"e3b"
    "0c44298fc1c14\"],\"app/config.py\":[\"100644\",\"29f4a27b05e46b77\"],\"app/main.py\":[\"100644\",\"5e2570b1d"
    "af8d6d4\"],\"deploy/prod.env\":[\"100644\",\"95dfc629f84bba97\"],\"scripts/deploy.sh\":[\"100755\",\"73474a4"
    "b0e01bb09\"]}],[\"Read credentials from the environment|Dana Ortiz|dana@example.com|2024-03-04T08:"
    "05:00+00:00\",{\"README.md\":[\"100644\",\"9e417ddb907f671c\"],\"app/__init__.py\":[\"100644\",\"e3b0c44298f"
    "c1c14\"],\"app/config.py\":[\"100644\",\"29f4a27b05e46b77\"],\"app/main.py\":[\"100644\",\"5e2570b1daf8d6d4\""
    "],\"deploy/prod.env\":[\"100644\",\"b78e8f07eec178d4\"],\"scripts/deploy.sh\":[\"100755\",\"5897caf581df31b"
    "7\"]}],[\"Add uptime metric|Dana Ortiz|dana@example.com|2024-03-06T13:20:00+00:00\",{\"README.md\":[\""
    "100644\",\"9e417ddb907f671c\"],\"app/__init__.py\":[\"100644\",\"e3b0c44298fc1c14\"],\"app/config.py\":[\"10"
    "0644\",\"29f4a27b05e46b77\"],\"app/main.py\":[\"100644\",\"5e2570b1daf8d6d4\"],\"app/metrics.py\":[\"100644\""
    ",\"58c6d9b94799f31c\"],\"deploy/prod.env\":[\"100644\",\"b78e8f07eec178d4\"],\"scripts/deploy.sh\":[\"10075"
    "5\",\"5897caf581df31b7\"]}],[\"Scale workers for metrics load|Dana Ortiz|dana@example.com|2024-03-07"
    "T09:45:00+00:00\",{\"README.md\":[\"100644\",\"9e417ddb907f671c\"],\"app/__init__.py\":[\"100644\",\"e3b0c44"
    "298fc1c14\"],\"app/config.py\":[\"100644\",\"29f4a27b05e46b77\"],\"app/main.py\":[\"100644\",\"5e2570b1daf8d"
    "6d4\"],\"app/metrics.py\":[\"100644\",\"58c6d9b94799f31c\"],\"deploy/prod.env\":[\"100644\",\"ca89f234580ca4"
    "90\"],\"scripts/deploy.sh\":[\"100755\",\"5897caf581df31b7\"]}]],\"tree\":\"955cc38ffac1a1f6b25da9e6d75caf"
    "77ab19e837\"},\"main\":{\"commits\":[[\"Initial commit|Dana Ortiz|dana@example.com|2024-03-01T09:00:00"
    "+00:00\",{\"README.md\":[\"100644\",\"9e417ddb907f671c\"],\"app/__init__.py\":[\"100644\",\"e3b0c44298fc1c14"
    "\"],\"app/main.py\":[\"100644\",\"5e2570b1daf8d6d4\"]}],[\"Add config loader|Dana Ortiz|dana@example.com"
    "|2024-03-02T10:15:00+00:00\",{\"README.md\":[\"100644\",\"9e417ddb907f671c\"],\"app/__init__.py\":[\"10064"
    "4\",\"e3b0c44298fc1c14\"],\"app/config.py\":[\"100644\",\"29f4a27b05e46b77\"],\"app/main.py\":[\"100644\",\"5e"
    "2570b1daf8d6d4\"]}],[\"Add production settings and deploy script|Dana Ortiz|dana@example.com|2024-"
    "03-03T16:40:00+00:00\",{\"README.md\":[\"100644\",\"9e417ddb907f671c\"],\"app/__init__.py\":[\"100644\",\"e3"
    "b0c44298fc1c14\"],\"app/config.py\":[\"100644\",\"29f4a27b05e46b77\"],\"app/main.py\":[\"100644\",\"5e2570b1"
    "daf8d6d4\"],\"deploy/prod.env\":[\"100644\",\"95dfc629f84bba97\"],\"scripts/deploy.sh\":[\"100755\",\"73474a"
    "4b0e01bb09\"]}],[\"Read credentials from the environment|Dana Ortiz|dana@example.com|2024-03-04T08"
    ":05:00+00:00\",{\"README.md\":[\"100644\",\"9e417ddb907f671c\"],\"app/__init__.py\":[\"100644\",\"e3b0c44298"
    "fc1c14\"],\"app/config.py\":[\"100644\",\"29f4a27b05e46b77\"],\"app/main.py\":[\"100644\",\"5e2570b1daf8d6d4"
    "\"],\"deploy/prod.env\":[\"100644\",\"b78e8f07eec178d4\"],\"scripts/deploy.sh\":[\"100755\",\"5897caf581df31"
    "b7\"]}],[\"Document deployment|Dana Ortiz|dana@example.com|2024-03-05T11:30:00+00:00\",{\"README.md\""
    ":[\"100644\",\"9e417ddb907f671c\"],\"app/__init__.py\":[\"100644\",\"e3b0c44298fc1c14\"],\"app/config.py\":["
    "\"100644\",\"29f4a27b05e46b77\"],\"app/main.py\":[\"100644\",\"5e2570b1daf8d6d4\"],\"deploy/prod.env\":[\"100"
    "644\",\"b78e8f07eec178d4\"],\"docs/deploy.md\":[\"100644\",\"f547d0eae8ecca5f\"],\"scripts/deploy.sh\":[\"10"
    "0755\",\"5897caf581df31b7\"]}]],\"tree\":\"5c896e6f4d69ba0fb6ad0b07b0ef25ff4bed960c\"}}"
)


def git(*args: str, repo: Path = REPO) -> str:
    res = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    return res.stdout.decode(errors="replace")


def filtered_hash(blob: str) -> str:
    data = git("cat-file", "blob", blob)
    kept = "".join(line for line in data.splitlines(True) if not CRED.search(line))
    return hashlib.sha256(kept.encode()).hexdigest()[:16]


def test_no_credentials_in_any_object():
    dump = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True, timeout=60,
    )
    assert dump.returncode == 0
    assert len(dump.stdout) > 0
    assert KEY_ID.encode() not in dump.stdout
    assert SECRET.encode() not in dump.stdout


def test_no_plaintext_copies_anywhere():
    for root in ("/app", "/root", "/tmp", "/home", "/srv", "/opt"):
        res = subprocess.run(["grep", "-rIl", "-e", KEY_ID, "-e", SECRET, root], capture_output=True, text=True)
        assert res.stdout == "", f"credentials found in: {res.stdout}"


def test_no_other_repositories_hold_the_secret():
    for root in ("/app", "/root", "/tmp", "/home", "/srv", "/opt"):
        for dirpath, dirnames, _files in os.walk(root):
            if "objects" in dirnames and "HEAD" in os.listdir(dirpath) and Path(dirpath) != REPO / ".git":
                dump = subprocess.run(
                    ["git", "--git-dir", dirpath, "cat-file", "--batch-all-objects", "--batch"],
                    capture_output=True, timeout=60,
                )
                assert SECRET.encode() not in dump.stdout, dirpath
                assert KEY_ID.encode() not in dump.stdout, dirpath


def test_refs_are_exactly_the_original_ones():
    refs = set(git("for-each-ref", "--format=%(refname)").split())
    assert refs == {"refs/heads/main", "refs/heads/feature/metrics", "refs/tags/v0.1"}


def test_tag_is_annotated_and_points_into_history():
    assert git("cat-file", "-t", "v0.1").strip() == "tag"
    assert git("tag", "-l", "--format=%(contents:subject)", "v0.1").strip() == "Release 0.1"
    subject = git("log", "-1", "--format=%s", "v0.1^{commit}").strip()
    assert subject == "Add production settings and deploy script"
    assert git("merge-base", "--is-ancestor", "v0.1", "main") == ""
    assert git("merge-base", "--is-ancestor", "v0.1", "feature/metrics") == ""


def test_branch_tips_unchanged():
    for ref, exp in EXPECTED.items():
        assert git("rev-parse", ref + "^{tree}").strip() == exp["tree"], ref


def test_history_preserved_apart_from_credentials():
    for ref, exp in EXPECTED.items():
        commits = git("rev-list", "--reverse", ref).split()
        assert len(commits) == len(exp["commits"]), ref
        for commit, (meta, files) in zip(commits, exp["commits"]):
            assert git("log", "-1", "--format=%s|%an|%ae|%aI", commit).strip() == meta
            got = {}
            for line in git("ls-tree", "-r", commit).splitlines():
                info, path = line.split("\t", 1)
                mode, _type, blob = info.split()
                got[path] = [mode, filtered_hash(blob)]
            assert got == files, (ref, meta)


def test_branches_share_history():
    base = git("merge-base", "main", "feature/metrics").strip()
    assert git("log", "-1", "--format=%s", base).strip() == "Read credentials from the environment"


def test_worktree_clean_on_main():
    assert git("symbolic-ref", "--short", "HEAD").strip() == "main"
    assert git("status", "--porcelain") == ""
