"""How a SQLite index stores an entry's sentence sample: exact rows in ``sentence``, prefixes in the row.

An entry's sample (its :data:`~.rule.SENTENCES_STORED` smallest sentence hashes, 64 bits each) is
stored twice, once for each direction it is read in:

``sentence`` (``WITHOUT ROWID``, primary key ``(key, entry)``): hash → entries
    One row per sampled hash: ``key`` is the hash XORed with its namespace's mask (:func:`ns_mask`)
    as a signed 64-bit integer, so one table serves every namespace without a namespace column (a
    byte a row) and a hash's holders, boilerplate counts included, are those of its own namespace
    (two namespaces' hashes meet under one key only by a 64-bit coincidence, as two sentences meet
    under one hash). A lookup is exact: a key is the whole hash, and an entry found through it is
    of the namespace (checked in the join).
``entry.sentences``: entry → its hashes
    The first :data:`PREFIX_BYTES` bytes of each sampled hash (ascending), half of what the whole
    hashes would take (docs/decisions/0302-sqlite-entry-layout.md). They are not a second copy of
    the sample but the way to its rows: the entry's hashes are the keys of its rows in the ranges of
    its prefixes
    (:func:`keys`). Each range is read by seeks only (the first key in it, then this entry's row
    under that key, and so on to the next distinct key), so a boilerplate sentence held by 100k
    entries costs what a unique one does: ~2 seeks a sampled hash, one statement for 25 entries.
    Another sample's hash in the same range (a prefix shared by chance: ~rows/2³² of them per
    range; one made on purpose costs ~2³² BLAKE2b hashes to find) costs two more seeks. Entries
    read by the rule, the decisions and ``entries()`` come with their exact sample; removing an
    entry deletes exactly its rows (:func:`delete`).
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Iterable, Mapping, Sequence

from .schema import insert_rows_sql

#: Bytes of each sampled hash kept in the entry row (``entry.sentences``;
#: docs/decisions/0302-sqlite-entry-layout.md).
PREFIX_BYTES = 4
_LOW_BITS = 64 - 8 * PREFIX_BYTES
_M64 = (1 << 64) - 1
_SIGN64 = 1 << 63
#: Odd, so ``ns × _MIX mod 2⁶⁴`` differs for every namespace id (the golden-ratio constant).
_MIX = 0x9E37_79B9_7F4A_7C15


def ns_mask(ns: int) -> int:
    """The 64-bit mask a namespace's sentence hashes are XORed with in ``sentence.key``."""
    return (ns * _MIX) & _M64


def key(ns: int, digest: str) -> int:
    """The ``sentence.key`` of a 16-hex-digit sentence hash in namespace ``ns``."""
    return keys_of(ns, (digest,))[0]


def keys_of(ns: int, digests: Iterable[str]) -> list[int]:
    """:func:`key` of each hash (the mask computed once: the hot path's two dozen hashes an item)."""
    mask = ns_mask(ns)
    return [(((int(h, 16) ^ mask) ^ _SIGN64) - _SIGN64) for h in digests]


def pack_prefixes(digests: Sequence[str]) -> bytes | None:
    """``entry.sentences`` for a sample (sorted hex hashes): their prefixes (None: no sample)."""
    return bytes.fromhex("".join([h[: 2 * PREFIX_BYTES] for h in digests])) or None


_FIRST = "SELECT key FROM sentence WHERE key >= ? AND key <= ? ORDER BY key LIMIT 1"
_NEXT = "SELECT key FROM sentence WHERE key > ? AND key <= ? ORDER BY key LIMIT 1"
_HELD = "SELECT 1 FROM sentence WHERE key = ? AND entry = ?"
#: Ranges read by one statement (3 parameters each: within SQLite's oldest limit of 999).
_CHUNK = 300
_SIGN, _LOW = 1 << 31, (1 << _LOW_BITS) - 1


def _first_rows_sql(n: int) -> str:
    """For each ``(entry, lo, hi)``: the entry's row under the first key of the range, if any."""
    return (f"WITH r(e, lo, hi) AS (VALUES {','.join(['(?,?,?)'] * n)}) SELECT r.e, s.key FROM r"
            " JOIN sentence s ON s.key = (SELECT key FROM sentence WHERE key >= r.lo AND key <= r.hi"
            " ORDER BY key LIMIT 1) AND s.entry = r.e")


def _starts(ns: int, blob: bytes) -> list[int]:
    """The lowest signed key of the range of each of the blob's prefixes (with repeats): a range
    is ``[start, start + 2³² - 1]`` and never crosses the sign bit."""
    if not isinstance(blob, bytes) or len(blob) % 4:
        raise ValueError(f"entry.sentences is not a sequence of 4-byte prefixes: {blob!r:.40}")
    high = ns_mask(ns) >> _LOW_BITS
    return [(((p ^ high) ^ _SIGN) - _SIGN) << _LOW_BITS for p in struct.unpack(f">{len(blob) // 4}I", blob)]


def keys(conn: sqlite3.Connection, ns: int, blobs: Mapping[int, bytes | None]) -> dict[int, list[int]]:
    """The ``sentence.key`` of every row of each entry id of ``blobs`` (its ``entry.sentences``).

    A few statements find, for every prefix of every entry, the first key in its range and the
    entry's row under it (the usual case: the range holds that entry's hash only); the ranges of an
    entry for which this finds fewer rows than it has prefixes are walked key by key (each step
    one seek)."""
    starts = {entry: _starts(ns, blob) for entry, blob in blobs.items() if blob}
    found: dict[int, list[int]] = {entry: [] for entry in starts}
    ranges = [(entry, lo, lo + _LOW) for entry, los in starts.items() for lo in set(los)]
    for i in range(0, len(ranges), _CHUNK):
        chunk = ranges[i : i + _CHUNK]
        for entry, k in conn.execute(_first_rows_sql(len(chunk)), [x for r in chunk for x in r]):
            found[entry].append(k)
    for entry, have in found.items():
        if len(have) < len(starts[entry]):
            for lo in set(starts[entry]):
                row = conn.execute(_FIRST, (lo, lo + _LOW)).fetchone()
                while row is not None:
                    if row[0] not in have and conn.execute(_HELD, (row[0], entry)).fetchone() is not None:
                        have.append(row[0])
                    row = conn.execute(_NEXT, (row[0], lo + _LOW)).fetchone()
    return found


def resolve(conn: sqlite3.Connection, ns: int, blobs: Mapping[int, bytes | None]) -> dict[int, tuple[str, ...]]:
    """The exact sample (sorted hex hashes) of each entry id of ``blobs`` (its ``entry.sentences``)."""
    mask = ns_mask(ns)
    return {entry: tuple(sorted([f"{k & _M64 ^ mask:016x}" for k in found]))
            for entry, found in keys(conn, ns, blobs).items()}


def insert(conn: sqlite3.Connection, entry: int, keys: Sequence[int]) -> None:
    """The ``sentence`` rows of a new entry, under the :func:`keys_of` its sample."""
    if keys:
        conn.execute(insert_rows_sql("sentence", "key, entry", len(keys)), [x for k in keys for x in (k, entry)])


def delete(conn: sqlite3.Connection, ns: int, doomed: Iterable[tuple[int, bytes | None]]) -> None:
    """Delete the ``sentence`` rows of these ``(entry id, entry.sentences)``."""
    found = keys(conn, ns, dict(doomed))
    conn.executemany("DELETE FROM sentence WHERE key = ? AND entry = ?",
                     [(k, entry) for entry, ks in found.items() for k in ks])
