"""How the Redis index holds the rule's data: key names, binary records, and queries as the script reads them.

Schema version 7 (6 with layout generations and marker values; 5 without split band keys: schema 5
and 6 indexes are read as they are): a compact layout, ~400
bytes an entry with 12 sentence hashes (~390 once its request token expired) and ~220 without,
request tokens included (``benchmarks/index_size.py``; version 4 took ~460 and ~245, version 3 ~560
and ~360, version 2 ~630 and ~375, version 1, a key per entry, per fingerprint, per band value and
per sentence, ~5 kB and ~2.8 kB). Redis spends ~50–90 bytes on every key before its data and ~40 on
every field of a large hash, but 2–4 on an element of a small hash (≤ 128 fields of ≤ 64 bytes: the
compact *listpack* encoding, Redis's defaults) or of a list. So nearly everything lives in small
hashes and lists, as binary values (``struct``-packed by the script; never pickle), and the hashes
split as the index grows so that they stay small.

``<prefix>`` is ``simhash`` unless the URL says ``?prefix=…``; ``<ns>`` is the namespace,
percent-encoded, in braces (a Redis Cluster hash tag: every key of a namespace lives in one slot).
Ids are 32-bit (4 bytes, big-endian, in lists); fingerprints are ``bits / 8`` raw bytes.

``<prefix>:meta``
    JSON string describing the index: ``format``, ``schema_version``, :class:`~.base.IndexParams`,
    band layouts, fingerprint storage, creation time and version. Written once with ``SET NX`` (of
    several processes creating the index at once, one wins and all check against its record);
    other parameters at open are a :class:`~.base.ParameterMismatch` naming the URL and fields. An
    index of another schema version is refused at open, saying what to do. Rewritten (compare-and-set)
    only by a re-banding (:mod:`.redis_reband`).
``<prefix>:namespaces``
    Hash: namespace name → creation time (for ``stats``).
``<prefix>:reband``
    Held (its token, expiring unless renewed) while a re-banding runs (:mod:`.redis_reband`).
``<prefix>:{<ns>}:meta``
    The namespace's marker (the schema version; after a re-banding, a new value), set at open. Every
    script call fails when it no longer holds what its caller read at open: gone, the server lost
    the index's keys (restarted without persistence, evicted keys), and an emptied index would let
    every story in again; changed, the index is being or was re-banded, and the caller would file
    its entries under the old layout. At open, a server that may evict any key
    (``maxmemory-policy allkeys-*``) or does not persist is refused (``unsafe="refuse"``) or logged.
``<prefix>:{<ns>}:seq``, ``…:n``, ``…:nbands``
    Entry id counter (``INCR``: ids are never reused, so a decision cannot point at a newer entry),
    entries, band members (``stats``).
``<prefix>:{<ns>}:e:<id // 64>``
    Entries, 64 a list: an entry is one binary record (:func:`decode_record`), element ``id % 64``
    (a list's elements have no size limit and cost 2–4 bytes each in its 8 KB listpack nodes,
    where a hash field of 64 bytes at most cost ~5 a chunk). A removed entry leaves an empty
    element (its neighbours keep their places) and a list left with no record is deleted
    (``LPOS``, Redis ≥ 6.0.6); an insert pads the list with empty elements up to its place.
    Records never change after insert.
``<prefix>:{<ns>}:<table>:<bucket>`` and ``<prefix>:{<ns>}:lh``
    The lists the rule searches, each a *table* of fixed-size records packed into 64-byte fields
    (a key's *page*, 0–15 from its mix, continued in fields page + 16, page + 32, … when full) of
    hashes chosen by linear hashing: ``lh`` holds each table's level,
    split pointer and record count, and a bucket splits when the table averages more than
    :data:`LOAD` records a bucket, so buckets stay compact at 10 entries and at 10 million, 1.5–2
    bytes a record beyond the record itself. A keyed table's key with more than 4 ids moves them to
    the sorted set ``<prefix>:{<ns>}:Z<table>:<hex key>`` (scores: first seen) and keeps a mark in
    their place (the sorted set's existence tells it from a real record). Tables (key → payload, bytes):

    ``tb0``, ``tb1``, … / ``bb0``, …: one table a title/body band (``tb0g1``, …: the tables of
    generation 1 of the layout, built by a re-banding; :func:`band_table`); the key is a fingerprint masked
    to the band's bits (:meth:`Keys.band_keys`), a record the fingerprint (8) alone: its key is
    itself masked, so the script files a new fingerprint under its bands, places records at a
    split and drops them, and a lookup keeps the page's records whose band is the key. A
    fingerprint is filed once however many entries share it, and leaves when its last entry goes.
    A band key with more than 32 fingerprints (clustered fingerprints sharing a band) moves them to
    the sorted set ``<prefix>:{<ns>}:Z<table>:<hex key>`` (scores 0, read whole) and keeps a mark,
    the key itself, in its page. At 128 fingerprints (and each time they double) the key *splits*
    if that spreads them: the same key becomes a hash, its *split node*, whose fields are
    (child number: 1 byte, the fingerprint masked to the child's bits) → the fingerprints packed.
    A child is the band's bits and one of as many parts of the other bits as the tier has bands:
    two fingerprints within the layout's distance that share the band agree on one part, so a
    fingerprint is filed under every child and a query reads one field a child (its own bits) and
    finds every one. A field that reaches 128 splits the same way (its value becomes empty, its
    fingerprints go to the node ``<node>/<hex field>``), three levels below the band at most. A
    tight crowd (fingerprints a bit or two apart) agrees on most parts and would be read more, not
    less, split: it stays whole. The existence and type of the spill key tell a mark from a
    fingerprint equal to its key. A check near a crowd reads a few small fields instead of the
    crowd (``benchmarks/redis_crowd.py``). ``th`` / ``bh``: title/body fingerprint → the id (4) of an
    entry holding it (a recurring headline: its sorted set by first seen, so the earliest
    non-expired holder is one ``ZRANGEBYSCORE … LIMIT 0 1``). ``sh``: sentence hash (8) → id.
    ``u``: the first 8 bytes of the URL's SHA-1 → id. These four are *keyed*: a record is a 1-byte
    tag and the id, the tag up to 7 bits of the key's 64-bit mix just above the bucket's address
    bits and a sentinel bit over them (a split sends a record by the lowest and keeps the rest;
    one whose bits ran out is sent by its entry's key), so a record repeats nothing its entry
    holds; the ids found under a tag are verified against their entries' records (a fingerprint,
    a sampled hash, found by a plain search of the record before it is decoded, the URL), which
    keeps every answer exact when keys share a tag (with 7 bits, ~1 in 128 of a fresh page's other
    records, more as records lose bits). Each spilled
    key has its own sorted set and a mark of two records: its tag and the zero id (ids start at
    1), then its 4-byte mix and a zero byte.
``<prefix>:{<ns>}:t:<hour>`` and ``<prefix>:{<ns>}:hours``
    Time buckets: the ids (4 bytes each) of the entries first seen in that hour (POSIX seconds //
    3600), and the sorted set of the hours that have entries. Purge drops whole buckets, oldest
    first, and sorts out only the bucket its limit falls in; ``stats`` and export read them.
``<prefix>:{<ns>}:r:<minute>:<k>``
    Request tokens: 10-byte records (bytes 2–7 of the token's SHA-1, whose first byte picks ``k``:
    52 bits of it in all; the id an *added* outcome returned), one string per minute and 1/16 of
    the tokens, written back whole at its length (``APPEND`` leaves up to as much again free),
    expiring whole :data:`~.redis.TOKEN_TTL` + 60 s after it was made.
``<prefix>:{<ns>}:pending:<owner>``, ``<prefix>:{<ns>}:owners``, ``<prefix>:{<ns>}:alive:<owner>``
    Delivery tracking (:mod:`.owners`): the ids of an owner's pending entries, the owners with
    pending entries, and each owner's lease (a key that expires :data:`~.redis.LEASE` seconds after
    its last check-and-add or heartbeat).
``<prefix>:{<ns>}:d:<url>`` and ``<prefix>:{<ns>}:decided``
    The latest decision about a non-new URL (hash: status, tier, distance, original id, time, title),
    and the decided URLs scored by decision time (``decisions``, purge).

Entry record (big-endian): first seen (double), flags (1: title
fingerprint, 2: body fingerprint, 4: number signature packed, 8: number signature as text, 16:
short-body digest, 32: URL, 64: title, 128: added pending), one byte: stored sentence hashes (low 5
bits), the URL's scheme left out (bits 5–6: :data:`SCHEMES`), the title in UTF-16-BE (bit 7: when
shorter than UTF-8, as CJK text is); then the title and body fingerprints, the number signature (a
count byte and 4 bytes a hash, or a 2-byte length and text), the sentence hashes (8 bytes each),
the digest (8 bytes), the URL (its length in 1 byte under 128, else 2 with the top bit set; UTF-8)
and the title (to the end of the record), each present when its flag is.
"""

from __future__ import annotations

import math
import re
import struct
import time
from typing import Any

from ..base import Entry, IndexError_, Query, Tier
from ..meta import TITLE_CHARS, Layout

#: Records a table bucket averages before it splits (linear hashing): the fullest buckets hold about
#: twice that, 8 or 12 to a 64-byte field (~35 fields), far under Redis's default
#: ``hash-max-listpack-entries`` (128). 144, not 96: a bucket's key (~80 bytes) over more records.
LOAD = 144
#: The quotient bits a keyed table's record tag holds when written (1 byte with its sentinel bit).
TAG_BITS = 7
ID_LIMIT = 2**32  # ids are 4 bytes in the lists
TIER_CHAR: dict[Tier, str] = {"title": "t", "body": "b", "sentence": "s"}
CHAR_TIER: dict[str, Tier] = {"t": "title", "b": "body", "s": "sentence"}
_HEX = frozenset("0123456789abcdef")
#: A band table's name, as the script's ``layout_of`` makes it (:func:`band_table`).
BAND_TABLE = re.compile(r"[tb]b\d+(?:g\d+)?")
_HEADER = struct.Struct(">dBB")
F_T, F_B, F_NUM, F_NUMTEXT, F_H, F_U, F_N = 1, 2, 4, 8, 16, 32, 64
#: The URL scheme a record leaves out, by its code (byte 10, bits 5–6).
SCHEMES = ("", "https://", "http://")


def band_table(tier_char: str, band: int, gen: int) -> str:
    """The name of band ``band``'s table of tier ``tier_char`` in generation ``gen`` of a layout
    (the script's ``layout_of`` names them so)."""
    return f"{tier_char}b{band}" + (f"g{gen}" if gen else "")


def reband_lock(prefix: str) -> str:
    """The key a re-banding holds (its token, with a lease) while it runs: opens are refused meanwhile."""
    return f"{prefix}:reband"


def glob_escape(text: str) -> str:
    """``text`` matched literally by a ``SCAN MATCH`` pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _hex16(text: object) -> bool:
    """Is ``text`` 16 lower-case hex digits (a sentence hash, a short-body digest: 8 bytes stored)?"""
    return isinstance(text, str) and len(text) == 16 and _HEX.issuperset(text)


def as_score(value: float) -> str:
    """A float as Redis and the script parse it back exactly (``repr`` is the shortest exact form)."""
    value = float(value)
    if math.isnan(value):
        raise ValueError("time must be a number, not NaN")
    return "-inf" if value == -math.inf else "+inf" if value == math.inf else repr(value)


def decode_record(record: bytes, fp_bytes: int) -> dict[str, Any]:
    """An entry's record (layout: the module docstring) as its fields; ValueError when not ours."""
    seen, flags, more = _HEADER.unpack_from(record)
    nsent, scheme, total = more % 32, SCHEMES[more >> 5 & 3], len(record)
    pos = _HEADER.size
    out: dict[str, Any] = {"seen": seen, "title_fp": None, "body_fp": None, "numbers": None,
                           "short_body": None, "url": None, "title": None}
    for flag, name in ((F_T, "title_fp"), (F_B, "body_fp")):
        if flags & flag:
            out[name] = int.from_bytes(record[pos : pos + fp_bytes], "big")
            pos += fp_bytes
    if flags & F_NUM:
        n = record[pos]
        out["numbers"] = " ".join(record[pos + 1 + 4 * i : pos + 5 + 4 * i].hex() for i in range(n))
        pos += 1 + 4 * n
    elif flags & F_NUMTEXT:
        (n,) = struct.unpack_from(">H", record, pos)
        out["numbers"] = record[pos + 2 : pos + 2 + n].decode()
        pos += 2 + n
    out["sentences"] = tuple(record[pos + 8 * i : pos + 8 + 8 * i].hex() for i in range(nsent))
    pos += 8 * nsent
    if flags & F_H:
        out["short_body"] = record[pos : pos + 8].hex()
        pos += 8
    if flags & F_U:
        n = record[pos]
        if n >= 128:
            n, pos = (n - 128) << 8 | record[pos + 1], pos + 1
        out["url"] = scheme + record[pos + 1 : pos + 1 + n].decode()
        pos += 1 + n
    if flags & F_N:  # the last field: up to the end
        out["title"] = record[pos:total].decode("utf-16-be" if more & 128 else "utf-8")
        pos = total
    if pos != total:
        raise ValueError(f"record of {total} bytes ends at {pos}")
    return out


class Keys:
    """One namespace's fingerprints, band keys and entries in the form the keys and the script hold them."""

    def __init__(self, location: str, namespace: str, bits: int, tiers: dict[Tier, Layout], gen: int = 0) -> None:
        self.location, self.namespace, self._width, self._tiers = location, namespace, bits // 4, tiers
        self.fp_bytes, self.gen = bits // 8, gen

    def tables(self) -> set[str]:
        """The names of this layout's band tables."""
        return {band_table(TIER_CHAR[t], n, self.gen) for t, bands in self._tiers.items() for n in range(len(bands))}

    def hex(self, fp: int) -> str:
        return format(fp, f"0{self._width}x")

    def band_keys(self, tier: Tier, fp: int) -> list[tuple[int, int]]:
        """``(band number, fp masked to the band's bits)`` for each band of ``tier``: the keys the
        script files ``fp`` under (it masks the fingerprint itself)."""
        return [(n, (fp >> shift & (1 << width) - 1) << shift) for n, (shift, width) in enumerate(self._tiers[tier])]

    def probe_keys(self, tier: Tier, fp: int) -> list[tuple[int, int]]:
        """The band keys a query's fingerprint reads its candidates from (a layout that probes
        neighbours may return more than :meth:`band_keys`; the pigeonhole bands probe their own)."""
        return self.band_keys(tier, fp)

    def probes_own_bands(self) -> bool:
        """Are a query's probe keys its bands' keys (:meth:`probe_keys` not replaced)? Then a check
        sends none and the script takes the keys it files the fingerprint under."""
        return getattr(self.probe_keys, "__func__", None) is Keys.probe_keys

    def probes(self, tfp: int | None, bfp: int | None) -> dict[str, list[list[Any]]]:
        """The probe keys of a query's fingerprints per tier character, as the script reads them."""
        return {c: [] if fp is None else [[n, self.hex(key)] for n, key in self.probe_keys(tier, fp)]
                for c, tier, fp in (("t", "title", tfp), ("b", "body", bfp))}

    def limits(self) -> dict[str, Any]:
        """What the script needs of the layout: fingerprint bytes, each tier's bands, the generation."""
        out = {"fp_bytes": self.fp_bytes, "bands": {TIER_CHAR[t]: [list(b) for b in bands]
                                                     for t, bands in self._tiers.items()}}
        return {**out, "band_gen": self.gen} if self.gen else out

    def entry(self, entry_id: int | bytes | str, record: bytes | None) -> Entry:
        """An entry from its record; a record not written by us is an :class:`IndexError_` naming it."""
        try:
            if not isinstance(record, bytes):
                raise ValueError("no record")
            f = decode_record(record, self.fp_bytes)
            return Entry(
                id=int(entry_id), namespace=self.namespace, url=f["url"], title=f["title"],
                first_seen=f["seen"], title_fp=f["title_fp"], body_fp=f["body_fp"], numbers=f["numbers"],
                sentences=f["sentences"], short_body=f["short_body"],
            )
        except (struct.error, ValueError, TypeError, IndexError) as exc:
            raise IndexError_(f"index {self.location}: entry {entry_id!r} is unreadable ({exc!r})") from exc

    def query(self, query: Query) -> dict[str, Any]:
        """A query as the script reads it (see the header of ``redis_rule.lua``; None: absent)."""
        tfp, bfp = query.title_fp, query.body_fp
        sentences = sorted(set(query.sentences))
        if not all(_hex16(h) for h in sentences):
            raise ValueError("sentence hashes must be 16 lower-case hex digits (signatures.sentence_signature)")
        if query.short_body is not None and not _hex16(query.short_body):
            raise ValueError("short_body must be 16 lower-case hex digits (signatures.short_body_digest)")
        fields = {
            "title_fp": None if tfp is None else self.hex(tfp),
            "body_fp": None if bfp is None else self.hex(bfp),
            "title_k": query.title_k,
            "body_k": query.body_k,
            "not_before": None if query.not_before is None else as_score(query.not_before),
            "seen_at": as_score(query.seen_at or time.time()),
            "url": query.url,
            "title": None if query.title is None else query.title[:TITLE_CHARS],
            "numbers": query.numbers,
            "title_numbers": int(query.title_numbers),
            "sentences": sentences,
            "sentences_shared": int(query.sentences_shared),
            "short_body": query.short_body,
            "figures": bool(query.figures),
            "owner": query.owner,
            "probe": None if self.probes_own_bands() else self.probes(tfp, bfp),
        }
        return {k: v for k, v in fields.items() if v is not None}
