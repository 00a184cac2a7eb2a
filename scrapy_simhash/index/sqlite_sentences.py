"""How a SQLite index stores an entry's sentence sample: exact rows in ``sentence``, prefixes in the row.

An entry's sample (its :data:`~.rule.SENTENCES_STORED` smallest sentence hashes, 64 bits each) is
stored twice, once for each direction it is read in:

``sentence`` (``WITHOUT ROWID``, primary key ``(key, entry)``): hash → entries
    One row per sampled hash: ``key`` is the hash XORed with its namespace's mask
    (:func:`ns_mask`) as a signed 64-bit integer, so one table serves every namespace without a
    namespace column (schema 4 had one: a byte a row more) and a hash's holders, boilerplate counts
    included, are those of its own namespace. A lookup is exact: a key is the whole hash, and an
    entry found through it is of the namespace (checked in the join).
``entry.sentences``: entry → its hashes
    The first :data:`PREFIX_BYTES` bytes of each sampled hash (ascending), half of what the whole
    hashes take (schema 4: 8 bytes each). They are not a second copy of the sample but the way to
    its rows: the entry's hashes are the keys of its rows in the ranges of its prefixes
    (:func:`resolve`). Each range is read by seeks only (the first key in it, then this entry's row
    under that key, and so on to the next distinct key), so a boilerplate sentence held by 100k
    entries costs what a unique one does. Another sample's hash in the same range (a prefix shared
    by chance: ~rows/2³² of them per range) only costs one more seek. Entries read by the rule, the
    decisions and ``entries()`` come with their exact sample; removing an entry deletes exactly its
    rows (:func:`delete`).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from ..simhash import from_signed64, to_signed64

#: Bytes of each sampled hash kept in the entry row (``entry.sentences``).
PREFIX_BYTES = 4
_LOW_BITS = 64 - 8 * PREFIX_BYTES
_M64 = (1 << 64) - 1
#: Odd, so ``ns × _MIX mod 2⁶⁴`` differs for every namespace id (the golden-ratio constant).
_MIX = 0x9E37_79B9_7F4A_7C15


def ns_mask(ns: int) -> int:
    """The 64-bit mask a namespace's sentence hashes are XORed with in ``sentence.key``."""
    return (ns * _MIX) & _M64


def key(ns: int, digest: str) -> int:
    """The ``sentence.key`` of a 16-hex-digit sentence hash in namespace ``ns``."""
    return to_signed64(int(digest, 16) ^ ns_mask(ns))


def digest(ns: int, stored: int) -> str:
    """The sentence hash (16 hex digits) of a ``sentence.key`` of namespace ``ns``."""
    return f"{from_signed64(stored) ^ ns_mask(ns):016x}"


def pack_prefixes(digests: Sequence[str]) -> bytes | None:
    """``entry.sentences`` for a sample (sorted hex hashes): their prefixes (None: no sample)."""
    return b"".join(bytes.fromhex(h[: 2 * PREFIX_BYTES]) for h in digests) or None


def _ranges(ns: int, blob: bytes) -> list[tuple[int, int, int]]:
    """``(lo, hi, count)``: the signed key range of each distinct prefix of ``blob`` and how many
    of the entry's hashes it holds."""
    high = ns_mask(ns) >> _LOW_BITS
    counts = Counter(blob[i : i + PREFIX_BYTES] for i in range(0, len(blob), PREFIX_BYTES))
    out = []
    for prefix, count in counts.items():
        base = (int.from_bytes(prefix, "big") ^ high) << _LOW_BITS  # the range never crosses the sign bit
        out.append((to_signed64(base), to_signed64(base | ((1 << _LOW_BITS) - 1)), count))
    return out


_FIRST = "SELECT key FROM sentence WHERE key >= ? AND key <= ? ORDER BY key LIMIT 1"
_NEXT = "SELECT key FROM sentence WHERE key > ? AND key <= ? ORDER BY key LIMIT 1"
_HELD = "SELECT 1 FROM sentence WHERE key = ? AND entry = ?"


def _fast_sql(n: int) -> str:
    values = ",".join("(?,?)" for _ in range(n))
    return (f"WITH r(lo, hi) AS (VALUES {values}) SELECT s.key FROM r JOIN sentence s"
            f" ON s.key = ({_FIRST.replace('?', 'r.lo', 1).replace('?', 'r.hi', 1)}) AND s.entry = ?")


def keys_of(conn: sqlite3.Connection, ns: int, entry: int, blob: bytes | None) -> list[int]:
    """The ``sentence.key`` of every row of ``entry`` (namespace ``ns``, prefixes ``blob``), ascending.

    One statement finds, for every prefix, the first key in its range and this entry's row under it
    (the usual case: the range holds this entry's hash only); a range where that finds fewer of the
    entry's hashes than its prefix counts is walked key by key (each step one seek)."""
    if not blob:
        return []
    ranges = _ranges(ns, blob)
    bounds = [b for lo, hi, _ in ranges for b in (lo, hi)]
    found = {k for (k,) in conn.execute(_fast_sql(len(ranges)), [*bounds, entry])}
    for lo, hi, count in ranges:
        if sum(lo <= k <= hi for k in found) >= count:
            continue
        row = conn.execute(_FIRST, (lo, hi)).fetchone()
        while row is not None:
            if conn.execute(_HELD, (row[0], entry)).fetchone() is not None:
                found.add(row[0])
            row = conn.execute(_NEXT, (row[0], hi)).fetchone()
    return sorted(found, key=lambda k: from_signed64(k) ^ ns_mask(ns))


def resolve(conn: sqlite3.Connection, ns: int, blobs: Mapping[int, bytes | None]) -> dict[int, tuple[str, ...]]:
    """The exact sample (sorted hex hashes) of each entry id of ``blobs`` (its ``entry.sentences``)."""
    return {entry: tuple(digest(ns, k) for k in keys_of(conn, ns, entry, blob)) for entry, blob in blobs.items()}


def insert(conn: sqlite3.Connection, ns: int, entry: int, sample: Iterable[str]) -> None:
    """The ``sentence`` rows of a new entry's sample."""
    conn.executemany("INSERT OR IGNORE INTO sentence(key, entry) VALUES (?, ?)", [(key(ns, h), entry) for h in sample])


def delete(conn: sqlite3.Connection, ns: int, doomed: Iterable[tuple[int, bytes | None]]) -> None:
    """Delete the ``sentence`` rows of these ``(entry id, entry.sentences)``."""
    conn.executemany("DELETE FROM sentence WHERE key = ? AND entry = ?",
                     [(k, entry) for entry, blob in doomed for k in keys_of(conn, ns, entry, blob)])
