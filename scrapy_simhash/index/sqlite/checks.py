"""The cheap consistency checks of a SQLite index's rows at open (:func:`check_rows`): a few index
lookups whatever the size, in the caller's read snapshot, refusing rows that cannot be right (entries
deleted under their band rows, an entry id counter set back, band keys of no namespace or band) rather
than answering from them."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from ..bands import TierBands
from ..base import TIERS, IndexOpenError, Tier
from . import dense as sqlite_dense
from .tables import BAND_NUMBER_BITS, TIER_KIND, Rows
from .values import codec

#: Namespaces whose oldest and newest entries are checked against the band rows at open.
_SAMPLED_NAMESPACES = 8
#: Band rows (of ``band`` and of ``band2`` each), at random keys, checked at open to belong to an
#: entry (two index lookups each), and entries, at random ids, to have their band rows (one lookup a
#: band): docs/decisions/0310-sqlite-open-samples.md.
_SAMPLED_ROWS = 8
_SAMPLED_ENTRIES = 2


def _refuse(location: str, what: str) -> IndexOpenError:
    return IndexOpenError(f"index {location}{what}: the file was altered or damaged, refusing it")


def check_rows(
    conn: sqlite3.Connection, location: str, tiers: dict[Tier, TierBands], vbits: int, bits: int
) -> None:
    """Cheap checks (a few index lookups, whatever the size; the caller holds one read snapshot)
    that the rows agree with the recorded layout and with each other: every namespace id used by an
    entry exists; the entry id counter is not below the highest id (:func:`_check_sequence`); the
    lowest and highest band keys belong to existing namespaces and bands; the oldest and newest
    entries of the first namespaces, and entries at random ids, have their band rows under the keys
    the layout gives them; band rows at random keys belong to an entry (:func:`_check_band_sample`).
    A changed namespace id, band count or layout would otherwise make every stored entry invisible,
    and band rows left without their entries make every stored story new again."""
    ids = {int(r[0]) for r in conn.execute("SELECT id FROM namespace")}
    used: list[Any] = []  # the distinct entry.ns values, one index lookup each (up to one unknown)
    (ns,) = conn.execute("SELECT min(ns) FROM entry").fetchone()
    while ns is not None and len(used) <= len(ids):
        used.append(ns)
        (ns,) = conn.execute("SELECT min(ns) FROM entry WHERE ns > ?", (ns,)).fetchone()
    unknown = [ns for ns in used if ns not in ids]
    if unknown:
        raise IndexOpenError(
            f"index {location} has entries of namespace id {unknown[0]!r}, which its namespace table "
            f"(ids {sorted(ids)[:10]}) does not have: the file was altered or damaged, refusing it"
        )
    sizes = {TIER_KIND[tier]: len(tiers[tier].parts) for tier in TIERS}
    # one aggregate per query: SQLite answers each from the primary key in O(log n), both at once by a scan
    for (key,) in (conn.execute(f"SELECT {f}(key) FROM band").fetchone() for f in ("min", "max")):
        if key is None:
            continue
        if not isinstance(key, int):
            raise IndexOpenError(f"index {location} holds a band key that is not an integer: {key!r}")
        ns, kind, number = key >> (vbits + 1 + BAND_NUMBER_BITS), key >> (vbits + BAND_NUMBER_BITS) & 1, (
            key >> vbits) & ((1 << BAND_NUMBER_BITS) - 1)
        if ns not in ids or number >= sizes[kind]:
            raise IndexOpenError(
                f"index {location} holds band key {key}, of namespace id {ns} and band {number} of "
                f"{TIERS[kind]} tier, which the namespace table and the recorded layout "
                f"({sizes[kind]} bands) do not have: the file was altered or damaged, refusing it"
            )
    enc, dec = codec(bits)
    stored_type = int if bits <= 64 else bytes
    namespaces: dict[int, Rows] = {}

    def rows_of(ns: int) -> Rows:
        if ns not in namespaces:
            namespaces[ns] = Rows(ns, "", tiers, vbits, enc, dec)
        return namespaces[ns]

    def check_entry(found: Sequence[Any]) -> None:
        ident, ns, tfp, bfp = found
        if any(v is not None and type(v) is not stored_type for v in (tfp, bfp)):
            return  # a wrongly typed value is an error when read (checked_decode)
        rows = rows_of(ns)
        for tier, raw in (("title", tfp), ("body", bfp)):
            if raw is None:
                continue
            try:
                keys = rows.keys(tier, dec(raw))  # type: ignore[arg-type]
            except (ValueError, TypeError, OverflowError):
                continue  # a value that is not ours is an error when read
            present = sqlite_dense.held(conn, rows, tier, raw)
            if present != len(keys):
                raise _refuse(location, (
                    f": entry {ident} has {present} of its {len(keys)} {tier} band rows under the keys the "
                    f"recorded layout gives (title_layout/body_layout, band_key, namespace id {ns})"))

    _check_sequence(conn, location)
    for ns in sorted(ids)[:_SAMPLED_NAMESPACES]:
        for order in ("", "DESC"):
            found = conn.execute(
                f"SELECT id, ns, title_fp, body_fp FROM entry WHERE ns = ? ORDER BY first_seen {order} LIMIT 1",
                (ns,)).fetchone()
            if found is None:
                break
            check_entry(found)
    rng = random.Random()
    # one aggregate per query: each answered from the primary key in O(log n), both at once by a scan
    low, high = (conn.execute(f"SELECT {f}(id) FROM entry").fetchone()[0] for f in ("min", "max"))
    if isinstance(low, int) and isinstance(high, int):
        for _ in range(_SAMPLED_ENTRIES):
            check_entry(conn.execute("SELECT id, ns, title_fp, body_fp FROM entry WHERE id >= ? ORDER BY id LIMIT 1",
                                     (rng.randint(low, high),)).fetchone())
    if ids:
        _check_band_sample(conn, location, ids, rows_of, stored_type, rng)


def _check_sequence(conn: sqlite3.Connection, location: str) -> None:
    """Refuse an entry id counter (``sqlite_sequence``, kept by ``AUTOINCREMENT``) that is missing,
    held twice or below the highest entry id: the next entries would take the ids of forgotten ones,
    and a decision's or a request's reference to a forgotten entry would point at a newer one."""
    (top,) = conn.execute("SELECT max(id) FROM entry").fetchone()
    counters = [seq for (seq,) in conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'entry'")]
    if top is None and not counters:
        return
    if len(counters) != 1:
        raise _refuse(location, (
            f" has {len(counters)} entry id counters (sqlite_sequence rows named 'entry') where it holds entries "
            f"up to id {top}: one is kept from the first entry on"))
    (seq,) = counters
    if not isinstance(seq, int) or (top is not None and seq < top):
        raise _refuse(location, (
            f" has its entry id counter (sqlite_sequence) at {seq!r}, below its highest entry id {top}: the next "
            "entries would take the ids of forgotten ones"))


def _check_band_sample(conn: sqlite3.Connection, location: str, ids: set[int], rows_of: Callable[[int], Rows],
                       stored_type: type, rng: random.Random) -> None:
    """Refuse band rows (the first at or after a random key of a random tier and band, in ``band`` and
    in ``band2``, of the namespace of a row at a random key) whose fingerprint no entry of their
    namespace and tier holds: a band row goes with the last entry holding its fingerprint
    (:meth:`Rows.drop_unused_bands`), so one left over means entries were deleted under it, and every
    story they held would be found by its band rows, then not found, and admitted again."""
    for table, ns_shift in (("band", 0), ("band2", 1 + sqlite_dense.PATH_BITS + sqlite_dense.HASH_BITS)):
        # one aggregate per query: each answered from the primary key in O(log n), both at once by a scan
        lowest, highest = (conn.execute(f"SELECT {f}(key) FROM {table}").fetchone()[0] for f in ("min", "max"))
        if not (isinstance(lowest, int) and isinstance(highest, int)):
            continue  # empty (a key that is not an integer: refused by the range check of ``band``)
        for _ in range(_SAMPLED_ROWS):
            ns = min(ids)
            if len(ids) > 1:  # the namespace of a row at a random key: empty namespaces are never drawn
                (key,) = conn.execute(f"SELECT key FROM {table} WHERE key >= ? ORDER BY key LIMIT 1",
                                      (rng.randint(lowest, highest),)).fetchone()
                if not isinstance(key, int):
                    raise _refuse(location, f" holds a {table} key that is not an integer: {key!r}")
                ns = key >> (ns_shift or rows_of(ns).tier_shift + 1)
                if ns not in ids:
                    raise _refuse(location, f" holds {table} key {key}, of namespace id {ns}, which its namespace "
                                  f"table (ids {sorted(ids)[:10]}) does not have")
            rows, tier = rows_of(ns), rng.choice(TIERS)
            if table == "band":
                low = rows.keys(tier, 0)[rng.randrange(len(rows.tiers[tier].parts))]
                high = low + (1 << rows.tier_shift - BAND_NUMBER_BITS)  # the band's keys
            else:
                low = rows.key_range_below[0] | TIER_KIND[tier] << sqlite_dense.PATH_BITS + sqlite_dense.HASH_BITS
                high = low + (1 << sqlite_dense.PATH_BITS + sqlite_dense.HASH_BITS)  # the tier's keys
            found = None
            for start in (rng.randrange(low, high), low):
                found = conn.execute(f"SELECT key, fp FROM {table} WHERE key >= ? AND key < ? ORDER BY key LIMIT 1",
                                     (start, high)).fetchone()
                if found is not None:
                    break
            if found is None:
                continue
            key, raw = found
            if type(raw) is not stored_type or sqlite_dense.is_marker(raw):
                continue  # a split bucket's marker; a value that is not ours is an error when read
            if conn.execute(rows.sql_used[tier], (rows.fp_key(raw), rows.ns_id, raw)).fetchone() is None:
                raise _refuse(location, (
                    f" holds a {tier} band row ({table} key {key}) of a fingerprint that no entry of namespace id "
                    f"{rows.ns_id} holds: entries were deleted under their band rows, and every story they held "
                    "would be admitted again"))
