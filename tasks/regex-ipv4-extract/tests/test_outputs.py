"""Checks for regex-ipv4-extract: extract_ips.sh on hidden inputs and /app/ips.txt."""

import ipaddress
import random
import re
import subprocess
from pathlib import Path

import pytest

SCRIPT = "/app/extract_ips.sh"
OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
ADDRESS = re.compile(rf"(?<![A-Za-z0-9_.]){OCTET}(?:\.{OCTET}){{3}}(?![A-Za-z0-9_]|\.[0-9])")
NOTES_EXPECTED = """0.0.0.0
1.1.1.1
2.2.2.2
8.8.4.4
8.8.8.8
9.9.0.1
9.9.9.9
9.10.0.1
10.0.0.1
10.0.0.2
10.0.0.9
10.0.0.60
10.20.30.40
10.20.30.41
100.64.0.1
149.112.112.112
172.16.0.0
172.16.0.1
192.168.10.5
192.168.10.15
192.168.10.150
198.51.100.23
203.0.113.7
255.255.255.255
"""


def reference(text: str) -> str:
    found = {m.group(0) for m in ADDRESS.finditer(text)}
    return "".join(f"{a}\n" for a in sorted(found, key=lambda a: ipaddress.IPv4Address(a)))


def run(text: str) -> subprocess.CompletedProcess:
    return subprocess.run([SCRIPT], input=text.encode(), capture_output=True, timeout=20, cwd="/tmp")


def test_reference_agrees_with_notes():
    assert reference(Path("/app/data/notes.txt").read_text()) == NOTES_EXPECTED


def test_ips_txt():
    assert Path("/app/ips.txt").read_text() == NOTES_EXPECTED


def test_script_on_notes():
    res = run(Path("/app/data/notes.txt").read_text())
    assert res.returncode == 0
    assert res.stdout.decode() == NOTES_EXPECTED


@pytest.mark.parametrize(
    "text",
    [
        "",
        "no addresses here\n",
        "a 1.2.3.4.\n",
        "x 4.3.2.1 and 1.2.3.4 and 1.2.3.4\n",
        "1.2.3.4",
        "1.2.3.4\n5.6.7.8",
        "199.9.9.9 1.2.3.04 1.2.3.40 01.2.3.4 1.2.3.256 1.2.3.25\n",
        "12.34.56.789 12.34.56.78.\n.11.22.33.44 11.22.33.44.x\n",
        "_5.5.5.5 5.5.5.6_ Z5.5.5.7 5.5.5.8z (5.5.5.9) 5.5.5.10,5.5.5.11;\n",
        "3.3.3.3.3.3 3.3.3.3..4 0.0.0.0:80 255.255.255.254/31\n",
        "mixed\t250.251.252.253\r\nend 249.0.0.1-249.0.0.2\n",
    ],
)
def test_edge_cases(text):
    res = run(text)
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode() == reference(text)


@pytest.mark.parametrize("seed", range(4))
def test_random_text(seed):
    rng = random.Random(seed)
    pieces = []
    for _ in range(400):
        kind = rng.random()
        if kind < 0.5:
            pieces.append(".".join(str(rng.choice([0, 1, 9, 10, 99, 100, 199, 200, 249, 250, 255, 256, 300]))
                                   if rng.random() < 0.9 else "0" + str(rng.randint(0, 9))
                                   for _ in range(rng.choice([3, 4, 4, 4, 5]))))
        else:
            pieces.append(rng.choice(["a", "_", ".", " ", "\n", ":", "/", "-", "x1", "(", ")", ",", "\t"]))
    text = "".join(pieces)
    res = run(text)
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode() == reference(text)
