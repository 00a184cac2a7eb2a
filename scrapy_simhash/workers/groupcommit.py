"""Group commit: calls that arrive while the index thread is busy are served together.

In a crawl, items reach the index faster than one fsynced transaction per item allows, and each
transaction also has to win the GIL back from the fingerprinting thread several times. A
:class:`GroupCommit` hands everything queued since the last call to one ``handle(batch)`` call on its
single worker thread (one transaction, one fsync), and answers each caller through its own future
only when that call returned: nothing is acknowledged before it is committed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class GroupCommit(Generic[T, R]):
    """Runs ``handle`` on one worker thread over everything submitted while it was busy, in order."""

    def __init__(
        self, handle: Callable[[list[T]], Sequence[R]], max_batch: int = 100, name: str = "group-commit"
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch!r}")
        self._handle = handle
        self._max_batch = max_batch
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._pending: list[tuple[T, Future[R]]] = []
        self._draining = False

    def submit(self, item: T) -> Future[R]:
        """Queue ``item``; the future gets its result (or the batch's exception) when its batch is done."""
        future: Future[R] = Future()
        with self._lock:
            self._pending.append((item, future))
            if not self._draining:
                self._executor.submit(self._drain)
                self._draining = True
        return future

    def _drain(self) -> None:
        while True:
            with self._lock:
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                if not batch:
                    self._draining = False
                    return
            batch = [(item, future) for item, future in batch if future.set_running_or_notify_cancel()]
            if not batch:
                continue
            try:
                results = list(self._handle([item for item, _ in batch]))
                if len(results) != len(batch):
                    raise RuntimeError(f"{len(results)} results for a batch of {len(batch)}")
            except BaseException as exc:  # every caller of the batch sees why; none is left waiting
                for _, future in batch:
                    future.set_exception(exc)
                continue
            for (_, future), result in zip(batch, results, strict=True):
                future.set_result(result)

    def shutdown(self) -> None:
        """Finish what was submitted, then stop the worker thread."""
        self._executor.shutdown(wait=True)
