"""The race's shortlist at the start of a search, seeded from data the product already has.

In priority order (ties at halving go to the earlier entry):

1. ``previous``: edit chains earlier evidence names (``SearchConfig.seeds``: the previous
   generation's search entrant and runner-up), re-based on the search root;
2. ``library``: the lineage's current library contract - the move to its latest
   validated experience snapshot (op ``experience_snapshot``), or the root itself when it
   carries that snapshot already (then only its variants are entries);
3. ``library_variant``: the library contract plus each of ``SearchConfig.library_variants``
   (the ``command`` format, a newline stop, one command per trial).

These predict a general lift (their evidence is not an audit). The rest joins the race
from evidence (:mod:`mindforge.search.racing`): the best candidate of each audit cluster
once exploration passed one of its tasks (``cluster_best``; the audit's affinity is the
weak prior of that exploration, never a wall), accepted model-proposed prompt edits
(``model``), and pairs of winners composed (``compose``).
"""

from __future__ import annotations

from collections.abc import Sequence

from mindforge.hcp import HCPContract
from mindforge.search.candidates import (
    CandidateError,
    CandidatePool,
    apply_edit,
    make_candidate,
)
from mindforge.search.edits import Edit, operator_edits, snapshot_edit
from mindforge.search.predictions import predict
from mindforge.search.race_models import Entrant, EntryReason, Prediction
from mindforge.search.state import SearchConfig, SearchTask

#: reasons whose candidates predict a general lift (their evidence is not an audit)
GENERAL_REASONS: frozenset[str] = frozenset({"previous", "library", "library_variant"})


def rebase(root: HCPContract, edits: Sequence[Edit]) -> list[Edit]:
    """The edits of a chain that still apply on ``root``, in order (the others are left out).

    A chain found on an earlier contract (the previous generation's root) may hold edits
    the new root already carries or that conflict with it; those are dropped one by one.
    """
    kept: list[Edit] = []
    current = root
    for edit in edits:
        if any(e.slot == edit.slot for e in kept):
            continue
        try:
            current = apply_edit(current, edit)
        except CandidateError:
            continue
        kept.append(edit)
    return kept


def _library_chains(root: HCPContract, config: SearchConfig) -> list[tuple[list[Edit], EntryReason]]:
    """The lineage's library contract and its variants, as chains from ``root`` (none without a library).

    The library contract is the move to the latest snapshot (op ``experience_snapshot``),
    or the root itself when it carries that snapshot already (then only the variants).
    """
    if config.experience_snapshot is None:
        return []
    moves = [e for e in operator_edits(root, (), config.experience_snapshot) if e.op == "experience_snapshot"]
    if not moves and root.resources.experience is None:
        return []
    chains: list[tuple[list[Edit], EntryReason]] = [(moves, "library")] if moves else []
    by_key = {e.key: e for e in operator_edits(root)}
    chains += [([*moves, by_key[k]], "library_variant") for k in config.library_variants if k in by_key]
    return chains


def _latest_library(edits: Sequence[Edit], config: SearchConfig) -> list[Edit]:
    """A seed chain with its library move pointed at the lineage's latest snapshot (the library grows)."""
    if config.experience_snapshot is None:
        return list(edits)
    latest = snapshot_edit(config.experience_snapshot)
    return [latest if e.op == "experience_snapshot" else e for e in edits]


def build_shortlist(
    root: HCPContract, tasks: Sequence[SearchTask], config: SearchConfig, capacity: int
) -> list[Entrant]:
    """The race's shortlist at the start of a search (see the module docstring).

    Args:
        root: the search root.
        tasks: the failing tasks, in the state's order.
        config: the search settings (seeds, snapshot, variants, edit keys).
        capacity: the most entrants (what the budget can probe).

    Returns:
        entrants in priority order, each a distinct harness, with its prediction.
    """
    pool = CandidatePool(root)
    entrants: list[Entrant] = []

    def add(edits: list[Edit], reason: EntryReason) -> bool:
        if len(entrants) >= capacity or not edits:
            return False
        try:
            candidate = make_candidate(root, edits, origin="seed" if reason in GENERAL_REASONS else "operator", step=0)
        except CandidateError:
            return False
        if not pool.add(candidate):
            return False
        entrants.append(Entrant(candidate=candidate, reason=reason, joined_step=0))
        return True

    for seed in config.seeds:
        add(rebase(root, _latest_library(seed.edits, config)), seed.reason)
    for edits, reason in _library_chains(root, config):
        add(edits, reason)
    return [e.model_copy(update={"prediction": entrant_prediction(e, root, tasks)}) for e in entrants]


def entrant_prediction(entrant: Entrant, root: HCPContract, tasks: Sequence[SearchTask]) -> Prediction:
    """An entrant's prediction: general for data seeds, else from the audit (see :func:`predict`)."""
    return predict(entrant.candidate, tasks, root, general=entrant.reason in GENERAL_REASONS)
