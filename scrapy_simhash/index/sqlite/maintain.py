"""The maintenance operations of a SQLite index: forget, purge, reset, count, stats, export.

A mixin of :class:`.sqlite.SqliteIndex` (which opens the file and runs the rule): the same
connection, lock and ``BEGIN IMMEDIATE`` transactions (``_write``), read snapshots (``_read``). Kept
apart so that the module with the hot path stays short; removing an entry (``_remove``) is here too,
since forgetting, purging and the delivery tracking's release all go through it.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..base import Entry
from ..meta import stats_dict
from . import sentences as sqlite_sentences
from .tables import ENTRY_COLS, Rows, Tables
from .values import url_key


class Maintenance:
    """Forget, purge, reset, count, stats and ``entries()`` over the index's tables."""

    location: str
    _ns_id: int | None
    _rows: Rows
    _lock: threading.RLock
    _write: Callable[[str], contextlib.AbstractContextManager[sqlite3.Connection]]
    _read: Callable[[str, Callable[[Tables], Any], Any], Any]
    _live: Callable[[], sqlite3.Connection]

    def forget(self, key: int | str) -> int:
        """Remove the entry with this id (int) or every entry with this URL (str), and the URL's
        decision; returns how many entries went."""
        if isinstance(key, bool) or not isinstance(key, int | str):
            raise TypeError(f"forget() takes an entry id or a URL, not {key!r}")
        with self._write("forget") as conn:
            if isinstance(key, int):
                removed = self._remove(conn, "ns = ? AND id = ?", (self._ns_id, key))
            else:
                removed = self._remove(conn, "url_key = ? AND ns = ? AND url = ?",
                                       (url_key(self._ns_id, key), self._ns_id, key))
            if isinstance(key, str):
                conn.execute("DELETE FROM decision WHERE ns = ? AND url = ?", (self._ns_id, key))
        return removed

    def _remove(self, conn: sqlite3.Connection, where: str, args: tuple[Any, ...]) -> int:
        """Remove the entries ``where`` selects, with their sentence, pending and unused band rows."""
        doomed = conn.execute(f"SELECT id, title_fp, body_fp, sentences FROM entry WHERE {where}", args).fetchall()
        ids = [(r[0],) for r in doomed]
        conn.executemany("DELETE FROM entry WHERE id = ?", ids)
        sqlite_sentences.delete(conn, self._ns_id, [(r[0], r[3]) for r in doomed])
        conn.executemany("DELETE FROM pending WHERE entry = ?", ids)
        self._rows.drop_unused_bands(conn, [(r[1], r[2]) for r in doomed])
        return len(doomed)

    def purge(self, older_than: float, *, batch: int = 5000) -> int:
        """Remove entries (and decisions) older than ``older_than`` (POSIX seconds); returns how many.

        Works in transactions of ``batch`` entries so crawlers sharing the file are never blocked long.
        """
        total = 0
        while True:
            with self._write("purge") as conn:
                n = self._remove(conn, "id IN (SELECT id FROM entry WHERE ns = ? AND first_seen < ? "
                                 "ORDER BY first_seen LIMIT ?)", (self._ns_id, older_than, batch))
                if n < batch:
                    conn.execute(
                        "DELETE FROM decision WHERE ns = ? AND decided_at < ?", (self._ns_id, older_than)
                    )
            total += n
            if n < batch:
                return total

    def reset(self) -> int:
        """Remove every entry, band row and decision of this namespace (others are untouched)."""
        lo, hi = self._rows.key_range
        with self._write("reset") as conn:
            conn.execute("DELETE FROM pending WHERE entry IN (SELECT id FROM entry WHERE ns = ?)", (self._ns_id,))
            if conn.execute("SELECT 1 FROM entry WHERE ns != ? LIMIT 1", (self._ns_id,)).fetchone() is None:
                conn.execute("DELETE FROM sentence")  # the only namespace with entries: every row is its
            else:
                sqlite_sentences.delete(conn, self._ns_id, conn.execute(
                    "SELECT id, sentences FROM entry WHERE ns = ? AND sentences IS NOT NULL", (self._ns_id,)
                ).fetchall())
            n = conn.execute("DELETE FROM entry WHERE ns = ?", (self._ns_id,)).rowcount
            conn.execute("DELETE FROM decision WHERE ns = ?", (self._ns_id,))
            conn.execute("DELETE FROM band WHERE key >= ? AND key < ?", (lo, hi))
            conn.execute("DELETE FROM band2 WHERE key >= ? AND key < ?", self._rows.key_range_below)
        return n

    def count(self) -> int:
        """Entries in this namespace."""
        with self._lock:
            conn = self._live()
            return int(conn.execute("SELECT count(*) FROM entry WHERE ns = ?", (self._ns_id,)).fetchone()[0])

    def stats(self) -> dict[str, Any]:
        """Location, size on disk, parameters, layouts, and per namespace: entries, oldest/newest
        first-seen, decisions. The keys ``entries``/``oldest``/``newest``/``decisions`` at the top
        level are this namespace's."""
        with self._lock:
            conn = self._live()
            names = dict(conn.execute("SELECT id, name FROM namespace").fetchall())
            per: dict[str, dict[str, Any]] = {
                name: {"entries": 0, "oldest": None, "newest": None, "decisions": 0}
                for name in names.values()
            }
            for ns, n, oldest, newest in conn.execute(
                "SELECT ns, count(*), min(first_seen), max(first_seen) FROM entry GROUP BY ns"
            ):
                per.setdefault(names.get(ns, f"#{ns}"), {"decisions": 0}).update(
                    entries=n, oldest=oldest, newest=newest
                )
            for ns, n in conn.execute("SELECT ns, count(*) FROM decision GROUP BY ns"):
                per.setdefault(names.get(ns, f"#{ns}"), {"entries": 0, "oldest": None, "newest": None})[
                    "decisions"
                ] = n
            band_rows = sum(int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in ("band", "band2"))
        size = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                size += os.stat(self.location + suffix).st_size
        return stats_dict(self, "sqlite", per, band_rows, {}, {"file_size": size})

    def entries(self, latest: int | None = None) -> Iterator[Entry]:
        """Every entry of this namespace (or the ``latest`` most recent), oldest first, fetched in
        pages (no long-lived cursor)."""
        last: tuple[float, int] = (-math.inf, -1)
        if latest is not None:
            def oldest_kept(tables: Tables) -> tuple[float, int] | None:
                return tables.conn.execute(
                    "SELECT first_seen, id FROM entry WHERE ns = ? ORDER BY first_seen DESC, id DESC LIMIT 1 OFFSET ?",
                    (self._ns_id, latest - 1)).fetchone()

            if latest <= 0:
                return
            start = self._read("export", oldest_kept, None)
            if start is not None:  # the pages start after `last`: just before the oldest kept (ids are integers)
                last = (start[0], start[1] - 1)
        while True:
            def page(tables: Tables, after: tuple[float, int] = last) -> list[Entry]:
                return self._rows.entries(tables.conn, tables.conn.execute(
                    f"SELECT {ENTRY_COLS} FROM entry WHERE ns = ? AND (first_seen, id) > (?, ?) "
                    "ORDER BY first_seen, id LIMIT 1000", (self._ns_id, *after)))

            entries = self._read("export", page, [])
            yield from entries
            if len(entries) < 1000:
                return
            last = (entries[-1].first_seen, entries[-1].id)
