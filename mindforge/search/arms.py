"""Choosing the cells of a step: arms (existing and potential candidates) and their scores.

An *arm* is a candidate contract that a cell may use: every candidate already in the
state, plus potential ones offered this step - the single operator edits, the best
winners composed pairwise, a cluster's best winner refined by one more edit that fits
the cluster's audit, and, in a cluster nothing has solved yet, its stepping stones
(candidates whose attempts got past the harness failure the audit named, see
:func:`mindforge.search.state.is_progress`) refined the same way. A potential arm becomes
a candidate only when a cell picks it. Refinements try the edits that fit the audit best
(the highest affinity level) first, in the catalogue's order; which of them pays off is
left to measured progress - the posteriors below - not to a ranking written for one model.

Some features only pay off together - a small model needs the bare ``command`` action
format AND a worked example to solve anything - so no single edit wins; the first edit
still shows as progress (its replies parse, the task now fails as a wrong answer), and
refining the stepping stone reaches the pair within a few steps.

Adaptive scoring: each (task, arm) cell has a Beta posterior on its success rate - a
prior from the task's audit (:mod:`.affinity`), the cell's own attempts, and the arm's
results on other tasks of the same cluster and of other clusters, down-weighted; a
composed arm inherits part of its parts' wins. ``selection = "ucb"`` scores the
posterior mean plus ``exploration`` standard deviations (untried fitting edits first,
then re-attempts of promising cells), ``"thompson"`` draws from it. Composed and refined
arms are offered to a task only after every single edit that fits its audit was tried
on a task of its cluster (refined stepping stones once the best-fitting ones were: the
evidence already points at them). The
``random`` strategy draws tasks and single edits uniformly.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict

from mindforge.hcp import HCPContract
from mindforge.search.affinity import PRIOR_MEAN, RULE_AFFINITY, affinity, task_affinity_table
from mindforge.search.candidates import (
    Candidate,
    CandidateError,
    CandidatePool,
    Origin,
    compose_edits,
    make_candidate,
)
from mindforge.search.edits import Edit
from mindforge.search.state import SearchConfig, SearchState

#: refined candidates (winner + one edit) offered per cluster and step
REFINE_PER_CLUSTER = 8
#: stepping stones (progress without a pass) refined per cluster and step
STEPPING_STONES_PER_CLUSTER = 2
#: with ``SearchConfig.audit_fit_ranking`` only (off by default, kept for
#: ``bench_search.py --mode rankings``): score added per affinity level of an arm's tags
FIT_TIE_BREAK = 1e-6
#: how much an attempt that made progress (past the harness failure, not passing) counts
#: for the candidates that extend it, relative to a success
PROGRESS_CREDIT = 0.5


class Arms:
    """Existing candidates plus potential new ones, for one planning step.

    Args:
        state: the search state.
        root: the search root contract.
    """

    def __init__(self, state: SearchState, root: HCPContract) -> None:
        self.state, self.root = state, root
        self.pool = CandidatePool(root, state.candidates)
        self.new: list[Candidate] = []
        self.potential: list[Candidate] = []
        self.capacity = state.config.max_candidates - len(state.candidates)

    def offer(self, edits: list[Edit], origin: Origin) -> None:
        if len(self.potential) >= self.capacity:
            return
        try:
            candidate = make_candidate(self.root, edits, origin=origin, step=self.state.step)
        except CandidateError:
            return
        if self.pool.duplicate_of(candidate) is None and all(
            c.harness_hash != candidate.harness_hash for c in self.potential
        ):
            self.potential.append(candidate)

    def all(self) -> list[Candidate]:
        return [*self.pool.items, *self.potential]

    def index_of(self, candidate: Candidate) -> int:
        """The candidate's index in the state once added (a potential one is added now).

        A candidate whose harness a known one already has maps to that one.
        """
        found = self.pool.find(candidate.contract_hash)
        if found is None:
            duplicate = self.pool.duplicate_of(candidate)
            found = duplicate if duplicate is not None and duplicate >= 0 else None
        if found is not None:
            return found
        self.pool.add(candidate)
        self.new.append(candidate)
        return len(self.pool.items) - 1


def _evidence(state: SearchState) -> dict[int, dict[str, list[int]]]:
    """candidate index -> cluster -> [usable attempts, successes, progress] over all tasks."""
    out: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    for key, stats in state.cells.items():
        task, cand = (int(part) for part in key.split(":"))
        entry = out[cand][state.tasks[task].cluster]
        entry[0] += stats.usable
        entry[1] += stats.successes
        entry[2] += stats.progress
    return out


def _fitting(
    singles: list[Edit], table: dict[str, int], root: HCPContract, taken: set[str], by_fit: bool = False
) -> list[Edit]:
    """Single edits in free slots that fit the audit (level >= 1), the highest affinity level first.

    Within a level, one edit of each op before a second edit of the same op, then the
    catalogue's order: refinements are cut at :data:`REFINE_PER_CLUSTER`, and a list
    of many examples would otherwise push every other kind of edit past the cut (a
    rule about the edit space, not about any model). With ``by_fit``
    (``SearchConfig.audit_fit_ranking``, off by default: a ranking written to put the
    coupled ``command`` format first for one model, kept only so that
    ``bench_search.py --mode rankings`` can measure it) edits of one level go in order of
    the sum of their tags' levels, then the catalogue's order.
    """
    scored = []
    seen: dict[tuple[int, str], int] = defaultdict(int)
    for i, e in enumerate(singles):
        if e.slot in taken:
            continue
        tags = e.tags(root)
        level = affinity(table, tags)
        # without by_fit: one edit of each op of a level before a second of the same op
        # (the ten examples do not crowd a format switch out of the refinements)
        nth = seen[(level, e.op)]
        seen[(level, e.op)] += 1
        scored.append((level, -_audit_fit(table, tags) if by_fit else nth, i, e))
    return [e for level, _order, _i, e in sorted(scored, key=lambda x: (-x[0], x[1], x[2])) if level >= 1]


def _refine(arms: Arms, base: list[Edit], fitting: list[Edit], origin: Origin) -> None:
    for edit in fitting[:REFINE_PER_CLUSTER]:
        try:
            arms.offer(compose_edits(base, [edit]), origin)
        except CandidateError:
            continue


def offer_new_arms(arms: Arms, state: SearchState, singles: list[Edit], unsolved: list[int]) -> None:
    for edit in singles:
        arms.offer([edit], "operator")
    if state.config.strategy == "random":
        return
    wins: dict[int, int] = defaultdict(int)
    for key, stats in state.cells.items():
        wins[int(key.split(":")[1])] += stats.successes
    winners = sorted((i for i in wins if wins[i] > 0), key=lambda i: (-wins[i], i))[: state.config.compose_top]
    for a_pos, a in enumerate(winners):
        for b in winners[a_pos + 1 :]:
            try:
                arms.offer(compose_edits(state.candidates[a].edits, state.candidates[b].edits), "compose")
            except CandidateError:
                continue
    evidence = _evidence(state)
    by_fit = state.config.audit_fit_ranking
    clusters = sorted({state.tasks[t].cluster for t in unsolved})
    for cluster in clusters:
        table = task_affinity_table(next(state.tasks[t] for t in unsolved if state.tasks[t].cluster == cluster))
        # the candidate with the most wins in this cluster (any candidate, not only the top winners)
        best = max(sorted(wins), key=lambda i: (evidence[i][cluster][1], -i), default=None)
        if best is not None and evidence[best][cluster][1] > 0:
            edits = state.candidates[best].edits
            now = _stone_table(state, best, cluster, table)  # also what its failed attempts ran into
            _refine(arms, edits, _fitting(singles, now, arms.root, {e.slot for e in edits}, by_fit), "refine")
            continue
        # nothing solved here yet: refine the stepping stones, shortest chains first (a
        # single edit that got past the failure before its own refinements), then the
        # highest measured progress rate
        stones = sorted(
            (i for i in evidence if evidence[i][cluster][2] > 0),
            key=lambda i: (
                len(state.candidates[i].edits),
                -_audit_fit(table, _edit_tags(state.candidates[i].edits, arms.root)) if by_fit else 0,
                -_progress_rate(evidence[i][cluster]),
                i,
            ),
        )
        for stone in stones[:STEPPING_STONES_PER_CLUSTER]:
            edits = state.candidates[stone].edits
            # the stone got past the base failure; refine it with what fits its failure now
            now = _stone_table(state, stone, cluster, table)
            _refine(arms, edits, _fitting(singles, now, arms.root, {e.slot for e in edits}, by_fit), "progress")


def _edit_tags(edits: list[Edit], root: HCPContract) -> frozenset[str]:
    """The union of the edits' tags (:meth:`Edit.tags` against ``root``)."""
    return frozenset().union(*(e.tags(root) for e in edits))


def _audit_fit(table: dict[str, int], tags: frozenset[str]) -> int:
    """How much of an audit an arm's tags answer: the sum of their affinity levels in ``table``."""
    return sum(table.get(tag, 0) for tag in tags)


def _progress_rate(entry: list[int]) -> float:
    """Posterior mean of a stone's progress rate in a cluster, ``(progress + 1) / (usable + 2)``.

    ``entry`` is ``[usable attempts, successes, progress]`` (:func:`_evidence`). Laplace's
    rule of succession: 4 of 4 attempts past the failure (0.83) ranks above 3 of 7 (0.44)
    and above a single 1 of 1 (0.67).
    """
    usable, _wins, progress = entry
    return (progress + 1) / (max(usable, progress) + 2)


def _stone_table(state: SearchState, stone: int, cluster: str, base: dict[str, int]) -> dict[str, int]:
    """The base failure's affinity table, raised by the table of the rule the stone's attempts fail under now.

    The rule most of the stone's progress attempts in the cluster failed under (e.g.
    ``model.stuck`` once replies parse: the model repeats a command until the turn
    limit) adds its edits at their own level, so the next refinement addresses what
    stands in the way now, not only what stood in the way at first.
    """
    rules: dict[str, int] = defaultdict(int)
    for key, stats in state.cells.items():
        task, cand = (int(part) for part in key.split(":"))
        if cand == stone and state.tasks[task].cluster == cluster:
            for rule, n in stats.progress_rules.items():
                rules[rule] += n
    if not rules:
        return base
    rule = max(sorted(rules), key=lambda r: rules[r])
    table = dict(base)
    for tag, level in RULE_AFFINITY.get(rule, {}).items():
        table[tag] = max(table.get(tag, 0), level)
    return table


class _Context:
    """Per-step precomputation shared by all cells: evidence, affinity tables, arm tags."""

    def __init__(
        self, state: SearchState, root: HCPContract, unsolved: list[int], all_arms: list[Candidate] | None = None
    ) -> None:
        self.state, self.root = state, root
        self.evidence = _evidence(state)
        use = state.config.use_audits
        self._arm: dict[str, tuple[frozenset[str], list[int]]] = {}
        self.tables = {t: task_affinity_table(state.tasks[t]) if use else {} for t in unsolved}
        for t, table in self.tables.items():
            if table and all_arms is not None and self._hint_refuted(t, table, all_arms):
                self.tables[t] = {}  # the audit's hint failed here: every edit is as likely as any other

    def _hint_refuted(self, task: int, table: dict[str, int], all_arms: list[Candidate]) -> bool:
        """Whether every single edit the task's audit points at (affinity 1 or more) ran
        ``max_attempts_per_cell`` usable attempts on the task with no pass and no progress.

        Then the hint is spent for this task, and its prior would only keep exploration on
        compositions of the edits that failed it, away from the edits the audit did not name
        (a fix no rule points at: UCB1's rule that every arm is pulled once, kept for singles).
        ``all_arms`` lists the known candidates first, at their state indices.
        """
        cap = self.state.config.max_attempts_per_cell
        known = len(self.state.candidates)
        fitting = [p for p, c in enumerate(all_arms) if len(c.edits) == 1 and affinity(table, self.arm(c)[0]) >= 1]
        if not fitting:
            return False
        for position in fitting:
            if position >= known:
                return False
            cell = self.state.cell(task, position)
            if cell.usable < cap or cell.successes or cell.progress:
                return False
        return True

    def arm(self, cand: Candidate) -> tuple[frozenset[str], list[int]]:
        """The arm's edit tags and the indices of candidates whose edits are a proper subset of its."""
        if cand.contract_hash not in self._arm:
            tags = _edit_tags(cand.edits, self.root)
            keys = set(cand.edit_keys)
            subs = [i for i, other in enumerate(self.state.candidates) if set(other.edit_keys) < keys]
            self._arm[cand.contract_hash] = (tags, subs)
        return self._arm[cand.contract_hash]


def _posterior(
    ctx: _Context, task: int, cand: Candidate, index: int | None, factor: float = 1.0
) -> tuple[float, float]:
    """Beta(alpha, beta) of one cell.

    Prior: ``prior_strength`` pseudo-attempts at the audit affinity's prior rate. Evidence:
    the cell's own attempts (weight 1), the candidate's attempts on other tasks of the same
    cluster (``cluster_weight``) and of other clusters (``global_weight``), and, at half
    those weights, the successes of candidates whose edits are a subset of its edits (a
    composed candidate inherits its parts' wins) and their progress at
    :data:`PROGRESS_CREDIT` (a refined stepping stone inherits the evidence that its base
    got past the harness failure); a part's failures on this task itself count against
    it at half weight where the part never passed nor progressed there. ``factor`` scales
    the prior rate (an operator whose predictions were refuted,
    :func:`mindforge.search.predictions.operator_factors`).
    """
    state, config = ctx.state, ctx.state.config
    cluster = state.tasks[task].cluster
    tags, subs = ctx.arm(cand)
    m0 = min(PRIOR_MEAN[affinity(ctx.tables[task], tags)] * factor, 0.95)
    alpha, beta = config.prior_strength * m0, config.prior_strength * (1 - m0)
    if index is not None:
        own = state.cell(task, index)
        alpha += own.successes
        beta += own.usable - own.successes
        for where, (usable, wins, _progress) in ctx.evidence.get(index, {}).items():
            if where == cluster:
                usable, wins = usable - own.usable, wins - own.successes
            weight = config.cluster_weight if where == cluster else config.global_weight
            alpha += weight * wins
            beta += weight * (usable - wins)
    for sub in subs:
        if sub == index:
            continue
        for where, (_usable, wins, progress) in ctx.evidence.get(sub, {}).items():
            weight = config.cluster_weight if where == cluster else config.global_weight
            # a part's wins, and (at half weight) the attempts where it got past the harness
            # failure without passing: a refined stepping stone is worth trying early
            alpha += 0.5 * weight * (wins + PROGRESS_CREDIT * progress)
        # ... and its failures on this very task, at half weight, when it never passed here
        # nor got past the harness failure: a composition of parts that each failed this
        # task is no likelier to pass it than they were, however often they won elsewhere
        part = state.cell(task, sub)
        if part.usable and not part.successes and not part.progress:
            beta += 0.5 * part.usable
    return alpha, max(beta, 1e-6)


def pick_adaptive(
    state: SearchState,
    arms: Arms,
    unsolved: list[int],
    n_cells: int,
    rng: random.Random,
    *,
    skip: frozenset[str] = frozenset(),
    skip_edits: frozenset[str] = frozenset(),
    factors: dict[str, float] | None = None,
    planned: dict[tuple[int, str], int] | None = None,
) -> list[tuple[int, Candidate]]:
    """The best ``n_cells`` (task, arm) cells by posterior score, at most ``ceil(n / unsolved)`` per task.

    Args:
        state: the search state.
        arms: existing and potential candidates.
        unsolved: the tasks to pick from (tasks nothing solved yet).
        n_cells: cells to pick.
        rng: the step's random source.
        skip: harness hashes of arms not to pick (refuted candidates).
        skip_edits: edit keys no picked arm may carry (refuted edits).
        factors: edit op -> prior weight of a single-edit arm (default 1).
        planned: (task, contract hash) -> cells already planned this step; a cell at its
            attempt cap counting those is not picked.
    """
    all_arms = arms.all()
    ctx = _Context(state, arms.root, unsolved, all_arms)
    factors = factors or {}
    planned = planned or {}
    cap = state.config.max_attempts_per_cell
    draws: list[tuple[float, int, int, Candidate]] = []
    existing = len(arms.pool.items)
    for t in unsolved:
        composing = _singles_tried(ctx, t, all_arms, existing, per_cluster=True)
        stepping = composing or _singles_tried(ctx, t, all_arms, existing, top_only=True)
        for position, cand in enumerate(all_arms):
            index = position if position < existing else None
            if cand.harness_hash in skip or not skip_edits.isdisjoint(cand.edit_keys):
                continue
            tried = state.cell(t, index).attempts if index is not None else 0
            if tried + planned.get((t, cand.contract_hash), 0) >= cap:
                continue
            if len(cand.edits) > 1 and not (stepping if cand.origin == "progress" else composing):
                continue
            factor = factors.get(cand.edits[0].op, 1.0) if len(cand.edits) == 1 else 1.0
            alpha, beta = _posterior(ctx, t, cand, index, factor)
            fit = FIT_TIE_BREAK * _audit_fit(ctx.tables[t], ctx.arm(cand)[0]) if state.config.audit_fit_ranking else 0.0
            draws.append((_score(state.config, alpha, beta, rng) + fit, t, position, cand))
    draws.sort(key=lambda d: (-d[0], d[1], d[2]))
    per_task = max(1, math.ceil(n_cells / max(len(unsolved), 1)))
    taken: dict[int, int] = defaultdict(int)
    picks: list[tuple[int, Candidate]] = []
    for _theta, t, _pos, cand in draws:
        if len(picks) >= n_cells:
            break
        if taken[t] < per_task:
            taken[t] += 1
            picks.append((t, cand))
    return picks


def _score(config: SearchConfig, alpha: float, beta: float, rng: random.Random) -> float:
    if config.selection == "thompson":
        return rng.betavariate(alpha, beta)
    mean = alpha / (alpha + beta)
    std = math.sqrt(alpha * beta / ((alpha + beta) ** 2 * (alpha + beta + 1)))
    return mean + config.exploration * std + 1e-9 * rng.random()


def _singles_tried(
    ctx: _Context, task: int, all_arms: list[Candidate], existing: int, *, top_only: bool = False,
    per_cluster: bool = False,
) -> bool:
    """Whether every single edit that fits the task has been attempted on it.

    The fitting edits are the single-edit arms the task's audit relates to (affinity 1
    or more), or all single edits when it relates to none. Composed and refined
    candidates are only tried on a task after that: they are for tasks that one fitting
    edit did not solve. With ``top_only`` only the best-fitting singles (the highest
    affinity level) count: refined stepping stones wait for those alone. With
    ``per_cluster`` (and always with ``top_only``) an attempt on any task of the task's
    cluster counts: the tasks of a cluster failed the same way, so trying every fitting
    edit on each of them first would spend the budget before anything is composed.
    """
    table = ctx.tables[task]
    singles = [(p, c) for p, c in enumerate(all_arms) if len(c.edits) == 1]
    levels = {p: affinity(table, ctx.arm(c)[0]) for p, c in singles}
    top = max(levels.values(), default=0)
    floor = top if top_only else (1 if top >= 1 else 0)
    cluster = ctx.state.tasks[task].cluster
    grouped = top_only or per_cluster
    peers = [t for t, entry in enumerate(ctx.state.tasks) if entry.cluster == cluster] if grouped else [task]
    for position, _cand in singles:
        if levels[position] < floor:
            continue
        if position >= existing or all(ctx.state.cell(t, position).attempts == 0 for t in peers):
            return False
    return True


def pick_random(
    state: SearchState, arms: Arms, singles: list[Edit], unsolved: list[int], n_cells: int, rng: random.Random
) -> list[tuple[int, Candidate]]:
    keys = {e.key for e in singles}
    choices = [c for c in arms.all() if len(c.edits) == 1 and c.edits[0].key in keys]
    if not choices or not unsolved:
        return []
    return [(rng.choice(unsolved), rng.choice(choices)) for _ in range(n_cells)]
