"""The pipeline's front-end of the worker pool: fingerprints and checks on worker processes, so the
crawl's own process keeps its core.

Fingerprinting (normalization, jieba, TF-IDF, simhash) is CPU-bound Python, and so is much of the
check-and-add (the rule between its index statements): on threads of the crawl process they share one
GIL with the reactor, and the crawl slows to their pace. A :class:`FingerprintPool` runs them on
``SIMHASH_WORKERS`` processes of a :class:`~scrapy_simhash.workers.pool.WorkerPool` instead: with an
index (the pipeline's case), each worker opens the crawl's index and fingerprints and checks each
call's items in one transaction, so the crawl process only sends titles and bodies out and gets
verdicts back. The index serializes the transactions of several workers (SQLite's write lock,
Redis's atomic commits): two copies of one story in flight are checked one after the other, and
verdicts come back in the order they were committed. Without an index the pool only fingerprints
(``submit``).

Items go to the workers in calls of up to :data:`MAX_BATCH`: those that queued up within
:data:`LINGER` of the first one, or while :data:`IN_FLIGHT` calls per worker were out (one being
fingerprinted, one waiting for it), so that the crawl process pays the executor's plumbing (its
threads, pipes, pickles and futures) per call rather than per item, and the items of one call share
one transaction (one fsync). A crawl's items arrive a few milliseconds apart, faster than one fsynced
commit each allows but slower than a worker fingerprints them: without the wait, each would go
alone. Only plain data goes out: an item's title and body (``str``, ``bytes``, ``None`` or a list of
them), its URL and request id; the
:class:`~scrapy_simhash.fingerprint.fingerprinter.Fingerprints` fields and the verdict come back.
Any other value is fingerprinted and checked in the crawl process, as with 0 workers.

Start-up: workers are spawned (the pool's start, :mod:`~scrapy_simhash.workers.pool`) at spider
open and warmed there (the engine built, the jieba dictionary loaded, one sample item
fingerprinted), while the crawl starts; items that arrive meanwhile wait for them. ``fork`` is unsafe
once Twisted's reactor and the pipeline's threads run.

Failures: a worker that dies breaks its pool, which fails every item in it; each is sent once more
to a fresh pool (in the order first sent), and checked in the crawl process if that one breaks too.
After :data:`MAX_RESTARTS` fresh pools, the next break makes this front-end give up: the rest of the
crawl is checked in the crawl process. An item sent again keeps its request id: if the dead worker
had committed it, the index answers what it answered then (:class:`~scrapy_simhash.index.Query`'s
``request_id``; a new item gets its own entry back, never itself as its duplicate). An item whose
fingerprinting raises in a worker is fingerprinted and checked in the crawl process, which raises the
same error (or decides it). No item is lost; none is checked twice. :meth:`FingerprintPool.shutdown`
finishes every pool it started (the broken ones killed): none of their threads or processes outlives
it. Signals are the crawl process's (:mod:`~scrapy_simhash.workers.pool`): it finishes its items and
shuts the pool down.

Stalls: a call that a worker leaves unanswered for ``timeout`` seconds (counted from when it was sent,
or from when its pool was ready if that is later; from when the pool was made while it is not) means
a worker that is stopped (``SIGSTOP``), hung in a system call, or looping: the watchdog (the timer
thread, which looks every :data:`WATCH` seconds while calls are out) kills the pool, which then
breaks as if a worker had died, with the same resending. Once the crawl is stopping (``stopping()``,
e.g. after a ``SIGTERM``), a call gets :data:`STOPPING_GRACE` seconds at most, and the items of a pool
killed then are checked in the crawl process rather than in a fresh pool: the crawl ends within
seconds whatever its workers do. :meth:`FingerprintPool.shutdown` waits ``timeout`` seconds at most
for the calls out (:data:`STOPPING_GRACE` once stopping).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from operator import itemgetter
from typing import Any

from ..fingerprint.fingerprinter import Fingerprints
from .pool import WorkerPool
from .process import _check_many, _fingerprint_many, _start_worker

logger = logging.getLogger(__name__)

#: Broken pools (a worker died) replaced by fresh ones; at the next break the front-end gives up and
#: fingerprints the rest of the crawl in the crawl process. See docs/decisions/0404-worker-restarts.md.
MAX_RESTARTS = 3
#: Most items in one call to a worker. See docs/decisions/0400-crawl-calls.md.
MAX_BATCH = 16
#: Calls out per worker at a time; items submitted meanwhile queue up for the next call. See
#: docs/decisions/0400-crawl-calls.md.
IN_FLIGHT = 2
#: Seconds the first item waiting for a call waits for others (unless :data:`MAX_BATCH` are queued
#: sooner): the latency an item pays so that the items of a moment share one call and one commit.
#: See docs/decisions/0400-crawl-calls.md.
LINGER = 0.02
#: Seconds between the timer's looks at the queue while items keep coming, and without any after which
#: it sleeps until woken. See docs/decisions/0403-crawl-timer.md.
POLL, DOZE = 0.01, 1.0
#: Seconds between two looks of the watchdog at the calls out while no item comes; see the module
#: docstring (Stalls) and docs/decisions/0410-worker-timeout.md.
WATCH = 0.5
#: Seconds a call out may still take once the crawl is stopping. See docs/decisions/0410-worker-timeout.md.
STOPPING_GRACE = 3.0
_place = itemgetter(3)
#: An item waiting for a worker: its future, what goes to the worker (title, body; with the index: url
#: and request id too), how many worker pools broke under it, and its place in the order of submission
#: (items sent again go in that order: the index answers them in the order it committed them).
_Job = tuple[Future[Any], tuple[Any, ...], int, int]


def _is_plain(value: Any) -> bool:
    """Can this item value go to a worker as it is (and be read there as it is read here)?"""
    kind = type(value)
    if value is None or kind is str or kind is bytes:
        return True
    return kind in (list, tuple) and all(v is None or type(v) in (str, bytes) for v in value)


# -- in the crawl process -------------------------------------------------------------------------


def _settle(future: Future[Any], result: Any = None, exc: BaseException | None = None) -> None:
    """Give ``future`` its outcome, unless it was cancelled meanwhile (nobody waits for it then)."""
    try:
        if exc is None:
            future.set_result(result)
        else:
            future.set_exception(exc)
    except InvalidStateError:
        pass


def _copy(future: Future[Any], source: Future[Any]) -> None:
    _settle(future, None if source.exception() else source.result(), source.exception())


class FingerprintPool:
    """``submit(title, body)`` → a future of the item's :class:`Fingerprints`, made on ``workers``
    processes (0: on one thread of this process, calling ``fallback``, as before the pool).

    With ``index`` (:func:`index_options`; ``workers`` ≥ 1), the workers check the items too:
    ``check(title, body, url, request_id)`` → a future of ``(fingerprints, verdict or the index's
    error)``, and what no worker can check goes to ``check_here`` (same arguments, a future of the
    same), with its request id: one that a worker committed before it died gets its answer back.
    ``before_call`` runs before each call to a worker (never on the submitter's thread: calls go
    from the pool's own threads). ``timeout``: seconds a call may go unanswered before its pool is
    killed and replaced; ``stopping()`` (read on the pool's timer thread) says that the crawl is
    stopping, when a call gets :data:`STOPPING_GRACE` seconds at most."""

    def __init__(self, workers: int, options: dict[str, Any], fallback: Callable[[Any, Any], Fingerprints],
                 index: dict[str, Any] | None = None,
                 check_here: Callable[[Any, Any, str | None, str], Future[Any]] | None = None,
                 before_call: Callable[[], None] | None = None, timeout: float = 60.0,
                 stopping: Callable[[], bool] | None = None) -> None:
        self.workers = workers
        self.died = 0  #: worker pools broken by a worker that died
        self.index_retries = 0  #: index retries in the workers (per item, as items see them)
        self.stalled = 0  #: worker pools killed because a call went unanswered (counted in ``died`` too)
        self.timeout = timeout
        self._stopping = stopping
        self._stopping_since: float | None = None  # when stopping() was first seen true
        self._options = options
        self._fallback = fallback
        self._index = index if workers else None
        self._check_here = check_here
        self._before_call = before_call
        self._call = _check_many if self._index is not None else _fingerprint_many
        self._local = ThreadPoolExecutor(1, thread_name_prefix="simhash-fingerprint")
        self._lock = threading.Lock()  # replacing the worker pool
        self._queue_lock = threading.Lock()
        self._queue: list[_Job] = []  # items waiting for a call
        self._submitted = itertools.count()
        self._due_at = 0.0  # when the queued items go, full or not (time.monotonic)
        self._in_flight = 0  # calls out
        self._out: Counter[int] = Counter()  # calls out per worker pool (id)
        self._broken_out: set[int] = set()  # broken pools with calls out: nothing goes until they are back
        self._stopped = False
        self._dozing = True  # the timer sleeps until woken (else it looks at the queue every POLL)
        self._due = threading.Condition(self._queue_lock)  # the timer: items queued, a call returned, stop
        self._retired: list[WorkerPool] = []  # broken pools, finished at shutdown
        self._calls: dict[int, tuple[WorkerPool, float]] = {}  # calls out: their pool, when sent
        self._call_ids = itertools.count()
        self._ready_at: dict[int, float] = {}  # worker pool (id) → when its workers were all started
        self._made_at: dict[int, float] = {}  # worker pool (id) → when it was made
        self._stalled_pools: set[int] = set()  # worker pools (id) the watchdog killed
        self._executor: WorkerPool | None = self._start() if workers else None
        self._timer = threading.Thread(target=self._send_when_due, name="simhash-linger", daemon=True)
        if workers:
            self._timer.start()

    def _start(self) -> WorkerPool:
        """A new pool whose workers are spawned and warmed now (they start in parallel)."""
        made = time.monotonic()
        pool = WorkerPool(self.workers, _start_worker, (self._options, self._index))
        self._made_at[id(pool)] = made
        started, waiting, counting = time.perf_counter(), [self.workers], threading.Lock()

        def ready(warmed: Future[int]) -> None:
            with counting:
                waiting[0] -= 1
                if not waiting[0]:
                    self._ready_at[id(pool)] = time.monotonic()
            if not waiting[0] and not warmed.exception():
                logger.info("scrapy-simhash: %d fingerprint worker process(es) ready in %.2f s",
                            self.workers, time.perf_counter() - started)

        for warmed in pool.started:
            warmed.add_done_callback(ready)
        return pool

    def pids(self) -> list[int]:
        """Process ids of the current workers (for tests and diagnostics)."""
        executor = self._executor
        return executor.pids() if executor is not None else []

    @property
    def decides(self) -> bool:
        """Do the workers check the items too (:meth:`check`)?"""
        return self._index is not None

    def here(self, title: Any, body: Any) -> Future[Fingerprints]:
        """Fingerprint one item in this process, on the pool's thread."""
        return self._local.submit(self._fallback, title, body)

    def submit(self, title: Any, body: Any) -> Future[Fingerprints]:
        """Fingerprint one item's title and body; the future raises what fingerprinting raises
        (:class:`~scrapy_simhash.fingerprint.fingerprinter.UnreadableField`)."""
        assert not self.decides, "the workers check items: use check()"
        return self._queue_up((title, body))

    def check(self, title: Any, body: Any, url: str | None, request_id: str) -> Future[Any]:
        """Fingerprint and check-and-add one item on a worker: a future of ``(fingerprints, verdict or
        the index's error)``; it raises what fingerprinting raises."""
        assert self.decides, "the pool has no index"
        return self._queue_up((title, body, url, request_id))

    def _queue_up(self, args: tuple[Any, ...]) -> Future[Any]:
        if self._executor is None or not (_is_plain(args[0]) and _is_plain(args[1])):
            return self._elsewhere(args)
        future: Future[Any] = Future()
        with self._queue_lock:
            self._queue.append((future, args, 0, next(self._submitted)))
            if len(self._queue) == 1 or len(self._queue) == MAX_BATCH:  # the timer waits for them, or sends them now
                self._due_at = time.monotonic() + (LINGER if len(self._queue) == 1 else 0.0)
                if self._dozing:  # else it looks again within POLL: waking it from here costs the reactor more
                    self._due.notify()
            stopped = self._stopped
        if stopped:  # the timer is gone
            self._send()
        return future

    def _send_when_due(self) -> None:
        """The timer thread: sends the queued items once :data:`LINGER` has passed (until shutdown).
        While items keep coming it looks at the queue every :data:`POLL` (a submit wakes nobody: a
        thread woken from the reactor's thread tends to preempt it while it holds the GIL); after
        :data:`DOZE` without any, it sleeps until the next submit or returned call wakes it."""
        last = time.monotonic()
        while True:
            stuck = None
            with self._due:
                while True:
                    if self._stopped:
                        return
                    now = time.monotonic()
                    if self._queue:
                        last = now
                    waiting = (bool(self._queue) and self._in_flight < IN_FLIGHT * self.workers
                               and not self._broken_out)
                    delay = self._due_at - now
                    if waiting and delay <= 0:
                        break
                    if self._calls and (stuck := self._overdue(now)) is not None:
                        break
                    self._dozing = not self._queue and now - last > DOZE
                    self._due.wait((WATCH if self._calls else None) if self._dozing
                                   else min(delay, POLL) if waiting else POLL)
                    self._dozing = False
            if stuck is not None:
                self._kill_stuck(stuck)
                continue
            self._send()

    def _overdue(self, now: float) -> WorkerPool | None:
        """The current worker pool if one of its calls went unanswered past its time (under the queue
        lock): ``timeout`` seconds from when it was sent or its pool was ready (made, until it is),
        whichever is later; :data:`STOPPING_GRACE` seconds from when the crawl began to stop."""
        executor = self._executor
        if executor is None or id(executor) in self._stalled_pools:
            return None
        sent = [at for pool, at in self._calls.values() if pool is executor]
        if not sent:
            return None
        if self._stopping_since is None and self._stopping is not None and self._stopping():
            self._stopping_since = now
        ready = self._ready_at.get(id(executor))
        start = max(min(sent), ready) if ready is not None else self._made_at.get(id(executor), min(sent))
        limit = start + self.timeout
        if self._stopping_since is not None:
            limit = min(limit, max(start, self._stopping_since) + STOPPING_GRACE)
        return executor if now >= limit else None

    def _kill_stuck(self, executor: WorkerPool) -> None:
        """Kill a worker pool whose call went unanswered: it breaks, and its calls come back as those
        of a pool whose worker died (:meth:`_returned`), their items sent again."""
        with self._queue_lock:
            if id(executor) in self._stalled_pools:
                return
            self._stalled_pools.add(id(executor))
        with self._lock:
            self.stalled += 1
        logger.warning("scrapy-simhash: a fingerprint worker did not answer within %s s (stopped, or stuck?); "
                       "its processes are killed and its items sent again",
                       f"{STOPPING_GRACE:g}" if self._stopping_since is not None else f"{self.timeout:g}")
        executor.kill()

    def _send(self) -> None:
        """Send the queued items, up to :data:`MAX_BATCH` a call, while fewer than :data:`IN_FLIGHT`
        calls per worker are out and the items are due (:data:`LINGER`) or a call's worth (the
        timer, a call's answer, or shutdown; not the submitter: ``before_call`` may write to the index)."""
        while True:
            with self._queue_lock:
                executor = self._executor
                if not self._queue or self._broken_out or (executor is not None and (
                        self._in_flight >= IN_FLIGHT * self.workers
                        or (len(self._queue) < MAX_BATCH and not self._stopped and time.monotonic() < self._due_at))):
                    return
                count = MAX_BATCH if executor is not None else len(self._queue)
                batch, self._queue[:count] = self._queue[:count], []
                if executor is not None:
                    self._in_flight += 1
                    self._out[id(executor)] += 1
                    call = next(self._call_ids)
                    self._calls[call] = (executor, time.monotonic())
            if executor is None:  # shut down, or given up: in the crawl process
                for future, args, *_ in batch:
                    self._in_process(future, args)
                continue
            if self._before_call is not None:
                self._before_call()
            try:
                sent = executor.submit(self._call, [args for _, args, *_ in batch])
            except (BrokenProcessPool, RuntimeError):  # broken by another call's worker, not yet replaced
                with self._queue_lock:
                    self._in_flight -= 1
                    del self._calls[call]
                    self._queue[:0] = batch  # not these items' attempt: they never reached a worker
                    self._queue.sort(key=_place)
                    self._due_at = 0.0
                    self._back(id(executor), broken=True)
                self._replace(executor)
                continue
            sent.add_done_callback(partial(self._returned, batch, executor, call))

    def _returned(self, batch: list[_Job], executor: WorkerPool, call: int,
                  sent: Future[Any]) -> None:
        """A worker's answer (on the worker pool's thread): each item's fingerprints, or why there are none."""
        exc = sent.exception()
        broken = isinstance(exc, BrokenProcessPool)  # its worker (or another one of its pool) died
        if broken:
            with self._queue_lock:
                self._broken_out.add(id(executor))  # from now until its calls are all back, nothing goes
            self._replace(executor)
        with self._queue_lock:
            self._in_flight -= 1
            del self._calls[call]
            if broken:
                # Once more, to a fresh pool, in the order first sent (a worker that committed them
                # before it died: their request ids get the same answers back, before any item checked
                # after them), then in the crawl process.
                self._queue[:0] = [(future, args, attempt + 1, place)
                                   for future, args, attempt, place in batch if attempt < 1]
                self._queue.sort(key=_place)
                self._due_at = 0.0
            self._back(id(executor), broken)
            self._due.notify()  # items held back by the calls out may be due now
        if broken:
            batch = [job for job in batch if job[2] >= 1]
        self._send()  # the next call first: the worker is idle
        results: Any = sent.result() if exc is None else [None] * len(batch)
        if self.decides and exc is None:
            retried, results = results
            self.index_retries += retried
        for (future, args, *_), result in zip(batch, results, strict=True):
            if result is None:  # it raised in the worker, or could not be sent: here it raises the same, or succeeds
                self._in_process(future, args)
            elif self.decides:
                _settle(future, (Fingerprints(*result[0]), result[1]))
            else:
                _settle(future, Fingerprints(*result))

    def _back(self, executor: int, broken: bool) -> None:
        """A call of this worker pool (id) is back (under the queue lock)."""
        self._out[executor] -= 1
        if broken and self._out[executor]:
            self._broken_out.add(executor)
        if not self._out[executor]:
            del self._out[executor]
            self._broken_out.discard(executor)

    def _elsewhere(self, args: tuple[Any, ...]) -> Future[Any]:
        """What no worker does: fingerprinted (and checked) in the crawl process."""
        if self.decides:
            assert self._check_here is not None
            return self._check_here(*args)
        return self.here(*args)

    def _in_process(self, future: Future[Any], args: tuple[Any, ...]) -> None:
        try:
            elsewhere = self._elsewhere(args)
        except RuntimeError as exc:  # the interpreter is exiting (the reactor was stopped): nobody waits
            _settle(future, exc=exc)
            return
        elsewhere.add_done_callback(partial(_copy, future))

    def _replace(self, broken: WorkerPool) -> None:
        """A fresh worker pool for a broken one (once per broken pool), or none after too many."""
        with self._lock:
            if self._executor is not broken:
                return
            self.died += 1
            gave_up = self.died > MAX_RESTARTS or self._stopping_since is not None
            logger.warning("scrapy-simhash: a fingerprint worker %s; %s",
                           "was killed" if id(broken) in self._stalled_pools else "died",
                           "the rest of the crawl is fingerprinted in the crawl process" if gave_up
                           else "its items are retried in a fresh worker")
            broken.kill()
            self._retired.append(broken)
            self._executor = None if gave_up else self._start()

    def shutdown(self) -> None:
        """Finish the items submitted, then stop the workers (joined) and the threads."""
        with self._due:
            self._stopped = True  # from now on every queued item is due
            self._due.notify()
        if self._timer.is_alive():
            self._timer.join()
        self._send()  # what waited for the timer
        with self._lock:
            executor, self._executor = self._executor, None
            executors = ([executor] if executor is not None else []) + self._retired
        grace = STOPPING_GRACE if self._stopping_since is not None else self.timeout
        for each in executors:  # the broken ones too: none of their threads or processes outlives the pool
            each.finish(timeout=grace)
        self._local.shutdown(wait=True)
