"""One contract per Update: rollouts, training, the promotion gate and the sealed pair share a harness.

The Update stage decides the successor *contract* first (Expansion's successor check on
the selection split, or the parent's contract) and then trains and judges the adapter
under that contract only. A pair that trains under one harness and is measured under
another says nothing about either (the adapter never saw the prompts it is judged on),
so such a plan is an error, never a fallback.

Two contracts have the same **harness** when they differ at most in ``model.adapter`` and
in the ``[mindforge]`` identity (name, revision, parent, edit, description): the
successor contract that names the new adapter (``successor_contract`` in the Update
activities) is the training contract with ``model.adapter`` set.

Pure: the HCP model only (no Temporal, Ray or store).
"""

from __future__ import annotations

import hashlib
from typing import Any

from mindforge.errors import MindForgeError


class OffContractError(MindForgeError):
    """A step of one Update would run under a harness other than the one it trains under.

    Args:
        step: the step that would go off contract (``"promotion gate"``, ``"training"``, ...).
        trained_under: the contract hash Update trains under.
        found: the contract hash the step names.
        detail: what differs, in words.
    """

    def __init__(self, step: str, trained_under: str, found: str, detail: str = "") -> None:
        self.step = step
        self.trained_under = trained_under
        self.found = found
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"{step}: runs under contract {found[:12]} but the Update trains under {trained_under[:12]}{extra}; "
            "a plan that trains under one contract and measures under another is refused, not fallen back from"
        )


def harness_key(contract: Any) -> str:
    """sha256 (hex) of a contract's harness: its document without ``[mindforge]`` and ``model.adapter``.

    Args:
        contract: an :class:`mindforge.hcp.HCPContract`.

    Returns:
        64 hex characters; equal for a contract and its ``adapter -> <name>`` derivations.
    """
    from mindforge.hcp import canonical_json

    doc = contract.to_document()
    doc.pop("mindforge", None)
    model = dict(doc.get("model") or {})
    model.pop("adapter", None)
    doc["model"] = model
    return hashlib.sha256(canonical_json(doc).encode("utf-8")).hexdigest()


def check_same_harness(step: str, trained_under: Any, measured_under: Any) -> None:
    """Raise unless ``measured_under`` has the harness of ``trained_under``.

    Args:
        step: the step being checked, for the message.
        trained_under / measured_under: :class:`mindforge.hcp.HCPContract` objects.

    Raises:
        OffContractError: their harnesses differ.
    """
    if harness_key(trained_under) != harness_key(measured_under):
        raise OffContractError(
            step, trained_under.content_hash, measured_under.content_hash,
            f"{measured_under.ref} is not {trained_under.ref} with another adapter",
        )
