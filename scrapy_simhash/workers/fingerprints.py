"""The pipeline's front-end of its worker processes: fingerprints and checks on other processes, so
the crawl's own process keeps its core.

Fingerprinting (normalization, jieba, TF-IDF, simhash) is CPU-bound Python, and so is much of the
check-and-add (the rule between its index statements): on threads of the crawl process they share one
GIL with the reactor, and the crawl slows to their pace. A :class:`FingerprintPool` runs them on
``SIMHASH_WORKERS`` processes instead: with an index (the pipeline's case), each worker opens the
crawl's index and fingerprints and checks each call's items in one transaction, so the crawl process
only sends titles and bodies out and gets verdicts back. The index serializes the transactions of
several workers (SQLite's write lock, Redis's atomic commits): two copies of one story in flight are
checked one after the other. Without an index the pool only fingerprints (``submit``).

Transport: each worker is a process with one socket to the crawl process (a *route*). The crawl
process's end is driven by the event loop the items come from (the asyncio reactor's: no thread of
the pool runs beside the reactor, none takes the GIL from it): a call is encoded (:mod:`.messages`:
JSON, never pickle) and written as the item arrives, the answer read when the socket is readable,
and the items' futures settled there.
Without a running asyncio loop (a plain thread, another Twisted reactor) the pool runs its own loop
on a thread. Workers run under ``SCHED_BATCH`` where there is one: woken by a call, a worker does not
preempt the reactor that wrote it.

Calls: an item that finds a ready worker with fewer than :data:`IN_FLIGHT` calls out goes at once,
alone; items that arrive while every worker has that many go together (up to :data:`MAX_BATCH`) as
soon as a call comes back. An idle pipeline answers a lone item without a batch delay, and under
load the items of a moment share one call and one transaction (one fsync). Only plain data goes out:
an item's title and body (``str``, ``bytes``, ``None`` or a list of them), its URL and request id;
the :class:`~scrapy_simhash.fingerprint.fingerprinter.Fingerprints` fields and the verdict come back.
Any other value is fingerprinted and checked in the crawl process, as with 0 workers. What became of
new items downstream (``fates``: delivered, released) rides with the next call, and its worker writes
it before it checks the call's items; a release with no item to carry it goes in a call of its own.

Start-up: workers are spawned when the pool is made (``fork`` is unsafe once Twisted's reactor and
the pipeline's threads run) and warmed there (the engine built, the jieba dictionary loaded, one
sample item fingerprinted, the index opened); each takes items as soon as it is ready, whatever the
others do.

Failures: a worker that dies (killed, out of memory, its start raised) gives its calls' items back;
each is sent once more, in the order first sent, to the other workers or the fresh one that replaces
it, and checked in the crawl process if that fails too. After :data:`MAX_RESTARTS` replacements, the
next death makes this front-end give up: the rest of the crawl is checked in the crawl process. An
item sent again keeps its request id: if the dead worker had committed it, the index answers what it
answered then (:class:`~scrapy_simhash.index.Query`'s ``request_id``; a new item gets its own entry
back, never itself as its duplicate). An item whose fingerprinting raises in a worker is
fingerprinted and checked in the crawl process, which raises the same error (or decides it). No item
is lost; none is checked twice. Signals are the crawl process's (the workers ignore ``SIGINT`` and
``SIGTERM``, :mod:`~scrapy_simhash.workers.pool`); a worker exits when its socket closes or its
parent is gone.

Stalls: a worker that leaves a call unanswered for ``timeout`` seconds (counted from when it was
sent, or from when the worker was ready if that is later), or does not become ready within
``timeout`` seconds while items wait, is stopped (``SIGSTOP``), hung in a system call, or looping:
the watchdog (a timer of the loop, every :data:`WATCH` seconds while calls are out) kills it, and its
items are sent again as a dead worker's. Once the crawl is stopping (``stopping()``, e.g. after a
``SIGTERM``), a call gets :data:`STOPPING_GRACE` seconds at most and a worker that dies is not
replaced: the crawl ends within seconds whatever its workers do. :meth:`FingerprintPool.shutdown`
waits ``timeout`` seconds at most for the calls out (:data:`STOPPING_GRACE` once stopping) and
leaves no thread or process behind.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import multiprocessing
import multiprocessing.util
import selectors
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from contextlib import suppress
from functools import partial
from operator import itemgetter
from typing import Any, Protocol

from ..fingerprint.fingerprinter import Fingerprints
from . import messages
from .process import _check_many, _fingerprint_many
from .routes import Job, Route, kill_routes

logger = logging.getLogger(__name__)

#: Workers that died replaced by fresh ones; at the next death the front-end gives up and
#: fingerprints the rest of the crawl in the crawl process. See docs/decisions/0404-worker-restarts.md.
MAX_RESTARTS = 3
#: Most items in one call to a worker. See docs/decisions/0400-crawl-calls.md.
MAX_BATCH = 16
#: Calls out per worker at a time; items that arrive meanwhile go together in the next call. See
#: docs/decisions/0400-crawl-calls.md.
IN_FLIGHT = 1
#: Seconds between two looks of the watchdog while calls are out; see the module docstring (Stalls)
#: and docs/decisions/0410-worker-timeout.md.
WATCH = 0.5
#: Seconds a call out may still take once the crawl is stopping. See docs/decisions/0410-worker-timeout.md.
STOPPING_GRACE = 3.0
_place = itemgetter(3)


class Fates(Protocol):
    """What became of new items downstream (:class:`~scrapy_simhash.scrapy.delivery.DeliveryTracker`):
    the worker that takes the next call writes it to the index before it checks the call's items."""

    @property
    def releases_waiting(self) -> bool: ...

    def take(self) -> tuple[list[int], list[int]]: ...

    def written(self, delivered: list[int], released: list[int], ok: bool) -> None: ...


def _is_plain(value: Any) -> bool:
    """Can this item value go to a worker as it is (and be read there as it is read here)?"""
    kind = type(value)
    if value is None or kind is str or kind is bytes:
        return True
    return kind in (list, tuple) and all(v is None or type(v) in (str, bytes) for v in value)


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
    processes (0: on one thread of this process, calling ``fallback``).

    With ``index`` (:func:`~.process.index_options`; ``workers`` ≥ 1), the workers check the items
    too: ``check(title, body, url, request_id)`` → a future of ``(fingerprints, verdict or the
    index's error)``, and what no worker can check goes to ``check_here`` (same arguments, a future of
    the same), with its request id: one that a worker committed before it died gets its answer back.
    ``timeout``: seconds a call may go unanswered before its worker is killed and replaced;
    ``stopping()`` (read by the watchdog) says that the crawl is stopping, when a call gets
    :data:`STOPPING_GRACE` seconds at most. ``fates``: what became of new items downstream, carried by
    the calls (each worker writes them before it checks the call's items; a release goes at once, in
    a call of its own if no item does: :meth:`nudge`). ``on_loop``: run on the asyncio loop running in the thread
    that first submits (the reactor's: the pipeline submits from its coroutines), if there is one;
    else (and by default: a caller that blocks on the futures) on a loop of the pool's own thread."""

    def __init__(self, workers: int, options: dict[str, Any], fallback: Callable[[Any, Any], Fingerprints],
                 index: dict[str, Any] | None = None,
                 check_here: Callable[[Any, Any, str | None, str], Future[Any]] | None = None,
                 timeout: float = 60.0, stopping: Callable[[], bool] | None = None, on_loop: bool = False,
                 fates: Fates | None = None) -> None:
        self.workers = workers
        self.died = 0  #: workers that died (or were killed)
        self.stalled = 0  #: workers killed because a call went unanswered (counted in ``died`` too)
        self.index_retries = 0  #: index retries in the workers (per item, as items see them)
        self.released = 0  #: entries released by the workers (their items dropped downstream)
        self.calls = 0  #: calls sent to the workers
        self.timeout = timeout
        self._on_loop = on_loop
        self._stopping = stopping
        self._stopping_since: float | None = None  # when stopping() was first seen true
        self._options = options
        self._fallback = fallback
        self._index = index if workers else None
        self._check_here = check_here
        self._fates = fates if self._index is not None else None
        self._call = _check_many if self._index is not None else _fingerprint_many
        self._local = ThreadPoolExecutor(1, thread_name_prefix="simhash-fingerprint")
        self._queue: list[Job] = []  # items waiting for a worker
        self._submitted = itertools.count()
        self._stopped = False
        self._gave_up = False
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop driving the routes, once bound
        self._loop_thread: int | None = None
        self._own_thread: threading.Thread | None = None  # the pool's own loop, when no loop was running
        self._attached = False  # the routes' handlers are on the loop
        self._bind_lock = threading.Lock()
        self._watching: asyncio.TimerHandle | None = None
        self._made_at = time.perf_counter()
        self._announced = False
        self._every: list[Route] = []  # every route made, joined at shutdown
        self._routes: list[Route] = [self._new_route() for _ in range(workers)]  # the live ones
        self._finalizer = multiprocessing.util.Finalize(self, kill_routes, (self._every,), exitpriority=10)

    def _new_route(self) -> Route:
        route = Route(self._options, self._index)
        self._every.append(route)
        if self._attached:
            self._attach(route)
        return route

    def pids(self) -> list[int]:
        """Process ids of the live workers (for tests and diagnostics)."""
        return [route.pid for route in self._routes if route.pid is not None]

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

    def wait_ready(self, timeout: float) -> bool:
        """Wait until every live worker is ready (or ``timeout`` seconds): are they?"""
        deadline = time.monotonic() + timeout

        def ready() -> bool:
            return all(route.ready_at is not None for route in self._routes)

        if self._loop is None or threading.get_ident() == self._loop_thread:
            self._drive(ready, deadline)
        while not ready() and time.monotonic() < deadline:
            time.sleep(0.01)
        return ready()

    # -- the loop -------------------------------------------------------------------------------

    def _queue_up(self, args: tuple[Any, ...]) -> Future[Any]:
        if not self._routes or self._stopped or not (_is_plain(args[0]) and _is_plain(args[1])):
            return self._elsewhere(args)
        future: Future[Any] = Future()
        job = (future, args, 0, next(self._submitted))
        loop = self._bind()
        if threading.get_ident() == self._loop_thread:
            self._take(job)
        else:
            loop.call_soon_threadsafe(self._take, job)
        return future

    def _bind(self) -> asyncio.AbstractEventLoop:
        """The loop that drives the routes: with ``on_loop``, the running one of the first thread that
        submits (the reactor's), else the pool's own, on a thread."""
        if self._loop is not None:
            return self._loop
        with self._bind_lock:
            if self._loop is None:
                running = None
                if self._on_loop:
                    with suppress(RuntimeError):
                        running = asyncio.get_running_loop()
                if running is None:
                    self._loop = asyncio.new_event_loop()
                    self._own_thread = threading.Thread(target=self._loop.run_forever, name="simhash-io", daemon=True)
                    self._own_thread.start()
                    self._loop.call_soon_threadsafe(self._attach_all)
                else:
                    self._loop = running
                    self._attach_all()
            return self._loop

    def _attach_all(self) -> None:
        """(On the loop's thread.) The routes' handlers on the loop."""
        self._loop_thread = threading.get_ident()
        if self._stopped:
            return
        self._attached = True
        for route in self._routes:
            self._attach(route)
        self._pump()

    def _attach(self, route: Route) -> None:
        assert self._loop is not None
        self._loop.add_reader(route.fd, self._readable, route)
        if route.unsent:
            self._loop.add_writer(route.fd, self._writable, route)

    def _detach(self, route: Route) -> None:
        if self._attached and self._loop is not None:
            self._loop.remove_reader(route.fd)
            self._loop.remove_writer(route.fd)

    def _take(self, job: Job) -> None:
        """(On the loop's thread.) A submitted item: to a worker now if one can take it, else queued."""
        if self._stopped or not self._routes:
            self._in_process(job)
            return
        self._queue.append(job)
        self._pump()

    def _pump(self) -> None:
        """Send the queued items to the ready workers with fewer than :data:`IN_FLIGHT` calls out (the
        least busy first), up to :data:`MAX_BATCH` a call; with no worker left, check them here."""
        while self._queue:
            if not self._routes:
                jobs, self._queue = self._queue, []
                for job in jobs:
                    self._in_process(job)
                return
            free = [route for route in self._routes if route.ready_at is not None and len(route.calls) < IN_FLIGHT]
            if not free:
                break
            route = min(free, key=lambda r: len(r.calls))
            batch, self._queue[:MAX_BATCH] = self._queue[:MAX_BATCH], []
            self._send(route, batch)
        if not self._queue and self._fates is not None and self._fates.releases_waiting:
            idle = [route for route in self._routes if route.ready_at is not None and not route.calls]
            if idle:  # a copy may wait for this release: written now, in a call of its own
                self._send(idle[0], [])
        self._watch_soon()

    def nudge(self) -> None:
        """A fate arrived (a release): carry it with a call now if a worker is idle."""
        if self._loop is None or self._stopped:
            return
        if threading.get_ident() == self._loop_thread:
            self._pump()
        else:
            self._loop.call_soon_threadsafe(self._pump)

    def _send(self, route: Route, batch: list[Job]) -> None:
        items = [args for _, args, *_ in batch]
        fates = self._fates.take() if self._fates is not None else ([], [])
        route.calls.append((batch, time.monotonic(), fates))
        self.calls += 1
        if not route.send(messages.call(self._call, (items, fates) if self.decides else (items,))):
            self._died(route)
        elif route.unsent and self._attached and self._loop is not None:
            self._loop.add_writer(route.fd, self._writable, route)

    def _writable(self, route: Route) -> None:
        if not route.flush():
            self._died(route)
        elif not route.unsent and self._attached and self._loop is not None:
            self._loop.remove_writer(route.fd)

    def _readable(self, route: Route) -> None:
        received = route.receive()
        if received is None:
            self._died(route)
            return
        for message in received:
            self._answer(route, *messages.read_answer(message))
            if route.dead:
                return

    def _answer(self, route: Route, kind: str, value: Any) -> None:
        """A worker's message: it is ready, its start failed, or a call's answer."""
        if kind == "ready":
            route.ready_at = time.monotonic()
            if not self._announced and all(r.ready_at is not None for r in self._routes):
                self._announced = True
                logger.info("scrapy-simhash: %d fingerprint worker process(es) ready in %.2f s",
                            self.workers, time.perf_counter() - self._made_at)
            self._pump()
            return
        if kind == "failed":
            route.failure = str(value)
            return
        batch, _, fates = route.calls.popleft()
        results: Any = value if kind == "answer" else [None] * len(batch)
        if self.decides:
            released = None
            if kind == "answer":
                retried, results, released = results
                self.index_retries += retried
            self._fates_written(fates, released)
        self._pump()  # the next call first: the worker is idle
        for (future, args, *_), result in zip(batch, results, strict=True):
            if result is None:  # it raised in the worker: here it raises the same, or succeeds
                self._in_process((future, args, 0, 0))
            elif self.decides:
                _settle(future, (messages.fingerprints(result[0]), result[1]))
            else:
                _settle(future, messages.fingerprints(result))

    def _died(self, route: Route, counted: bool = True) -> None:
        """A worker died (or was killed): its calls' items once more to the others or to a fresh one,
        in the order first sent; then (or after too many deaths, or while stopping) in this process.
        ``counted``: a death of its own (not one of the others ended when the front-end gives up)."""
        if route.dead:
            return
        route.dead = True
        self._detach(route)
        route.close(kill=True)
        self._routes.remove(route)
        jobs = [job for batch, *_ in route.calls for job in batch]
        for _, _, fates in route.calls:
            self._fates_written(fates, None)  # (written again with the next call: it does no harm)
        route.calls.clear()
        if counted:
            self.died += 1
            if self._stopping_since is None and self._stopping is not None and self._stopping():
                self._stopping_since = time.monotonic()
            give_up = not self._gave_up and (self.died > MAX_RESTARTS or self._stopping_since is not None)
            self._gave_up = self._gave_up or give_up
            if not self._stopped:
                logger.warning("scrapy-simhash: a fingerprint worker %s%s; %s",
                               "was killed" if route.stalled else "died",
                               f" ({route.failure})" if route.failure else "",
                               "the rest of the crawl is fingerprinted in the crawl process" if self._gave_up
                               else "its items are retried in a fresh worker")
            if give_up:
                for other in list(self._routes):
                    self._died(other, counted=False)
            elif not self._gave_up and not self._stopped:
                self._routes.append(self._new_route())
        again = not (self._gave_up or self._stopped)
        self._queue[:0] = [(future, args, attempt + 1, place)
                           for future, args, attempt, place in jobs if attempt < 1 and again]
        self._queue.sort(key=_place)
        for job in jobs:
            if job[2] >= 1 or not again:
                self._in_process(job)
        self._pump()

    def _fates_written(self, fates: tuple[list[int], list[int]], released: int | None) -> None:
        """A call's fates are written (``released``: how many entries that released), or not (None)."""
        if self._fates is not None and (fates[0] or fates[1]):
            self._fates.written(*fates, ok=released is not None)
            self.released += released or 0

    # -- the watchdog ---------------------------------------------------------------------------

    def _watch_soon(self) -> None:
        if (self._watching is None and self._attached and self._loop is not None
                and (self._queue or any(route.calls for route in self._routes))):
            self._watching = self._loop.call_later(WATCH, self._watch_tick)

    def _watch_tick(self) -> None:
        self._watching = None
        self._watch()
        self._watch_soon()

    def _watch(self) -> None:
        """Kill the workers whose call went unanswered past its time: ``timeout`` seconds from when it
        was sent or the worker was ready, whichever is later (from when it was made, while it is not
        and items wait); :data:`STOPPING_GRACE` seconds from when the crawl began to stop."""
        now = time.monotonic()
        if self._stopping_since is None and self._stopping is not None and self._stopping():
            self._stopping_since = now
        for route in list(self._routes):
            if route.calls:
                start = max(route.calls[0][1], route.ready_at or route.made_at)
            elif route.ready_at is None and self._queue:
                start = route.made_at
            else:
                continue
            limit = start + self.timeout
            if self._stopping_since is not None:
                limit = min(limit, max(start, self._stopping_since) + STOPPING_GRACE)
            if now >= limit and not route.dead:
                self._kill_stuck(route)

    def _kill_stuck(self, route: Route) -> None:
        self.stalled += 1
        route.stalled = True
        logger.warning("scrapy-simhash: a fingerprint worker did not answer within %s s (stopped, or stuck?); "
                       "it is killed and its items sent again",
                       f"{STOPPING_GRACE:g}" if self._stopping_since is not None else f"{self.timeout:g}")
        self._died(route)

    # -- without the loop -----------------------------------------------------------------------

    def _drive(self, done: Callable[[], bool], deadline: float) -> None:
        """Run the routes' handlers on this thread (the loop's, or none is bound, or it is detached)
        until ``done()`` or the deadline, the watchdog included."""
        with selectors.DefaultSelector() as selector:
            while not done() and self._routes:
                now = time.monotonic()
                if now >= deadline:
                    return
                routes = list(self._routes)
                for route in routes:
                    selector.register(route.fd, selectors.EVENT_READ | (selectors.EVENT_WRITE if route.unsent else 0),
                                      route)
                try:
                    events = selector.select(min(WATCH, deadline - now))
                finally:
                    for route in routes:
                        with suppress(KeyError, ValueError, OSError):  # (a route that died meanwhile)
                            selector.unregister(route.fd)
                for key, mask in events:
                    route = key.data
                    if mask & selectors.EVENT_WRITE and not route.dead:
                        self._writable(route)
                    if mask & selectors.EVENT_READ and not route.dead:
                        self._readable(route)
                self._watch()

    def _release_loop(self) -> None:
        """Take the routes off the loop (stopping the pool's own), so that this thread drives them."""
        loop = self._loop
        if loop is None:
            return
        if self._watching is not None:
            self._watching.cancel()
            self._watching = None
        if self._own_thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            self._own_thread.join()
            for route in self._routes:
                self._detach(route)
            self._attached = False
            loop.close()
        elif threading.get_ident() == self._loop_thread or not loop.is_running():
            for route in self._routes:
                self._detach(route)
            self._attached = False
        else:
            released = threading.Event()

            def release() -> None:
                for route in self._routes:
                    self._detach(route)
                self._attached = False
                released.set()

            loop.call_soon_threadsafe(release)
            if not released.wait(STOPPING_GRACE):  # the loop no longer runs its callbacks
                release()
        self._loop_thread = threading.get_ident()

    # -- elsewhere ------------------------------------------------------------------------------

    def _elsewhere(self, args: tuple[Any, ...]) -> Future[Any]:
        """What no worker does: fingerprinted (and checked) in the crawl process."""
        if self.decides:
            assert self._check_here is not None
            return self._check_here(*args)
        return self.here(*args)

    def _in_process(self, job: Job) -> None:
        future, args, *_ = job
        try:
            elsewhere = self._elsewhere(args)
        except RuntimeError as exc:  # the interpreter is exiting (the reactor was stopped): nobody waits
            _settle(future, exc=exc)
            return
        elsewhere.add_done_callback(partial(_copy, future))

    def shutdown(self) -> None:
        """Finish the items submitted (every worker answers its calls, or is killed after the grace
        time and its items are checked here), then end the workers (joined) and the threads."""
        self._release_loop()
        if self._stopping_since is None and self._stopping is not None and self._stopping():
            self._stopping_since = time.monotonic()
        grace = STOPPING_GRACE if self._stopping_since is not None else self.timeout
        self._drive(lambda: not self._queue and not any(route.calls for route in self._routes),
                    time.monotonic() + grace)
        self._stopped = True  # from now on, a worker that dies is not replaced and nothing is queued
        for route in list(self._routes):
            if route.calls:
                self._kill_stuck(route)
        jobs, self._queue = self._queue, []
        for job in jobs:
            self._in_process(job)
        for route in self._routes:
            route.close(kill=route.ready_at is None)  # a ready one reads the end of its socket and exits
        for route in self._every:
            route.join(grace)
        self._routes = []
        self._finalizer.cancel()
        self._local.shutdown(wait=True)
