"""The request batcher: grouping, waiting for batch mates, errors per group and per item."""

from __future__ import annotations

import threading
import time

import pytest

from mindforge.policy.engines.batcher import Batcher


def _run_all(batcher: Batcher, items: list) -> list:
    out: dict[int, object] = {}

    def call(i: int, item) -> None:
        try:
            out[i] = batcher.submit(item)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            out[i] = exc

    threads = [threading.Thread(target=call, args=(i, it)) for i, it in enumerate(items)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    return [out[i] for i in range(len(items))]


def test_queued_items_batch_by_key_and_keep_their_order():
    gate, started = threading.Event(), threading.Event()
    seen: list[list[int]] = []

    def run(batch: list[int]) -> list[int]:
        started.set()
        gate.wait(5)
        seen.append(list(batch))
        return [x * 10 for x in batch]

    b = Batcher(run, key=lambda x: x % 2, max_batch=2, wait_sec=0.0)
    first = threading.Thread(target=b.submit, args=(100,))
    first.start()
    assert started.wait(5)  # the worker now runs [100] and waits at the gate; the rest queue
    results: list = []
    rest = threading.Thread(target=lambda: results.extend(_run_all(b, [1, 2, 3, 4, 5])))
    rest.start()
    deadline = time.monotonic() + 5
    while b._queue.qsize() < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    gate.set()
    first.join(5)
    rest.join(10)
    b.close()
    assert results == [10, 20, 30, 40, 50]
    assert seen[0] == [100]
    # one round of five queued items: odd and even groups, each cut at max_batch=2
    assert sorted(sorted(s) for s in seen[1:]) == [[1, 3], [2, 4], [5]]
    assert b.batch_sizes[0] == 1 and sorted(b.batch_sizes[1:]) == [1, 2, 2]


def test_after_a_concurrent_round_the_next_waits_for_a_mate():
    """Two callers that alternate (each comes back shortly after its answer) fall into step."""
    # wait_sec leaves room for a loaded machine's scheduling delays around the sleeps below
    b = Batcher(lambda batch: [time.sleep(0.05) or x for x in batch], key=lambda x: 0, max_batch=4, wait_sec=2.0)
    b._demand = 2  # as after a round where a second caller queued
    got: list = []
    t = threading.Thread(target=lambda: got.append(b.submit("a")))
    t.start()
    time.sleep(0.3)  # well inside wait_sec: "a" is still waiting for a mate
    assert b.batch_sizes == []
    assert b.submit("b") == "b"
    t.join(5)
    assert got == ["a"] and b.batch_sizes == [2]
    # that round saw two callers; a lone caller now waits at most wait_sec, then runs alone
    start = time.monotonic()
    assert b.submit("c") == "c"
    assert 1.9 < time.monotonic() - start < 6.0
    # ... and after a lone round nobody waits (well under wait_sec)
    start = time.monotonic()
    assert b.submit("d") == "d"
    assert time.monotonic() - start < 1.5
    b.close()


def test_errors_reach_the_callers_of_their_group_only():
    def run(batch: list[str]) -> list:
        if "boom" in batch:
            raise ValueError("bad batch")
        return [ValueError(f"bad item {x}") if x == "bad" else x.upper() for x in batch]

    b = Batcher(run, key=lambda x: x == "boom", max_batch=8, wait_sec=0.0)
    assert b.submit("ok") == "OK"
    with pytest.raises(ValueError, match="bad item bad"):
        b.submit("bad")
    with pytest.raises(ValueError, match="bad batch"):
        b.submit("boom")
    assert b.submit("fine") == "FINE"  # the worker survives
    b.close()
    with pytest.raises(RuntimeError, match="closed"):
        b.submit("late")


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="max_batch"):
        Batcher(lambda b: b, key=id, max_batch=0)
    with pytest.raises(ValueError, match="wait_sec"):
        Batcher(lambda b: b, key=id, wait_sec=-1)


def test_items_sent_together_run_together_even_from_a_cold_start():
    b = Batcher(lambda batch: list(batch), key=lambda x: 0, max_batch=4, wait_sec=0.0, gather_sec=0.2)
    assert _run_all(b, ["x", "y"]) == ["x", "y"]
    assert b.batch_sizes == [2]
    b.close()
