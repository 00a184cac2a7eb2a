"""What became of each new item after this pipeline, told to the index, so that a copy rejected
downstream does not turn the next copy into its duplicate.

A new item's entry is *pending* (:mod:`scrapy_simhash.index.owners`) until Scrapy says what became
of the item: ``item_scraped`` (it reached storage) delivers the entry, ``item_dropped`` by a later
component or ``item_error`` releases it. Signals carry the object a later component handed on,
which may be another object than the one this pipeline saw: items are found by identity, else by
their URL and title. Fates are queued here and applied, never on the reactor, by a flusher thread
as soon as they arrive (``flush``; the fates that arrive while one write runs go in the next: a
crawl killed just after storing an item has almost always recorded it, since the next open
releases what is still pending; :data:`DELAY`), and by the index thread before its next batch (or
the pool before its next call to a worker) when a release is among them (:meth:`apply`: a copy
released downstream no longer blocks the items of that batch; a delivery changes no decision).
What no signal told by the end of the crawl went somewhere, and is delivered.

A copy found to be the duplicate of one of these pending entries can wait for the entry's fate
(:meth:`DeliveryTracker.waiter`): delivered, the copy is a duplicate; released (and the release
written), the copy is checked again, so a copy rejected downstream never takes its twin with it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ..index import BandIndex

Key = tuple[str, str]

#: Seconds the flusher waits after a fate arrives before it writes: none. Each write takes the
#: fates that arrived meanwhile, so the transactions follow the item rate only while the index
#: keeps up (docs/decisions/0700-delivery-window.md).
DELAY = 0.0
#: Seconds a duplicate waits for the fate of its pending original before it is dropped anyway:
#: longer than a storage pipeline takes for one item, short enough that a stuck item does not hold
#: its copies for the rest of the crawl (docs/decisions/0701-twin-wait.md).
TWIN_WAIT = 60.0


class DeliveryTracker:
    """Pending entries by item, and the fates that arrived for them."""

    def __init__(self, key: Callable[[Any], Key | None], flush: Callable[[], None] | None = None,
                 delay: float = DELAY) -> None:
        self._key = key  # an item's (url, title), or None
        self._flush, self._delay = flush, delay  # called on the flusher thread when a fate arrives
        self._flusher: threading.Thread | None = None
        self._tracked: dict[int, tuple[Any, int, Key | None]] = {}  # id(item) → (item: kept alive, entry id, key)
        self._by_key: dict[Key, int] = {}
        self._fates: list[tuple[str, int]] = []
        self._pending: set[int] = set()  # entry ids tracked, fate not told yet
        self._releasing: set[int] = set()  # entry ids whose release is queued or being written
        self._waiters: dict[int, list[Future[str]]] = {}  # entry id → copies waiting for its fate
        self._releases = 0  # among the queued fates
        self._arrived = 0  # fates queued so far
        self._idle = False  # the flusher waits for a fate
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)

    def track(self, item: Any, entry_id: int) -> None:
        """Remember the pending entry of a new item until a signal tells its fate."""
        key = self._key(item)
        with self._lock:
            self._tracked[id(item)] = (item, entry_id, key)
            self._pending.add(entry_id)
            if key is not None:
                self._by_key[key] = entry_id

    def fate(self, item: Any, fate: str) -> None:
        """Queue ``"deliver"`` or ``"release"`` for a tracked item (any thread)."""
        if not self._tracked:
            return
        found = self._tracked.get(id(item))
        key = found[2] if found is not None and found[0] is item else self._key(item)  # (the key it was tracked by)
        with self._lock:
            found = self._tracked.pop(id(item), None)
            entry_id = found[1] if found is not None else self._by_key.get(key) if key else None
            if entry_id is None:
                return
            if key is not None and self._by_key.get(key) == entry_id:
                del self._by_key[key]
            if found is None:
                self._tracked = {k: v for k, v in self._tracked.items() if v[1] != entry_id}
            self._pending.discard(entry_id)
            if fate == "release":
                self._releasing.add(entry_id)
            else:
                self._tell(entry_id, fate)
            self._fates.append((fate, entry_id))
            self._arrived += 1
            self._releases += fate == "release"
            if self._flush is not None:
                if self._flusher is None:  # one thread for the crawl, started with the first fate
                    self._flusher = threading.Thread(target=self._run, name="simhash-delivery", daemon=True)
                    self._flusher.start()
                elif self._idle:
                    self._wake.notify()

    def _run(self) -> None:
        """The flusher thread: when a fate arrives (``delay`` s later if > 0), ``flush`` (until
        :meth:`stop`). Fates a failed flush left queued wait for the next fate to arrive (no retry
        loop while the index is down)."""
        flushed = 0
        while True:
            with self._lock:
                self._idle = True
                while self._arrived == flushed and self._flush is not None:
                    self._wake.wait()
                self._idle = False
                if self._flush is not None and self._delay > 0:
                    self._wake.wait(self._delay)  # the fates of that moment go together (or stop wakes it)
                flush, flushed = self._flush, self._arrived
            if flush is None:
                return
            flush()

    def stop(self) -> None:
        """No more flushes; waits for one that is running (before the last :meth:`apply`)."""
        with self._lock:
            flusher, self._flusher, self._flush = self._flusher, None, None
            self._wake.notify()
        if flusher is not None:
            flusher.join()

    def untold(self) -> None:
        """At the end: the items no signal told about went somewhere; their entries are delivered."""
        with self._lock:
            self._fates += [("deliver", entry_id) for _, entry_id, _ in self._tracked.values()]
            for entry_id in self._pending:
                self._tell(entry_id, "deliver")
            self._tracked.clear()
            self._by_key.clear()
            self._pending.clear()

    def waiter(self, entry_id: int, timeout: float = TWIN_WAIT) -> Future[str] | None:
        """A future of the fate of this pending entry of ours: ``"deliver"``, ``"release"`` (once the
        release is written: a check made then no longer finds the entry) or ``"timeout"`` after
        ``timeout`` seconds; None when the entry is not one of ours awaiting its fate."""
        with self._lock:
            if entry_id not in self._pending and entry_id not in self._releasing:
                return None
            future: Future[str] = Future()
            self._waiters.setdefault(entry_id, []).append(future)
        timer = threading.Timer(timeout, self._timed_out, (entry_id, future))
        timer.daemon = True
        timer.start()
        future.add_done_callback(lambda _: timer.cancel())
        return future

    def _timed_out(self, entry_id: int, future: Future[str]) -> None:
        with self._lock:
            waiting = self._waiters.get(entry_id, [])
            if future in waiting:
                waiting.remove(future)
                if not waiting:
                    del self._waiters[entry_id]
        if not future.done():
            future.set_result("timeout")

    def _tell(self, entry_id: int, fate: str) -> None:
        """Settle the futures waiting for this entry's fate (the lock is held)."""
        for future in self._waiters.pop(entry_id, []):
            if not future.done():
                future.set_result(fate)

    def apply(self, index: BandIndex, *, if_released: bool = False) -> int:
        """Deliver or release the entries whose fates arrived (``if_released``: only if a release is
        among them); returns how many were released. On an index error the fates stay queued (tried
        again later) and the error is raised."""
        with self._lock:
            if if_released and not self._releases:
                return 0
            fates, self._fates, self._releases = self._fates, [], 0
        if not fates:
            return 0
        released = [e for fate, e in fates if fate == "release"]
        try:
            index.deliver([e for fate, e in fates if fate == "deliver"])
            count = index.release(released)
        except BaseException:
            with self._lock:
                self._fates[:0] = fates
                self._releases += sum(fate == "release" for fate, _ in fates)
            raise
        with self._lock:
            for entry_id in released:
                self._releasing.discard(entry_id)
                self._tell(entry_id, "release")
        return count
