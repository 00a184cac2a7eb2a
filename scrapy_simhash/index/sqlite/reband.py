"""Re-banding a SQLite index in place: new band rows from the full fingerprints of its entries.

Every entry keeps its whole title and body fingerprints, so any band layout (another threshold, the
layout of a newer schema version, :mod:`.bands`) can be rebuilt from them without the texts. It is
one ``BEGIN IMMEDIATE`` transaction: the band rows are deleted, rebuilt in key order (an
``INSERT … SELECT … ORDER BY``: the B-tree is appended to, not written at random) and the meta
record updated, then committed. A file of an older schema version is converted in the same
transaction (:func:`_convert_band_tables`: schema 3 lacks ``band2``, schemas 4 to 6 key it by
``(key, sub)``; :func:`_convert_tables`: schemas 3 and 4 keep a namespace column in ``sentence`` and
whole hashes in ``entry.sentences``, schemas 3 to 5 sub-second times, a 64-bit URL digest and ``ns``
in the fingerprint indexes). A process killed at any point
leaves the file as it was (WAL: an uncommitted transaction is never seen); crawls sharing the file
wait for the lock meanwhile (their ``busy_timeout``), then go on with the new layout.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...__version__ import __version__
from ...fingerprint.simhash import from_signed64, to_signed64
from ..bands import bands_for, records
from ..base import TIERS, IndexOpenError, IndexParams
from ..meta import FORMAT, check_params
from . import dense as sqlite_dense
from . import sentences as sqlite_sentences
from .file import META_TABLE, SCHEMA_VERSION, _json_encode, check_header, check_schema, connect, read_meta, sqlite_error
from .schema import SCHEMA
from .tables import Rows, storage_meta, value_bits
from .values import codec, url_key, whole_seconds

#: Schema versions re-banding reads: their tables are this version's or converted to it.
REBANDED = (3, 4, 5, 6, SCHEMA_VERSION)
#: The entry table and its indexes, as :data:`SCHEMA` names them (the table first).
ENTRY_OBJECTS = (("TABLE", "entry"), *(("INDEX", f"entry_{name}") for name in ("title", "body", "seen", "url")))
#: The columns of this version's ``entry`` table (a converted file's rows are copied into them).
ENTRY_COLUMNS = "id, ns, title_fp, body_fp, first_seen, url, url_key, title, numbers, sentences, short"
#: The ``sentence`` table of schemas 3 and 4 (a namespace column, the whole hash).
OLD_SENTENCE_SQL = ("CREATE TABLE sentence (\n    ns INTEGER NOT NULL,\n    hash INTEGER NOT NULL,\n"
                    "    entry INTEGER NOT NULL,\n    PRIMARY KEY (ns, hash, entry)\n) WITHOUT ROWID")
#: Progress is reported every this many band rows computed.
PROGRESS_EVERY = 20_000

Progress = Callable[[int, int], None]


def reband(
    path: str | os.PathLike[str], *, title_bands: int | None = None, body_bands: int | None = None,
    at_least: bool = False, progress: Progress | None = None, busy_timeout: float = 30.0,
) -> dict[str, Any]:
    """Rebuild the band rows of the index file at ``path`` for ``title_bands``/``body_bands`` (None:
    keep the recorded number; ``at_least``: never fewer than recorded, so that no other namespace of
    the file loses a threshold it answered) in the layout of this version, in one transaction. Returns
    ``{"entries", "band_rows", "params", "previous", "seconds"}``. ``progress(done, total)`` is
    called as band rows are computed (total: the rows to compute)."""
    file = Path(os.path.expanduser(os.fspath(path))).absolute()
    if not file.exists():
        raise IndexOpenError(f"index {file} does not exist")
    check_header(file)
    conn = connect(file, False, busy_timeout)
    try:
        return _reband(conn, file, title_bands, body_bands, at_least, progress)
    except sqlite3.Error as exc:
        raise sqlite_error(str(file), exc, "re-banding") from exc
    finally:
        conn.close()


def _reband(
    conn: sqlite3.Connection, file: Path, title_bands: int | None, body_bands: int | None, at_least: bool,
    progress: Progress | None,
) -> dict[str, Any]:
    started = time.perf_counter()
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA cache_size=-262144")  # 256 MiB: the sort and the B-tree appends
    conn.execute("BEGIN IMMEDIATE")
    try:
        meta = read_meta(conn, file)  # under the lock: nobody re-bands it meanwhile
        if meta.get("format") != FORMAT:
            raise IndexOpenError(f"{file} is not a scrapy-simhash index (format {meta.get('format')!r})")
        if meta.get("schema_version") not in REBANDED:
            raise IndexOpenError(
                f"index {file} has schema version {meta.get('schema_version')!r}; re-banding reads versions "
                f"{', '.join(map(str, REBANDED))} only"
            )
        _convert_band_tables(conn)
        _convert_tables(conn)
        check_schema(conn, file)
        try:
            previous = IndexParams(**meta["params"])
            check_params(previous)
        except (KeyError, TypeError, ValueError) as exc:
            raise IndexOpenError(f"index {file} records unreadable parameters: {exc}") from exc
        params = IndexParams(**{**previous.as_dict(), **{
            name: max(value, getattr(previous, name)) if at_least else value
            for name, value in (("title_bands", title_bands), ("body_bands", body_bands)) if value is not None}})
        check_params(params)
        entries, band_rows = _rebuild(conn, params, progress)
        new = {"schema_version": SCHEMA_VERSION, "params": params.as_dict(), **{
            f"{tier}_layout": record for tier, record in records(params).items()},
            **storage_meta(params), "rebanded": time.time(), "rebanded_by": f"scrapy-simhash {__version__}"}
        conn.executemany(f'INSERT OR REPLACE INTO "{META_TABLE}"(key, value) VALUES (?, ?)',
                         [(key, _json_encode(value)) for key, value in new.items()])
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    with contextlib.suppress(sqlite3.Error):
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {"entries": entries, "band_rows": band_rows, "params": params.as_dict(),
            "previous": previous.as_dict(), "seconds": time.perf_counter() - started}


def _schema_statement(start: str) -> str:
    """The statement of :data:`SCHEMA` that begins with ``start``."""
    at = SCHEMA.index(start)
    return SCHEMA[at : SCHEMA.index(";\n", at)]


def _convert_band_tables(conn: sqlite3.Connection) -> None:
    """Give a schema 3 to 6 file this version's ``band2`` (inside the caller's transaction): schema 3
    has none, schemas 4 to 6 key it by ``(key, sub)`` (one split level). Its rows are all rebuilt
    (:func:`_rebuild`), so the old table is dropped, not converted. Read from the table itself, not the
    recorded version, so a file converted already is left as it is."""
    want = _schema_statement("CREATE TABLE band2")
    found = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'band2'").fetchone()
    if found is not None and found[0] == want:
        return
    if found is not None:
        conn.execute("DROP TABLE band2")
    conn.execute(want)


def _convert_tables(conn: sqlite3.Connection) -> None:
    """Bring the entry and sentence tables of a schema 3, 4 or 5 file to this version's (inside the
    caller's transaction): the ``sentence`` rows of schemas 3 and 4 re-keyed without their namespace
    column (:func:`.sqlite_sentences.key`); ``entry`` and its indexes rebuilt as schema 6 has them
    (:func:`_convert_entry_to_6`). Read from the tables themselves, not the recorded version, so a
    file converted already is left as it is."""
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'sentence'").fetchone()
    old_sentences = sql == OLD_SENTENCE_SQL
    if old_sentences:
        mask = sqlite_sentences.ns_mask
        conn.create_function("simhash_sentence_key", 2, lambda ns, h: to_signed64(from_signed64(h) ^ mask(ns)),
                             deterministic=True)
        conn.execute("ALTER TABLE sentence RENAME TO sentence_old")
        conn.execute(_schema_statement("CREATE TABLE sentence"))
        conn.execute("INSERT INTO sentence(key, entry) SELECT simhash_sentence_key(ns, hash) AS k, entry"
                     " FROM sentence_old ORDER BY k, entry")
        conn.execute("DROP TABLE sentence_old")
    current = {name: _schema_statement(f"CREATE {kind} {name} ") for kind, name in ENTRY_OBJECTS}
    found = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE tbl_name = 'entry'").fetchall())
    if old_sentences or any(found.get(name) != sql for name, sql in current.items()):
        _convert_entry_to_6(conn, whole_hashes=old_sentences)


def _convert_entry_to_6(conn: sqlite3.Connection, whole_hashes: bool) -> None:
    """Rebuild ``entry`` as schema 6 has it, every id and the id sequence kept: ``first_seen`` cut to
    its whole second (:func:`.sqlite_values.whole_seconds`), ``url_key`` the 32-bit digest, the
    fingerprint indexes keyed without ``ns`` (:func:`.sqlite_schema.fp_key_sql`); with
    ``whole_hashes`` (schemas 3 and 4) ``sentences`` cut to their prefixes and ``url_key`` added."""
    width = sqlite_sentences.PREFIX_BYTES
    conn.create_function("simhash_prefixes", 1, lambda blob: None if blob is None else b"".join(
        blob[i : i + width] for i in range(0, len(blob), 8)) or None, deterministic=True)
    conn.create_function("simhash_url_key", 2, url_key, deterministic=True)
    conn.create_function("simhash_whole_seconds", 1, whole_seconds, deterministic=True)
    sequence = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entry'").fetchone()
    conn.execute("ALTER TABLE entry RENAME TO entry_old")  # its indexes go with it when it is dropped
    conn.execute(_schema_statement("CREATE TABLE entry"))
    converted = ENTRY_COLUMNS.replace("url_key", "simhash_url_key(ns, url)").replace(
        "first_seen", "simhash_whole_seconds(first_seen)")
    if whole_hashes:
        converted = converted.replace("sentences", "simhash_prefixes(sentences)")
    conn.execute(f"INSERT INTO entry({ENTRY_COLUMNS}) SELECT {converted} FROM entry_old ORDER BY id")
    conn.execute("DROP TABLE entry_old")
    for kind, name in ENTRY_OBJECTS[1:]:
        conn.execute(_schema_statement(f"CREATE {kind} {name} "))
    if sequence is not None:  # AUTOINCREMENT: no id of a forgotten entry is ever given again
        conn.execute("DELETE FROM sqlite_sequence WHERE name = 'entry'")
        conn.execute("INSERT INTO sqlite_sequence(name, seq) VALUES ('entry', ?)", sequence)


def _rebuild(conn: sqlite3.Connection, params: IndexParams, progress: Progress | None) -> tuple[int, int]:
    """Delete every band row and insert those of ``params``'s layout; returns (entries, band rows)."""
    tiers, vbits = bands_for(params), value_bits(params)
    enc, dec = codec(params.bits)
    rows: dict[int, Rows] = {}
    (entries,) = conn.execute("SELECT count(*) FROM entry").fetchone()
    total = sum(conn.execute(f"SELECT count(*) FROM entry WHERE {tier}_fp IS NOT NULL").fetchone()[0]
                * len(tiers[tier].parts) for tier in TIERS)
    done = 0

    def key(ns: int, tier: str, number: int, raw: Any) -> int:
        nonlocal done
        ns_rows = rows.get(ns)
        if ns_rows is None:
            ns_rows = rows[ns] = Rows(ns, "", tiers, vbits, enc, dec)
        done += 1
        if progress is not None and done % PROGRESS_EVERY == 0:
            progress(done, total)
        return ns_rows.keys(tier, dec(raw))[number]  # type: ignore[arg-type]

    conn.create_function("simhash_band_key", 4, key)
    conn.execute("DELETE FROM band")
    conn.execute("DELETE FROM band2")
    for tier in TIERS:
        for number in range(len(tiers[tier].parts)):
            conn.execute(
                f"INSERT OR IGNORE INTO band(key, fp) SELECT simhash_band_key(ns, ?, ?, {tier}_fp) AS k, {tier}_fp"
                f" FROM entry WHERE {tier}_fp IS NOT NULL ORDER BY k, {tier}_fp", (tier, number))
    any_ns = Rows(0, "", tiers, vbits, enc, dec)  # what splitting needs: the layout, the codec, key packing
    sqlite_dense.split_dense(conn, any_ns, conn.execute(
        "SELECT key, count(*) FROM band GROUP BY key HAVING count(*) >= ?", (sqlite_dense.MIN_SPLIT,)).fetchall())
    if progress is not None:
        progress(total, total)
    band_rows = sum(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in ("band", "band2"))
    return entries, band_rows
