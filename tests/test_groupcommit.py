"""Group commit: what queues up while the worker is busy goes in one call, answered in order."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from scrapy_simhash.workers.groupcommit import GroupCommit


def test_calls_queued_while_busy_are_handled_together_in_order() -> None:
    started, gate = threading.Event(), threading.Event()
    calls: list[list[int]] = []

    def handle(batch: list[int]) -> list[int]:
        if not calls:
            started.set()
            gate.wait(5)  # the first call holds the worker while the others queue up
        calls.append(batch)
        return [x * 10 for x in batch]

    committer: GroupCommit[int, int] = GroupCommit(handle, max_batch=4)
    futures = [committer.submit(0)]
    assert started.wait(5)
    futures += [committer.submit(n) for n in range(1, 10)]
    gate.set()
    assert [f.result(5) for f in futures] == [n * 10 for n in range(10)]
    committer.shutdown()
    assert calls[0] == [0]
    assert [len(c) for c in calls[1:]] == [4, 4, 1]  # never more than max_batch
    assert [x for c in calls for x in c] == list(range(10))


def test_an_error_reaches_every_caller_of_its_batch_only() -> None:
    started, gate = threading.Event(), threading.Event()

    def handle(batch: list[int]) -> list[int]:
        started.set()
        gate.wait(5)
        if 3 in batch:
            raise OSError("disk full")
        return batch

    committer: GroupCommit[int, int] = GroupCommit(handle, max_batch=3)
    futures = [committer.submit(0)]
    assert started.wait(5)
    futures += [committer.submit(n) for n in range(1, 6)]
    gate.set()
    outcomes = []
    for f in futures:
        try:
            outcomes.append(f.result(5))
        except OSError as exc:
            outcomes.append(str(exc))
    committer.shutdown()
    # batches: [0] alone, then [1, 2, 3] (fails as a whole), then [4, 5]
    assert outcomes == [0, "disk full", "disk full", "disk full", 4, 5]


def test_a_cancelled_call_is_left_out_and_shutdown_finishes_the_rest() -> None:
    started, gate = threading.Event(), threading.Event()
    seen: list[int] = []

    def handle(batch: list[int]) -> list[int]:
        started.set()
        gate.wait(5)
        seen.extend(batch)
        return batch

    committer: GroupCommit[int, int] = GroupCommit(handle)
    first = committer.submit(0)
    assert started.wait(5)
    cancelled: Future[int] = committer.submit(1)
    last = committer.submit(2)
    assert cancelled.cancel()
    gate.set()
    committer.shutdown()
    assert first.result(0) == 0 and last.result(0) == 2
    assert seen == [0, 2]


def test_max_batch_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        GroupCommit(lambda batch: batch, max_batch=0)


def test_a_handler_that_loses_results_fails_the_batch_instead_of_hanging() -> None:
    committer: GroupCommit[int, int] = GroupCommit(lambda batch: batch[:-1])
    future = committer.submit(1)
    with pytest.raises(RuntimeError, match="0 results for a batch of 1"):
        future.result(5)
    assert committer.submit(2).exception(5) is not None  # the worker is still serving
    committer.shutdown()
