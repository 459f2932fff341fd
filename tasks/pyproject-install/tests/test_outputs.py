"""Checks for pyproject-install: a real (non-editable) offline install that works from anywhere."""

import collections
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

PKG = Path("/app/textstats")
SOURCES = {
    "src/textstats/__init__.py": "d2870e99e0e8819b6554cbf4bf5373a3db70a72ff867c97eb881670037b5360c",
    "src/textstats/cli.py": "a8c39e77efc9034bd0f2c72d4bc7e01ab69cdd5e70c8713530f873f0987eb8ae",
    "src/textstats/core.py": "610bf246bdd426d42f2847a39b7d6e231a8fea3db5240d2c1cce105677bbd38f",
    "src/textstats/data/stopwords.txt": "dd585e82afdd8ad6170ad5c2f58847ea384eea2cc9f5ee351396315cfccea959",
}
STOP = {"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "has", "he", "in", "is", "it",
        "its", "of", "on", "or", "she", "that", "the", "they", "this", "to", "was", "were", "will", "with"}
WORDS = ["the", "cat", "dog", "and", "bird", "is", "fish", "a", "tree", "it's", "Cat", "DOG", "with", "owl"]


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    return env


def run(args: list[str], cwd: str = "/tmp", timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def reference(text: str, top: int, keep: bool) -> str:
    words = (m.group(0).lower() for m in re.finditer(r"[^\W\d_]+(?:'[^\W\d_]+)*", text))
    counts = collections.Counter(w for w in words if keep or w not in STOP)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return "".join(f"{c} {w}\n" for w, c in ranked)


def test_python_code_unchanged():
    for rel, digest in SOURCES.items():
        assert hashlib.sha256((PKG / rel).read_bytes()).hexdigest() == digest, rel


def test_installed_regular_install():
    code = ("import importlib.metadata as m, json, textstats; "
            "d = m.distribution('textstats'); "
            "print(json.dumps([m.version('textstats'), textstats.__file__, d.read_text('direct_url.json')]))")
    res = run(["python3", "-c", code])
    assert res.returncode == 0, res.stderr
    version, module_file, direct_url = json.loads(res.stdout)
    assert version == "0.3.0"
    assert not module_file.startswith("/app/"), f"imported from the source tree: {module_file}"
    if direct_url:
        assert not json.loads(direct_url).get("dir_info", {}).get("editable", False)


def test_cli_on_path_with_stopwords(tmp_path):
    assert shutil.which("textstats", path=clean_env()["PATH"])
    rng = random.Random(7)
    text = " ".join(rng.choice(WORDS) for _ in range(500)) + "\n"
    f = tmp_path / "in.txt"
    f.write_text(text)
    res = run(["textstats", "--top", "4", str(f)])
    assert res.returncode == 0, res.stderr
    assert res.stdout == reference(text, 4, keep=False)
    res = run(["textstats", "--keep-stopwords", str(f), str(f)])
    assert res.returncode == 0, res.stderr
    assert res.stdout == reference(text + text, 10, keep=True)


def test_offline_build_metadata(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(PKG, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "dist"))
    res = run(["pip", "wheel", "--no-index", "--no-build-isolation", "--no-deps", "-w", str(tmp_path / "w"), str(src)])
    assert res.returncode == 0, res.stdout + res.stderr
    (wheel,) = (tmp_path / "w").glob("textstats-0.3.0-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert "textstats/data/stopwords.txt" in names
        meta = zf.read("textstats-0.3.0.dist-info/METADATA").decode()
        entry = zf.read("textstats-0.3.0.dist-info/entry_points.txt").decode()
    assert "Requires-Dist" not in meta
    assert re.search(r"^textstats\s*=\s*textstats\.cli:main\s*$", entry, re.M)


def test_install_command_succeeds(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(PKG, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "dist"))
    res = run(["pip", "install", "--no-index", "--no-build-isolation", "--target", str(tmp_path / "t"), str(src)])
    assert res.returncode == 0, res.stdout + res.stderr
    assert (tmp_path / "t" / "textstats" / "data" / "stopwords.txt").is_file()
