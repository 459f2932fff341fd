"""The generation simulator: exact makespans, barriers, monotone in slots, the lanes, training."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest

from mindforge.scale.costs import (
    CostError,
    TrialCost,
    TrialWork,
    costs_from_records,
    fit_token_rates,
    split_trial,
)
from mindforge.scale.nightly import NightlySpec, Overheads, nightly_plan
from mindforge.scale.plan import (
    Cluster,
    GenerationPlan,
    PolicyServer,
    SandboxWave,
    Serial,
    TimedTrial,
    Training,
    TrialWave,
    plan_from_timeline,
)
from mindforge.scale.simulate import simulate

WIDE = PolicyServer(lanes=10_000)


def _fixed(stage: str, seconds: float) -> TrialWork:
    return TrialWork(stage=stage, setup_sec=0.0, model_sec=0.0, tool_sec=seconds, finish_sec=0.0)


@pytest.mark.parametrize(("n", "k", "t"), [(10, 3, 2.0), (16, 16, 5.0), (1, 4, 7.5), (17, 2, 1.0)])
def test_fixed_trials_take_ceil_n_over_k_rounds(n, k, t):
    plan = GenerationPlan(steps=[TrialWave(label="x: w", counts={"x": n})])
    res = simulate(plan, {"x": [_fixed("x", t)]}, Cluster(nodes=1, slots_per_node=k), WIDE)
    assert res.makespan_sec == pytest.approx(math.ceil(n / k) * t)
    assert res.trials == n
    assert res.slot_busy_sec == pytest.approx(n * t)


def test_barrier_holds_between_waves_and_serial_steps():
    plan = GenerationPlan(
        steps=[
            TrialWave(label="a: first", counts={"a": 3}),  # 2 rounds of 4 s on 2 slots
            Serial(label="gap: store", seconds=1.5),
            TrialWave(label="b: second", counts={"b": 1}),
        ]
    )
    pools = {"a": [_fixed("a", 4.0)], "b": [_fixed("b", 1.0)]}
    res = simulate(plan, pools, Cluster(nodes=1, slots_per_node=2), WIDE)
    first, gap, second = res.steps
    assert first.end_sec == pytest.approx(8.0)  # the third trial could not start on the idle slot's next wave
    assert gap.start_sec == first.end_sec and gap.end_sec == pytest.approx(9.5)
    assert second.start_sec == pytest.approx(9.5)
    assert res.makespan_sec == pytest.approx(10.5)
    assert res.by_group() == pytest.approx({"a": 8.0, "gap": 1.5, "b": 1.0})


def test_more_slots_never_slow_a_generation_down():
    rng = random.Random(3)
    pool = [
        TrialWork(
            stage="s",
            setup_sec=rng.uniform(0, 1),
            model_sec=rng.uniform(1, 9),
            tool_sec=rng.uniform(0, 2),
            finish_sec=rng.uniform(0, 1),
            turns=rng.randint(1, 5),
        )
        for _ in range(40)
    ]
    plan = GenerationPlan(steps=[TrialWave(label="s: a", counts={"s": 57}), TrialWave(label="s: b", counts={"s": 23})])
    spans = [
        simulate(plan, {"s": pool}, Cluster(nodes=1, slots_per_node=k), WIDE, seed=7).makespan_sec
        for k in (1, 2, 3, 5, 8, 13, 64)
    ]
    assert all(later <= earlier + 1e-9 for earlier, later in zip(spans, spans[1:], strict=False))
    assert spans[-1] < spans[0] / 10


def test_one_lane_serialises_model_calls_and_the_speedup_divides_them():
    work = TrialWork(stage="s", setup_sec=0.0, model_sec=2.0, tool_sec=0.0, finish_sec=0.0, turns=2)
    plan = GenerationPlan(steps=[TrialWave(label="s: w", counts={"s": 4})])
    shape = Cluster(nodes=2, slots_per_node=2)
    assert simulate(plan, {"s": [work]}, shape, PolicyServer(lanes=1)).makespan_sec == pytest.approx(8.0)
    assert simulate(plan, {"s": [work]}, shape, PolicyServer(lanes=4)).makespan_sec == pytest.approx(2.0)
    fast = simulate(plan, {"s": [work]}, shape, PolicyServer(lanes=1, model_speedup=4.0))
    assert fast.makespan_sec == pytest.approx(2.0)
    assert fast.lane_busy_sec == pytest.approx(2.0)


def test_dispatch_and_training_and_sandbox_jobs():
    plan = GenerationPlan(
        steps=[
            SandboxWave(label="replays: r", n_jobs=4, job_sec=1.0),
            Training(label="training: t", seconds=5.0),
            TrialWave(label="s: w", counts={"s": 4}),
        ]
    )
    res = simulate(plan, {"s": [_fixed("s", 0.0)]}, Cluster(nodes=4, slots_per_node=1), WIDE, dispatch_sec=0.25)
    # the replays have a slot each but the dispatcher hands them out one at a time: the last runs from 1.0 s
    assert res.steps[0].wall_sec == pytest.approx(2.0)
    assert res.steps[1].wall_sec == pytest.approx(5.0) and res.training_sec == pytest.approx(5.0)
    assert res.steps[2].wall_sec == pytest.approx(1.0)
    assert res.dispatch_busy_sec == pytest.approx(2.0)


def test_same_seed_same_result_and_an_unknown_stage_is_named():
    pool = [_fixed("s", float(i)) for i in range(1, 9)]
    plan = GenerationPlan(steps=[TrialWave(label="s: w", counts={"s": 20})])
    shape = Cluster(nodes=1, slots_per_node=3)
    assert simulate(plan, {"s": pool}, shape, WIDE, seed=1) == simulate(plan, {"s": pool}, shape, WIDE, seed=1)
    with pytest.raises(KeyError, match="'sealed'"):
        simulate(GenerationPlan(steps=[TrialWave(label="x: w", counts={"sealed": 1})]), {"s": pool}, shape, WIDE)


def _rec(**over):
    rec = dict(
        stage="search",
        build_sec=0.1,
        start_sec=0.4,
        agent_sec=9.0,
        verify_sec=0.5,
        teardown_sec=0.1,
        prompt_tokens=3000,
        completion_tokens=150,
        num_turns=3,
    )
    rec.update(over)
    return rec


def test_costs_from_records_names_the_record_and_field():
    (cost,) = costs_from_records([_rec()], source="db#lin")
    assert cost.setup_sec == pytest.approx(0.5) and cost.finish_sec == pytest.approx(0.6)
    with pytest.raises(CostError, match=r"db#lin: trial record 1: field 'agent_sec' is missing"):
        costs_from_records([_rec(), _rec(agent_sec=None)], source="db#lin")
    with pytest.raises(CostError, match=r"trial record 0: field 'agent_sec'"):
        costs_from_records([_rec(agent_sec=-1.0)], source="db#lin")


def test_token_rates_recover_known_rates_and_split_keeps_the_total():
    rng = random.Random(0)
    costs = []
    for _ in range(50):
        pt, ct = rng.randint(500, 5000), rng.randint(20, 300)
        costs.append(
            TrialCost(
                stage="s",
                setup_sec=0.5,
                agent_sec=1.2 + ct / 50 + pt / 600,
                finish_sec=0.5,
                prompt_tokens=pt,
                completion_tokens=ct,
                num_turns=3,
            )
        )
    rates = fit_token_rates(costs)
    assert rates.fixed_sec == pytest.approx(1.2, abs=1e-6)
    assert rates.completion_tokens_per_sec == pytest.approx(50, rel=1e-6)
    assert rates.prompt_tokens_per_sec == pytest.approx(600, rel=1e-6)
    work = split_trial(costs[0], rates)
    assert work.model_sec + work.tool_sec == pytest.approx(costs[0].agent_sec)
    assert work.tool_sec == pytest.approx(1.2, abs=1e-6)
    with pytest.raises(CostError, match="at least 3"):
        fit_token_rates(costs[:2])


def test_plan_from_timeline_reads_waves_gaps_and_training():
    t0 = datetime(2026, 1, 1, tzinfo=UTC)

    def tr(stage, a, b):
        return TimedTrial(stage=stage, started_at=t0 + timedelta(seconds=a), finished_at=t0 + timedelta(seconds=b))

    trials = [tr("expansion", 5, 10), tr("expansion", 6, 12), tr("rollout", 20, 25), tr("selection", 125, 130)]
    plan = plan_from_timeline(trials, t0, t0 + timedelta(seconds=131), training_sec=80.0)
    kinds = [(s.kind, getattr(s, "seconds", None)) for s in plan.steps]
    assert kinds == [
        ("serial", 5.0),
        ("trials", None),
        ("serial", 8.0),
        ("trials", None),
        ("training", 80.0),
        ("serial", 20.0),
        ("trials", None),
        ("serial", 1.0),
    ]
    assert plan.n_trials == 4
    with pytest.raises(ValueError, match="exceeds its gap"):
        plan_from_timeline(trials, t0, t0 + timedelta(seconds=131), training_sec=200.0)


def test_nightly_plan_counts():
    spec = NightlySpec(tasks=1000, attempts=5)
    over = Overheads(discovery_sec=27, replay_job_sec=2.4, search_finish_sec=18, barrier_sec=0.2)
    plan = nightly_plan(spec, over, training_sec=60)
    assert spec.split_sizes() == (500, 250, 250)
    per_stage: dict[str, int] = {}
    for s in plan.steps:
        if isinstance(s, TrialWave):
            for stage, n in s.counts.items():
                per_stage[stage] = per_stage.get(stage, 0) + n
    assert per_stage == {"expansion": 2500, "search": 1000, "selection": 2 * 2500, "rollout": 4 * 512, "sealed": 3750}
    assert sum(isinstance(s, Training) for s in plan.steps) == 4
