"""The worker processes of ``dedup --jobs``, and what every worker process of the package shares.

A :class:`WorkerPool` is a :class:`~concurrent.futures.ProcessPoolExecutor` with what a command line
needs around it; :class:`InOrder` answers its tasks in input order. The pipeline's workers
(:class:`~scrapy_simhash.workers.fingerprints.FingerprintPool`) have a socket each, driven by the
reactor's loop, but start, take signals and exit as these do (:func:`bootstrap`, :func:`without_main`).

Start: every worker is started, and runs its initializer, when the pool is made. Workers are spawned
(a fresh interpreter) unless the caller says a fork is safe (no other thread in the process: a fork
copies only the calling thread, and a lock another thread held stays locked in the child); a forked
worker starts with the parent's engine already loaded. Spawned workers do not import the parent's
``__main__`` (:func:`without_main`).

Signals: workers ignore ``SIGINT`` and ``SIGTERM``. Ctrl-C and systemd signal the whole process
group, and the parent alone decides what they mean (the crawl finishes its items; ``dedup`` stops
between two transactions, :func:`ctrl_c_deferred`). A worker exits as soon as its parent is gone,
however it went (``SIGKILL`` included): it never outlives it as an orphan.

Worker death: a worker that dies (killed, out of memory, its initializer raised) breaks the pool at
once: every call out fails with :class:`BrokenProcessPool`, and the other workers are killed (the
dead one may have held a lock of the pool's queues, on which they would wait for ever). ``dedup --jobs``
then ends with an error (:class:`WorkerDied`).

Finish: :meth:`WorkerPool.finish` lets the workers answer the calls out, then ends them; a pool that
is broken, or whose workers do not answer and end within the given time (a worker stuck, or
stopped), is killed instead. Workers are never sent ``SIGTERM`` (they ignore it), only ``SIGKILL``,
and none of the pool's threads or processes outlives ``finish()``: the interpreter's exit, which
joins them, never waits for one.
"""

from __future__ import annotations

import concurrent.futures.process
import multiprocessing
import multiprocessing.util
import os
import signal
import sys
import threading
import time
import types
from collections import deque
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, suppress
from multiprocessing.connection import wait as wait_for_sentinels
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: How much nicer than the parent the workers of a pool run whose parent does the serial part of
#: the work (``dedup --jobs``: its check-and-adds). See docs/decisions/0401-worker-nice.md.
WORKER_NICE = 3
#: Seconds between two looks at a noted Ctrl-C while no answer comes. See
#: docs/decisions/0402-stopping-a-pool.md.
INTERRUPT_POLL = 0.1
#: Seconds a pool stopped early waits for its workers' answers and ends before it kills them. See
#: docs/decisions/0402-stopping-a-pool.md.
FINISH_TIMEOUT = 10.0
#: Calls queued for the workers per worker, beyond the one each is on: a worker that finishes a call
#: finds the next one at once, even while the parent's main thread holds the GIL (the executor's
#: thread that refills the queue waits for it). See docs/decisions/0406-queued-calls.md.
QUEUED_PER_WORKER = 2
_queue_size_lock = threading.Lock()


class WorkerDied(Exception):
    """A worker process died (killed, out of memory): the calls it held will never be answered."""


# -- in a worker ----------------------------------------------------------------------------------


def bootstrap(initializer: Callable[..., None] | None, initargs: tuple[Any, ...]) -> None:
    """Every worker's initializer: the signals are the parent's, exit with the parent, a quick exit,
    then the front-end's ``initializer(*initargs)``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_with, args=(parent.sentinel,), daemon=True).start()
    multiprocessing.util.Finalize(None, exit_now, exitpriority=-100)  # the last thing at exit
    if initializer is not None:
        initializer(*initargs)


def _exit_with(parent_sentinel: int) -> None:
    """Exit as soon as the parent process is gone, however it went (its end of a pipe closes)."""
    wait_for_sentinels([parent_sentinel])
    os._exit(1)


def exit_now() -> None:
    """Once the pool let the worker go (its last answer written), exit without tearing its engine
    down object by object (tenths of a second that the parent's shutdown would wait for)."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    os._exit(0)


def _ready() -> int:
    return os.getpid()


# -- in the parent --------------------------------------------------------------------------------


@contextmanager
def without_main() -> Iterator[None]:
    """Spawn workers that do not import this process's ``__main__``, as :mod:`multiprocessing` does
    to find functions defined there: a pool's functions are all in modules. A crawl script with no
    ``if __name__ == "__main__"`` guard (Scrapy's "run from a script" examples) would otherwise run
    its crawl again in each worker, and a main that is no file (``python -``) would fail to start it."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


class WorkerPool:
    """``workers`` processes, each started with ``initializer(*initargs)`` (after :func:`bootstrap`),
    answering ``submit(fn, *args)``: a :class:`Future` of ``fn(*args)`` in a worker. ``fork``: fork the
    workers (only when no other thread runs); else spawn them. ``nice``: how much nicer than this
    process they run."""

    def __init__(self, workers: int, initializer: Callable[..., None] | None = None,
                 initargs: tuple[Any, ...] = (), *, fork: bool = False, nice: int = 0) -> None:
        self.workers = workers
        context = multiprocessing.get_context("fork" if fork else "spawn")
        executors = concurrent.futures.process
        with _queue_size_lock:  # the executor sizes its call queue from this module constant
            extra = executors.EXTRA_QUEUED_CALLS
            setattr(executors, "EXTRA_QUEUED_CALLS", QUEUED_PER_WORKER * workers)  # noqa: B010
            try:
                self._executor = ProcessPoolExecutor(workers, mp_context=context, initializer=bootstrap,
                                                     initargs=(initializer, initargs))
            finally:
                setattr(executors, "EXTRA_QUEUED_CALLS", extra)  # noqa: B010
        # the executor's own dict, which shutdown() forgets: the workers to kill after it
        self._processes: MutableMapping[int, Any] = self._executor._processes
        with without_main():  # one process a submit while none is idle: every worker starts now
            #: each worker's pid once it has started (or the error that broke the pool)
            self.started: list[Future[int]] = [self._executor.submit(_ready) for _ in range(workers)]
        if nice:
            self._renice(nice)

    def _renice(self, nice: int) -> None:
        """The workers ``nice`` nicer than this process, set from here as soon as they exist (set in a
        worker, it would run at this process's priority while it starts)."""
        if not hasattr(os, "setpriority"):
            return
        priority = min(os.getpriority(os.PRIO_PROCESS, 0) + nice, 19)
        for pid in list(self._processes):
            with suppress(OSError):  # a worker that already died: the pool is broken
                os.setpriority(os.PRIO_PROCESS, pid, priority)

    def submit(self, fn: Callable[..., R], *args: Any) -> Future[R]:
        """``fn(*args)`` in a worker; raises :class:`BrokenProcessPool` once a worker has died, and
        ``RuntimeError`` once the pool is finished."""
        return self._executor.submit(fn, *args)

    def pids(self) -> list[int]:
        """Process ids of the workers (for tests and diagnostics)."""
        return list(self._processes)

    @property
    def broken(self) -> bool:
        """Has a worker died?"""
        return bool(getattr(self._executor, "_broken", False))

    def kill(self) -> None:
        """``SIGKILL`` the workers still alive. The executor's own clean-up of a broken pool
        (``terminate()``, then a join) would wait for ever for one that ignores ``SIGTERM``, is
        stuck, or waits on a queue lock that a dead worker held."""
        for process in list(self._processes.values()):
            if process.is_alive():
                process.kill()

    def finish(self, timeout: float | None = None, cancel: bool = False) -> None:
        """Let the workers answer the calls out (``cancel``: only those a worker already took; the
        others are cancelled), then end them, and wait until the pool's thread has ended. A pool
        that is broken, or still running after ``timeout`` seconds, is killed (:meth:`kill`)."""
        thread = getattr(self._executor, "_executor_manager_thread", None)  # shutdown() forgets it
        self._executor.shutdown(wait=False, cancel_futures=cancel)
        deadline = None if timeout is None else time.monotonic() + timeout
        while thread is not None and thread.is_alive():
            if self.broken or (deadline is not None and time.monotonic() >= deadline):
                self.kill()
            thread.join(0.1)


@contextmanager
def ctrl_c_deferred() -> Iterator[list[int]]:
    """Ctrl-C noted in the list it yields instead of raised wherever the main thread happens to be.
    Raised there, a ``KeyboardInterrupt`` can land between a lock's acquisition and the ``with`` that
    would release it (a lock the pool's threads share with this one), and the pool's clean-up then
    waits for ever for threads blocked on it. :class:`InOrder` raises it where no lock is held. A
    handler other than Python's default (an embedding program's) is left alone."""
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


_END: Any = object()


class InOrder(Generic[T, R]):
    """``fn(task)`` of each of ``tasks`` on ``pool``, answered in the order of the tasks, with at most
    ``ahead`` tasks out at a time. The tasks are drawn on the caller's thread, as answers are taken
    (the first ones at once: the workers start on them while the caller prepares). A Ctrl-C noted in
    ``ctrl_c`` (:func:`ctrl_c_deferred`) is raised as ``KeyboardInterrupt`` while an answer is awaited
    and between :meth:`batches`; a worker's death as :class:`WorkerDied`."""

    def __init__(self, pool: WorkerPool, fn: Callable[[T], list[R]], tasks: Iterable[T], ahead: int,
                 ctrl_c: Sequence[int] = ()) -> None:
        self._pool = pool
        self._fn = fn
        self._tasks: Iterator[T] | None = iter(tasks)
        self._ahead = ahead
        self._ctrl_c = ctrl_c
        self._out: deque[Future[list[R]]] = deque()
        self._top_up()

    def _top_up(self) -> None:
        while self._tasks is not None and len(self._out) < self._ahead:
            task = next(self._tasks, _END)
            if task is _END:
                self._tasks = None
                return
            try:
                future = self._pool.submit(self._fn, task)
            except BrokenProcessPool as exc:  # raised as WorkerDied where the answer is taken
                future = Future()
                future.set_exception(exc)
                self._tasks = None
            self._out.append(future)

    def _take(self, block: bool) -> list[R] | None:
        """The next answer; None if ``block`` is false and it is not there yet; :data:`_END` at the end."""
        self._top_up()
        if not self._out:
            return _END
        head = self._out[0]
        while not head.done():
            if not block:
                return None
            if self._ctrl_c:
                raise KeyboardInterrupt
            wait([head], timeout=INTERRUPT_POLL)
        self._out.popleft()
        if isinstance(head.exception(), BrokenProcessPool):
            raise WorkerDied("a worker process died (killed, or out of memory?)") from None
        return head.result()

    def batches(self, size: int, most: int) -> Iterator[list[R]]:
        """The answers, concatenated in order, in batches of ``size`` and the answers already there
        after them, up to ``most`` (the last batch may be shorter)."""
        batch: list[R] = []
        while True:
            if self._ctrl_c:
                raise KeyboardInterrupt
            answer = self._take(block=True)
            if answer is _END:
                break
            assert answer is not None
            batch += answer
            if len(batch) < size:
                continue
            while len(batch) < most:
                answer = self._take(block=False)
                if answer is None or answer is _END:
                    break
                batch += answer
            yield batch
            batch = []
        if batch:
            yield batch
