"""What became of each new item after this pipeline, told to the index (issue: a copy rejected
downstream must not turn the next copy into its duplicate).

A new item's entry is *pending* (:mod:`scrapy_simhash.index.owners`) until Scrapy says what became
of the item: ``item_scraped`` (it reached storage) delivers the entry, ``item_dropped`` by a later
component or ``item_error`` releases it. Signals carry the object a later component handed on,
which may be another object than the one this pipeline saw: items are found by identity, else by
their URL and title. Fates are queued here and applied by the index thread before its next batch
(:meth:`apply`) or by a short timer a moment after they arrive (``flush``; so that a crawl killed
soon after storing items has recorded most of them), never on the reactor; what no signal told by
the end of the crawl went somewhere, and is delivered.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from .index import BandIndex

Key = tuple[str, str]


class DeliveryTracker:
    """Pending entries by item, and the fates that arrived for them."""

    def __init__(self, key: Callable[[Any], Key | None], flush: Callable[[], None] | None = None,
                 delay: float = 0.1) -> None:
        self._key = key  # an item's (url, title), or None
        self._flush, self._delay = flush, delay  # called on a timer thread ``delay`` s after a fate arrives
        self._timer: threading.Timer | None = None
        self._tracked: dict[int, tuple[Any, int]] = {}  # id(item) → (item: kept alive, entry id)
        self._by_key: dict[Key, int] = {}
        self._fates: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def track(self, item: Any, entry_id: int) -> None:
        """Remember the pending entry of a new item until a signal tells its fate."""
        key = self._key(item)
        with self._lock:
            self._tracked[id(item)] = (item, entry_id)
            if key is not None:
                self._by_key[key] = entry_id

    def fate(self, item: Any, fate: str) -> None:
        """Queue ``"deliver"`` or ``"release"`` for a tracked item (any thread)."""
        if not self._tracked:
            return
        key = self._key(item)
        with self._lock:
            found = self._tracked.pop(id(item), None)
            entry_id = found[1] if found is not None else self._by_key.get(key) if key else None
            if entry_id is None:
                return
            if key is not None and self._by_key.get(key) == entry_id:
                del self._by_key[key]
            if found is None:
                self._tracked = {k: v for k, v in self._tracked.items() if v[1] != entry_id}
            self._fates.append((fate, entry_id))
            if self._flush is not None and self._timer is None:
                self._timer = threading.Timer(self._delay, self._on_timer)
                self._timer.daemon = True
                self._timer.start()

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
        assert self._flush is not None
        self._flush()

    def stop(self) -> None:
        """No more timers; waits for one that is running (before the last :meth:`apply`)."""
        with self._lock:
            timer, self._timer, self._flush = self._timer, None, None
        if timer is not None:
            timer.cancel()
            timer.join()

    def untold(self) -> None:
        """At the end: the items no signal told about went somewhere; their entries are delivered."""
        with self._lock:
            self._fates += [("deliver", entry_id) for _, entry_id in self._tracked.values()]
            self._tracked.clear()
            self._by_key.clear()

    def apply(self, index: BandIndex) -> int:
        """Deliver or release the entries whose fates arrived; returns how many were released. On an
        index error the fates stay queued (tried again with the next batch) and the error is raised."""
        with self._lock:
            fates, self._fates = self._fates, []
        if not fates:
            return 0
        try:
            index.deliver([e for fate, e in fates if fate == "deliver"])
            return index.release([e for fate, e in fates if fate == "release"])
        except BaseException:
            with self._lock:
                self._fates[:0] = fates
            raise
