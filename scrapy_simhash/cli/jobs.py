"""``dedup --jobs``: the worker processes that read and fingerprint lines, fed in input order, and the
reading of their answers, which the run decides on in that order.

The workers are a :class:`multiprocessing.pool.Pool` (forked where that is safe, else spawned),
nicer than the run's process, whose check-and-adds are the run's serial part. Stopping is where a
pool goes wrong: a Ctrl-C raised wherever the main thread happens to be, a worker killed while it
sends an answer, a worker that died or never answers can each leave the pool's clean-up waiting
forever; :func:`ctrl_c_deferred`, :meth:`_Pool.finish` and :meth:`_Pool.lost_a_worker` keep a run
from hanging on any of them.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.pool
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .common import make_fingerprinter
from .lines import LineResult, LineWorker

if TYPE_CHECKING:
    from multiprocessing.pool import IMapIterator

    from .input import Reader

#: The workers run this much nicer than the parent. The parent's check-and-adds are
#: the run's serial part (in English, where fingerprints are cheap, its pace is the run's); with as
#: many workers as cores, three processes at one priority share two cores and the parent gets two
#: thirds of one. Two workers at +3 (weight 526 each) weigh what the parent (1024) does: the
#: scheduler leaves it a core, and the workers share the rest and what it leaves idle.
WORKER_NICE = 3
#: Seconds between looks at a Ctrl-C while no worker's answer comes.
INTERRUPT_POLL = 0.1
#: Seconds a run stopped early waits for its workers' answers before it kills them.
FINISH_TIMEOUT = 10.0

_worker: LineWorker | None = None


def _init_worker(fp_options: dict[str, Any], fields: tuple[list[str], list[str], list[str]], keep: bool) -> None:
    """Pool initializer (a spawned worker): one Fingerprinter per worker process, built with the
    parent's options."""
    global _worker
    _nicer()
    _worker = LineWorker(make_fingerprinter(fp_options), *fields, keep_json=keep)


def _nicer() -> None:
    """A worker's priority: :data:`WORKER_NICE` below the parent's (where the platform has nice)."""
    if hasattr(os, "nice"):
        os.nice(WORKER_NICE)


def start_pool(jobs: int, worker: LineWorker, fp_options: dict[str, Any],
                fields: tuple[list[str], list[str], list[str]], keep: bool) -> multiprocessing.pool.Pool:
    """The worker processes. Forked where that is safe (Linux, and no other thread in this process
    yet: a fork copies only the calling thread, and a lock another thread held stays locked in the
    child): they start with the parent's engine, tables and route already loaded, instead of paying
    the engine's start-up again each (~0.1 s of CPU a worker). Elsewhere spawned, each building its own."""
    global _worker
    if sys.platform == "linux" and threading.active_count() == 1:
        worker.fingerprinter.prepare()  # what the first fingerprint loads, loaded once for all of them
        _worker = worker
        return _Pool(jobs, initializer=_forked_worker, context=multiprocessing.get_context("fork"))
    return _Pool(jobs, initializer=_init_worker, initargs=(fp_options, fields, keep),
                 context=multiprocessing.get_context("spawn"))


class _Pool(multiprocessing.pool.Pool):
    """A process pool whose worker handler thread sleeps until a worker exits or the pool changes
    state. CPython's also wakes whenever the results pipe is readable (``_get_sentinels``): while
    answers wait there for the result thread (which waits for the GIL behind the decide loop), it
    spins, building a selector and checking the workers over and over, on the parent's CPU and GIL,
    which the run's serial part needs. The workers' sentinels and the change notifier (close,
    terminate, the last task done) are all it acts on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._started = {worker.pid for worker in self._pool}  # type: ignore[attr-defined]

    def _get_sentinels(self) -> list[Any]:
        return [self._change_notifier._reader]  # type: ignore[attr-defined]

    def lost_a_worker(self) -> bool:
        """Has a worker died (killed, out of memory)? The pool replaces it without a word, and the
        lines it was fingerprinting are never answered: the run would wait for them forever."""
        return any(worker.pid not in self._started or worker.exitcode is not None
                   for worker in list(self._pool))  # type: ignore[attr-defined]

    def finish(self) -> None:
        """Close the pool, let the workers answer what they were sent (a run stopped early: at most
        the reader's window of lines), and join it. Not ``terminate()``: it kills the workers, and one
        killed while it sends an answer leaves the answers' queue locked, on which the pool's own
        clean-up then waits forever (seen under load). A pool that lost a worker (whose lines are never
        answered), or whose answers or workers' ends take longer than :data:`FINISH_TIMEOUT` (a worker
        that never answers, even with all its lines answered), is abandoned (:meth:`_abandon`)."""
        lost = self.lost_a_worker()  # before close(): closed, workers end of their own once all is answered
        self.close()
        if not lost:
            deadline = time.monotonic() + FINISH_TIMEOUT
            self._worker_handler.join(FINISH_TIMEOUT)  # type: ignore[attr-defined]  # it ends once all is answered
            workers = list(self._pool)  # type: ignore[attr-defined]
            for worker in workers:  # then each ends at the stop it is sent (one that never answers does not)
                worker.join(max(0.0, deadline - time.monotonic()))
            if not self._worker_handler.is_alive() and not any(w.is_alive() for w in workers):  # type: ignore[attr-defined]
                self.join()
                return
        self._abandon()

    def _abandon(self) -> None:
        """Kill the workers and leave the pool's threads behind (daemons: they end with the process).
        A dead worker may hold a lock of the pool's queues (an idle one waits for its next task holding
        the tasks' read lock), on which ``terminate()``'s clean-up, and the one the pool runs at exit,
        would wait forever: that clean-up is cancelled."""
        handler = self._worker_handler  # type: ignore[attr-defined]
        handler._state = multiprocessing.pool.TERMINATE  # no replacement workers from now on
        self._change_notifier.put(None)  # type: ignore[attr-defined]
        handler.join()
        for worker in list(self._pool):  # type: ignore[attr-defined]
            worker.kill()
            worker.join()
        self._terminate.cancel()  # type: ignore[attr-defined]


def _forked_worker() -> None:
    """Pool initializer (a forked worker): not the parent's signal handlers (a Python handler that
    only sets a flag, as Twisted's or an embedding program's may, would keep a SIGTERM from ending the
    worker: ``Pool.terminate``'s, the one :mod:`multiprocessing` sends its daemon processes at exit);
    Ctrl-C is the parent's."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _nicer()


def work(chunk: list[tuple[int, bytes | str]]) -> list[LineResult]:
    """One task of the pool, in a worker: a chunk of numbered lines made into their results."""
    assert _worker is not None
    return [_worker(numbered) for numbered in chunk]


def feed(reader: Reader, size: int, stop: threading.Event) -> Iterator[list[tuple[int, bytes | str]]]:
    """The reader's lines in lists of ``size``: one task of the pool each; none once ``stop`` is set."""
    chunk: list[tuple[int, bytes | str]] = []
    for numbered in reader:
        if stop.is_set():
            return
        chunk.append(numbered)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk and not stop.is_set():
        yield chunk


def stop_feeding(stop: threading.Event, reader: Reader) -> None:
    """End the pool's feed of lines (a run that stops early: Ctrl-C, an index error). Its feeder
    thread may wait for the reader's window, which only decided lines open: without this, it waits
    forever, and the pool, which finishes once every line sent is answered (:meth:`_Pool.finish`), with it."""
    stop.set()
    reader.consumed()  # one more line read: the feeder sees the stop


@contextmanager
def ctrl_c_deferred() -> Iterator[list[int]]:
    """Ctrl-C noted in the list it yields instead of raised wherever the main thread happens to be,
    while the pool runs. Raised there, a ``KeyboardInterrupt`` can land between a lock's acquisition
    and the ``with`` that would release it (a lock the pool's threads share with this one: its
    results' or the reader's window), and the pool's clean-up then waits forever for threads blocked
    on it (seen under load). :func:`ready_batches` raises it where no lock is held.
    A handler other than Python's default (an embedding program's) is left alone."""
    seen: list[int] = []
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield seen
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


class WorkerDied(Exception):
    """A ``--jobs`` worker process died: the lines it held will never be answered."""


def ready_batches(chunks: IMapIterator, ctrl_c: Sequence[int], lost_a_worker: Callable[[], bool],
                  size: int, most: int) -> Iterator[list[LineResult]]:
    """The lines of each transaction, from the pool's answers in input order: ``size`` lines, and the
    chunks already answered after them, up to ``most``. A Ctrl-C noted in ``ctrl_c``
    (:func:`ctrl_c_deferred`) is raised here, between transactions, as ``KeyboardInterrupt``; a
    worker lost while the answers wait, as :class:`WorkerDied`."""
    batch: list[LineResult] = []
    while True:
        if ctrl_c:
            raise KeyboardInterrupt
        try:
            chunk = chunks.next(timeout=INTERRUPT_POLL)
        except multiprocessing.TimeoutError:
            if lost_a_worker():
                raise WorkerDied("a --jobs worker process died (killed, or out of memory?)") from None
            continue
        except StopIteration:
            break
        batch += chunk
        if len(batch) < size:
            continue
        while len(batch) < most:
            try:
                batch += chunks.next(timeout=0)
            except (multiprocessing.TimeoutError, StopIteration):
                break
        yield batch
        batch = []
    if batch:
        yield batch
