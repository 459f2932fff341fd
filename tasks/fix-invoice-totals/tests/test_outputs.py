"""Checks for fix-invoice-totals: run the fixed invoice.py on hidden inputs.

Expected output comes from a reference implementation of the README written here with
``decimal``; the inputs target the README's edge cases (half-cent rounding, comments,
case-insensitive stable ordering, error exits).
"""

import csv
import io
import json
import random
import re
import subprocess
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

PROGRAM = Path("/app/invoice/invoice.py")
RATES = {"EU": "0.21", "UK": "0.20", "US-CA": "0.0725", "US-OR": "0", "CH": "0.081"}
CENT = Decimal("0.01")


def reference(text: str) -> str:
    customers: dict[str, list] = {}
    for line in text.splitlines()[1:]:
        if not line or line.startswith("#"):
            continue
        name, _sku, qty, price, region = next(csv.reader([line]))
        entry = customers.setdefault(name, [region, Decimal(0)])
        entry[1] += int(qty) * Decimal(price)
    out, grand = [], [Decimal(0)] * 3
    for name in sorted(customers, key=str.lower):  # sorted() is stable
        region, sub = customers[name]
        tax = (sub * Decimal(RATES[region])).quantize(CENT, rounding=ROUND_HALF_UP)
        row = [sub, tax, sub + tax]
        grand = [g + r for g, r in zip(grand, row)]
        out.append("\t".join([name] + [f"{v:.2f}" for v in row]))
    out.append("\t".join(["TOTAL"] + [f"{v:.2f}" for v in grand]))
    return "\n".join(out) + "\n"


def run(tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    f = tmp_path / "orders.csv"
    f.write_text(text)
    return subprocess.run(
        ["python3", str(PROGRAM), str(f)], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
    )


def check_ok(tmp_path: Path, text: str) -> None:
    res = run(tmp_path, text)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == reference(text).splitlines()


HEADER = "customer,sku,quantity,unit_price,region\n"


def test_rates_and_readme_unchanged():
    assert json.loads(Path("/app/invoice/rates.json").read_text()) == RATES


def test_sample_file():
    check_ok(Path("/tmp"), Path("/app/invoice/sample.csv").read_text())


def test_half_cent_rounding(tmp_path):
    text = HEADER + "a,X,1,0.50,EU\nb,X,1,2.50,EU\nc,X,3,1,US-CA\nd,X,1,0.20,US-CA\ne,X,1,12.50,CH\nf,X,7,0.05,UK\n"
    check_ok(tmp_path, text)


def test_first_row_and_comments_and_blanks(tmp_path):
    text = HEADER + "solo,Q,2,9.99,UK\n\n# comment, with commas,1,2,3\nsolo,Q,1,0.01,UK\n"
    check_ok(tmp_path, text)


def test_case_insensitive_stable_order(tmp_path):
    text = HEADER + "beta,A,1,1,EU\nAlpha,A,1,1,EU\nalpha,A,2,1,EU\nALPHA,A,3,1,EU\n\"Gamma, Inc\",A,1,3.33,CH\n"
    check_ok(tmp_path, text)


def test_zero_rate_and_zero_quantity(tmp_path):
    check_ok(tmp_path, HEADER + "oregon,Z,0,99.99,US-OR\noregon,Z,4,0.99,US-OR\nnil,Z,0,5,EU\n")


def test_large_accumulation(tmp_path):
    lines = [HEADER.rstrip("\n")] + ["bulk,B,1000,0.10,CH"] * 37 + ["bulk,B,3,0.01,CH"]
    check_ok(tmp_path, "\n".join(lines) + "\n")


@pytest.mark.parametrize("seed", range(8))
def test_random_orders(tmp_path, seed):
    rng = random.Random(seed)
    names = ["acme", "Acme", "bolt", "Core", "delta", "Echo Co", "foxtrot", "ACME"]
    region_of = {n: rng.choice(sorted(RATES)) for n in names}
    lines = [HEADER.rstrip("\n")]
    for _ in range(rng.randint(5, 60)):
        n = rng.choice(names)
        price = f"{rng.randint(0, 5000)}.{rng.randint(0, 99):02d}" if rng.random() < 0.8 else str(rng.randint(0, 40))
        lines.append(f"{n},S-{rng.randint(1, 9)},{rng.randint(0, 25)},{price},{region_of[n]}")
        if rng.random() < 0.1:
            lines.append("#" + rng.choice(["", " note", "x,1,2,3,EU"]))
    check_ok(tmp_path, "\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "body,bad_line",
    [
        ("a,X,1,1,EU\nb,X,1,1,MARS\n", 3),
        ("a,X,1,1,EU\n# c\n\na,X,2,1,UK\n", 5),
        ("a,X,1.5,1,EU\n", 2),
        ("a,X,1,1,EU\na,X,-1,1,EU\n", 3),
        ("a,X,1,abc,EU\n", 2),
        ("a,X,1,1,EU\n#\na,X,1,1.234,EU\n", 4),
    ],
)
def test_errors_exit_2(tmp_path, body, bad_line):
    res = run(tmp_path, HEADER + body)
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert res.stdout == ""
    assert re.search(rf"(?<!\d){bad_line}(?!\d)", res.stderr), res.stderr
    assert "Traceback" not in res.stderr
