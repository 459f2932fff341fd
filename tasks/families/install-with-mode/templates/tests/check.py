"""Verifier: every copy is there, with its content and exactly the mode asked for."""
import stat
import sys
from pathlib import Path

sys.path.insert(0, "/tests")
import gen  # noqa: E402

for name, text in gen.contents().items():
    copy, orig = Path("/app/tools") / name, Path("/app/staging") / name
    if not copy.is_file() or copy.read_text() != text:
        sys.exit(f"{copy} missing or changed")
    if stat.S_IMODE(copy.stat().st_mode) != gen.MODE:
        sys.exit(f"{copy} has mode {oct(stat.S_IMODE(copy.stat().st_mode))}")
    if not orig.is_file() or stat.S_IMODE(orig.stat().st_mode) != 0o664:
        sys.exit(f"{orig} was changed")
sys.exit(0)
