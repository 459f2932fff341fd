"""Per-task retrieval: the ``k`` entries whose instructions are closest to a task's, by BM25.

Ranking is Okapi BM25 (Robertson and Zaragoza, "The Probabilistic Relevance Framework:
BM25 and Beyond", 2009) from ``rank-bm25``: a small, pure-Python library over numpy (already a
core dependency) with the standard Okapi variant and its IDF floor. ``bm25s`` is faster on
large corpora through scipy sparse matrices, but a lineage's library holds tens to hundreds
of entries, built once per trial, so its speed buys nothing here and scipy would be a new
heavy dependency.

Retrieval is deterministic for (snapshot, instruction, task): instructions are tokenised
as lowercase runs of letters and digits, ties (equal scores, rounded to 1e-9) go by entry id.
**Leave-one-out**: an entry mined from the task itself (same task id or task hash) is never
returned, so search-split figures measure transfer too.
"""

from __future__ import annotations

import re
from typing import Literal

from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]  # rank-bm25 ships no type hints

from mindforge.experience.entry import ExperienceEntry
from mindforge.experience.snapshot import ExperienceSnapshot

#: which entries retrieval may return: both kinds, or only one provenance
ProvenanceFilter = Literal["any", "oracle", "model"]

_TOKEN_RE = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """Lowercase runs of ASCII letters and digits (``planets.txt`` gives ``planets``, ``txt``)."""
    return _TOKEN_RE.findall(text.lower())


def eligible(
    snapshot: ExperienceSnapshot,
    *,
    task_id: str,
    task_hash: str,
    provenance: ProvenanceFilter = "any",
    single_line: bool = False,
) -> list[ExperienceEntry]:
    """The entries retrieval may return for a task, in entry-id order.

    Args:
        snapshot: the library snapshot.
        task_id / task_hash: the task being attempted (its own entries are left out).
        provenance: ``any``, or only ``oracle`` / ``model`` entries.
        single_line: leave out entries with a multi-line command (the ``command`` action
            format takes one line per reply).
    """
    return [
        e
        for e in snapshot.entries
        if e.task_id != task_id
        and e.task_hash != task_hash
        and (provenance == "any" or str(e.provenance) == provenance)
        and not (single_line and e.multi_line)
    ]


def retrieve(
    snapshot: ExperienceSnapshot,
    instruction: str,
    *,
    k: int,
    task_id: str,
    task_hash: str,
    provenance: ProvenanceFilter = "any",
    single_line: bool = False,
) -> list[ExperienceEntry]:
    """The ``k`` eligible entries ranked best first by BM25 of their instructions against ``instruction``.

    Args:
        snapshot: the library snapshot.
        instruction: the task's instruction (the query).
        k: how many to return (0 returns none); fewer when fewer are eligible.
        task_id / task_hash / provenance / single_line: see :func:`eligible`.

    Returns:
        at most ``k`` entries; with no word in common the order falls back to entry id.

    Raises:
        ValueError: ``k`` is negative.
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    pool = eligible(snapshot, task_id=task_id, task_hash=task_hash, provenance=provenance, single_line=single_line)
    if k == 0 or not pool:
        return []
    corpus = [tokenize(e.instruction) for e in pool]
    query = tokenize(instruction)
    if query and any(corpus):
        # rank-bm25 divides by the mean document length: give empty documents one dummy token
        scores = [float(s) for s in BM25Okapi([doc or ["\0"] for doc in corpus]).get_scores(query)]
    else:
        scores = [0.0] * len(pool)
    ranked = sorted(zip(pool, scores, strict=True), key=lambda pair: (-round(pair[1], 9), pair[0].entry_id))
    return [entry for entry, _ in ranked[:k]]
