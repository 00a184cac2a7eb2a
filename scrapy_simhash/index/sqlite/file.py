"""The SQLite index file itself: made whole or not at all, and refused untouched when it is not ours.

Everything here is about the file, not the rule: building a new file under a temporary name and
linking it into place; before SQLite reads an existing one, checking that it (and its ``-wal``/``-shm``)
are regular files, its header and its pending WAL (:mod:`.sqlite_wal`); connecting with
``trusted_schema=OFF`` and refusing any schema object the project did not create (a planted trigger
could delete every new entry or copy every URL elsewhere); reading its self-description (JSON only,
never pickle), probing that it can be written, and naming the file, and the cause (locked,
read-only, corrupt), in every error. The schema it holds is described in :mod:`.sqlite_tables`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import stat
import threading
from pathlib import Path
from typing import Any

from sqlitedict import SqliteDict

from ..base import IndexError_, IndexOpenError, IndexWriteError
from .fd import descriptor
from .schema import PENDING_OBJECTS, REQUEST_OBJECTS, SCHEMA
from .wal import check_wal

#: 2: entry.numbers (title tier's number guard), sentence table (opt-in tier). 3: sentence hashes as
#: 8-byte integers, an entry's sample in its row (entry.sentences), entry.short (short bodies),
#: entry.numbers as a BLOB. 4: multi-index band layout (:mod:`.bands`). 5: sentence rows without a
#: namespace column, 4-byte prefixes of the sample in the entry row (:mod:`.sqlite_sentences`), the
#: URL index on a digest (entry.url_key): 654 -> 575 bytes an entry. 6: ``entry.first_seen`` in whole
#: seconds, a 32-bit ``url_key``, the fingerprint indexes keyed without an ``ns`` column
#: (:func:`.sqlite_schema.fp_key_sql`): 606 -> 575 bytes an entry with a crawl's sub-second times.
#: 7: split buckets two levels deep, ``band2`` keyed by one integer (:mod:`.sqlite_dense`).
#: ``scrapy-simhash reband`` converts a version 3, 4, 5 or 6 file.
SCHEMA_VERSION = 7
META_TABLE = "simhash_meta"
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: The table sqlitedict creates for the meta record (``SqliteDict(tablename=META_TABLE)``).
_META_TABLE_SQL = f'CREATE TABLE "{META_TABLE}" (key TEXT PRIMARY KEY, value BLOB)'
#: Tables SQLite itself may add: ``ANALYZE`` statistics (they steer query plans, never answers).
_SQLITE_STAT = {"sqlite_stat1": "(tbl,idx,stat)", "sqlite_stat4": "(tbl,idx,neq,nlt,ndlt,sample)"}

def _json_encode(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def create_file(file: Path, meta: dict[str, Any]) -> None:
    """Build a complete index file recording ``meta`` under a temporary name, then link it into
    place atomically.

    ``os.link`` fails if the name exists, so when two processes create the same file at once
    one wins and the other simply opens the winner's file; nobody ever sees half a file.
    """
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IndexOpenError(f"cannot create the directory of index {file}: {exc}") from exc
    tmp = file.with_name(f".{file.name}.{os.getpid()}.{threading.get_ident()}.creating")
    try:
        # Fail here, in this thread, if the directory cannot be written: sqlitedict would fail
        # in its background thread first.
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        with SqliteDict(
            str(tmp),
            tablename=META_TABLE,
            flag="n",
            encode=_json_encode,
            decode=json.loads,
            autocommit=False,
        ) as sd:
            for key, value in meta.items():
                sd[key] = value
            sd.commit()
        conn = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            # Nobody sees this file before it is whole and synced (below), then linked: its two
            # transactions (the schema, the switch to WAL) need no journal file and no syncs of
            # their own (8 fdatasyncs and 2 journal unlinks at every creation, milliseconds each
            # on a busy disk).
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute("PRAGMA journal_mode=MEMORY")
            conn.executescript(f"BEGIN; {SCHEMA} COMMIT;")
            conn.execute("PRAGMA journal_mode=WAL")
        finally:
            conn.close()
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, file)
        except FileExistsError:
            pass  # someone else created it first: open theirs
        except OSError:
            # Filesystems without hard links: a rename is atomic but could replace a file made
            # in the meantime, so only do it if the name is still free.
            if not file.exists():
                os.replace(tmp, file)
        with contextlib.suppress(OSError):
            dfd = os.open(file.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    except (OSError, sqlite3.Error, RuntimeError) as exc:
        raise IndexOpenError(f"cannot create index {file}: {exc}") from exc
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                os.unlink(f"{tmp}{suffix}")


def check_file_types(file: Path) -> None:
    """Refuse a directory, FIFO, socket or device at the index path or its ``-wal``/``-shm``/
    ``-journal`` (opening a FIFO would wait forever for a writer)."""
    for path in (file, *(Path(f"{file}{suffix}") for suffix in ("-wal", "-shm", "-journal"))):
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise IndexOpenError(f"cannot read index {file}: {exc}") from exc
        if not stat.S_ISREG(mode):
            kind = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket",
                    stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}.get(
                        stat.S_IFMT(mode), "not a regular file")
            raise IndexOpenError(f"index {file}: {path} is {kind}, not a file")


def check_header(file: Path) -> None:
    """Reject what SQLite would reject later (or worse, half-read, or lose) before touching the file."""
    check_file_types(file)
    try:
        size = file.stat().st_size
        with descriptor(file) as fd:  # not open(): closing it could drop this process's SQLite locks
            header = os.pread(fd, 100, 0)
    except OSError as exc:
        raise IndexOpenError(f"cannot read index {file}: {exc}") from exc
    if size == 0:
        raise IndexOpenError(
            f"{file} is an empty file, not a scrapy-simhash index "
            "(delete it to let a new index be created)"
        )
    if header[:16] != _SQLITE_MAGIC:
        raise IndexOpenError(
            f"{file} is not a SQLite database (garbage or another format): not a scrapy-simhash index"
        )
    if len(header) < 100:
        raise IndexOpenError(f"index {file} is truncated ({size} bytes, shorter than a SQLite header)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    change_counter = int.from_bytes(header[24:28], "big")
    valid_for = int.from_bytes(header[92:96], "big")
    pages = pages if change_counter == valid_for else 0  # the header's page count is stale otherwise
    wal = Path(f"{file}-wal")
    wal_pending = wal.exists() and wal.stat().st_size > 0
    if pages and not wal_pending and size < pages * page_size:
        raise IndexOpenError(
            f"index {file} is truncated: {size} bytes but its header says {pages} pages of {page_size}"
        )
    check_wal(file, page_size, pages)


def connect(file: Path, readonly: bool, timeout: float) -> sqlite3.Connection:
    """A connection that runs nothing the file's schema asks for (``trusted_schema=OFF``: no
    function with side effects in a view, trigger or index of the file; SQLite 3.31+, older
    versions ignore the pragma and only :func:`check_schema` stands guard)."""
    target = f"{file.as_uri()}?mode=ro" if readonly else str(file)
    try:
        conn = sqlite3.connect(target, uri=readonly, isolation_level=None, timeout=timeout, check_same_thread=False)
    except sqlite3.Error as exc:
        raise open_error(file, exc, "opening") from exc
    conn.execute("PRAGMA trusted_schema=OFF")
    return conn


@functools.cache
def _expected_schema() -> frozenset[tuple[str, str, str, str | None]]:
    """``(type, name, table, sql)`` of every object a new index holds, made by running the same
    statements in memory, so the comparison follows SCHEMA without a second list to keep in step."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(f"{_META_TABLE_SQL}; {SCHEMA}")
        return frozenset(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
    finally:
        conn.close()


def check_schema(conn: sqlite3.Connection, file: Path) -> None:
    """Refuse any table, index, trigger or view the project did not create, or one of ours whose
    SQL differs from what SCHEMA creates (an extra column, default, CHECK, a changed index)."""
    expected = _expected_schema()
    by_name = {name: (type_, table, sql) for type_, name, table, sql in expected}
    found = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    for type_, name, table, sql in found:
        if (type_, name, table, sql) in expected:
            continue
        if type_ == "table" and name in _SQLITE_STAT and sql == f"CREATE TABLE {name}{_SQLITE_STAT[name]}":
            continue
        if name in by_name:
            why = f"its definition differs from the one scrapy-simhash creates: {sql!r}"
        else:
            why = f"scrapy-simhash did not create it ({sql or 'no SQL'!r})"
        raise IndexOpenError(
            f"index {file} has been tampered with: {type_} {name!r} on {table!r}: {why}. Refusing to use "
            "it (nothing was changed): a planted trigger or view can drop or copy entries"
        )
    missing = sorted(name for _, name, _, _ in expected if name not in {row[1] for row in found})
    for added in (PENDING_OBJECTS, REQUEST_OBJECTS):  # a file made before them gets them at a writable open
        if set(added) <= set(missing):
            missing = [name for name in missing if name not in added]
    if missing:
        raise IndexOpenError(f"index {file} is damaged: schema objects {missing} are missing")


def open_error(file: Path, exc: sqlite3.Error, doing: str) -> IndexOpenError:
    """An IndexOpenError naming the file and what stands in the way: a lock another process holds,
    a file or directory this user cannot write, or a file that is not a (whole) database."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return IndexOpenError(
            f"index {file} is locked by another process ({text} while {doing}): SQLite's lock on it "
            "was held longer than the busy timeout (a process holding an exclusive lock or a long "
            "write transaction); wait for it to finish, or stop it"
        )
    if "readonly" in text or "read-only" in text:
        return IndexOpenError(
            f"index {file} is read-only here ({text}): open it with readonly=True, or give this user "
            "write permission on the file and its directory"
        )
    if "unable to open" in text:
        directory = file.parent
        if not os.access(directory, os.W_OK):
            return IndexOpenError(
                f"index {file} cannot be opened ({text}): its directory {directory} is not writable, and "
                f"SQLite must create {file.name}-wal and {file.name}-shm there even to read it; give this "
                "user write permission on the directory, or copy the file somewhere writable"
            )
        if not os.access(file, os.R_OK):
            return IndexOpenError(f"index {file} cannot be opened ({text}): this user may not read it")
        return IndexOpenError(f"cannot open index {file} ({text}) while {doing}")
    return IndexOpenError(f"index {file} cannot be read, corrupt or not a database ({text}) while {doing}")


def probe_write(conn: sqlite3.Connection) -> None:
    """Try a write (rolled back) so a file SQLite can only read fails at open, not at the first
    item. A lock held by another process says nothing about that: the probe then gives way at
    once (check-and-adds wait for locks and are retried)."""
    busy_ms = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("INSERT INTO namespace(name, created) VALUES (char(0) || 'probe', 0)")
        finally:
            conn.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc) and "busy" not in str(exc):
            raise
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")


def read_meta(conn: sqlite3.Connection, file: Path) -> dict[str, Any]:
    """The self-description: the sqlitedict table, read on our own connection, JSON only.

    Reading goes through our connection rather than ``SqliteDict(flag="r")`` because the latter
    opens a second, read-write connection that runs ``PRAGMA journal_mode``/``synchronous``
    (writes, on a file opened read-only or not yet known to be ours) and leaves a helper
    connection open until the next garbage collection (file descriptors, WAL left behind).
    """
    try:
        rows = conn.execute(f'SELECT key, value FROM "{META_TABLE}"').fetchall()
        return {str(key): json.loads(value) for key, value in rows}
    except (ValueError, TypeError, sqlite3.Error) as exc:
        raise IndexOpenError(
            f"index {file}: unreadable {META_TABLE} table (not a scrapy-simhash index?): {exc}"
        ) from exc


def sqlite_error(location: str, exc: BaseException, doing: str) -> IndexError_:
    """Map a sqlite3 error to ours, naming the file: corruption apart from write failures."""
    text = str(exc)
    if any(s in text for s in ("malformed", "not a database", "disk image")):
        return IndexError_(f"index {location} is corrupt ({text}) while {doing}")
    return IndexWriteError(f"index {location}: {doing} failed: {text}")
