"""The default band index: one SQLite file, shared by every process and spider that opens it.

What is stored where, and why
-----------------------------
``simhash_meta`` (a :mod:`sqlitedict` table: ``key TEXT PRIMARY KEY, value BLOB``, JSON values)
    The file describes itself (:func:`.meta.new_meta`): ``format`` (``"scrapy-simhash-index"``),
    ``schema_version``, the :class:`~.base.IndexParams` (bits, bands per tier, tokenizer, features
    version), the band layouts derived from them, how band keys are packed (``band_key``), how
    fingerprints are stored, and when and by which version the file was created. Other parameters
    at open are a :class:`~.base.ParameterMismatch`; a file without this table is "not a
    scrapy-simhash index". It is written once, by ``SqliteDict(encode=json.dumps)`` (never its
    pickle default), into a private temporary file before that file is linked into place, so
    sqlitedict's own background connection never meets our transactions. It is read at open on our
    own connection with the same JSON decoder (see :func:`.sqlite_file.read_meta` for why not
    through sqlitedict); any tool can still read it with
    ``SqliteDict(path, "simhash_meta", flag="r", decode=json.loads)``.
``namespace``
    ``(id, name, created)``: several projects can share one file; every other row carries the id.
``entry``
    One row per admitted item: ``id`` (never reused, ``AUTOINCREMENT``, so a decision's reference
    to a forgotten entry cannot point at a newer one), ``ns``, ``title_fp``, ``body_fp`` (NULL when
    that text was too short), ``first_seen`` (POSIX seconds), ``url``, ``title`` (first 300
    characters), ``numbers`` (the body's number signature, a short text, see
    :func:`~.rule.numbers_agree`; checked by the title tier when a query asks). Indexes
    ``(ns, title_fp, first_seen)`` and ``(ns, body_fp, first_seen)`` find the
    earliest non-expired entry holding a fingerprint in O(log n), however many share it;
    ``(ns, first_seen)`` serves purge/stats/export and ``(ns, url)`` serves ``forget(url)``.
``band`` (``WITHOUT ROWID``, primary key ``(key, fp)``)
    The pigeonhole bands. ``key`` packs ``(namespace id, tier, band number, band value)`` into one
    non-negative 63-bit integer; ``fp`` is the full fingerprint. A fingerprint is stored once per
    band however many entries share it, so boilerplate pages and empty bodies do not grow buckets:
    the cost of a check stays flat under skew. Band rows go away only when the last entry of the
    namespace holding that fingerprint does (forget, purge, reset).
``sentence`` (``WITHOUT ROWID``, primary key ``(ns, hash, entry)``)
    The opt-in sentence tier's lookup table: one row per stored sentence hash of an entry added
    with a sentence signature (its 16 smallest sentence hashes, 16 hex digits each). Rows go with
    their entry.
``decision``
    The latest decision per ``(ns, url)`` for a matched item (status, tier, distance, id of the
    original, time) so that ``explain(url)`` can say why an item was dropped or flagged. Only
    queries with a URL are recorded; one row per URL keeps the table bounded.

Fingerprints: ``bits`` ≤ 64 are stored as SQLite's signed 64-bit integers through
:func:`~scrapy_simhash.simhash.to_signed64` / :func:`~scrapy_simhash.simhash.from_signed64` (the only
place the mapping happens is :func:`_codec`); 128-bit fingerprints as 16-byte
big-endian BLOBs. A band value of more than 36 bits (only with 128 bits or very few bands) is folded
(XOR) into 36 bits inside the key: that can only add candidates, and every candidate is verified by
exact Hamming distance, so exactness is unaffected.

Transactions: the connection runs in autocommit mode (``isolation_level=None``) with explicit
``BEGIN IMMEDIATE`` / ``COMMIT`` / ``ROLLBACK``. A check-and-add is the rule of :mod:`.rule` run
over this file's tables (:class:`_Tables`) inside one ``BEGIN IMMEDIATE`` transaction, so two
processes carrying one story are
serialized and exactly one is admitted. The file is in WAL mode with ``synchronous=FULL``: when
``check_and_add`` returns "added", the entry is committed and its WAL frame fsynced, so a process
killed at any point leaves a file that opens and holds every entry reported new. Readers are never
blocked by writers; writers wait up to ``busy_timeout`` seconds for each other.

Scaling: identical fingerprints cost nothing extra, but distinct fingerprints sharing a band value
are all candidates: about ``n / 2**width`` per band. For 64 bits and body k=3 (16-bit bands) that is
~15 per band at 1M entries, verified in Python; ``benchmarks/index_scaling.py`` measures it. Manku's
permuted tables (e.g. 5 blocks, keys on 2 of them) would trade more band rows for fewer candidates.

Safety (:mod:`.sqlite_file`): nothing read from the file is unpickled or evaluated (meta values are
JSON). A file that is not ours, is corrupt, truncated or not a database is an
:class:`~.base.IndexOpenError` naming it, and is never modified; nothing is silently recreated. A
new file is built under a temporary name and linked into place only once complete, so a concurrent
opener sees either no file or a whole one.
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..simhash import from_signed64, to_signed64
from . import rule
from .base import (
    TIERS,
    Decision,
    Entry,
    IndexError_,
    IndexOpenError,
    IndexParams,
    IndexWriteError,
    Match,
    Outcome,
    Query,
    Tier,
)
from .meta import FORMAT, TITLE_CHARS, QueryChecks, check_params, layouts, new_meta, stats_dict, verify_meta
from .sqlite_file import (
    META_TABLE,
    SCHEMA_VERSION,
    TABLES,
    check_header,
    create_file,
    probe_write,
    read_meta,
    sqlite_error,
)

__all__ = ["FORMAT", "META_TABLE", "SCHEMA_VERSION", "SqliteIndex"]

#: Bits of the band value inside a band key, at most; the rest of the 63 bits hold the prefix.
MAX_VALUE_BITS = 36
#: Bits reserved for the namespace id in a band key (about a million namespaces per file).
NAMESPACE_BITS = 20
BAND_NUMBER_BITS = 6  # up to 64 bands per tier
_KIND = {"title": 0, "body": 1}

_ENTRY_COLS = "id, title_fp, body_fp, first_seen, url, title, numbers"
_ENTRY_COLS_E = ", ".join(f"e.{c.strip()}" for c in _ENTRY_COLS.split(","))


def _value_bits(params: IndexParams) -> int:
    widest = max(width for layout in layouts(params).values() for _, width in layout)
    return min(widest, MAX_VALUE_BITS)


def _fold(value: int, bits: int) -> int:
    mask = (1 << bits) - 1
    while value >> bits:
        value = (value & mask) ^ (value >> bits)
    return value


def _codec(bits: int) -> tuple[Callable[[int], Any], Callable[[Any], int]]:
    """How a fingerprint is stored: the one place the signed 64-bit mapping is applied."""
    if bits <= 64:
        return to_signed64, from_signed64
    nbytes = bits // 8

    def enc(fp: int) -> bytes:
        return fp.to_bytes(nbytes, "big")

    def dec(raw: Any) -> int:
        return int.from_bytes(raw, "big")

    return enc, dec


class _Tables:
    """The rule's :class:`~.rule.Store` on this file's tables, inside the caller's transaction."""

    def __init__(self, index: SqliteIndex, conn: sqlite3.Connection) -> None:
        self.index, self.conn = index, conn

    def candidates(self, tier: Tier, fp: int) -> Iterable[int]:
        dec = self.index._dec
        return [dec(raw) for (raw,) in self.conn.execute(self.index._sql_band[tier], self.index._keys(tier, fp))]

    def holders(self, tier: Tier, fp: int, not_before: float, limit: int | None) -> list[Entry]:
        ix = self.index
        args = (ix._ns_id, ix._enc(fp), not_before, -1 if limit is None else limit)
        return [ix._entry(r) for r in self.conn.execute(ix._sql_first[tier], args)]

    def sentence_holders(self, hashes: Sequence[str], not_before: float) -> list[tuple[Entry, int, int]]:
        ix, conn, cap = self.index, self.conn, rule.SENTENCE_MAX_HOLDERS
        hashes = [
            h for h in hashes
            if conn.execute("SELECT count(*) FROM (SELECT 1 FROM sentence WHERE ns = ? AND hash = ? LIMIT ?)",
                            (ix._ns_id, h, cap)).fetchone()[0] < cap
        ]
        if not hashes:
            return []
        rows = conn.execute(
            f"SELECT {_ENTRY_COLS_E}, count(*), (SELECT count(*) FROM sentence x WHERE x.entry = e.id)"
            f" FROM sentence s JOIN entry e ON e.id = s.entry"
            f" WHERE s.ns = ? AND s.hash IN ({','.join('?' * len(hashes))}) AND e.first_seen >= ?"
            " GROUP BY e.id ORDER BY e.first_seen, e.id",
            (ix._ns_id, *hashes, not_before),
        ).fetchall()
        return [(ix._entry(tuple(row)), shared, stored) for *row, shared, stored in rows]

    def insert(self, query: Query, seen_at: float) -> int:
        ix, conn = self.index, self.conn
        tfp, bfp = query.title_fp, query.body_fp
        entry_id = conn.execute(
            "INSERT INTO entry(ns, title_fp, body_fp, first_seen, url, title, numbers) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                ix._ns_id,
                None if tfp is None else ix._enc(tfp),
                None if bfp is None else ix._enc(bfp),
                seen_at,
                query.url,
                None if query.title is None else query.title[:TITLE_CHARS],
                query.numbers,
            ),
        ).lastrowid
        assert entry_id is not None
        conn.executemany("INSERT OR IGNORE INTO band(key, fp) VALUES (?, ?)", ix._band_rows(tfp, bfp))
        if query.sentences:
            conn.executemany(
                "INSERT OR IGNORE INTO sentence(ns, hash, entry) VALUES (?, ?, ?)",
                [(ix._ns_id, h, entry_id) for h in sorted(set(query.sentences))[: rule.SENTENCES_STORED]],
            )
        return entry_id

    def record(self, query: Query, match: Match, status: str, seen_at: float) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO decision(ns, url, status, tier, distance, original, decided_at, title)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.index._ns_id, query.url, status, match.tier, match.distance, match.entry.id, seen_at,
                None if query.title is None else query.title[:TITLE_CHARS],
            ),
        )


class SqliteIndex(QueryChecks):
    """A :class:`~.base.BandIndex` in one SQLite file (see the module docstring for the layout).

    Open it with :func:`scrapy_simhash.index.open_index` or :meth:`SqliteIndex.open`. One instance
    holds one connection; its methods may be called from several threads (a lock serializes them).
    """

    location: str
    namespace: str
    params: IndexParams

    def __init__(self) -> None:  # use SqliteIndex.open()
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()

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
        if not file.exists():
            if readonly or not create:
                why = "opened read-only" if readonly else "create=False"
                raise IndexOpenError(f"index {file} does not exist ({why})")
            params = params or IndexParams()
            create_file(file, new_meta(
                params, SCHEMA_VERSION,
                band_key={
                    "value_bits": _value_bits(params),
                    "namespace_bits": NAMESPACE_BITS,
                    "band_number_bits": BAND_NUMBER_BITS,
                },
                fingerprint_storage="int64" if params.bits <= 64 else "blob16",
            ))
        self._open_existing(file, params)
        return self

    def _open_existing(self, file: Path, params: IndexParams | None) -> None:
        check_header(file)
        try:
            if self._readonly:
                conn = sqlite3.connect(
                    f"{file.as_uri()}?mode=ro", uri=True, isolation_level=None,
                    timeout=self._busy_timeout, check_same_thread=False,
                )
            else:
                conn = sqlite3.connect(
                    str(file), isolation_level=None, timeout=self._busy_timeout, check_same_thread=False
                )
        except sqlite3.Error as exc:
            raise IndexOpenError(f"cannot open index {file}: {exc}") from exc
        self._conn = conn
        try:
            self._verify_and_configure(file, params)
        except BaseException:
            self._conn = None
            conn.close()
            raise

    def _verify_and_configure(self, file: Path, requested: IndexParams | None) -> None:
        conn = self._conn
        assert conn is not None
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.Error as exc:
            raise IndexOpenError(f"index {file} cannot be read, corrupt or not a database: {exc}") from exc
        if META_TABLE not in tables:
            raise IndexOpenError(
                f"{file} is a SQLite database but not a scrapy-simhash index (no {META_TABLE} table)"
            )
        meta = read_meta(conn, file)
        if meta.get("format") == FORMAT and meta.get("schema_version") == SCHEMA_VERSION:
            missing = [t for t in TABLES if t not in tables]
            if missing:
                raise IndexOpenError(f"index {file} is damaged: tables {missing} are missing")
        stored = verify_meta(meta, str(file), SCHEMA_VERSION, requested, "file")
        try:
            value_bits = int(meta["band_key"]["value_bits"])
        except (KeyError, TypeError, ValueError) as exc:
            raise IndexOpenError(f"index {file} records unreadable parameters: {exc}") from exc
        self.params = stored
        self._meta = meta
        self._value_bits = value_bits
        self._layouts = layouts(stored)
        self._bits = stored.bits
        self._enc, decode = _codec(stored.bits)
        stored_type = int if stored.bits <= 64 else bytes

        def checked_decode(raw: Any) -> int:
            # A file written by someone else may hold anything in a fingerprint column.
            if type(raw) is not stored_type:
                raise IndexError_(
                    f"index {file} is corrupt: a stored fingerprint is {type(raw).__name__}, "
                    f"not {stored_type.__name__}"
                )
            return decode(raw)

        self._dec = checked_decode
        try:
            if not self._readonly:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
                probe_write(conn)
            conn.execute("PRAGMA cache_size=-32768")  # 32 MiB: keeps the upper B-tree levels hot
            conn.execute("PRAGMA temp_store=MEMORY")
            self._ns_id = self._namespace_id(self.namespace, create=not self._readonly)
        except sqlite3.Error as exc:
            if "readonly" in str(exc):
                raise IndexOpenError(
                    f"index {file} is read-only here ({exc}): open it with readonly=True"
                ) from exc
            raise IndexOpenError(f"cannot open index {file}: {exc}") from exc
        self._prepare()

    def _namespace_id(self, name: str, *, create: bool) -> int | None:
        conn = self._conn
        assert conn is not None
        row = conn.execute("SELECT id FROM namespace WHERE name = ?", (name,)).fetchone()
        if row is not None or not create:
            return None if row is None else int(row[0])
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("INSERT OR IGNORE INTO namespace(name, created) VALUES (?, ?)", (name, time.time()))
            ns_id = int(conn.execute("SELECT id FROM namespace WHERE name = ?", (name,)).fetchone()[0])
            if ns_id >= 1 << NAMESPACE_BITS:
                raise IndexOpenError(
                    f"index {self.location} cannot hold more than {1 << NAMESPACE_BITS} namespaces"
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return ns_id

    def _prepare(self) -> None:
        """Precompute what the hot path needs: band key bases and SQL per tier."""
        vb = self._value_bits
        ns = self._ns_id or 0
        self._band_plan: dict[Tier, list[tuple[int, int, int]]] = {}
        for tier in TIERS:
            plan = []
            for number, (shift, width) in enumerate(self._layouts[tier]):
                prefix = ((ns << 1 | _KIND[tier]) << BAND_NUMBER_BITS) | number
                plan.append((prefix << vb, shift, width))
            self._band_plan[tier] = plan
        self._ns_key_range = (
            (ns << (1 + BAND_NUMBER_BITS)) << vb,
            ((ns + 1) << (1 + BAND_NUMBER_BITS)) << vb,
        )
        self._sql_band = {
            tier: f"SELECT fp FROM band WHERE key IN ({','.join('?' * len(self._layouts[tier]))})"
            for tier in TIERS
        }
        self._sql_first = {
            tier: f"SELECT {_ENTRY_COLS} FROM entry WHERE ns = ? AND {tier}_fp = ? AND first_seen >= ? "
            "ORDER BY first_seen, id LIMIT ?"
            for tier in TIERS
        }
        self._sql_used = {
            tier: f"SELECT 1 FROM entry WHERE ns = ? AND {tier}_fp = ? LIMIT 1" for tier in TIERS
        }

    # -- helpers ---------------------------------------------------------------------------------

    def _keys(self, tier: Tier, fp: int) -> list[int]:
        vb = self._value_bits
        keys = []
        for base, shift, width in self._band_plan[tier]:
            value = (fp >> shift) & ((1 << width) - 1)
            if width > vb:
                value = _fold(value, vb)
            keys.append(base | value)
        return keys

    def _live(self) -> sqlite3.Connection:
        conn = self._conn
        if conn is None:
            raise IndexError_(f"index {self.location} is closed")
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
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise sqlite_error(self.location, exc, doing) from exc
                raise

    def _entry(self, row: tuple[Any, ...]) -> Entry:
        ident, tfp, bfp, first_seen, url, title, numbers = row
        dec = self._dec
        return Entry(
            id=ident,
            namespace=self.namespace,
            url=url,
            title=title,
            first_seen=first_seen,
            title_fp=None if tfp is None else dec(tfp),
            body_fp=None if bfp is None else dec(bfp),
            numbers=numbers,
        )

    def _band_rows(self, tfp: int | None, bfp: int | None) -> list[tuple[int, Any]]:
        rows = []
        if tfp is not None:
            raw = self._enc(tfp)
            rows.extend((key, raw) for key in self._keys("title", tfp))
        if bfp is not None:
            raw = self._enc(bfp)
            rows.extend((key, raw) for key in self._keys("body", bfp))
        return rows

    def _drop_unused_bands(self, conn: sqlite3.Connection, removed: list[tuple[Any, Any]]) -> None:
        """Delete band rows of fingerprints no remaining entry of the namespace holds."""
        for index, tier in enumerate(TIERS):
            for raw in {r[index] for r in removed if r[index] is not None}:
                if conn.execute(self._sql_used[tier], (self._ns_id, raw)).fetchone() is None:
                    conn.executemany(
                        "DELETE FROM band WHERE key = ? AND fp = ?",
                        [(key, raw) for key in self._keys(tier, self._dec(raw))],
                    )

    # -- the protocol ----------------------------------------------------------------------------

    # -- the protocol ----------------------------------------------------------------------------

    def check_and_add(self, query: Query, *, flagged: Collection[Tier] = ()) -> Outcome:
        """The rule (:func:`.rule.check_and_add`) in one ``BEGIN IMMEDIATE`` transaction, fsynced."""
        return self.check_and_add_many([query], flagged=flagged)[0]

    def check_and_add_many(self, queries: Sequence[Query], *, flagged: Collection[Tier] = ()) -> list[Outcome]:
        """Each query in turn as :meth:`check_and_add` (a later one sees the earlier ones' entries),
        all in one transaction: one fsync for the batch, and nothing of it is committed unless all is."""
        for query in queries:
            self._check_query(query)
        if not queries:
            return []
        with self._write("check-and-add") as conn:
            tables = _Tables(self, conn)
            return [rule.check_and_add(tables, query, flagged) for query in queries]

    def peek(self, query: Query) -> Match | None:
        """What :meth:`check_and_add` would answer now, read in one snapshot; nothing is written."""
        self._check_query(query)
        return self._read("check", lambda tables: rule.peek(tables, query), None)

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

    def _read(self, doing: str, run: Callable[[_Tables], Any], empty: Any) -> Any:
        """``run`` over the tables in one read transaction (a consistent snapshot, writers not blocked)."""
        with self._lock:
            conn = self._live()
            if self._ns_id is None:
                return empty
            try:
                conn.execute("BEGIN")
                try:
                    return run(_Tables(self, conn))
                finally:
                    conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise sqlite_error(self.location, exc, doing) from exc

    def add(self, entries: list[tuple[int | None, int | None, str | None, str | None, float]]) -> int:
        """Bulk-add ``(title_fp, body_fp, url, title, first_seen)`` in one transaction, unchecked."""
        rows, bands = [], []
        enc, ns = self._enc, getattr(self, "_ns_id", None)
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
                    first_seen,
                    url,
                    None if title is None else title[:TITLE_CHARS],
                )
            )
            bands.extend(self._band_rows(tfp, bfp))
        bands.sort(key=lambda r: r[0])  # key order: B-tree appends instead of random page writes
        with self._write("bulk add") as conn:
            conn.executemany(
                "INSERT INTO entry(ns, title_fp, body_fp, first_seen, url, title) VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            conn.executemany("INSERT OR IGNORE INTO band(key, fp) VALUES (?, ?)", bands)
        return len(rows)

    def explain(self, url: str) -> Decision | None:
        """The latest decision recorded for ``url`` in this namespace (None if it was new or unseen)."""
        found = self._decisions("AND d.url = ?", (url,), 1)
        return found[0] if found else None

    def decisions(self, limit: int = 1000) -> list[Decision]:
        """The ``limit`` most recent decisions of this namespace, newest first."""
        return self._decisions("", (), limit)

    def _decisions(self, where: str, args: tuple[Any, ...], limit: int) -> list[Decision]:
        with self._lock:
            rows = self._live().execute(
                f"SELECT d.url, d.status, d.tier, d.distance, d.decided_at, d.title, {_ENTRY_COLS_E}"
                " FROM decision d LEFT JOIN entry e ON e.id = d.original AND e.ns = d.ns"
                f" WHERE d.ns = ? {where} ORDER BY d.decided_at DESC LIMIT ?",
                (self._ns_id, *args, limit),
            ).fetchall()
        return [
            Decision(
                url=url, status=status, tier=tier, distance=distance, decided_at=decided_at, title=title,
                original=None if erow[0] is None else self._entry(erow),
            )
            for url, status, tier, distance, decided_at, title, *erow in rows
        ]

    def forget(self, key: int | str) -> int:
        """Remove the entry with this id (int) or every entry with this URL (str), and the URL's
        decision; returns how many entries went."""
        if isinstance(key, bool) or not isinstance(key, int | str):
            raise TypeError(f"forget() takes an entry id or a URL, not {key!r}")
        column = "id" if isinstance(key, int) else "url"
        with self._write("forget") as conn:
            removed = conn.execute(
                f"SELECT title_fp, body_fp FROM entry WHERE ns = ? AND {column} = ?", (self._ns_id, key)
            ).fetchall()
            conn.execute(
                f"DELETE FROM sentence WHERE entry IN (SELECT id FROM entry WHERE ns = ? AND {column} = ?)",
                (self._ns_id, key),
            )
            conn.execute(f"DELETE FROM entry WHERE ns = ? AND {column} = ?", (self._ns_id, key))
            if isinstance(key, str):
                conn.execute("DELETE FROM decision WHERE ns = ? AND url = ?", (self._ns_id, key))
            self._drop_unused_bands(conn, removed)
        return len(removed)

    def purge(self, older_than: float, *, batch: int = 5000) -> int:
        """Remove entries (and decisions) older than ``older_than`` (POSIX seconds); returns how many.

        Works in transactions of ``batch`` entries so crawlers sharing the file are never blocked long.
        """
        total = 0
        while True:
            with self._write("purge") as conn:
                doomed = conn.execute(
                    "SELECT id, title_fp, body_fp FROM entry WHERE ns = ? AND first_seen < ? "
                    "ORDER BY first_seen LIMIT ?",
                    (self._ns_id, older_than, batch),
                ).fetchall()
                conn.executemany("DELETE FROM entry WHERE id = ?", [(r[0],) for r in doomed])
                conn.executemany("DELETE FROM sentence WHERE entry = ?", [(r[0],) for r in doomed])
                self._drop_unused_bands(conn, [(r[1], r[2]) for r in doomed])
                if len(doomed) < batch:
                    conn.execute(
                        "DELETE FROM decision WHERE ns = ? AND decided_at < ?", (self._ns_id, older_than)
                    )
            total += len(doomed)
            if len(doomed) < batch:
                return total

    def reset(self) -> int:
        """Remove every entry, band row and decision of this namespace (others are untouched)."""
        lo, hi = self._ns_key_range
        with self._write("reset") as conn:
            n = conn.execute("DELETE FROM entry WHERE ns = ?", (self._ns_id,)).rowcount
            conn.execute("DELETE FROM decision WHERE ns = ?", (self._ns_id,))
            conn.execute("DELETE FROM sentence WHERE ns = ?", (self._ns_id,))
            conn.execute("DELETE FROM band WHERE key >= ? AND key < ?", (lo, hi))
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
            band_rows = int(conn.execute("SELECT count(*) FROM band").fetchone()[0])
        size = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                size += os.stat(self.location + suffix).st_size
        return stats_dict(self, "sqlite", per, band_rows, {}, {"file_size": size})

    def entries(self) -> Iterator[Entry]:
        """Every entry of this namespace, oldest first, fetched in pages (no long-lived cursor)."""
        last: tuple[float, int] = (-math.inf, -1)
        while True:
            with self._lock:
                conn = self._live()
                rows = conn.execute(
                    f"SELECT {_ENTRY_COLS} FROM entry WHERE ns = ? AND (first_seen, id) > (?, ?) "
                    "ORDER BY first_seen, id LIMIT 1000",
                    (self._ns_id, *last),
                ).fetchall()
            yield from (self._entry(r) for r in rows)
            if len(rows) < 1000:
                return
            last = (rows[-1][3], rows[-1][0])

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
