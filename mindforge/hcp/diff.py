"""Key-path diffs between two HCP contracts, as records and as readable text.

Every contract in a lineage has a parent and a diff that explains it (docs/design.md);
this module computes that diff over the full documents, unknown sections included.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from mindforge.hcp.model import HCPContract

#: strings longer than this (characters), or spanning lines, are shown as a unified diff
LONG_STRING_CHARS = 80
_SHOW_CHARS = 120


class ContractChange(BaseModel):
    """One changed key path.

    Attributes:
        key: dotted TOML key path (``tools.allow``, ``resources.embedded[0].content``).
        old: the value in the first contract, None when absent there.
        new: the value in the second contract, None when absent there.
    """

    model_config = ConfigDict(frozen=True)

    key: str
    old: Any = None
    new: Any = None

    @property
    def kind(self) -> str:
        """``added``, ``removed`` or ``changed``."""
        if self.old is None:
            return "added"
        if self.new is None:
            return "removed"
        return "changed"


def flatten(document: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Map every leaf of a document to its key path, in document order.

    Tables are descended into, as are arrays of tables (``a.b[0].c``); other arrays
    and empty tables are leaves.
    """
    out: dict[str, Any] = {}
    for key, value in document.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            out.update(flatten(value, path))
        elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            for index, item in enumerate(value):
                out.update(flatten(item, f"{path}[{index}]"))
        else:
            out[path] = value
    return out


def diff_contracts(a: HCPContract, b: HCPContract, *, include_identity: bool = True) -> list[ContractChange]:
    """Key paths whose value differs between ``a`` and ``b``.

    Args:
        a: the old contract (e.g. the parent).
        b: the new contract (e.g. the child).
        include_identity: also report ``[mindforge]`` (name, revision, parent, edit,
            description), which differ along every lineage step.

    Returns:
        the changes, in ``a``'s document order followed by keys only in ``b``.
    """
    flat_a, flat_b = flatten(a.to_document()), flatten(b.to_document())
    keys = list(flat_a) + [key for key in flat_b if key not in flat_a]
    changes = []
    for key in keys:
        if not include_identity and key.startswith("mindforge."):
            continue
        old, new = flat_a.get(key), flat_b.get(key)
        if _is_empty_container_of(key, old, flat_b) or _is_empty_container_of(key, new, flat_a):
            continue  # [] -> [[a.b]] tables: the added tables' keys say it all
        # compare with types: TOML 1 and 1.0 (and True) are different values
        if type(old) is not type(new) or old != new:
            changes.append(ContractChange(key=key, old=old, new=new))
    return changes


def _is_empty_container_of(key: str, value: Any, other: dict[str, Any]) -> bool:
    """True when ``value`` is an empty array or table whose key has children in ``other``."""
    return value in ([], {}) and key not in other and any(k.startswith((f"{key}[", f"{key}.")) for k in other)


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > _SHOW_CHARS:
        text = f"{text[: _SHOW_CHARS - 20]}... ({len(text)} chars)"
    return text


def _is_long(value: Any) -> bool:
    return isinstance(value, str) and (len(value) > LONG_STRING_CHARS or "\n" in value)


def _unified(change: ContractChange) -> list[str]:
    """Unified-diff lines for a changed long string; [] when not applicable or invisible."""
    old, new = change.old, change.new
    if not (isinstance(old, str) and isinstance(new, str) and (_is_long(old) or _is_long(new))):
        return []
    return list(
        difflib.unified_diff(old.splitlines(), new.splitlines(), f"a/{change.key}", f"b/{change.key}", lineterm="")
    )


def format_diff(changes: list[ContractChange]) -> str:
    """Readable text: one line per changed key path, long strings as a unified diff.

    Lines start with ``+`` (added), ``-`` (removed) or ``~`` (changed); a changed long
    string is followed by its unified diff, indented by four spaces.

    Returns:
        the text, ending without a newline; ``""`` when there are no changes.
    """
    lines: list[str] = []
    for change in changes:
        if change.kind == "added":
            lines.append(f"+ {change.key} = {_show(change.new)}")
        elif change.kind == "removed":
            lines.append(f"- {change.key} = {_show(change.old)}")
        elif hunks := _unified(change):
            lines.append(f"~ {change.key}:")
            lines.extend(f"    {line}" for line in hunks)
        else:
            lines.append(f"~ {change.key}: {_show(change.old)} -> {_show(change.new)}")
    return "\n".join(lines)
