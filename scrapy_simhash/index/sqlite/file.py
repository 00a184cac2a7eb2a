"""The SQLite index file itself: made whole or not at all, and refused untouched when it is not ours.

Everything here is about the file, not the rule: building a new file under a temporary name and
linking it into place; before SQLite reads an existing one, checking that it (and its ``-wal``/``-shm``)
are regular files, its header and its pending WAL (:mod:`.wal`), and, to write, that its ``-shm``
and ``-wal`` can be written; connecting with
``trusted_schema=OFF`` and refusing any schema object the project did not create (a planted trigger
could delete every new entry or copy every URL elsewhere); reading its self-description (JSON only,
never pickle) and checking it, and the rows, against the parameters it records (:func:`open_file`);
probing that it can be written; and naming the file, and the cause (locked, read-only, corrupt,
another schema version), in every error. The schema it holds is described in :mod:`.tables`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import json
import os
import sqlite3
import stat
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlitedict import SqliteDict

from ..bands import bands_for, records
from ..base import IndexOpenError, IndexParams, IndexWriteError, SimhashIndexError
from ..meta import verify_meta
from .checks import check_rows
from .fd import descriptor
from .schema import SCHEMA
from .tables import NAMESPACE_BITS, Rows, check_storage_meta, value_bits
from .values import codec
from .wal import check_wal

#: The one layout of the tables (:data:`.schema.SCHEMA`) and of the meta record this version reads and
#: writes. A file recording any other version is refused at open, saying both (:func:`.meta.other_version`;
#: docs/decisions/0304-sqlite-schema-version.md).
SCHEMA_VERSION = 8
META_TABLE = "simhash_meta"
#: SQLite's page cache a connection keeps, in KiB (docs/decisions/0301-sqlite-page-cache.md).
CACHE_KIB = 32768
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: The table sqlitedict creates for the meta record (``SqliteDict(tablename=META_TABLE)``).
_META_TABLE_SQL = f'CREATE TABLE "{META_TABLE}" (key TEXT PRIMARY KEY, value BLOB)'
#: Tables SQLite itself may add: ``ANALYZE`` statistics (they steer query plans, never answers).
_SQLITE_STAT = {"sqlite_stat1": "(tbl,idx,stat)", "sqlite_stat4": "(tbl,idx,neq,nlt,ndlt,sample)"}


def _json_encode(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def create_file(file: Path, meta: dict[str, Any]) -> bool:
    """Build a complete index file recording ``meta`` under a temporary name, then link it into
    place atomically; True when this call put it there.

    ``os.link`` fails if the name exists, so when two processes create the same file at once
    one wins and the other simply opens the winner's file; nobody ever sees half a file.
    """
    created = False
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IndexOpenError(f"cannot create the directory of index {file}: {exc}") from exc
    tmp = file.with_name(f".{file.name}.{os.getpid()}.{threading.get_ident()}.creating")
    try:
        # Fail here, in this thread, if the directory cannot be written, not in sqlitedict's
        # background thread.
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
            # their own (docs/decisions/0303-sqlite-new-file-unsynced.md).
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
            created = True
        except FileExistsError:
            pass  # someone else created it first: open theirs
        except OSError:
            # Filesystems without hard links: a rename is atomic but could replace a file made
            # in the meantime, so only do it if the name is still free.
            if not file.exists():
                os.replace(tmp, file)
                created = True
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
    return created


def real_path(file: Path) -> Path:
    """The file SQLite opens for ``file``: symbolic links followed, as SQLite's unix VFS does, so its
    ``-wal`` and ``-shm`` sit beside the target, not beside the link."""
    return Path(os.path.realpath(file))


def check_file_types(file: Path) -> None:
    """Refuse a directory, FIFO, socket or device at the index path or its ``-wal``/``-shm``/
    ``-journal`` (opening a FIFO would wait forever for a writer)."""
    real = real_path(file)
    for path in (file, *(Path(f"{real}{suffix}") for suffix in ("-wal", "-shm", "-journal"))):
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


#: ``FS_IOC_GETFLAGS`` (Linux) and its immutable and append-only attribute bits (``chattr +i`` / ``+a``).
_FS_IOC_GETFLAGS, _ATTRIBUTES = 0x80086601, ((0x10, "immutable (chattr +i)"), (0x20, "append-only (chattr +a)"))


def _attributes(path: Path) -> list[str]:
    """The attributes that stop even root from writing ``path`` (empty where they cannot be read)."""
    try:
        with descriptor(path) as fd:
            (flags,) = struct.unpack_from("=i", fcntl.ioctl(fd, _FS_IOC_GETFLAGS, bytes(8)))
    except OSError:
        return []
    return [name for bit, name in _ATTRIBUTES if flags & bit]


def check_writable(file: Path) -> None:
    """Refuse, before SQLite opens it for writing, an index whose ``-shm`` or ``-wal`` this process
    cannot write (an immutable or append-only attribute, permissions, a read-only mount). SQLite
    shares the file between processes through the ``-shm``, which it maps into memory and writes at
    every transaction: unwritable at open, it would fall back to reading only, and a mapping of one
    that turns unwritable later ends the process with SIGBUS at its next write."""
    real = real_path(file)
    for suffix in ("-shm", "-wal"):
        path = Path(f"{real}{suffix}")
        try:
            with descriptor(path, os.O_RDWR):  # not open(): closing it could drop this process's SQLite locks
                continue
        except FileNotFoundError:
            continue  # SQLite creates it
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EACCES, errno.EROFS):
                raise IndexOpenError(f"cannot open index {file}: {exc}") from exc
        why = " and ".join(_attributes(path)) or "not writable by this user"
        raise IndexOpenError(
            f"index {file} cannot be written: {path} is {why}, and SQLite must write its {suffix} file at every "
            f"transaction (nothing was changed). Make {path} writable again (chattr -i, chmod, or remount), or "
            "open the index read-only"
        )


def check_header(file: Path, *, created: bool = False) -> None:
    """Reject what SQLite would reject later (or worse, half-read, or lose) before touching the file
    (``created``: this process has just made it, see :func:`.wal.check_wal`)."""
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
    wal = Path(f"{real_path(file)}-wal")
    wal_pending = wal.exists() and wal.stat().st_size > 0
    if pages and not wal_pending and size < pages * page_size:
        raise IndexOpenError(
            f"index {file} is truncated: {size} bytes but its header says {pages} pages of {page_size}"
        )
    check_wal(file, page_size, pages, created=created)


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
        directory = real_path(file).parent
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


def sqlite_error(location: str, exc: BaseException, doing: str) -> SimhashIndexError:
    """Map a sqlite3 error to ours, naming the file: corruption apart from write failures."""
    text = str(exc)
    if any(s in text for s in ("malformed", "not a database", "disk image")):
        return SimhashIndexError(f"index {location} is corrupt ({text}) while {doing}")
    return IndexWriteError(f"index {location}: {doing} failed: {text}")


@dataclass
class OpenFile:
    """An index file verified and configured for one namespace: its connection, its record and the
    parameters it records, and the namespace's rows (:class:`.tables.Rows`; ``ns_id`` None: opened
    read-only, and the namespace holds nothing yet)."""

    conn: sqlite3.Connection
    meta: dict[str, Any]
    params: IndexParams
    rows: Rows
    ns_id: int | None


def open_file(
    file: Path, namespace: str, requested: IndexParams | None, readonly: bool, busy_timeout: float,
    *, created: bool = False,
) -> OpenFile:
    """Open an existing index file: its header and WAL checked (:func:`check_header`), its ``-shm``
    and ``-wal`` writable (unless ``readonly``: :func:`check_writable`), its record verified against
    ``requested`` (any, when None), its schema objects and a sample of its rows against what the
    record implies, then WAL mode, full syncs and a write probe (unless ``readonly``) and the
    namespace's id (created when writable). The connection is closed again when any of it fails.
    ``created``: :func:`create_file` has just put the file there."""
    check_header(file, created=created)
    if not readonly:
        check_writable(file)
    conn = connect(file, readonly, busy_timeout)
    try:
        return _verify_and_configure(conn, file, namespace, requested, readonly)
    except BaseException:
        conn.close()
        raise


def _verify_and_configure(
    conn: sqlite3.Connection, file: Path, namespace: str, requested: IndexParams | None, readonly: bool
) -> OpenFile:
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as exc:
        raise open_error(file, exc, "reading its schema") from exc
    if META_TABLE not in tables:
        raise IndexOpenError(f"{file} is a SQLite database but not a scrapy-simhash index (no {META_TABLE} table)")
    meta = read_meta(conn, file)
    stored = verify_meta(meta, str(file), SCHEMA_VERSION, requested, "file", layout_records=records)
    check_schema(conn, file)  # also: none of our tables and indexes is missing
    check_storage_meta(meta, stored, str(file))
    layouts, vbits = bands_for(stored), value_bits(stored)
    enc, decode = codec(stored.bits)
    stored_type = int if stored.bits <= 64 else bytes

    def checked_decode(raw: Any) -> int:
        # A file written by someone else may hold anything in a fingerprint column.
        if type(raw) is not stored_type:
            raise SimhashIndexError(
                f"index {file} is corrupt: a stored fingerprint is {type(raw).__name__}, not {stored_type.__name__}"
            )
        return decode(raw)

    try:
        conn.execute("BEGIN")  # one snapshot: a writer removing entries meanwhile is no damage
        try:
            check_rows(conn, str(file), layouts, vbits, stored.bits)
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        if not readonly:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            probe_write(conn)
        conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")  # docs/decisions/0301-sqlite-page-cache.md
        conn.execute("PRAGMA temp_store=MEMORY")
        ns_id = _namespace_id(conn, file, namespace, create=not readonly)
    except sqlite3.Error as exc:
        raise open_error(file, exc, "opening") from exc
    rows = Rows(ns_id, namespace, layouts, vbits, enc, checked_decode)
    return OpenFile(conn, meta, stored, rows, ns_id)


def _namespace_id(conn: sqlite3.Connection, file: Path, name: str, *, create: bool) -> int | None:
    """The id of namespace ``name`` in the file, created if absent and ``create`` (else None)."""
    row = conn.execute("SELECT id FROM namespace WHERE name = ?", (name,)).fetchone()
    if row is not None or not create:
        return None if row is None else int(row[0])
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("INSERT OR IGNORE INTO namespace(name, created) VALUES (?, ?)", (name, time.time()))
        ns_id = int(conn.execute("SELECT id FROM namespace WHERE name = ?", (name,)).fetchone()[0])
        if ns_id >= 1 << NAMESPACE_BITS:
            raise IndexOpenError(f"index {file} cannot hold more than {1 << NAMESPACE_BITS} namespaces")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return ns_id
