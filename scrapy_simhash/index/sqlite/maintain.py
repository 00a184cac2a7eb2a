"""Removing a namespace's entries, and summing up what it holds: the SQL of forget, purge, reset,
release, stats and export.

The readers of the whole namespace (export, stats, decisions) check every row they read against
what the index writes (:func:`row_damage`, :mod:`..damage`): a damaged row is named, never decoded
into a value of the wrong type.

Plain functions over a connection, run inside the transaction or read snapshot the caller
(:class:`.index.SqliteIndex`) holds, as :class:`.tables.Tables` runs the rule's reads and writes.
Removing an entry (:func:`remove`) takes its sentence, pending and no longer used band rows with it,
whichever operation removes it: forgetting, purging, or the delivery tracking releasing an item
dropped downstream.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Sequence
from typing import Any

from ..base import Entry, SimhashIndexError
from ..damage import TIME_MAX, TIME_MIN, shown, time_damage
from ..owners import impossible
from . import sentences as sqlite_sentences
from .tables import ENTRY_COLS, Rows
from .values import url_key

#: Entries read by one statement of an export (:func:`entries_after`).
PAGE = 1000


def remove(conn: sqlite3.Connection, rows: Rows, where: str, args: tuple[Any, ...]) -> int:
    """Remove the entries ``where`` selects, with their sentence, pending and unused band rows;
    returns how many."""
    doomed = conn.execute(f"SELECT id, title_fp, body_fp, sentences FROM entry WHERE {where}", args).fetchall()
    ids = [(r[0],) for r in doomed]
    conn.executemany("DELETE FROM entry WHERE id = ?", ids)
    sqlite_sentences.delete(conn, rows.ns_id or 0, [(r[0], r[3]) for r in doomed])
    conn.executemany("DELETE FROM pending WHERE entry = ?", ids)
    rows.drop_unused_bands(conn, [(r[1], r[2]) for r in doomed])
    return len(doomed)


def release(conn: sqlite3.Connection, rows: Rows, entry_ids: list[int]) -> int:
    """Remove those of these entries that are pending (their items were dropped downstream)."""
    marks = ",".join("?" * len(entry_ids))
    return remove(conn, rows, f"ns = ? AND id IN (SELECT entry FROM pending WHERE entry IN ({marks}))",
                  (rows.ns_id, *entry_ids))


def pending_owners(conn: sqlite3.Connection, ns: int | None) -> list[str]:
    """The owners of the namespace's pending entries."""
    return [o for (o,) in conn.execute(
        "SELECT DISTINCT p.owner FROM pending p JOIN entry e ON e.id = p.entry WHERE e.ns = ?", (ns,))]


def pending_problem(conn: sqlite3.Connection) -> str | None:
    """What makes the pending rows impossible (None: nothing): rows that no entry owns, or stamps
    that no process of this host can have written on their entries (:func:`..owners.impossible`;
    a file is used on one host). Reads the pending rows only: a handful, the items in flight."""
    orphans = conn.execute("SELECT count(*) FROM pending WHERE entry NOT IN (SELECT id FROM entry)").fetchone()[0]
    if orphans:
        return f"{orphans} pending row(s) that no entry owns"
    for owner, earliest, n in conn.execute(
            "SELECT p.owner, min(e.first_seen), count(*) FROM pending p JOIN entry e ON e.id = p.entry"
            " GROUP BY p.owner"):
        why = impossible(owner if isinstance(owner, str) else repr(owner), float(earliest), other_hosts=False)
        if why is not None:
            return f"{n} pending row(s): {why}"
    return None


def release_owner(conn: sqlite3.Connection, rows: Rows, owner: str) -> int:
    """Remove the namespace's pending entries of ``owner`` (a process that died before delivering them)."""
    return remove(conn, rows, "ns = ? AND id IN (SELECT entry FROM pending WHERE owner = ?)", (rows.ns_id, owner))


def forget(conn: sqlite3.Connection, rows: Rows, key: int | str) -> int:
    """Remove the entry with this id (int) or every entry with this URL (str), and the URL's decision."""
    ns = rows.ns_id
    if isinstance(key, int):
        return remove(conn, rows, "ns = ? AND id = ?", (ns, key))
    removed = remove(conn, rows, "url_key = ? AND ns = ? AND url = ?", (url_key(ns or 0, key), ns, key))
    conn.execute("DELETE FROM decision WHERE ns = ? AND url = ?", (ns, key))
    return removed


def purge_batch(conn: sqlite3.Connection, rows: Rows, older_than: float, batch: int) -> int:
    """Remove up to ``batch`` of the oldest entries first seen before ``older_than``; when fewer were
    left, the decisions made before it too. Returns how many entries went."""
    n = remove(conn, rows, "id IN (SELECT id FROM entry WHERE ns = ? AND first_seen < ? ORDER BY first_seen LIMIT ?)",
               (rows.ns_id, older_than, batch))
    if n < batch:
        conn.execute("DELETE FROM decision WHERE ns = ? AND decided_at < ?", (rows.ns_id, older_than))
    return n


def reset(conn: sqlite3.Connection, rows: Rows) -> int:
    """Remove every entry, band row, sentence row, pending row and decision of the namespace;
    returns how many entries went."""
    ns = rows.ns_id
    conn.execute("DELETE FROM pending WHERE entry IN (SELECT id FROM entry WHERE ns = ?)", (ns,))
    if conn.execute("SELECT 1 FROM entry WHERE ns != ? LIMIT 1", (ns,)).fetchone() is None:
        conn.execute("DELETE FROM sentence")  # the only namespace with entries: every row is its
    else:
        sqlite_sentences.delete(conn, ns or 0, conn.execute(
            "SELECT id, sentences FROM entry WHERE ns = ? AND sentences IS NOT NULL", (ns,)).fetchall())
    n = conn.execute("DELETE FROM entry WHERE ns = ?", (ns,)).rowcount
    conn.execute("DELETE FROM decision WHERE ns = ?", (ns,))
    conn.execute("DELETE FROM band WHERE key >= ? AND key < ?", rows.key_range)
    conn.execute("DELETE FROM band2 WHERE key >= ? AND key < ?", rows.key_range_below)
    return int(n)


def count(conn: sqlite3.Connection, ns: int | None) -> int:
    """Entries in namespace ``ns``."""
    return int(conn.execute("SELECT count(*) FROM entry WHERE ns = ?", (ns,)).fetchone()[0])


#: SQL: is ``first_seen`` a time the index writes (:data:`..damage.TIME_MIN` … ``TIME_MAX``)?
SOUND_TIME = (f"(typeof(first_seen) IN ('integer', 'real') AND first_seen BETWEEN {TIME_MIN!r} AND {TIME_MAX!r})")


def per_namespace(conn: sqlite3.Connection) -> tuple[dict[str, dict[str, Any]], int]:
    """Entries, oldest and newest first-seen and decisions of every namespace (an id the namespace
    table lacks as ``#id``), and the band rows of the whole file. First-seen values the index never
    writes are left out of oldest/newest and counted: ``damaged`` and ``first_damaged`` (the first
    one named), present only then."""
    names = dict(conn.execute("SELECT id, name FROM namespace").fetchall())
    per: dict[str, dict[str, Any]] = {
        name: {"entries": 0, "oldest": None, "newest": None, "decisions": 0} for name in names.values()
    }
    for ns, n, oldest, newest, damaged in conn.execute(
        f"SELECT ns, count(*), min(CASE WHEN {SOUND_TIME} THEN first_seen END),"
        f" max(CASE WHEN {SOUND_TIME} THEN first_seen END), sum(NOT {SOUND_TIME}) FROM entry GROUP BY ns"
    ).fetchall():
        about = per.setdefault(names.get(ns, f"#{ns}"), {"decisions": 0})
        about.update(entries=n, oldest=oldest, newest=newest)
        if damaged:
            ident, value = conn.execute(
                f"SELECT id, first_seen FROM entry WHERE ns = ? AND NOT {SOUND_TIME} LIMIT 1", (ns,)).fetchone()
            about.update(damaged=damaged, first_damaged=f"entry #{ident}: first_seen {time_damage(value)}")
    for ns, n in conn.execute("SELECT ns, count(*) FROM decision GROUP BY ns"):
        per.setdefault(names.get(ns, f"#{ns}"), {"entries": 0, "oldest": None, "newest": None})["decisions"] = n
    band_rows = sum(int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in ("band", "band2"))
    return per, band_rows


def file_size(location: str) -> int:
    """Bytes of the index file and its WAL."""
    size = 0
    for suffix in ("", "-wal"):
        with contextlib.suppress(OSError):
            size += os.stat(location + suffix).st_size
    return size


def oldest_kept(conn: sqlite3.Connection, ns: int | None, latest: int) -> tuple[float, int] | None:
    """``(first_seen, id)`` of the oldest of the namespace's ``latest`` most recent entries (None: it
    holds fewer)."""
    return conn.execute(
        "SELECT first_seen, id FROM entry WHERE ns = ? ORDER BY first_seen DESC, id DESC LIMIT 1 OFFSET ?",
        (ns, latest - 1)).fetchone()


def row_damage(row: Sequence[Any], bits: int) -> str | None:
    """``"entry #N: <column> is …"`` for the first value of an ``ENTRY_COLS`` row that the index
    never writes (a type SQLite let in: its columns take any), None when there is none."""
    ident, tfp, bfp, first_seen, url, title, numbers, sentences, short, chars = row
    fp_type: type = int if bits <= 64 else bytes
    problems = [(name, f"is {shown(value)}, not a {bits}-bit fingerprint") for name, value in
                (("title_fp", tfp), ("body_fp", bfp)) if value is not None and (
                    type(value) is not fp_type or (isinstance(value, bytes) and len(value) != bits // 8))]
    problems += [("first_seen", problem) for problem in [time_damage(first_seen)] if problem]
    problems += [(name, f"is {shown(value)}, not text") for name, value in
                 (("url", url), ("title", title), ("chars", chars)) if value is not None and type(value) is not str]
    problems += [(name, f"is {shown(value)}, not a BLOB of 4-byte hashes") for name, value in
                 (("numbers", numbers), ("sentences", sentences)) if value is not None and (
                     type(value) is not bytes or len(value) % 4)]
    if short is not None and type(short) is not int:
        problems.append(("short", f"is {shown(short)}, not a 64-bit digest"))
    if tfp is None and bfp is None:
        problems.append(("title_fp", "and body_fp are both NULL"))
    return None if not problems else f"entry #{ident}: {problems[0][0]} {problems[0][1]}"


def sound_entries(conn: sqlite3.Connection, rows: Rows, found: Sequence[Sequence[Any]], bits: int
                  ) -> tuple[list[Entry], list[str]]:
    """The entries of these ``ENTRY_COLS`` rows, and the descriptions of the rows that are damaged
    (:func:`row_damage`), left out."""
    sound, problems = [], []
    for row in found:
        problem = row_damage(row, bits)
        if problem is None:
            sound.append(row)
        else:
            problems.append(problem)
    try:
        return rows.entries(conn, sound), problems
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:  # a row row_damage let through
        raise SimhashIndexError(f"an entry of entries #{sound[0][0]}..#{sound[-1][0]} cannot be read "
                                f"({type(exc).__name__}: {exc})") from exc


def entries_after(conn: sqlite3.Connection, rows: Rows, after: tuple[Any, int], bits: int
                  ) -> tuple[list[Entry], list[str], tuple[Any, int] | None, int]:
    """The next :data:`PAGE` rows of the namespace in ``(first_seen, id)`` order after ``after``:
    their sound entries, the descriptions of the damaged ones, the ``(first_seen, id)`` of the last
    row read (where the next page starts) and how many rows were read."""
    found = conn.execute(
        f"SELECT {ENTRY_COLS} FROM entry WHERE ns = ? AND (first_seen, id) > (?, ?) ORDER BY first_seen, id LIMIT ?",
        (rows.ns_id, *after, PAGE)).fetchall()
    entries, problems = sound_entries(conn, rows, found, bits)
    return entries, problems, ((found[-1][3], found[-1][0]) if found else None), len(found)
