"""Task families written for a test: a small, valid family whose parts each test can replace."""

from __future__ import annotations

from pathlib import Path

import tomli_w

#: a generator: writes /app/data.txt with ``%%count`` numbered lines (and the truth for the verifier)
GEN_PY = '''"""Inputs of this instance: /app/data.txt."""
import sys
from pathlib import Path

COUNT = %%count
WORD = "%%word"


def lines():
    return [f"{WORD} {i}" for i in range(COUNT)]


def generate(root):
    Path(root, "data.txt").write_text("\\n".join(lines()) + "\\n")


if __name__ == "__main__":
    generate(sys.argv[1])
'''

TEMPLATES = {
    "instruction.md": "Count the lines of /app/data.txt (%%{shout}) and write the number to /app/count.txt.\n",
    "environment/Dockerfile": (
        "FROM mindforge/base:bookworm\nWORKDIR /app\nCOPY gen.py /tmp/gen.py\n"
        "RUN python3 /tmp/gen.py /app && rm /tmp/gen.py\n"
    ),
    "common/gen.py": GEN_PY,
    "tests/check.py": (
        "import sys\nfrom pathlib import Path\n\nsys.path.insert(0, '/tests')\n"
        "import gen  # noqa: E402 - after the sys.path line\n\n"
        "out = Path('/app/count.txt')\n"
        "sys.exit(0 if out.is_file() and out.read_text().strip() == str(len(gen.lines())) else 1)\n"
    ),
    "tests/test.sh": (
        "#!/usr/bin/env bash\nmkdir -p /logs/verifier\n"
        "if python3 /tests/check.py; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
    ),
    "solution/solve.sh": "#!/usr/bin/env bash\nwc -l < /app/data.txt > /app/count.txt\n",
}


def family_doc(name: str, *, count_max: int = 20, words: tuple[str, ...] = ("apple", "pear", "plum")) -> dict:
    """The ``family.toml`` of a small family: ``count`` (1..count_max) and ``word`` (an enum)."""
    return {
        "name": name,
        "category": "text",
        "summary": "Count the lines of a generated file.",
        "schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["count", "word"],
            "properties": {
                "count": {"type": "integer", "minimum": 1, "maximum": count_max},
                "word": {"enum": list(words)},
            },
        },
        "example": {"count": 3, "word": words[0]},
        "difficulty": {"base": 0.0, "weights": {"count": 3.0 / count_max}, "thresholds": [1.0, 2.0]},
        "lookup": {"shout": {"param": "word", "values": {w: w.upper() for w in words}}},
    }


def write_family(root: Path, name: str, doc: dict | None = None, templates: dict[str, str] | None = None) -> Path:
    """Write a family folder ``root/name`` (``family_doc`` and :data:`TEMPLATES` unless given)."""
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "family.toml").write_text(tomli_w.dumps(doc or family_doc(name)))
    for rel, text in (templates or TEMPLATES).items():
        path = folder / "templates" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder
