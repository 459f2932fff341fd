"""The instance-steps marker of an ``environment/Dockerfile``: one image per family.

A task family renders many instances whose Dockerfiles differ only in their last lines
(copy the instance's generator in, run it). :func:`insert_marker` puts :data:`MARKER`, a
comment, before the first of those lines; :func:`split_instance_steps` splits a
Dockerfile at it:

* the lines above the marker (the *head*) are the Dockerfile of the *shared image*, built
  once per family and tagged by :func:`shared_env_hash` (the head's text and the bytes of
  every build-context file the head copies, never the instance's files);
* the instructions below it are the *instance steps*, :class:`InstanceStep`: ``COPY src...
  dest`` of files in the build context and ``RUN`` commands (shell or JSON-array form,
  backslash continuations joined), which the sandbox runs when it starts
  (:mod:`mindforge.sandbox.instance`), as ``docker build`` would have.

A Dockerfile with the marker stays a complete Dockerfile: ``docker build`` and Harbor
skip comments and build the whole instance. What the steps cannot do as ``docker build``
does is refused (:func:`split_instance_steps` raises; :func:`insert_marker` then adds no
marker): any instruction but ``COPY`` and ``RUN`` below the marker, ``COPY`` flags
(``--from``, ``--chown``, ...), globs or variables in ``COPY``, here-documents, a source
outside the context, and a head whose last stage has ``ARG`` (build arguments would not
reach the steps) or ``SHELL`` (the steps run ``/bin/sh -c``).

Why not the ``dockerfile-parse`` package: it is not a dependency, and the part it would
do (logical lines) is the small part; what a step means (the ``COPY`` forms, what is
refused) is ours anyway.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict

from mindforge.errors import InputError

#: the marker line (a Dockerfile comment); anything matching :data:`_MARKER_RE` counts
MARKER = "# mindforge: instance steps below run when the sandbox starts (one image per family)"
_MARKER_RE = re.compile(r"^\s*#\s*mindforge:\s*instance steps\b", re.IGNORECASE)
_ESCAPE = re.compile(r"^\s*#\s*escape\s*=\s*(?P<char>\S)\s*$", re.IGNORECASE)
_DIRECTIVE = re.compile(r"^\s*#\s*\w+\s*=")
_HEREDOC = re.compile(r"<<-?[\"']?[A-Za-z_][A-Za-z0-9_]*")
_GLOB = re.compile(r"[*?\[]")
_DOCKERFILE = "environment/Dockerfile"


@dataclass(frozen=True)
class Instruction:
    """One logical Dockerfile instruction.

    Attributes:
        keyword: the instruction in upper case (``RUN``).
        args: the rest, continuation lines joined (escape char and newline dropped).
        line: 1-based number of its first physical line.
        index: 0-based index of that line in ``text.splitlines()``.
    """

    keyword: str
    args: str
    line: int
    index: int


class InstanceStep(BaseModel):
    """One step the sandbox runs at start: a ``COPY`` or a ``RUN`` of the Dockerfile.

    Attributes:
        kind: ``copy`` or ``run``.
        line: its line in ``environment/Dockerfile`` (1-based).
        text: the instruction as written (continuations joined), for messages.
        sources: ``copy``: paths relative to the build context (``environment/``).
        dest: ``copy``: the destination as written (relative = against the image's WORKDIR;
            ending in ``/``, or with several sources, a directory).
        command: ``run`` in shell form: the command for ``/bin/sh -c``.
        argv: ``run`` in JSON-array form: the program and its arguments (no shell).
    """

    model_config = ConfigDict(frozen=True)

    kind: Literal["copy", "run"]
    line: int
    text: str
    sources: tuple[str, ...] = ()
    dest: str = ""
    command: str = ""
    argv: tuple[str, ...] = ()


@dataclass(frozen=True)
class InstanceSplit:
    """A Dockerfile split at its marker.

    Attributes:
        head: the lines above the marker, verbatim: the shared image's Dockerfile.
        steps: the instructions below it, in order.
    """

    head: str
    steps: tuple[InstanceStep, ...]


def parse_instructions(text: str) -> list[Instruction]:
    """The logical instructions of a Dockerfile, in order.

    Comment and blank lines are skipped (inside a continuation too, as Docker does), the
    ``# escape=`` directive is honoured, and here-document bodies are not read as
    instructions.

    Args:
        text: the Dockerfile.

    Returns:
        One :class:`Instruction` per logical line.
    """
    escape, in_directives = "\\", True
    out: list[Instruction] = []
    parts: list[str] = []
    start = 0
    heredoc_ends: list[str] = []
    for index, line in enumerate(text.splitlines()):
        if heredoc_ends:
            if line.strip() == heredoc_ends[0]:
                heredoc_ends.pop(0)
            continue
        if in_directives:
            match = _ESCAPE.match(line)
            escape = match["char"] if match else escape
            in_directives = bool(_DIRECTIVE.match(line))
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not parts:
            start = index
        continuing = stripped.endswith(escape)
        parts.append(stripped[:-1] if continuing else stripped)
        if continuing:
            continue
        keyword, _, args = " ".join(parts).partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start + 1, start))
        if keyword.upper() in ("RUN", "COPY", "ADD"):
            heredoc_ends = [m.lstrip("<-").strip("\"'") for m in _HEREDOC.findall(args)]
        parts = []
    if parts:
        keyword, _, args = " ".join(parts).partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start + 1, start))
    return out


def _json_list(args: str) -> list[str] | None:
    """``args`` as a JSON array of strings, or None when it is not one (the shell form)."""
    if not args.startswith("["):
        return None
    try:
        value = json.loads(args)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def _step(ins: Instruction, context: Path | None, path: Path) -> InstanceStep:
    """One instruction below the marker as a step.

    Raises:
        InputError: see :func:`split_instance_steps`.
    """
    where, text = f"line {ins.line}", f"{ins.keyword} {ins.args}"
    if _HEREDOC.search(ins.args):
        raise InputError(path, where, "unsupported below the instance-steps marker: a here-document")
    if ins.keyword == "RUN":
        argv = _json_list(ins.args)
        if ins.args.startswith("--"):
            raise InputError(path, where, f"unsupported below the instance-steps marker: RUN flags ({text})")
        if argv is not None:
            return InstanceStep(kind="run", line=ins.line, text=text, argv=tuple(argv))
        return InstanceStep(kind="run", line=ins.line, text=text, command=ins.args)
    if ins.keyword != "COPY":
        raise InputError(
            path, where, f"only COPY and RUN may follow the instance-steps marker (got {ins.keyword})"
        )
    words = _json_list(ins.args) or ins.args.split()
    reason = _copy_problem(words, context)
    if reason:
        raise InputError(path, where, f"{reason} ({text})")
    return InstanceStep(kind="copy", line=ins.line, text=text, sources=tuple(words[:-1]), dest=words[-1])


def _copy_problem(words: list[str], context: Path | None) -> str:
    """Why a ``COPY`` below the marker cannot run as a step, or ``""``."""
    if any(w.startswith("--") for w in words):
        return "unsupported below the instance-steps marker: COPY flags"
    if len(words) < 2:
        return "COPY needs a source and a destination"
    if any("$" in w for w in words):
        return "unsupported below the instance-steps marker: variables in COPY"
    for src in words[:-1]:
        if _GLOB.search(src):
            return f"unsupported below the instance-steps marker: a glob in COPY source {src!r}"
        rel = PurePosixPath(src)
        if rel.is_absolute() or ".." in rel.parts:
            return f"COPY source {src!r} is not inside the build context (environment/)"
        if context is not None and not (context / rel).exists():
            return f"COPY source {src!r} is not in the build context (environment/)"
    return ""


def split_instance_steps(text: str, path: Path, context: Path | None = None) -> InstanceSplit | None:
    """Split a Dockerfile at :data:`MARKER`.

    Args:
        text: the Dockerfile.
        path: its path, for errors (``<task>/environment/Dockerfile``).
        context: the build context (``environment/``); when given, every ``COPY``
            source below the marker must exist in it.

    Returns:
        None when there is no marker; else the head and the steps.

    Raises:
        InputError: naming ``path``, the field ``line <n>`` and the reason: an
            instruction other than ``COPY``/``RUN`` below the marker, a ``COPY`` the
            steps cannot run (flags, globs, variables, a source outside or missing from
            the context), a here-document, a second marker, no ``FROM`` above it, or a
            last head stage with ``ARG`` or ``SHELL``.
    """
    lines = text.splitlines(keepends=True)
    marks = [i for i, line in enumerate(lines) if _MARKER_RE.match(line)]
    if not marks:
        return None
    if len(marks) > 1:
        raise InputError(path, f"line {marks[1] + 1}", "a second instance-steps marker")
    head = "".join(lines[: marks[0]])
    _check_head(parse_instructions(head), path, marks[0] + 1)
    offset = marks[0] + 1
    steps = []
    for ins in parse_instructions("".join(lines[offset:])):
        ins = Instruction(ins.keyword, ins.args, ins.line + offset, ins.index + offset)
        steps.append(_step(ins, context, path))
    return InstanceSplit(head=head, steps=tuple(steps))


def _check_head(head: list[Instruction], path: Path, marker_line: int) -> None:
    froms = [i for i, ins in enumerate(head) if ins.keyword == "FROM"]
    if not froms:
        raise InputError(path, f"line {marker_line}", "no FROM above the instance-steps marker")
    for ins in head[froms[-1]:]:
        if ins.keyword in ("ARG", "SHELL"):
            why = "build arguments do not reach" if ins.keyword == "ARG" else "the steps run /bin/sh -c, not"
            raise InputError(
                path, f"line {ins.line}", f"{ins.keyword} above the instance-steps marker: {why} the instance steps"
            )


def insert_marker(text: str, instance_files: Collection[str]) -> str | None:
    """``text`` with :data:`MARKER` before the first ``COPY``/``ADD`` of an instance file.

    Args:
        text: a rendered Dockerfile without a marker.
        instance_files: paths, relative to the build context, of the instance's own
            files (a family's ``templates/common/`` files).

    Returns:
        The new text; None when no ``COPY``/``ADD`` names an instance file, or when what
        follows it cannot run as instance steps (:func:`split_instance_steps` refuses:
        an ``ADD``, ``ENV``, ``USER``, a ``COPY`` flag, ...); the instance then builds
        its own image.
    """
    wanted = {PurePosixPath(f).as_posix() for f in instance_files}
    for ins in parse_instructions(text):
        if ins.keyword not in ("COPY", "ADD"):
            continue
        words = _json_list(ins.args) or ins.args.split()
        if not any(PurePosixPath(w).as_posix() in wanted for w in words[:-1] if not w.startswith("--")):
            continue
        lines = text.splitlines(keepends=True)
        newline = "\r\n" if lines[ins.index].endswith("\r\n") else "\n"
        marked = "".join(lines[: ins.index]) + MARKER + newline + "".join(lines[ins.index:])
        try:
            split_instance_steps(marked, Path(_DOCKERFILE))
        except InputError:
            return None
        return marked
    return None


def head_copy_sources(head: str) -> list[str]:
    """The build-context sources every ``COPY``/``ADD`` of ``head`` names (not ``--from`` ones)."""
    out: list[str] = []
    for ins in parse_instructions(head):
        if ins.keyword not in ("COPY", "ADD"):
            continue
        words = _json_list(ins.args) or ins.args.split()
        if any(w.startswith("--from") for w in words):
            continue
        out.extend(w for w in words[:-1] if not w.startswith("--"))
    return out


def shared_env_hash(head: str, context: Path) -> str:
    """sha256 hex of the head's text and the bytes of every context file it copies.

    A source that is a directory counts with every file under it, a glob with every
    file it matches (relative path and bytes, sorted); a missing source counts as its
    name only (the build then fails on it). The instance's files are never read.

    Args:
        head: the shared image's Dockerfile (:attr:`InstanceSplit.head`).
        context: the build context (``environment/``).

    Returns:
        The hex digest (64 characters).
    """
    digest = hashlib.sha256(b"head\0" + head.encode("utf-8"))
    files: set[Path] = set()
    for src in head_copy_sources(head):
        matches = sorted(context.glob(src)) if _GLOB.search(src) else [context / src]
        for match in matches:
            files.update([match] if match.is_file() else (p for p in match.rglob("*") if p.is_file()))
    for file in sorted(files):
        data = file.read_bytes()
        digest.update(file.relative_to(context).as_posix().encode("utf-8") + b"\0")
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()
