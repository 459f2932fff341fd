"""Reading TOML input files: every failure is an :class:`~mindforge.errors.InputError`.

One reader for the TOML files users hand MindForge (``task.toml``, ``family.toml``,
``settings.toml``, the image map): a missing file, a directory, unreadable bytes, text
that is not UTF-8, malformed TOML (with line and column) and nesting too deep for the
parser each become an ``InputError`` naming the file; nothing else escapes.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from mindforge.errors import InputError

_TOML_POS = re.compile(r"\(at line (\d+), column (\d+)\)")


def loads_toml(text: str, path: object) -> dict[str, Any]:
    """Parse TOML text read from ``path``.

    Args:
        text: the document.
        path: the file it came from (named in errors).

    Returns:
        The parsed table.

    Raises:
        InputError: malformed TOML (the reason gives line and column), or arrays and
            inline tables nested too deep to parse.
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = _TOML_POS.search(message)
        if match:
            detail = _TOML_POS.sub("", message).strip()
            reason = f"malformed TOML at line {match[1]}, column {match[2]}: {detail}"
        else:
            reason = f"malformed TOML: {message}"
        raise InputError(path, "", reason) from exc
    except RecursionError:
        # tomllib parses nested arrays recursively; a hostile file can nest past the stack
        raise InputError(path, "", "malformed TOML: arrays or inline tables nested too deep") from None


def read_toml(path: Path) -> dict[str, Any]:
    """Read and parse a TOML file.

    Args:
        path: the file.

    Returns:
        The parsed table.

    Raises:
        InputError: the file is missing (or not a regular file), unreadable, not UTF-8,
            or not TOML (:func:`loads_toml`).
    """
    if not path.is_file():
        raise InputError(path, "", "missing file")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, "", f"not UTF-8 text (byte {exc.start})") from exc
    except OSError as exc:
        raise InputError(path, "", f"cannot read file: {exc.strerror or exc}") from exc
    return loads_toml(text, path)
