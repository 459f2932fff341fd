"""Collect requests that arrive together into batches, run them on one worker thread.

Pure (no torch). A :class:`Batcher` owns one thread; callers :meth:`Batcher.submit` an
item and block on a :class:`concurrent.futures.Future` until its batch has run. The
thread takes the first queued item, gathers what else arrives within ``gather_sec`` (a
few milliseconds, so that requests sent together run together) or, when the last round
showed concurrent callers, within ``wait_sec``, splits the lot into groups of compatible items
(``key``) and hands each group, at most ``max_batch`` long, to ``run_batch``.

Why it waits: generation with transformers' ``generate`` is static batching (rows cannot
join a running batch). Two agent trials that alternate generation and tool calls would
otherwise take turns forever, each running alone while the other's next request queues.
When the previous round saw ``n`` callers (the rows it ran plus those that queued while
it ran), the next round waits up to ``wait_sec`` for as many; once the trials fall into
step, each round runs them together. A lone caller never waits (its last round saw one).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_STOP = object()
#: a round takes at most this many batches' worth of queued items (they may fall in several groups)
_ROUND_BATCHES = 4


class Batcher(Generic[T, R]):
    """One worker thread running queued items in batches.

    Args:
        run_batch: runs one group of compatible items and returns one result per item, in
            order; an exception fails every item of the group.
        key: items with equal keys may share a batch.
        max_batch: most items per ``run_batch`` call.
        wait_sec: longest wait (seconds) for more items when the last round saw
            concurrent callers; 0 never waits.
        gather_sec: wait (seconds) for items arriving together with the first, on every round.
        name: the worker thread's name.

    Raises:
        ValueError: ``max_batch`` < 1 or ``wait_sec`` < 0.
    """

    def __init__(
        self,
        run_batch: Callable[[list[T]], Sequence[R]],
        *,
        key: Callable[[T], Hashable],
        max_batch: int = 8,
        wait_sec: float = 0.25,
        gather_sec: float = 0.005,
        name: str = "batcher",
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        if wait_sec < 0 or gather_sec < 0:
            raise ValueError(f"wait_sec and gather_sec must not be negative, got {wait_sec}, {gather_sec}")
        self._run_batch = run_batch
        self._key = key
        self.max_batch = max_batch
        self.wait_sec = wait_sec
        self.gather_sec = gather_sec
        self._queue: queue.Queue[Any] = queue.Queue()
        self._demand = 1  # callers seen by the last round
        self.batch_sizes: list[int] = []  # rows of every run_batch call, for tests and benchmarks
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, item: T) -> R:
        """Queue ``item`` and wait for its result.

        Raises:
            RuntimeError: the batcher was closed.
            Exception: whatever ``run_batch`` raised for the item's group.
        """
        if not self._thread.is_alive():
            raise RuntimeError("batcher is closed")
        fut: Future[R] = Future()
        self._queue.put((item, fut))
        return fut.result()

    def close(self) -> None:
        """Stop the worker thread after the items already queued."""
        self._queue.put(_STOP)
        self._thread.join()

    # ------------------------------------------------------------------ worker

    def _gather(self, first: Any) -> tuple[list[tuple[T, Future[R]]], bool]:
        items, stop = [first], False
        start = time.monotonic()
        gather_until = start + self.gather_sec
        demand_until = start + (self.wait_sec if self._demand > 1 else 0.0)
        while len(items) < self.max_batch * _ROUND_BATCHES:
            until = max(gather_until, demand_until) if len(items) < self._demand else gather_until
            try:
                nxt = self._queue.get(timeout=max(0.0, until - time.monotonic()))
            except queue.Empty:
                break
            if nxt is _STOP:
                stop = True
                break
            items.append(nxt)
        return items, stop

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            items, stop = self._gather(first)
            groups: dict[Hashable, list[tuple[T, Future[R]]]] = {}
            for item, fut in items:
                try:
                    groups.setdefault(self._key(item), []).append((item, fut))
                except Exception as exc:  # noqa: BLE001 - a key that cannot be computed fails that item only
                    fut.set_exception(exc)
            for group in groups.values():
                for start in range(0, len(group), self.max_batch):
                    self._run(group[start : start + self.max_batch])
            # callers this round saw: those it ran plus those that queued meanwhile
            self._demand = max(1, min(self.max_batch, len(items) + self._queue.qsize()))
            if stop:
                return

    def _run(self, chunk: list[tuple[T, Future[R]]]) -> None:
        self.batch_sizes.append(len(chunk))
        try:
            results = self._run_batch([item for item, _ in chunk])
            if len(results) != len(chunk):
                raise RuntimeError(f"run_batch returned {len(results)} results for {len(chunk)} items")
        except BaseException as exc:  # noqa: BLE001 - handed to every waiting caller
            for _, fut in chunk:
                fut.set_exception(exc)
            return
        for (_, fut), result in zip(chunk, results, strict=True):
            if isinstance(result, BaseException):
                fut.set_exception(result)
            else:
                fut.set_result(result)
