"""Build a directory once, atomically, so that several processes may ask for it at once.

Used for the model directories MindForge derives locally (the tiny model, a GGUF file
dequantised into a plain Hugging Face directory): a reader either sees no directory or
a complete one, never a half-written one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def build_once(target: Path, is_current: Callable[[Path], bool], build: Callable[[Path], object]) -> Path:
    """Return ``target``, building it first unless ``is_current(target)`` holds.

    The build writes into a private temporary directory beside ``target`` which is then
    renamed into place (a rename within one file system is atomic); when two processes
    build at once, the first rename wins and the other copy is discarded. A stale
    ``target`` (present but not current) is removed before the rename.

    Args:
        target: the directory to provide.
        is_current: whether a directory holds a complete, up-to-date build.
        build: writes a complete build into the (existing, empty) directory it is given;
            what it returns is ignored.

    Returns:
        ``target``.

    Raises:
        OSError: the rename failed and no current copy appeared meanwhile.
        Exception: whatever ``build`` raises (the temporary directory is removed).
    """
    target = Path(target)
    if is_current(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        build(tmp)
        tmp.chmod(0o755)  # mkdtemp made it private; the build is for every reader (workers, servers)
        if target.exists() and not is_current(target):
            shutil.rmtree(target, ignore_errors=True)  # stale version
        try:
            os.rename(tmp, target)
        except OSError:
            if not is_current(target):  # lost a race to a broken copy
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
