"""Fingerprints on worker processes, so the crawl's own process keeps its core (issue 18).

Fingerprinting (normalization, jieba, TF-IDF, simhash) is CPU-bound Python: on a thread of the crawl
process it shares one GIL with the reactor and the index thread, and the crawl slows to its pace. A
:class:`FingerprintPool` runs it on ``SIMHASH_WORKERS`` processes instead (a
:class:`~concurrent.futures.ProcessPoolExecutor`); the check-and-add stays in the crawl process, on
the index thread, in the order fingerprints complete, exactly as before. Items go to the workers in
calls of up to :data:`MAX_BATCH`: those that queued up within :data:`LINGER` of the first one, or
while :data:`IN_FLIGHT` calls per worker were out (one being fingerprinted, one waiting for it), so
that the crawl process pays the executor's plumbing (its two threads, pipes, pickles and futures)
per call rather than per item, and the items of one call reach the index together, for one
transaction (one fsync). A crawl's items arrive a few milliseconds apart, faster than one fsynced
commit each allows but slower than a worker fingerprints them: without the wait, each would go
alone. Only plain data crosses the process boundary: an item's
title and body (``str``, ``bytes``, ``None`` or a list of them) go out, the
:class:`~scrapy_simhash.fingerprint.Fingerprints` fields (ints, strings, a tuple of strings,
booleans) come back. Any other value is fingerprinted in the crawl process, as with 0 workers.

Start-up: workers are *spawned* (a fresh interpreter), at spider open, and warmed there (the engine
built, the jieba dictionary loaded, one sample item fingerprinted), while the crawl starts; items
that arrive meanwhile wait for them. ``fork`` is unsafe once Twisted's reactor and the pipeline's
threads run, and ``forkserver`` would block the reactor while its server starts and set
process-wide state of the user's :mod:`multiprocessing`.

Failures: a worker that dies (killed, out of memory) breaks the executor, which fails every item in
it; each is sent once more to a fresh executor, and fingerprinted in the crawl process if that one
breaks too. After :data:`MAX_RESTARTS` fresh executors, the next break makes the pool give up: the
rest of the crawl is fingerprinted in the crawl process. An item whose fingerprinting raises in a
worker is fingerprinted again in the crawl process, which raises the same error (or returns the same
fingerprints). No item is lost; none reaches the index twice (only the fingerprints are retried,
never the check).

Signals: workers ignore ``SIGINT`` and ``SIGTERM`` (Ctrl-C and systemd signal the whole process
group): the crawl process handles them, finishes its items and shuts the pool down. A worker whose
crawl process died without shutting it down (``SIGKILL``) notices and exits.
"""

from __future__ import annotations

import inspect
import logging
import multiprocessing
import multiprocessing.util
import os
import re
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from concurrent.futures import Future, InvalidStateError, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import fields
from functools import partial
from multiprocessing.connection import wait
from typing import Any

from .fingerprint import Fingerprinter, Fingerprints

logger = logging.getLogger(__name__)

#: Broken executors (a worker died) replaced by fresh ones; at the next break the pool gives up and
#: fingerprints the rest of the crawl in the crawl process.
MAX_RESTARTS = 3
#: Most items in one call to a worker.
MAX_BATCH = 16
#: Calls out per worker at a time; items submitted meanwhile queue up for the next call.
IN_FLIGHT = 2
#: Seconds the first item waiting for a call waits for others (unless :data:`MAX_BATCH` are queued
#: sooner): the latency an item pays so that the items of a moment share one call and one commit.
LINGER = 0.02
_FIELDS = tuple(f.name for f in fields(Fingerprints))
_FINGERPRINTER_OPTIONS = frozenset(inspect.signature(Fingerprinter).parameters)
#: An item waiting for its fingerprints: its future, title, body, and how many executors broke under it.
_Job = tuple[Future[Fingerprints], Any, Any, int]
_SAMPLE = ("江城地铁十二号线今日开通 Harbour city opens tidal plant",
           "<p>本报讯 2023年6月18日上午9时，江城地铁十二号线正式开通运营，全长38公里。</p>"
           "<p>The plant's 14 turbines can produce up to 32 megawatts, enough for about 20,000 homes.</p>")


def fingerprinter_options(engine_options: dict[str, Any]) -> dict[str, Any]:
    """The :class:`Fingerprinter` keywords among :meth:`Deduplicator.open`'s, as plain data (patterns
    as ``(pattern, flags)``, paths as strings, word lists as lists) for the workers."""
    options = {k: v for k, v in engine_options.items() if k in _FINGERPRINTER_OPTIONS}
    if options.get("title_patterns"):
        options["title_patterns"] = [(p.pattern, p.flags) if isinstance(p, re.Pattern) else (p, 0)
                                     for p in options["title_patterns"]]
    if options.get("user_dict"):
        options["user_dict"] = os.fspath(options["user_dict"])
    stop_words = options.get("stop_words")
    if stop_words is not None:
        options["stop_words"] = (os.fspath(stop_words) if isinstance(stop_words, (str, os.PathLike))
                                 else list(stop_words))
    return options


def _is_plain(value: Any) -> bool:
    """Can this item value go to a worker as it is (and be read there as it is read here)?"""
    kind = type(value)
    if value is None or kind is str or kind is bytes:
        return True
    return kind in (list, tuple) and all(v is None or type(v) in (str, bytes) for v in value)


# -- in the worker process ------------------------------------------------------------------------

_fingerprinter: Fingerprinter | None = None


def _start_worker(options: dict[str, Any]) -> None:
    """Worker initializer: ignore the signals the crawl handles, exit with the crawl, warm the engine."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent.sentinel,), daemon=True).start()
    options = dict(options)
    options["title_patterns"] = [re.compile(p, f) for p, f in options.get("title_patterns") or ()]
    global _fingerprinter
    _fingerprinter = Fingerprinter(**options)
    _fingerprinter.fingerprint(*_SAMPLE)  # the first item pays nothing more than any other
    multiprocessing.util.Finalize(None, _exit_now, exitpriority=-100)  # the last thing at exit


def _exit_now() -> None:
    """Once the pool let the worker go (its last answer written), exit without tearing the engine's
    tables down object by object (~0.2 s that the crawl's shutdown would wait for)."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    os._exit(0)


def _exit_with(parent_sentinel: int) -> None:
    """Exit as soon as the crawl process is gone, however it went (its end of a pipe closes)."""
    wait([parent_sentinel])
    os._exit(1)


def _ready() -> int:
    return os.getpid()


def _fingerprint(title: Any, body: Any) -> tuple[Any, ...] | None:
    """The fields of an item's fingerprints, or None if fingerprinting raised (the crawl process
    then fingerprints the item itself, and raises the same error there)."""
    assert _fingerprinter is not None, "worker not started"
    try:
        fps = _fingerprinter.fingerprint(title, body)
    except Exception:
        return None
    return tuple(getattr(fps, name) for name in _FIELDS)


def _fingerprint_many(pairs: list[tuple[Any, Any]]) -> list[tuple[Any, ...] | None]:
    """:func:`_fingerprint` of each ``(title, body)`` of one call."""
    return [_fingerprint(title, body) for title, body in pairs]


# -- in the crawl process -------------------------------------------------------------------------


@contextmanager
def _without_main() -> Iterator[None]:
    """Spawn workers that do not import this process's ``__main__``, as :mod:`multiprocessing` does
    to find functions defined there: theirs are all in this module. A crawl script with no ``if
    __name__ == "__main__"`` guard (Scrapy's "run from a script" examples) would otherwise run its
    crawl again in each worker, and a main that is no file (``python -``) would fail to start it."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


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
    processes (0: on one thread of this process, calling ``fallback``, as before the pool)."""

    def __init__(self, workers: int, options: dict[str, Any],
                 fallback: Callable[[Any, Any], Fingerprints]) -> None:
        self.workers = workers
        self.died = 0  #: executors broken by a worker that died
        self._options = options
        self._fallback = fallback
        self._local = ThreadPoolExecutor(1, thread_name_prefix="simhash-fingerprint")
        self._lock = threading.Lock()  # replacing the executor
        self._queue_lock = threading.Lock()
        self._queue: list[_Job] = []  # items waiting for a call
        self._due_at = 0.0  # when the queued items go, full or not (time.monotonic)
        self._in_flight = 0  # calls out
        self._stopped = False
        self._due = threading.Condition(self._queue_lock)  # the timer: items queued, a call returned, stop
        self._executor: ProcessPoolExecutor | None = self._start() if workers else None
        self._timer = threading.Thread(target=self._send_when_due, name="simhash-linger", daemon=True)
        if workers:
            self._timer.start()

    def _start(self) -> ProcessPoolExecutor:
        """A new executor whose workers are spawned and warmed now (they start in parallel)."""
        executor = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_start_worker, initargs=(self._options,))
        with _without_main():
            self._warm(executor)
        return executor

    def _warm(self, executor: ProcessPoolExecutor) -> None:
        """Spawn every worker now (one process per submit while none is idle: no later submit spawns)."""
        started, waiting, counting = time.perf_counter(), [self.workers], threading.Lock()

        def ready(warmed: Future[int]) -> None:
            with counting:
                waiting[0] -= 1
            if not waiting[0] and not warmed.exception():
                logger.info("scrapy-simhash: %d fingerprint worker process(es) ready in %.2f s",
                            self.workers, time.perf_counter() - started)

        for _ in range(self.workers):
            executor.submit(_ready).add_done_callback(ready)

    def pids(self) -> list[int]:
        """Process ids of the current workers (for tests and diagnostics)."""
        executor = self._executor
        return list(getattr(executor, "_processes", None) or ()) if executor is not None else []

    def submit(self, title: Any, body: Any) -> Future[Fingerprints]:
        """Fingerprint one item's title and body; the future raises what fingerprinting raises
        (:class:`~scrapy_simhash.fingerprint.UnreadableField`)."""
        if self._executor is None or not (_is_plain(title) and _is_plain(body)):
            return self._local.submit(self._fallback, title, body)
        future: Future[Fingerprints] = Future()
        with self._queue_lock:
            self._queue.append((future, title, body, 0))
            if len(self._queue) == 1:
                self._due_at = time.monotonic() + LINGER
                self._due.notify()
            due = len(self._queue) >= MAX_BATCH or self._stopped
        if due:
            self._send()
        return future

    def _send_when_due(self) -> None:
        """The timer thread: sends the queued items once :data:`LINGER` has passed (until shutdown)."""
        while True:
            with self._due:
                while True:
                    if self._stopped:
                        return
                    waiting = bool(self._queue) and self._in_flight < IN_FLIGHT * self.workers
                    delay = self._due_at - time.monotonic()
                    if waiting and delay <= 0:
                        break
                    self._due.wait(delay if waiting else None)  # else a submit or a returned call wakes it
            self._send()

    def _send(self) -> None:
        """Send the queued items, up to :data:`MAX_BATCH` a call, while fewer than :data:`IN_FLIGHT`
        calls per worker are out and the items are due (:data:`LINGER`) or a call's worth (any
        thread: the submitter, the timer, or a call's answer)."""
        while True:
            with self._queue_lock:
                executor = self._executor
                if not self._queue or (executor is not None and (
                        self._in_flight >= IN_FLIGHT * self.workers
                        or (len(self._queue) < MAX_BATCH and not self._stopped and time.monotonic() < self._due_at))):
                    return
                count = MAX_BATCH if executor is not None else len(self._queue)
                batch, self._queue[:count] = self._queue[:count], []
                self._in_flight += executor is not None
            if executor is None:  # shut down, or given up: in the crawl process
                for future, title, body, _ in batch:
                    self._in_process(future, title, body)
                continue
            try:
                sent = executor.submit(_fingerprint_many, [(title, body) for _, title, body, _ in batch])
            except (BrokenProcessPool, RuntimeError):  # broken by another call's worker, not yet replaced
                with self._queue_lock:
                    self._in_flight -= 1
                    self._queue[:0] = batch  # not these items' attempt: they never reached a worker
                    self._due_at = 0.0
                self._replace(executor)
                continue
            sent.add_done_callback(partial(self._returned, batch, executor))

    def _returned(self, batch: list[_Job], executor: ProcessPoolExecutor,
                  sent: Future[list[tuple[Any, ...] | None]]) -> None:
        """A worker's answer (on the executor's thread): each item's fingerprints, or why there are none."""
        with self._queue_lock:
            self._in_flight -= 1
            self._due.notify()  # items held back by the calls out may be due now
        exc = sent.exception()
        if isinstance(exc, BrokenProcessPool):  # its worker (or another one of the executor) died
            self._replace(executor)
            retry = [(future, title, body, attempt + 1) for future, title, body, attempt in batch if attempt < 1]
            with self._queue_lock:
                self._queue[:0] = retry  # once more, to a fresh executor
                self._due_at = 0.0
            batch = [job for job in batch if job[3] >= 1]  # twice broken: in the crawl process
        self._send()  # the next call first: the worker is idle
        results = sent.result() if exc is None else [None] * len(batch)
        for (future, title, body, _), result in zip(batch, results, strict=True):
            if result is not None:
                _settle(future, Fingerprints(*result))
            else:  # it raised in the worker, or could not be sent: here it raises the same, or succeeds
                self._in_process(future, title, body)

    def _in_process(self, future: Future[Fingerprints], title: Any, body: Any) -> None:
        self._local.submit(self._fallback, title, body).add_done_callback(partial(_copy, future))

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        """A fresh executor for a broken one (once per broken executor), or none after too many."""
        with self._lock:
            if self._executor is not broken:
                return
            self.died += 1
            gave_up = self.died > MAX_RESTARTS
            logger.warning("scrapy-simhash: a fingerprint worker died; %s", "the rest of the crawl is fingerprinted "
                           "in the crawl process" if gave_up else "its items are retried in a fresh worker")
            self._executor = None if gave_up else self._start()
        broken.shutdown(wait=False)

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
        if executor is not None:
            executor.shutdown(wait=True)
        self._local.shutdown(wait=True)
