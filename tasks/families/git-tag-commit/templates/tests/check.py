"""Verifier: the tag names the right commit, is of the right kind, and nothing else moved."""
import subprocess
import sys

sys.path.insert(0, "/tests")
import gen  # noqa: E402


def git(*args):
    r = subprocess.run(["git", "-C", "/app/repo", *args], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


if git("rev-list", "--count", "main") != str(gen.COMMITS):
    sys.exit("branch main moved or commits were added")
want = git("rev-parse", f"main~{gen.BACK}")
got = git("rev-parse", f"refs/tags/{gen.TAG}^{{commit}}")
kind = git("cat-file", "-t", f"refs/tags/{gen.TAG}")
ok = got is not None and got == want and kind == ("tag" if gen.ANNOTATED else "commit")
if ok and gen.ANNOTATED:
    ok = "Release candidate" in (git("tag", "-l", "--format=%(contents)", gen.TAG) or "")
sys.exit(0 if ok else f"tag {gen.TAG}: commit {got}, kind {kind}; want {want}")
