"""Benchmark: does a lineage's own experience library lift SmolLM2-135M on sealed tasks?

The full micro suite (``tasks/micro``) on three splits stratified by category
(:func:`mindforge.evaluation.splits.assign_splits`, key ``bench-experience``), SmolLM2-135M-
Instruct served by llama.cpp behind the OpenAI-compatible API (as ``bench_real_model`` and
``mindforge eval`` serve it), real Docker sandboxes and verifiers. Four contracts run on the
**sealed** split with the same trials each (same tasks, same attempt indices):

- ``command``: the shipped ``smollm2.toml`` with the ``command`` action format (one command
  per trial, replies stop at their newline), no examples - the baseline of every lift;
- ``command + oracle library``: retrieval (BM25, ``k`` entries per task, never the task's
  own) from the library seeded with the **search** split's reference solutions, each
  validated by replay with no model (:mod:`mindforge.experience`);
- ``command + library after one generation``: the same library grown by one generation -
  the oracle-seeded contract runs on the search split, its passes are mined, replayed twice
  with no model and kept if both pass - oracle and model entries together;
- ``command + hand-written library (RESTATES TEST TASKS)``: the first eight of the ten
  hand-written examples that search used to offer (``benchmarks/reference_examples``); they
  restate bundled tasks' solutions, so this arm is a reference, never evidence of skill.

Printed per contract: the sealed success rate (Wilson 95% interval) and the paired lift
over ``command`` (:func:`mindforge.evaluation.lift.paired_lift`, bootstrap 95% interval),
with task and trial counts; and the library's entries by provenance and its rejections by
reason. Target: the experience library's sealed lift over no examples has a 95%
lower bound above 0 - reported as measured either way. Nothing here decides anything: the
search split feeds the library, the sealed split only measures.

Run on demand (needs the ``llamacpp`` extra and ``mindforge dev up``)::

    python benchmarks/bench_experience.py            # the full run (longer than 10 minutes)
    python benchmarks/bench_experience.py --quick    # 1 attempt a sealed task, 1 a search task (< 10 min)
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPO = Path(__file__).resolve().parents[1]
SPLIT_KEY = "bench-experience"
REFERENCE_EXAMPLES = REPO / "benchmarks" / "reference_examples"
#: the hand-written arm carries the first eight reference examples (a contract holds at most 8)
REFERENCE_COUNT = 8
BASELINE = "command"
ORACLE = "command + oracle library"
GROWN = "command + library after one generation"
REFERENCE = "command + hand-written library (RESTATES TEST TASKS)"


def split_suite(key: str = SPLIT_KEY) -> dict[str, list[Any]]:
    """The micro suite on three splits (selection and sealed 0.2 each, stratified by category)."""
    from mindforge.evaluation import PoolSplit, SplitCandidate, SplitConfig, assign_splits
    from mindforge.tasks.loader import load_tasks

    tasks = load_tasks([REPO / "tasks" / "micro"])
    assignment = assign_splits(
        [SplitCandidate(task_hash=t.content_hash, task_id=t.id, category=t.config.metadata.category) for t in tasks],
        SplitConfig(),
        split_key=key,
    )
    return {s.value: [t for t in tasks if assignment[t.content_hash] == s] for s in PoolSplit}


def command_contract(temperature: float | None = None) -> Any:
    """``smollm2.toml`` with the ``command`` action format (its coupled stop and one-command mode), as search does."""
    from mindforge.hcp import derive, load_contract
    from mindforge.search import Edit, materialize

    root = load_contract(REPO / "hcp_contracts" / "smollm2.toml")
    contract = materialize(root, [Edit(op="action_format", value="command")])
    if temperature is not None and temperature != contract.provider_options.temperature:
        contract = derive(
            contract, revision=f"{contract.mindforge.revision}-t{temperature:g}", edit=f"temperature {temperature:g}",
            changes={"provider_options.temperature": temperature},
        )
    return contract


def reference_contract(command: Any) -> Any:
    """The ``command`` contract with the first eight hand-written examples (they restate test tasks)."""
    from mindforge.hcp import derive
    from mindforge.search.library import load_example_folder

    examples = load_example_folder(REFERENCE_EXAMPLES)[:REFERENCE_COUNT]
    return derive(
        command, revision=f"{command.mindforge.revision}-handwritten",
        edit="resources.examples: the hand-written library (RESTATES TEST TASKS; reference only)",
        changes={"resources.examples": examples},
    )


def sealed_jobs(contracts: dict[str, Any], sealed: list[Any], attempts: int) -> list[tuple[Any, Any, str, int]]:
    """The same (task, attempt) trials for every contract: ``(task, contract, trial id, attempt)``."""
    return [
        (task, contract, f"sealed/{contract.content_hash[:12]}/{task.id}/{a}", a)
        for contract in contracts.values()
        for task in sealed
        for a in range(attempts)
    ]


def lift_rows(records: list[Any], contracts: dict[str, Any], sealed: list[Any]) -> list[str]:
    """One line per contract: sealed success rate, and the paired lift over :data:`BASELINE` with its 95% interval."""
    from mindforge.evaluation import PairRef, PoolSplit, paired_lift, wilson_interval

    hashes = {t.content_hash for t in sealed}
    base = PairRef(contract_hash=contracts[BASELINE].content_hash)
    lines = []
    for name, contract in contracts.items():
        mine = [r for r in records if r.contract_hash == contract.content_hash and r.has_real_reward]
        rate = wilson_interval(sum(r.passed for r in mine), len(mine))
        line = (f"  {name}: {rate.successes}/{rate.n} sealed trials passed = {rate.rate:.3f} "
                f"(95% CI {rate.lo:.3f}..{rate.hi:.3f}) on {len({r.task_hash for r in mine})} tasks")  # fmt: skip
        if name != BASELINE:
            lift = paired_lift(
                records, base, PairRef(contract_hash=contract.content_hash), hashes,
                measured_on=PoolSplit.SEALED, resamples=4000, seed=0,
            )  # fmt: skip
            if lift.mean is None:
                line += f"\n    lift over {BASELINE}: none ({lift.reason})"
            else:
                bound = "above 0" if lift.lo is not None and lift.lo > 0 else "not above 0"
                line += (f"\n    lift over {BASELINE}: {lift.mean:+.3f} (95% CI {lift.lo:+.3f}..{lift.hi:+.3f}; "
                         f"lower bound {bound}) on {lift.n_tasks} tasks, {lift.n_trials} trials")  # fmt: skip
        lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> int:
    from benchmarks.bench_real_model import Runner
    from mindforge.policy.server.server import start_policy_server
    from mindforge.settings import get_settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 attempt a sealed task and a search task (< 10 min)")
    parser.add_argument("--attempts", type=int, default=None, help="attempts a sealed task a contract (full: 4)")
    parser.add_argument("--grow-attempts", type=int, default=None, help="attempts a search task, generation (full: 2)")
    parser.add_argument("--k", type=int, default=4, help="entries retrieved per task (0, 1, 2, 4, 8)")
    parser.add_argument("--temperature", type=float, default=None, help="temperature (default: the contract's)")
    parser.add_argument("--workers", type=int, default=2, help="trials at once")
    args = parser.parse_args(argv)
    attempts = args.attempts or (1 if args.quick else 4)
    grow_attempts = args.grow_attempts or (1 if args.quick else 2)

    t0 = time.monotonic()
    splits = split_suite()
    sizes = {k: len(v) for k, v in splits.items()}
    command = command_contract(args.temperature)
    contracts: dict[str, Any] = {BASELINE: command}
    notes: list[str] = []
    server = start_policy_server("smollm2", engine="llamacpp")
    runner = Runner(server.base_url, get_settings().artifacts / "bench_experience", workers=args.workers)
    library: Any = None
    try:
        if importlib.util.find_spec("mindforge.experience") is not None:
            from benchmarks.bench_experience_library import grow_library, oracle_library

            oracle = oracle_library(runner, splits["search"], SPLIT_KEY)
            contracts[ORACLE] = oracle.attach(command, k=args.k, provenance="oracle")
            library = grow_library(runner, oracle, contracts[ORACLE], splits["search"], grow_attempts, SPLIT_KEY)
            contracts[GROWN] = library.attach(command, k=args.k, provenance="any")
            print(f"  library: {oracle.summary()} -> after one generation: {library.summary()}", flush=True)
        else:
            notes.append("the experience library (mindforge.experience) is not in this tree: "
                         f"the {ORACLE!r} and {GROWN!r} arms were not run")  # fmt: skip
        contracts[REFERENCE] = reference_contract(command)
        jobs = sealed_jobs(contracts, splits["sealed"], attempts)
        print(f"  sealed: {len(jobs)} trials ({len(contracts)} contracts x {sizes['sealed']} tasks x {attempts})",
              flush=True)  # fmt: skip
        records = runner.run(jobs, run_id=f"{SPLIT_KEY}-sealed")
    finally:
        server.stop()

    print("\n=== bench_experience (SmolLM2-135M-Instruct on llama.cpp, tasks/micro, one run) ===")
    print(f"splits (stratified by category, key {SPLIT_KEY!r}): search {sizes['search']}, "
          f"selection {sizes['selection']}, sealed {sizes['sealed']}; {attempts} attempt(s) a sealed task a contract; "
          f"temperature {command.provider_options.temperature:g}, k = {args.k}")  # fmt: skip
    if library is not None:
        print(f"library after one generation ({grow_attempts} attempt(s) a search task): {library.summary()}")
    for line in lift_rows(records, contracts, splits["sealed"]):
        print(line)
    print(f"  ({REFERENCE}: its examples restate bundled tasks' solutions - a reference, never evidence of skill)")
    for note in notes:
        print(f"note: {note}")
    print(f"wall time {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
