"""Checks for c-stats-make: the build works, is incremental, tracks headers, and the tool is unchanged."""

import math
import os
import random
import re
import subprocess
import time
from pathlib import Path

import pytest

PROJECT = Path("/app/project")
BIN = PROJECT / "bin" / "stats"
LINE = re.compile(
    r"^n=(\d+) mean=(-?\d+\.\d{3}) median=(-?\d+\.\d{3}) stddev=(\d+\.\d{3}) min=(-?\d+\.\d{3}) max=(-?\d+\.\d{3})$"
)


def make(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", *args], cwd=PROJECT, capture_output=True, text=True, timeout=90)


@pytest.fixture(scope="module", autouse=True)
def clean_build():
    assert make("clean").returncode == 0
    assert not BIN.exists(), "make clean must remove bin/stats"
    res = make()
    assert res.returncode == 0, res.stdout + res.stderr
    assert BIN.is_file() and os.access(BIN, os.X_OK)


def stats(text: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN)], input=text, capture_output=True, text=True, timeout=10)


def expected(values: list[float]) -> list[float]:
    v = sorted(values)
    n = len(v)
    mean = sum(v) / n
    median = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    sd = math.sqrt(sum((x - mean) ** 2 for x in v) / n)
    return [mean, median, sd, v[0], v[-1]]


@pytest.mark.parametrize("seed", range(6))
def test_results(seed):
    rng = random.Random(seed)
    values = [round(rng.uniform(-500, 500), rng.randint(0, 3)) for _ in range(rng.randint(1, 400))]
    sep = rng.choice([" ", "\n", "\t", "  \n"])
    res = stats(sep.join(map(repr, values)) + "\n")
    assert res.returncode == 0, res.stderr
    m = LINE.match(res.stdout.strip())
    assert m, res.stdout
    assert int(m.group(1)) == len(values)
    for got, want in zip(map(float, m.groups()[1:]), expected(values)):
        assert abs(got - want) <= 1.5e-3, (got, want)


def test_exact_small_case():
    assert stats("4 1 3 2\n").stdout == (
        "n=4 mean=2.500 median=2.500 stddev=1.118 min=1.000 max=4.000\n"
    )


def test_empty_and_bad_input():
    assert stats("").stdout == "n=0\n"
    res = stats("1 2 x3 4")
    assert res.returncode == 2
    assert "token 3" in res.stderr


def test_second_make_is_noop():
    assert make("-q").returncode == 0, "tree should be up to date after a build"
    before = BIN.stat().st_mtime_ns
    res = make()
    assert res.returncode == 0
    assert "gcc" not in res.stdout
    assert BIN.stat().st_mtime_ns == before


def compiled_sources(dry_run: str) -> set[str]:
    return set(re.findall(r"(\w+)\.c\b", " ".join(l for l in dry_run.splitlines() if " -c" in l)))


@pytest.mark.parametrize(
    "header,sources",
    [("parse.h", {"main", "parse"}), ("stats.h", {"main", "parse", "stats"})],
)
def test_header_change_rebuilds(header, sources):
    time.sleep(1.1)
    (PROJECT / "include" / header).touch()
    assert make("-q").returncode != 0, f"touching {header} must make the tree out of date"
    dry = make("-n")
    assert sources <= compiled_sources(dry.stdout), dry.stdout
    assert make().returncode == 0
    assert BIN.stat().st_mtime_ns > (PROJECT / "include" / header).stat().st_mtime_ns
    assert make("-q").returncode == 0
