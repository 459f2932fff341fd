"""How the GRPO loop lays samples out: groups kept together in a step, micro-batches bounded in logit positions.

Pure Python apart from the seeded ``torch.Generator`` that orders the groups.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import torch

from mindforge.trainer.samples import TrainingSample


def micro_batches(
    group_ids: Sequence[str],
    size: int,
    extents: Sequence[tuple[int, int]] | None = None,
    max_positions: int | None = None,
) -> list[tuple[int, int]]:
    """``(start, end)`` spans of at most ``size`` consecutive samples, each within one group's run.

    With ``extents`` and ``max_positions``, a span also ends before its forward would hold
    more than ``max_positions`` vocabulary-sized logit rows: a micro-batch of B samples
    computes logits at B x (longest length - earliest first model token + 1) positions
    (:func:`mindforge.trainer.lora.per_token_logps`), each a float row of the vocabulary
    (49,152 for SmolLM2: about 0.8 MB with its float32 copy and gradient). A sample over
    the cap runs alone.

    Args:
        group_ids: shape (N,), the group of each sample in step order.
        size: most samples per micro-batch (>= 1).
        extents: shape (N,), each sample's (length in tokens, position of its first model token).
        max_positions: most logit positions per micro-batch (None: no cap).
    """
    spans: list[tuple[int, int]] = []
    start = 0

    def positions(a: int, b: int) -> int:
        assert extents is not None
        rows = extents[a:b]
        return (b - a) * (max(n for n, _ in rows) - min(f for _, f in rows) + 1)

    for i in range(1, len(group_ids) + 1):
        full = i - start == size
        over = (
            extents is not None and max_positions is not None and i < len(group_ids)
            and positions(start, i + 1) > max_positions
        )
        if i == len(group_ids) or group_ids[i] != group_ids[start] or full or over:
            spans.append((start, i))
            start = i
    return spans


def extents_of(samples: Sequence[TrainingSample]) -> list[tuple[int, int]]:
    """Each sample's (length in tokens, position of its first model token), as :func:`micro_batches` takes them."""
    return [(len(s.input_ids), s.loss_mask.index(1) if 1 in s.loss_mask else len(s.input_ids)) for s in samples]


def group_order(group_ids: Sequence[str], generator: torch.Generator) -> list[int]:
    """A seeded visiting order with each group's samples together: groups shuffled, then members shuffled.

    A step of ``batch_size`` samples then holds one group or a few, as TRL's GRPO batches
    are laid out (``num_generations`` completions of a prompt side by side), and its rows
    share their prompt.

    Args:
        group_ids: shape (N,), the group of each sample.
        generator: the seeded generator of this run.
    """
    members: dict[str, list[int]] = defaultdict(list)
    for i, g in enumerate(group_ids):
        members[g].append(i)
    groups = sorted(members)
    order: list[int] = []
    for g in (groups[k] for k in torch.randperm(len(groups), generator=generator).tolist()):
        idx = members[g]
        order += [idx[k] for k in torch.randperm(len(idx), generator=generator).tolist()]
    return order
