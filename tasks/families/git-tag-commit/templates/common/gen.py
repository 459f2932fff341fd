"""Inputs of this instance: the repository /app/repo."""
import os
import subprocess
import sys
from pathlib import Path

SEED = %%seed
COMMITS = %%commits
BACK = %%back
ANNOTATED = "%%annotated" == "true"
TAG = "%%{tag}"


def generate(root):
    repo = Path(root) / "repo"
    repo.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GIT_AUTHOR_NAME="Dev", GIT_AUTHOR_EMAIL="dev@example.com", GIT_COMMITTER_NAME="Dev",
               GIT_COMMITTER_EMAIL="dev@example.com")

    def git(*args):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)

    git("init", "-q", "-b", "main")
    for i in range(COMMITS):
        (repo / "CHANGES.txt").open("a").write(f"change {i + 1} ({SEED % (i + 7)})\n")
        stamp = f"2024-01-{i + 1:02d}T12:00:00Z"
        env.update(GIT_AUTHOR_DATE=stamp, GIT_COMMITTER_DATE=stamp)
        git("add", "CHANGES.txt")
        git("commit", "-q", "-m", f"Change {i + 1}")


if __name__ == "__main__":
    generate(sys.argv[1])
