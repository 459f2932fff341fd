"""Content hash of a task directory.

The hash keys the task's image cache (``Task.image_tag``) and the store's task records,
so it must be the same on every machine for the same files and change whenever any file
changes. It ignores file times, owners and modes, and Python byte-code caches.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from mindforge.errors import InputError

_SKIP_DIRS = frozenset({"__pycache__"})
_SKIP_SUFFIXES = (".pyc",)
_CHUNK_BYTES = 1 << 20


def iter_task_files(root: Path) -> list[tuple[str, Path]]:
    """Every file under ``root`` that the content hash covers, in hashing order.

    Args:
        root: the task directory.

    Returns:
        ``(relative POSIX path, absolute path)`` pairs sorted by the relative path;
        ``__pycache__`` folders and ``*.pyc`` files are left out. Symbolic links are not
        followed: a link is listed as itself.
    """
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
        base = Path(dirpath)
        # Symlinked directories are not descended into (followlinks=False) but must
        # still count: hash them as links.
        entries = filenames + [d for d in dirnames if (base / d).is_symlink()]
        for name in entries:
            if name.endswith(_SKIP_SUFFIXES):
                continue
            full = base / name
            found.append((full.relative_to(root).as_posix(), full))
    found.sort(key=lambda item: item[0])
    return found


def content_hash(root: Path) -> str:
    """sha256 over every file's relative POSIX path and bytes, in sorted path order.

    Each file contributes ``path, NUL, kind, size (8 bytes big-endian), bytes``, so that
    moving bytes between neighbouring files or renaming a file changes the hash. A
    symbolic link contributes its target text instead of the target's bytes.

    Args:
        root: the task directory.

    Returns:
        The hex digest (64 characters).

    Raises:
        InputError: ``root`` is not a directory, a file cannot be read, or a file's
            name is not UTF-8.
    """
    if not root.is_dir():
        raise InputError(root, "", "not a directory")
    digest = hashlib.sha256()
    for rel, full in iter_task_files(root):
        try:
            digest.update(rel.encode("utf-8") + b"\0")
        except UnicodeEncodeError:
            shown = os.fsencode(full).decode("utf-8", "backslashreplace")
            raise InputError(shown, "", "the file name is not UTF-8; rename it") from None
        try:
            if full.is_symlink():
                target = os.fsencode(os.readlink(full))
                digest.update(b"L" + len(target).to_bytes(8, "big") + target)
                continue
            size = full.stat().st_size
            digest.update(b"F" + size.to_bytes(8, "big"))
            with full.open("rb") as fh:
                while chunk := fh.read(_CHUNK_BYTES):
                    digest.update(chunk)
        except OSError as exc:
            raise InputError(full, "", f"cannot read file: {exc.strerror or exc}") from exc
    return digest.hexdigest()
