"""In-memory tar archives for copying files into and out of a container.

Entries are named relative to ``/`` and extracted there: the engine creates missing parent
directories (root-owned, 0755), and existing directories, never listed in an archive,
keep their owner and mode (listing ``tmp/`` would reset ``/tmp``'s 1777).
"""

from __future__ import annotations

import io
import tarfile
import time
from pathlib import Path, PurePosixPath


def relative(sandbox_path: str) -> PurePosixPath:
    """``sandbox_path`` relative to ``/``.

    Raises:
        ValueError: the path is not absolute, is ``/`` itself, or holds ``..``.
    """
    path = PurePosixPath(sandbox_path)
    if not path.is_absolute() or ".." in path.parts or path == PurePosixPath("/"):
        raise ValueError(f"sandbox path must be absolute, below /, without '..': {sandbox_path!r}")
    return path.relative_to("/")


def _as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def dir_archive(local_dir: Path, sandbox_dir: str) -> bytes:
    """A tar of ``local_dir``'s contents placed under ``sandbox_dir``, owned by root.

    Args:
        local_dir: the directory to copy (its modes are kept).
        sandbox_dir: the absolute target directory in the container.

    Returns:
        the tar bytes, to extract at ``/``.

    Raises:
        FileNotFoundError: ``local_dir`` is not a directory.
        ValueError: a bad ``sandbox_dir``.
    """
    local_dir = Path(local_dir)
    if not local_dir.is_dir():
        raise FileNotFoundError(f"{local_dir}: not a directory")
    return copies_archive([(local_dir, sandbox_dir)])


def copies_archive(items: list[tuple[Path, str]]) -> bytes:
    """One tar of several copies, in order, owned by root, to extract at ``/``.

    Args:
        items: ``(local path, sandbox path)`` pairs: a file lands at its sandbox path with
            its local mode; a directory's contents land under its sandbox path (as
            :func:`dir_archive`).

    Returns:
        the tar bytes.

    Raises:
        ValueError: a bad sandbox path.
        OSError: a local path cannot be read.
    """
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for local, sandbox_path in items:
            dest = relative(sandbox_path)
            if not local.is_dir():
                _add(tar, local, str(dest))
                continue
            entries = sorted(local.rglob("*"))
            if not entries:
                # an empty directory still has to appear in the sandbox
                info = tarfile.TarInfo(str(dest))
                info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
                tar.addfile(_as_root(info))
            for path in entries:
                _add(tar, path, str(dest / path.relative_to(local).as_posix()))
    return buf.getvalue()


def _add(tar: tarfile.TarFile, path: Path, arcname: str) -> None:
    info = _as_root(tar.gettarinfo(str(path), arcname=arcname))
    if info.isreg():
        with path.open("rb") as fh:
            tar.addfile(info, fh)
    else:
        tar.addfile(info)


def file_archive(sandbox_path: str, data: bytes, mode: int = 0o644) -> bytes:
    """A tar holding one root-owned file at ``sandbox_path`` (to extract at ``/``).

    Raises:
        ValueError: a bad ``sandbox_path``.
    """
    info = tarfile.TarInfo(str(relative(sandbox_path)))
    info.size, info.mode, info.mtime = len(data), mode, int(time.time())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.addfile(_as_root(info), io.BytesIO(data))
    return buf.getvalue()


def single_file(archive: bytes) -> bytes | None:
    """The bytes of the first entry of a tar, or None when it is not a regular file."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as tar:
        member = tar.next()
        if member is None or not member.isreg():
            return None
        fh = tar.extractfile(member)
        return fh.read() if fh is not None else b""
