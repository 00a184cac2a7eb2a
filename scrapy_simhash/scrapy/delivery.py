"""What became of each new item after this pipeline, told to the index, so that a copy rejected
downstream does not turn the next copy into its duplicate, and a crash does not store an item twice.

A new item's entry is *pending* (:mod:`scrapy_simhash.index.owners`) until Scrapy says what became
of the item: stored (:class:`StoredMark`, the last pipeline, in the call that stored it; else
``item_scraped``, a turn of the loop later) delivers the entry, ``item_dropped`` by a later
component or ``item_error`` releases it. Signals carry the object a later component handed on,
which may be another object than the one this pipeline saw: items are found by identity, else by
their URL and title. A delivery is appended at once to this crawl's :class:`Journal`, a file of
this host that outlives a kill; fates are applied to the index, never on the reactor, by a flusher
thread as soon as they arrive (``flush``; the fates that arrive while one write runs go in the
next; :data:`DELAY`), and by the index thread before its next batch (or the pool before its next
call to a worker) when a release is among them (:meth:`DeliveryTracker.apply`: a copy released
downstream no longer blocks the items of that batch; a delivery changes no decision). At the next
open, the entries a dead crawl left pending are delivered if its journal lists them, else released.
What no signal told by the end of the crawl went somewhere, and is delivered.

A copy found to be the duplicate of one of these pending entries can wait for the entry's fate
(:meth:`DeliveryTracker.waiter`): delivered, the copy is a duplicate; released (and the release
written), the copy is checked again, so a copy rejected downstream never takes its twin with it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
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


logger = logging.getLogger(__name__)

#: Sent by :class:`StoredMark` (``item``): the item passed every pipeline before it.
item_stored = object()
#: :class:`StoredMark`'s order in ``ITEM_PIPELINES`` (the Addon's): after any storage pipeline.
STORED_ORDER = 1_000_000_000


class StoredMark:
    """The last item pipeline: an item that reaches it was stored by the pipelines before it. It
    tells :class:`~.pipeline.SimhashPipeline` at once, in the call that stored the item, where
    ``item_scraped`` comes a turn of the loop later, after the other items that arrived together
    were stored too: a kill in between would leave all of them unrecorded. Added by the Addon;
    with ``ITEM_PIPELINES``, list ``"scrapy_simhash.scrapy.delivery.StoredMark"`` after storage."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> StoredMark:
        return cls(crawler)

    def process_item(self, item: Any, spider: Any = None) -> Any:
        self.crawler.signals.send_catch_log(signal=item_stored, item=item)
        return item


class Journal:
    """The entry ids whose items reached storage, appended to a file of this host as each
    ``item_scraped`` arrives (on the reactor, a few bytes in the OS cache: it outlives a kill of
    the process, with no wait for the index). A crawl that dies before its delivered marks are
    written leaves its journal, and the next crawl's recovery delivers what it lists instead of
    releasing it (docs/decisions/0700-delivery-window.md). Removed once the marks are written."""

    def __init__(self, directory: Path, owner: str) -> None:
        self.path = directory / self.name(owner)
        self._fd: int | None = None
        self._broken = False

    @staticmethod
    def directory(location: str, namespace: str) -> Path:
        """Where the journals of an index's namespace live on this host."""
        digest = hashlib.sha256(f"{location}\0{namespace}".encode()).hexdigest()[:20]
        return Path(tempfile.gettempdir()) / f"scrapy-simhash-{os.getuid() if hasattr(os, 'getuid') else 0}" / digest

    @staticmethod
    def name(owner: str) -> str:
        return re.sub(r"[^A-Za-z0-9_.:-]", "_", owner)[:200]

    @staticmethod
    def read(directory: Path, owner: str) -> set[int]:
        """The ids a journal lists (none if it is missing or unreadable; a line cut by the kill is left out)."""
        try:
            data = (directory / Journal.name(owner)).read_bytes()
        except OSError:
            return set()
        return {int(line) for line in data.split(b"\n")[:-1] if line.isdigit()}

    def add(self, entry_id: int) -> None:
        if self._broken:
            return
        try:
            if self._fd is None:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.write(self._fd, b"%d\n" % entry_id)
        except OSError as exc:
            self._broken = True
            logger.warning("scrapy-simhash: cannot write the delivery journal %s (%s): a crash may pass on again "
                           "the items it stored last", self.path, exc)

    def remove(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.path.unlink(missing_ok=True)


class DeliveryTracker:
    """Pending entries by item, and the fates that arrived for them."""

    def __init__(self, key: Callable[[Any], Key | None], flush: Callable[[], None] | None = None,
                 delay: float = DELAY, journal: Journal | None = None) -> None:
        self._key = key  # an item's (url, title), or None
        self.journal = journal  # where deliveries are recorded as they arrive (set before the first)
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
                if self.journal is not None:
                    self.journal.add(entry_id)
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

    @property
    def releases_waiting(self) -> bool:
        """Is a release among the fates not written yet?"""
        return self._releases > 0

    def take(self) -> tuple[list[int], list[int]]:
        """The fates that arrived, to be written (here by :meth:`apply`, or by a worker with its next
        call): the entry ids delivered and released. Say what became of them with :meth:`written`."""
        with self._lock:
            fates, self._fates, self._releases = self._fates, [], 0
        return [e for fate, e in fates if fate == "deliver"], [e for fate, e in fates if fate == "release"]

    def written(self, delivered: list[int], released: list[int], ok: bool) -> None:
        """Fates :meth:`take` gave: written (the copies waiting for the released entries are told), or
        not (queued again, for the next write)."""
        with self._lock:
            if not ok:
                self._fates[:0] = [("deliver", e) for e in delivered] + [("release", e) for e in released]
                self._releases += len(released)
                return
            for entry_id in released:
                self._releasing.discard(entry_id)
                self._tell(entry_id, "release")

    def apply(self, index: BandIndex, *, if_released: bool = False) -> int:
        """Deliver or release the entries whose fates arrived (``if_released``: only if a release is
        among them); returns how many were released. On an index error the fates stay queued (tried
        again later) and the error is raised."""
        if if_released and not self._releases:
            return 0
        delivered, released = self.take()
        if not delivered and not released:
            return 0
        try:
            index.deliver(delivered)
            count = index.release(released)
        except BaseException:
            self.written(delivered, released, ok=False)
            raise
        self.written(delivered, released, ok=True)
        return count
