"""Checks for shell-ext-summary: run extsum.sh on hostile trees and compare with a reference."""

import collections
import os
import random
import subprocess
from pathlib import Path

import pytest

SCRIPT = "/app/bin/extsum.sh"


def reference(root: Path) -> str:
    count, size = collections.Counter(), collections.Counter()
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            dot = name.rfind(".")
            ext = name[dot + 1:].lower() if 0 < dot < len(name) - 1 else "(none)"
            count[ext] += 1
            size[ext] += path.stat().st_size
    return "".join(f"{e} {count[e]} {size[e]}\n" for e in sorted(count, key=lambda e: e.encode()))


def run(*args: str, cwd: str = "/tmp") -> subprocess.CompletedProcess:
    return subprocess.run([SCRIPT, *args], capture_output=True, timeout=15, cwd=cwd, stdin=subprocess.DEVNULL)


def write(path: Path, nbytes: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * nbytes)


def check(root: Path) -> None:
    res = run(str(root))
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode() == reference(root)


def test_simple_tree(tmp_path):
    write(tmp_path / "a.txt", 10)
    write(tmp_path / "b.TXT", 5)
    write(tmp_path / "sub" / "c.md", 7)
    write(tmp_path / "README", 3)
    check(tmp_path)


def test_hostile_names(tmp_path):
    root = tmp_path / "my files"
    write(root / "with space.txt", 11)
    write(root / "new\nline.log", 4)
    write(root / "-rf", 2)
    write(root / "-n.sh", 9)
    write(root / "*.txt", 6)
    write(root / "[a-z].md", 1)
    write(root / "dir.v1.2" / "noext", 8)
    write(root / "dir.v1.2" / "archive.tar.gz", 100)
    write(root / ".hidden" / ".bashrc", 12)
    write(root / ".hidden" / ".config.json", 13)
    write(root / "trailing.", 5)
    write(root / "empty.dat", 0)
    write(root / "UPPER.JPG", 30)
    write(root / "tab\there.Jpg", 1)
    check(root)


def test_symlinks_not_counted(tmp_path):
    outside = tmp_path / "outside"
    write(outside / "big.bin", 5000)
    root = tmp_path / "root"
    write(root / "real.bin", 10)
    (root / "link.bin").symlink_to(outside / "big.bin")
    (root / "linkdir").symlink_to(outside)
    (root / "dangling.bin").symlink_to(tmp_path / "nope")
    assert run(str(root)).stdout.decode() == "bin 1 10\n"


def test_empty_dir(tmp_path):
    (tmp_path / "only" / "dirs").mkdir(parents=True)
    res = run(str(tmp_path))
    assert res.returncode == 0 and res.stdout == b""


def test_relative_path_with_spaces(tmp_path):
    write(tmp_path / "a b" / "x.py", 3)
    write(tmp_path / "a b" / "y.PY", 4)
    res = run("a b", cwd=str(tmp_path))
    assert res.returncode == 0
    assert res.stdout.decode() == "py 2 7\n"


@pytest.mark.parametrize("seed", range(3))
def test_random_tree(tmp_path, seed):
    rng = random.Random(seed)
    alphabet = "abcXYZ .-_*?$'\"\\\n\t"
    for _ in range(rng.randint(30, 80)):
        parts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(rng.randint(1, 3))]
        parts = [p.replace("/", "_") for p in parts if p not in (".", "..")] or ["f"]
        name = parts[-1] + rng.choice(["", ".txt", ".TxT", ".c", ".tar.gz", "."])
        path = tmp_path.joinpath(*parts[:-1], name)
        if path.exists() or any(p.exists() and not p.is_dir() for p in path.parents):
            continue
        write(path, rng.randint(0, 300))
    check(tmp_path)


@pytest.mark.parametrize("args", [[], ["/nonexistent/dir"], ["/etc/hostname"], ["/tmp", "/tmp"]])
def test_errors(args, tmp_path):
    res = run(*args, cwd=str(tmp_path))
    assert res.returncode == 2
    assert res.stdout == b""
    assert res.stderr.strip() != b""
