"""Files carried inside an HCP contract (``[[resources.embedded]]``), checked by sha256, and workspace paths.

An HCP RFC-0002 rule: embedded resources carry a sha256 that is checked on load, and no
path escapes the workspace.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from pathlib import PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

_SHA256_RE = re.compile(r"[0-9a-f]{64}")


def check_relative_path(value: str) -> str:
    """Check that ``value`` is a normalised relative POSIX path that stays in the workspace.

    Raises:
        ValueError: empty, absolute, containing ``..`` or backslashes, or not normalised.
    """
    if not value:
        raise ValueError("empty path")
    if "\\" in value:
        raise ValueError(f"path {value!r} contains a backslash; use '/'")
    pure = PurePosixPath(value)
    if pure.is_absolute():
        raise ValueError(f"path {value!r} is absolute; paths are relative to the workspace root")
    if ".." in pure.parts:
        raise ValueError(f"path {value!r} escapes the workspace ('..')")
    if str(pure) != value or "." in pure.parts:
        raise ValueError(f"path {value!r} is not normalised; write {str(pure)!r}")
    return value


class EmbeddedResource(BaseModel):
    """``[[resources.embedded]]``: a file carried inside the contract, checked by sha256.

    Attributes:
        kind: what it is (``skill``, ``file``, ...).
        path: where it lands, relative to the workspace root; never escapes it.
        encoding: how ``content`` is written: ``utf-8`` text or ``base64``.
        content: the file's content in that encoding.
        sha256: hex sha256 of the decoded bytes, checked on load.
    """

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)

    kind: str = Field(min_length=1)
    path: str
    encoding: Literal["utf-8", "base64"] = "utf-8"
    content: str
    sha256: str

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        return check_relative_path(value)

    @field_validator("content")
    @classmethod
    def _content(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("encoding") == "base64":
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ValueError(f"not valid base64: {exc}") from None
        return value

    @field_validator("sha256")
    @classmethod
    def _sha256(cls, value: str, info: ValidationInfo) -> str:
        if not _SHA256_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not a lowercase hex sha256 (64 characters)")
        if "content" in info.data and "encoding" in info.data:
            actual = hashlib.sha256(_decode(info.data["content"], info.data["encoding"])).hexdigest()
            if actual != value:
                raise ValueError(f"sha256 mismatch: declared {value}, content hashes to {actual}")
        return value

    @property
    def data(self) -> bytes:
        """The decoded bytes of the file."""
        return _decode(self.content, self.encoding)


def _decode(content: str, encoding: str) -> bytes:
    return base64.b64decode(content) if encoding == "base64" else content.encode("utf-8")
