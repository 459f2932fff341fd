"""Deriving a child contract from a parent by one recorded edit (configuration search).

A child differs from its parent by dotted-path changes (toggle a hook, change the
action format, add a skill, rewrite a prompt, ...), carries ``mindforge.parent =
"name@revision"`` of the parent and the edit in words, and is validated exactly as a
loaded file is.
"""

from __future__ import annotations

import base64
import copy
import hashlib
from typing import Any

from pydantic import BaseModel, ValidationError

from mindforge.hcp.io import ContractError, contract_from_document, validation_problems
from mindforge.hcp.model import HCPContract
from mindforge.hcp.sections import EmbeddedResource

# task time limits and resources belong to the task, never to the harness: changing
# them would make results incomparable with anyone else's (docs/design.md, "The HCP contract")
_TASK_LIMIT_KEYS = frozenset(
    {
        "timeout_sec",
        "agent_timeout_sec",
        "verifier_timeout_sec",
        "build_timeout_sec",
        "cpus",
        "memory_mb",
        "storage_mb",
        "gpus",
    }
)
_IDENTITY_KEYS_ALLOWED = frozenset({"mindforge.description"})


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="python", exclude_none=True)
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    return value


def _check_key(key: str, source: str) -> list[str]:
    parts = key.split(".")
    if not key or any(not part for part in parts) or "[" in key:
        raise ContractError(source, key, "not a dotted key path of tables (replace whole arrays, e.g. 'tools.allow')")
    if parts[0] == "version":
        raise ContractError(source, key, "the HCP version is not a harness setting")
    if parts[0] == "mindforge" and key not in _IDENTITY_KEYS_ALLOWED:
        raise ContractError(source, key, "identity and lineage are set by derive's name/revision/edit arguments")
    if parts[-1] in _TASK_LIMIT_KEYS:
        raise ContractError(source, key, "task time limits and resources belong to the task, not to the HCP contract")
    return parts


def apply_changes(document: dict[str, Any], changes: dict[str, Any], source: str) -> dict[str, Any]:
    """Return a copy of ``document`` with dotted-path ``changes`` applied.

    Args:
        document: a contract document (see :meth:`HCPContract.to_document`).
        changes: key path -> new value; None removes the key; pydantic models (such as
            :class:`EmbeddedResource`) are converted to tables.
        source: named in errors.

    Raises:
        ContractError: a key path that is malformed, not changeable, or runs through a
            value that is not a table.
    """
    out = copy.deepcopy(document)
    for key, value in changes.items():
        parts = _check_key(key, source)
        node = out
        for depth, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ContractError(source, ".".join(parts[: depth + 1]), "is not a table, so it has no keys to change")
        if value is None:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = _plain(value)
    return out


def derive(
    parent: HCPContract,
    *,
    name: str | None = None,
    revision: str,
    edit: str,
    changes: dict[str, Any],
    description: str | None = None,
) -> HCPContract:
    """Derive a child contract from ``parent`` by one recorded edit.

    Args:
        parent: the contract derived from.
        name: the child's name; default the parent's.
        revision: the child's revision (name@revision must differ from the parent's).
        edit: the edit in words, recorded as ``mindforge.edit`` (non-empty).
        changes: dotted key path -> value, e.g. ``{"hooks.plan_first": True}``; None
            removes a key. ``[mindforge]`` (except ``description``), ``version`` and
            task limits cannot be changed.
        description: the child's description; default the parent's.

    Returns:
        the validated child, with ``mindforge.parent = parent.ref``.

    Raises:
        ContractError: a bad change key, or the child is invalid (key path and reason).
    """
    source = f"derived from {parent.ref}"
    if not edit.strip():
        raise ContractError(source, "mindforge.edit", "a derived contract must record its edit")
    document = apply_changes(parent.to_document(), changes, source)
    identity = document["mindforge"]
    identity.update(name=name or parent.mindforge.name, revision=revision, parent=parent.ref, edit=edit)
    if description is not None:
        identity["description"] = description
    if f"{identity['name']}@{revision}" == parent.ref:
        raise ContractError(source, "mindforge.revision", f"{revision!r} is the parent's own name@revision")
    return contract_from_document(document, source)


def make_embedded(kind: str, path: str, data: bytes | str) -> EmbeddedResource:
    """An embedded resource with its sha256 computed.

    Args:
        kind: e.g. ``skill``.
        path: relative path in the workspace (must not escape it).
        data: text (stored as utf-8) or bytes (stored as utf-8 text when they decode,
            else base64).

    Raises:
        ContractError: bad kind or path.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        content, encoding = raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        content, encoding = base64.b64encode(raw).decode("ascii"), "base64"
    fields = {
        "kind": kind,
        "path": path,
        "encoding": encoding,
        "content": content,
        "sha256": hashlib.sha256(raw).hexdigest(),
    }
    try:
        return EmbeddedResource.model_validate(fields)
    except ValidationError as exc:
        problems = validation_problems(exc)
        raise ContractError("<embedded resource>", problems[0][0], problems[0][1], problems) from None
