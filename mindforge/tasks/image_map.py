"""The image map: public base-image references -> locally built images.

Public task Dockerfiles start ``FROM`` registry images; a host without registry access
builds them from local images instead (docs/tasks.md, "Base images and
the image map"). The map is a TOML file (``deploy/image_map.toml``; schema in its comments)::

    [map]                         # exact references
    "ubuntu:24.04" = "mindforge/base:bookworm"

    [[pattern]]                   # fnmatch globs, tried in file order
    match = "python:3*"
    image = "mindforge/base:bookworm"

Several files stack into layers: a later file (the user's) is consulted before an earlier
one (the repo's), and inside a layer exact entries win over patterns. References are
compared in Docker's normal form: ``docker.io/library/ubuntu:24.04`` and ``ubuntu:24.04``
are the same, a missing tag means ``latest``, and a digest (``@sha256:...``) is matched
with and without it.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from mindforge.errors import InputError
from mindforge.settings import Settings, get_settings
from mindforge.tasks.loader import input_error_from_validation
from mindforge.tomlfile import read_toml

USER_IMAGE_MAP_NAME = "image_map.toml"

_ImageRef = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, pattern=r"^\S+$")]
_DOCKER_HUB = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})

_FROM = re.compile(
    r"^(?P<lead>\s*FROM\s+)(?P<flags>(?:--\S+\s+)*)(?P<image>\S+)(?P<rest>.*)$", re.IGNORECASE
)
_AS = re.compile(r"^\s+AS\s+(?P<name>\S+)", re.IGNORECASE)
_ARG = re.compile(r"^\s*ARG\s+(?P<body>.+)$", re.IGNORECASE)
_ESCAPE = re.compile(r"^\s*#\s*escape\s*=\s*(?P<char>\S)\s*$", re.IGNORECASE)
_DIRECTIVE = re.compile(r"^\s*#\s*\w+\s*=")
_HEREDOC = re.compile(r"<<(?P<dash>-?)(?P<quote>[\"']?)(?P<word>[A-Za-z_][A-Za-z0-9_]*)(?P=quote)")
_HEREDOC_INSTRUCTIONS = frozenset({"RUN", "COPY", "ADD"})
_VAR = re.compile(r"\$(?:\{(?P<braced>\w+)(?::?-(?P<default>[^}]*))?\}|(?P<bare>\w+))")


class _PatternRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    match: _ImageRef
    image: _ImageRef


class _ImageMapFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    map: dict[str, _ImageRef] = {}
    pattern: list[_PatternRule] = []


def normalize_ref(ref: str) -> str:
    """Docker's normal form of an image reference, short for Docker Hub.

    ``docker.io/library/ubuntu`` -> ``ubuntu:latest``; ``python:3.12@sha256:ab`` is kept
    as is; a registry host (a first component with ``.`` or ``:``, or ``localhost``) is kept.
    """
    name, _, digest = ref.strip().partition("@")
    tag = ""
    last_slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > last_slash:
        name, tag = name[:colon], name[colon + 1 :]
    parts = name.split("/")
    if len(parts) > 1 and parts[0] in _DOCKER_HUB:
        parts = parts[1:]
    if len(parts) == 2 and parts[0] == "library":
        parts = parts[1:]
    out = "/".join(parts)
    if tag:
        out += f":{tag}"
    elif not digest:
        out += ":latest"
    return f"{out}@{digest}" if digest else out


def _candidates(ref: str) -> list[str]:
    """Forms of ``ref`` to look up, most specific first."""
    ref = ref.strip()
    norm = normalize_ref(ref)
    forms = [ref, norm]
    if "@" in norm:
        bare = normalize_ref(norm.split("@", 1)[0])
        forms.append(bare)
    return list(dict.fromkeys(forms))


@dataclass(frozen=True)
class ImageMapLayer:
    """One map file: exact entries (keys in normal form) and ordered glob patterns."""

    source: str
    exact: dict[str, str] = field(default_factory=dict)
    patterns: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ImageMap:
    """Public image reference -> local image, as layers (highest priority first)."""

    layers: tuple[ImageMapLayer, ...] = ()

    def merged(self, other: ImageMap) -> ImageMap:
        """A map where ``other``'s entries are consulted before this one's."""
        return ImageMap(other.layers + self.layers)

    def resolve(self, ref: str) -> str | None:
        """The local image for ``ref``, or None when no entry maps it.

        Args:
            ref: an image reference as written after ``FROM`` (``ubuntu:24.04``,
                ``docker.io/library/python:3.12-slim@sha256:...``).

        Returns:
            The mapped image reference, or None.
        """
        forms = _candidates(ref)
        for layer in self.layers:
            for form in forms:
                if form in layer.exact:
                    return layer.exact[form]
            for match, image in layer.patterns:
                if any(fnmatch.fnmatchcase(form, match) for form in forms):
                    return image
        return None

    def rewrite_dockerfile(self, text: str) -> tuple[str, list[tuple[str, str]]]:
        """Point the ``FROM`` lines of a Dockerfile at mapped local images.

        Handles ``FROM [--platform=...] image[:tag][@digest] [AS name]`` (any case),
        keeps stage names, drops ``--platform`` from a rewritten line (the local image
        exists for the host's platform only), never rewrites a ``FROM`` naming an
        earlier stage or ``scratch``, expands ``$VAR``/``${VAR}`` from ``ARG`` defaults
        declared before the first ``FROM``, and skips lines inside line continuations and
        heredocs (so a ``from x import y`` line in a ``RUN`` script is left alone).

        Args:
            text: the Dockerfile.

        Returns:
            The new text (identical line endings) and the substitutions made, as
            ``(original reference, local image)`` pairs in file order.
        """
        out: list[str] = []
        subs: list[tuple[str, str]] = []
        escape = "\\"
        in_directives = True
        continuing = False
        heredocs: list[tuple[str, bool]] = []
        instruction = ""
        stages: set[str] = set()
        args: dict[str, str | None] = {}
        seen_from = False
        for line in text.splitlines(keepends=True):
            body = line.rstrip("\r\n")
            ending = line[len(body) :]
            stripped = body.strip()
            if heredocs:
                word, dash = heredocs[0]
                if (body.lstrip("\t") if dash else body) == word:
                    heredocs.pop(0)
                out.append(line)
                continue
            if in_directives:
                escape_match = _ESCAPE.match(body)
                if escape_match:
                    escape = escape_match["char"]
                if not _DIRECTIVE.match(body):
                    in_directives = False
            if not stripped or stripped.startswith("#"):
                out.append(line)
                continue
            if not continuing:
                instruction = stripped.split(None, 1)[0].upper()
                if instruction == "FROM":
                    body = self._rewrite_from(body, args, stages, subs)
                    seen_from = True
                elif instruction == "ARG" and not seen_from:
                    _record_args(body, args)
            if instruction in _HEREDOC_INSTRUCTIONS:
                heredocs.extend((m["word"], bool(m["dash"])) for m in _HEREDOC.finditer(body))
            continuing = body.rstrip().endswith(escape)
            out.append(body + ending)
        return "".join(out), subs

    def _rewrite_from(
        self,
        body: str,
        args: dict[str, str | None],
        stages: set[str],
        subs: list[tuple[str, str]],
    ) -> str:
        match = _FROM.match(body)
        if not match:
            return body
        image, rest = match["image"], match["rest"]
        as_match = _AS.match(rest)
        ref = _expand(image, args) if "$" in image else image
        new_body = body
        if ref is not None and ref.lower() not in stages and ref.lower() != "scratch":
            local = self.resolve(ref)
            if local is not None and local != ref:
                # The local image has the host's platform only: a pinned --platform
                # would make Docker look for another variant in a registry.
                flags = "".join(
                    f"{flag} " for flag in match["flags"].split()
                    if not flag.lower().startswith("--platform")
                )
                new_body = f"{match['lead']}{flags}{local}{rest}"
                subs.append((ref, local))
        if as_match:
            stages.add(as_match["name"].lower())
        return new_body


def _record_args(body: str, args: dict[str, str | None]) -> None:
    match = _ARG.match(body)
    if not match:
        return
    for item in match["body"].split():
        name, eq, value = item.partition("=")
        args[name] = value.strip("\"'") if eq else None


def _expand(image: str, args: dict[str, str | None]) -> str | None:
    """``image`` with ``$VAR``/``${VAR}``/``${VAR:-default}`` filled in, or None if unknown."""
    unknown = False

    def fill(m: re.Match[str]) -> str:
        nonlocal unknown
        name = m["braced"] or m["bare"]
        value = args.get(name)
        if value:
            return value
        if m["default"] is not None:
            return m["default"]
        unknown = True
        return ""

    expanded = _VAR.sub(fill, image)
    return None if unknown or not expanded else expanded


def _load_layer(path: Path) -> ImageMapLayer:
    data = read_toml(path)
    try:
        parsed = _ImageMapFile.model_validate(data)
    except ValidationError as exc:
        raise input_error_from_validation(path, exc) from exc
    exact: dict[str, str] = {}
    for key, image in parsed.map.items():
        if not key.strip() or any(c.isspace() for c in key.strip()):
            raise InputError(path, f"map.{key}", "an image reference without spaces is needed")
        exact[normalize_ref(key)] = image
    patterns = tuple((rule.match, rule.image) for rule in parsed.pattern)
    return ImageMapLayer(source=str(path), exact=exact, patterns=patterns)


def load_image_map(path: Path, user_path: Path | None = None) -> ImageMap:
    """Load the repo's image map and stack an optional user file on top.

    Args:
        path: the base map (``settings.image_map_file``, i.e. ``deploy/image_map.toml``).
        user_path: a user map whose entries are consulted first (see
            :func:`default_image_map` for the usual place).

    Returns:
        The stacked map.

    Raises:
        InputError: a file is missing or malformed, or an entry is not a string image
            reference (the error names the file and the key).
    """
    image_map = ImageMap((_load_layer(Path(path)),))
    if user_path is not None:
        image_map = image_map.merged(ImageMap((_load_layer(Path(user_path)),)))
    return image_map


def default_image_map(settings: Settings | None = None) -> ImageMap:
    """The map this machine uses: ``settings.image_map_file`` plus the user's file.

    The user's file is ``$MINDFORGE_DATA_DIR/image_map.toml`` (``settings.data_dir``),
    read when it exists; its entries win over the repo's.

    Args:
        settings: the settings (default :func:`~mindforge.settings.get_settings`).

    Returns:
        The stacked map.

    Raises:
        InputError: as :func:`load_image_map`.
    """
    settings = settings or get_settings()
    user = settings.data_dir / USER_IMAGE_MAP_NAME
    return load_image_map(settings.image_map_file, user if user.is_file() else None)
