"""The default band index: one SQLite file, shared by every process and spider that opens it.

The tables and how they hold the rule's data are described in :mod:`.tables`; how the file is made,
checked and opened, in :mod:`.file`; the sentence samples, in :mod:`.sentences`; the SQL of removing
entries and summing up a namespace, in :mod:`.maintain`. This module is the index's public API: it
holds the connection and its lock, and runs every operation in a transaction of its own.

Transactions: the connection runs in autocommit mode (``isolation_level=None``) with explicit
``BEGIN IMMEDIATE`` / ``COMMIT`` / ``ROLLBACK``. A check-and-add is the rule of :mod:`.rule` run
over this file's tables (:class:`.tables.Tables`) inside one ``BEGIN IMMEDIATE`` transaction, so two
processes carrying one story are serialized and exactly one is admitted. The file is in WAL mode
with ``synchronous=FULL``: when ``check_and_add`` returns "added", the entry is committed and its WAL
frame fsynced, so a process killed at any point leaves a file that opens and holds every entry
reported new. Readers are never blocked by writers; writers wait up to ``busy_timeout`` seconds for
each other.

Safety (:mod:`.file`): nothing read from the file is unpickled or evaluated (meta values are
JSON). A file that is not ours, is corrupt, truncated, not a database or of another schema version
is an :class:`~.base.IndexOpenError` naming it, and is never modified; nothing is silently
recreated. A new file is built under a temporary name and linked into place only once complete, so
a concurrent opener sees either no file or a whole one.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

from .. import rule
from ..bands import records
from ..base import (
    Decision,
    Entry,
    IndexOpenError,
    IndexParams,
    IndexWriteError,
    Match,
    Outcome,
    Query,
    SimhashIndexError,
    Tier,
)
from ..damage import Damaged, decision_damage
from ..damage import report as report_damage
from ..meta import FORMAT, TITLE_CHARS, QueryChecks, check_params, new_meta, stats_dict
from ..owners import alive as owners_alive
from ..runs import RUNS_KEPT, Run, newest_first, run_from_json
from . import dense as sqlite_dense
from . import maintain
from .file import META_TABLE, SCHEMA_VERSION, create_file, open_file, sqlite_error
from .schema import REQUEST_TTL
from .tables import ENTRY_COLS_E, Rows, Tables, storage_meta
from .values import url_key, whole_seconds

__all__ = ["FORMAT", "META_TABLE", "SCHEMA_VERSION", "SqliteIndex"]

#: What fails one item of a check-and-add batch alone (a value in the file that is not ours).
_ITEM_ERRORS = (SimhashIndexError, ValueError, TypeError, OverflowError)


def _failed(exc: BaseException) -> Outcome:
    return Outcome(match=None, entry_id=None, error=f"{type(exc).__name__}: {exc}")


#: Seconds between two asks for the write lock when a delivered mark waits for it (a worker's batch
#: holds it through its fsync): SQLite's own busy handler sleeps up to 100 ms between asks, and every
#: item stored meanwhile would be passed on again after a kill (docs/decisions/0700-delivery-window.md).
DELIVER_POLL = 0.001


class SqliteIndex(QueryChecks):
    """A :class:`~.base.BandIndex` in one SQLite file (see the module docstring for the layout).

    Open it with :func:`scrapy_simhash.index.open_index` or :meth:`SqliteIndex.open`. One instance
    holds one connection; its methods may be called from several threads (a lock serializes them).
    """

    location: str
    namespace: str
    params: IndexParams
    _rows: Rows  # the namespace's rows: band keys, codec, the hot path's SQL (:class:`.tables.Rows`)
    _ns_id: int | None  # None: opened read-only, and the namespace holds nothing yet
    _meta: dict[str, Any]
    _readonly: bool
    _busy_timeout: float

    def __init__(self) -> None:  # use SqliteIndex.open()
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self._tokens_purged = 0.0  # seen_at of the last purge of old request tokens

    # -- opening ---------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        namespace: str = "default",
        params: IndexParams | None = None,
        create: bool = True,
        readonly: bool = False,
        busy_timeout: float = 30.0,
    ) -> SqliteIndex:
        """Open the index file at ``path``, creating it (with ``params`` or the defaults) if absent.

        ``params=None`` accepts whatever the file records (inspection tools); otherwise every field
        must match or :class:`~.base.ParameterMismatch` names the file and each difference.
        """
        if not isinstance(namespace, str) or not namespace:
            raise ValueError("namespace must be a non-empty string")
        if params is not None:
            check_params(params)
        file = Path(os.path.expanduser(os.fspath(path))).absolute()
        self = cls()
        self.location = str(file)
        self.namespace = namespace
        self._readonly = readonly
        self._busy_timeout = busy_timeout
        created = False
        if not file.exists():
            if readonly or not create:
                why = "opened read-only" if readonly else "create=False"
                raise IndexOpenError(f"index {file} does not exist ({why})")
            params = params or IndexParams()
            created = create_file(file, new_meta(params, SCHEMA_VERSION, layout_records=records,
                                                 **storage_meta(params)))
        opened = open_file(file, namespace, params, readonly, busy_timeout, created=created)
        self._conn, self._meta, self.params = opened.conn, opened.meta, opened.params
        self._rows, self._ns_id, self._bits = opened.rows, opened.ns_id, opened.params.bits
        return self

    # -- helpers ---------------------------------------------------------------------------------

    def _live(self) -> sqlite3.Connection:
        conn = self._conn
        if conn is None:
            raise SimhashIndexError(f"index {self.location} is closed")
        return conn

    def _writable(self) -> sqlite3.Connection:
        conn = self._live()
        if self._readonly:
            raise IndexWriteError(f"index {self.location} was opened read-only: cannot write to it")
        if self._ns_id is None:  # pragma: no cover - created at open when writable
            raise IndexWriteError(f"index {self.location}: namespace {self.namespace!r} is missing")
        return conn

    def _begin(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise IndexWriteError(
                f"index {self.location}: could not get the write lock within {self._busy_timeout} s ({exc})"
            ) from exc

    @contextlib.contextmanager
    def _write(self, doing: str) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` … ``COMMIT`` transaction; rolled back on any error."""
        with self._lock:
            conn = self._writable()
            self._begin(conn)
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                self._abort(conn, exc, doing)
                raise

    def _abort(self, conn: sqlite3.Connection, exc: BaseException, doing: str) -> None:
        """Roll back the failed transaction; an SQLite error is raised as ours, naming the index
        (the caller re-raises anything else)."""
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error):
            raise sqlite_error(self.location, exc, doing) from exc

    # -- the protocol ----------------------------------------------------------------------------

    def check_and_add(self, query: Query, *, flagged: Collection[Tier] = ()) -> Outcome:
        """The rule (:func:`.rule.check_and_add`) in one ``BEGIN IMMEDIATE`` transaction, fsynced."""
        return self.check_and_add_many([query], flagged=flagged)[0].checked()

    def check_and_add_many(self, queries: Sequence[Query], *, flagged: Collection[Tier] = ()) -> list[Outcome]:
        """Each query in turn as :meth:`check_and_add` (a later one sees the earlier ones' entries),
        all in one transaction: one fsync for the batch, and nothing of it is committed unless all is."""
        for query in queries:
            self._check_query(query)
        if not queries:
            return []
        if len(queries) == 1:  # the transaction is the item's savepoint: two statements fewer
            return [self._check_one(queries[0], flagged)]
        with self._write("check-and-add") as conn:
            purged = self._tokens_purged
            try:  # the usual batch, no item failing: no savepoints (two statements an item fewer)
                return [self._decide(conn, Tables(self._rows, conn, query), query, flagged) for query in queries]
            except _ITEM_ERRORS:  # again from the same state, a savepoint an item: that item alone fails
                conn.execute("ROLLBACK")
                self._tokens_purged = purged
                self._begin(conn)
            return [self._one(conn, Tables(self._rows, conn, query), query, flagged) for query in queries]

    def _check_one(self, query: Query, flagged: Collection[Tier]) -> Outcome:
        """One query in a transaction of its own: :meth:`_write` unrolled (the hot path of
        ``check_and_add``), the item's failure rolled back as its outcome."""
        with self._lock:
            conn = self._writable()
            self._begin(conn)
            try:
                try:
                    outcome = self._decide(conn, Tables(self._rows, conn, query), query, flagged)
                except _ITEM_ERRORS as exc:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    return _failed(exc)
                conn.execute("COMMIT")
                return outcome
            except BaseException as exc:
                self._abort(conn, exc, "check-and-add")
                raise

    def _decide(self, conn: sqlite3.Connection, tables: Tables, query: Query, flagged: Collection[Tier]) -> Outcome:
        """The rule for one query; with a request id, the answer it was already given, if any, else
        the rule's answer, kept with it (tokens older than :data:`REQUEST_TTL` go once a minute)."""
        token = query.request_id
        if token is None:
            return rule.check_and_add(tables, query, flagged)
        outcome = tables.answered(token)
        if outcome is None:
            outcome = rule.check_and_add(tables, query, flagged)
            tables.remember(token, outcome, query.seen_at)
            if query.seen_at >= self._tokens_purged + 60:
                conn.execute("DELETE FROM request WHERE at < ?", (query.seen_at - REQUEST_TTL,))
                self._tokens_purged = query.seen_at
        return outcome

    def _one(self, conn: sqlite3.Connection, tables: Tables, query: Query, flagged: Collection[Tier]) -> Outcome:
        """One query of a batch, under a savepoint: a value in the file that is not ours (a tampered
        fingerprint) fails this item alone, with nothing of it written."""
        conn.execute("SAVEPOINT item")
        try:
            outcome = self._decide(conn, tables, query, flagged)
        except _ITEM_ERRORS as exc:
            conn.execute("ROLLBACK TO item")
            outcome = _failed(exc)
        conn.execute("RELEASE item")
        return outcome

    def peek(self, query: Query) -> Match | None:
        """What :meth:`check_and_add` would answer now, read in one snapshot; nothing is written."""
        self._check_query(query)
        return self._read("check", lambda tables: rule.peek(Tables(tables.rows, tables.conn, query), query), None)

    def lookup(
        self,
        title_fp: int | None,
        body_fp: int | None,
        *,
        title_k: int,
        body_k: int,
        not_before: float | None = None,
        limit: int = 5,
    ) -> list[Match]:
        """Nearest entries per tier within the distances, title tier first, each tier nearest first."""
        self._check_fp(title_fp, "title_fp")
        self._check_fp(body_fp, "body_fp")
        self._check_k(title_k, body_k)
        return self._read("lookup", lambda tables: rule.lookup(
            tables, title_fp, body_fp, title_k=title_k, body_k=body_k, not_before=not_before, limit=limit
        ), [])

    def _read(self, doing: str, run: Callable[[Tables], Any], empty: Any) -> Any:
        """``run`` over the tables in one read transaction (a consistent snapshot, writers not blocked)."""
        with self._lock:
            conn = self._live()
            if self._ns_id is None:
                return empty
            try:
                conn.execute("BEGIN")
                try:
                    return run(Tables(self._rows, conn))
                finally:
                    conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise sqlite_error(self.location, exc, doing) from exc

    def add(self, entries: list[tuple[int | None, int | None, str | None, str | None, float]]) -> int:
        """Bulk-add ``(title_fp, body_fp, url, title, first_seen)`` in one transaction, unchecked."""
        rows, bands = [], []
        enc, ns = self._rows.enc, self._ns_id
        for tfp, bfp, url, title, first_seen in entries:
            if tfp is None and bfp is None:
                raise ValueError("an entry needs a title or a body fingerprint")
            self._check_fp(tfp, "title_fp")
            self._check_fp(bfp, "body_fp")
            rows.append(
                (
                    ns,
                    None if tfp is None else enc(tfp),
                    None if bfp is None else enc(bfp),
                    whole_seconds(first_seen),
                    url,
                    url_key(ns or 0, url),
                    None if title is None else title[:TITLE_CHARS],
                )
            )
            bands.extend(self._rows.band_rows(tfp, bfp))
        bands.sort(key=lambda r: r[0])  # key order: B-tree appends instead of random page writes
        with self._write("bulk add") as conn:
            conn.executemany(
                "INSERT INTO entry(ns, title_fp, body_fp, first_seen, url, url_key, title)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            sqlite_dense.write(conn, self._rows, bands)
        return len(rows)

    def explain(self, url: str) -> Decision | None:
        """The latest decision recorded for ``url`` in this namespace (None if it was new or unseen);
        a damaged one raises :class:`SimhashIndexError`."""
        found = self._decisions("AND d.url = ?", (url,), 1, None)
        return found[0] if found else None

    def decisions(self, limit: int = 1000, *, damaged: Damaged | None = None) -> list[Decision]:
        """The ``limit`` most recent decisions of this namespace, newest first; a damaged one (or one
        whose original entry is) is described to ``damaged`` and left out, or without it raises."""
        return self._decisions("", (), limit, damaged)

    def _decisions(self, where: str, args: tuple[Any, ...], limit: int, damaged: Damaged | None) -> list[Decision]:
        bits = self.params.bits

        def read(tables: Tables) -> tuple[list[Decision], list[str]]:
            rows = tables.conn.execute(
                f"SELECT d.url, d.status, d.tier, d.distance, d.decided_at, d.title, d.score, {ENTRY_COLS_E}"
                " FROM decision d LEFT JOIN entry e ON e.id = d.original AND e.ns = d.ns"
                f" WHERE d.ns = ? {where} ORDER BY d.decided_at DESC LIMIT ?",
                (self._ns_id, *args, limit),
            ).fetchall()
            found, _ = maintain.sound_entries(tables.conn, self._rows,  # (a damaged original: its decision's)
                                              [r[7:] for r in rows if r[7] is not None], bits)
            originals = {e.id: e for e in found}
            decisions, problems = [], []
            for url, status, tier, distance, decided_at, title, score, *erow in rows:
                decision = Decision(url=url, status=status, tier=tier, distance=distance, decided_at=decided_at,
                                    title=title, original=originals.get(erow[0]), score=score)
                problem = decision_damage(decision, bits)
                if problem is None and erow[0] is not None and erow[0] not in originals:
                    problem = f"decision about {url!r}: its original {maintain.row_damage(erow, bits)}"
                if problem is None:
                    decisions.append(decision)
                else:
                    problems.append(problem)
            return decisions, problems

        decisions, problems = self._read("explain", read, ([], []))
        for problem in problems:
            report_damage(damaged, self.location, problem)
        return decisions

    # -- delivery ---------------------------------------------------------------------------------

    def deliver(self, entry_ids: Sequence[int]) -> None:
        """These pending entries' items reached storage: no longer pending (one transaction, not
        fsynced: in the WAL it outlives a kill of the process, and the next fsynced commit makes it
        durable; lost to a power cut, the entries are released and their items passed on again,
        docs/decisions/0700-delivery-window.md)."""
        if not entry_ids:
            return
        with self._lock:
            conn = self._writable()
            busy_ms = conn.execute("PRAGMA busy_timeout").fetchone()[0]
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout = 0")  # polled below: SQLite's own waits grow to 100 ms
            try:
                self._begin_polling(conn)
                try:
                    conn.executemany("DELETE FROM pending WHERE entry = ?", [(int(i),) for i in entry_ids])
                    conn.execute("COMMIT")
                except BaseException as exc:
                    self._abort(conn, exc, "deliver")
                    raise
            finally:
                conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
                conn.execute("PRAGMA synchronous=FULL")

    def _begin_polling(self, conn: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE``, the write lock asked for every :data:`DELIVER_POLL` s (up to the
        busy timeout), so a mark is written as soon as a worker's batch lets the lock go."""
        deadline = time.monotonic() + self._busy_timeout
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if time.monotonic() >= deadline or "locked" not in str(exc):
                    raise IndexWriteError(f"index {self.location}: could not get the write lock within "
                                          f"{self._busy_timeout} s ({exc})") from exc
                time.sleep(DELIVER_POLL)

    def release(self, entry_ids: Sequence[int]) -> int:
        """Remove these pending entries (their items were dropped downstream); returns how many."""
        if not entry_ids:
            return 0
        with self._write("release") as conn:
            return maintain.release(conn, self._rows, [int(i) for i in entry_ids])

    def recover(self, delivered: Callable[[str], Collection[int]] | None = None) -> int:
        """Release the pending entries of this namespace whose owner died before delivering them
        (those ``delivered(owner)`` lists are delivered instead); pending rows that cannot be right
        (:func:`.maintain.pending_problem`) are refused with :class:`IndexOpenError`, nothing released."""
        with self._lock:
            problem = maintain.pending_problem(self._live())
            if problem is not None:
                raise IndexOpenError(f"index {self.location}: {problem}; refusing to release entries on them "
                                     "(check: pending rows)")
            owners = maintain.pending_owners(self._live(), self._ns_id)
        total = 0
        for owner in [o for o in owners if owners_alive(o) is False]:
            stored = [(int(i), owner) for i in delivered(owner)] if delivered is not None else []
            with self._write("recover") as conn:
                conn.executemany("DELETE FROM pending WHERE entry = ? AND owner = ?", stored)
                total += maintain.release_owner(conn, self._rows, owner)
        return total

    # -- maintenance ------------------------------------------------------------------------------

    def forget(self, key: int | str) -> int:
        """Remove the entry with this id (int) or every entry with this URL (str), and the URL's
        decision; returns how many entries went."""
        if isinstance(key, bool) or not isinstance(key, int | str):
            raise TypeError(f"forget() takes an entry id or a URL, not {key!r}")
        with self._write("forget") as conn:
            return maintain.forget(conn, self._rows, key)

    def purge(self, older_than: float, *, batch: int = 5000) -> int:
        """Remove entries (and decisions) older than ``older_than`` (POSIX seconds); returns how many.

        Works in transactions of ``batch`` entries so crawlers sharing the file are never blocked long.
        """
        total = 0
        while True:
            with self._write("purge") as conn:
                n = maintain.purge_batch(conn, self._rows, older_than, batch)
            total += n
            if n < batch:
                return total

    def reset(self) -> int:
        """Remove every entry, band row and decision of this namespace (others are untouched)."""
        with self._write("reset") as conn:
            return maintain.reset(conn, self._rows)

    def count(self) -> int:
        """Entries in this namespace."""
        with self._lock:
            return maintain.count(self._live(), self._ns_id)

    def stats(self) -> dict[str, Any]:
        """Location, size on disk, parameters, layouts, and per namespace: entries, oldest/newest
        first-seen, decisions. The keys ``entries``/``oldest``/``newest``/``decisions`` at the top
        level are this namespace's."""
        with self._lock:
            per, band_rows = maintain.per_namespace(self._live())
        return stats_dict(self, "sqlite", per, band_rows, {}, {"file_size": maintain.file_size(self.location)})

    def entries(self, latest: int | None = None, *, damaged: Damaged | None = None) -> Iterator[Entry]:
        """Every entry of this namespace (or the ``latest`` most recent), oldest first, fetched in
        pages (no long-lived cursor). A row holding a value the index never writes is described to
        ``damaged`` and skipped; without ``damaged``, it raises :class:`SimhashIndexError`."""
        last: tuple[Any, int] = (-math.inf, -1)
        if latest is not None:
            if latest <= 0:
                return
            start = self._read("export", lambda tables: maintain.oldest_kept(tables.conn, self._ns_id, latest), None)
            if start is not None:  # the pages start after `last`: just before the oldest kept (ids are integers)
                last = (start[0], start[1] - 1)
        while True:
            def page(tables: Tables, after: tuple[Any, int] = last) -> tuple[Any, ...]:
                return maintain.entries_after(tables.conn, self._rows, after, self.params.bits)

            entries, problems, cursor, n = self._read("export", page, ([], [], None, 0))
            for problem in problems:
                report_damage(damaged, self.location, problem)
            yield from entries
            if n < maintain.PAGE or cursor is None:
                return
            last = cursor

    # -- runs -------------------------------------------------------------------------------------

    def record_run(self, run: Run) -> None:
        """Write ``run``'s record (replacing its start), and keep the :data:`~.runs.RUNS_KEPT` newest."""
        with self._write("record run") as conn:
            conn.execute("INSERT OR REPLACE INTO run(ns, id, started, record) VALUES (?, ?, ?, ?)",
                         (self._ns_id, run.id, run.started, run.to_json()))
            conn.execute("DELETE FROM run WHERE ns = ?1 AND id NOT IN (SELECT id FROM run WHERE ns = ?1"
                         " ORDER BY started DESC, id DESC LIMIT ?2)", (self._ns_id, RUNS_KEPT))

    def runs(self, limit: int = RUNS_KEPT, *, damaged: Damaged | None = None) -> list[Run]:
        """The ``limit`` most recent runs of this namespace, newest first; a damaged record is
        described to ``damaged`` and left out, or without it raises :class:`SimhashIndexError`."""
        raw = self._read("runs", lambda tables: tables.conn.execute(
            "SELECT record FROM run WHERE ns = ? ORDER BY started DESC, id DESC LIMIT ?",
            (self._ns_id, max(0, limit))).fetchall(), [])
        found = []
        for (record,) in raw:
            try:
                found.append(run_from_json(record))
            except ValueError as exc:
                report_damage(damaged, self.location, str(exc))
        return newest_first(found)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()

    def __enter__(self) -> SqliteIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else ("read-only" if self._readonly else "open")
        return f"<SqliteIndex {self.location} namespace={self.namespace!r} {state}>"
