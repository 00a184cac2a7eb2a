"""How the Redis index holds the rule's data: key names, entry hashes, and queries as the script reads them.

Keys (plain strings and integers only, never pickle)
----------------------------------------------------
``<prefix>`` is ``simhash`` unless the URL says ``?prefix=…``; ``<ns>`` is the namespace,
percent-encoded, in braces (a Redis Cluster hash tag: every key of a namespace lives in one slot).

``<prefix>:meta``
    JSON string describing the index: ``format``, ``schema_version``, :class:`~.base.IndexParams`,
    band layouts, fingerprint storage, creation time and version. Written once with ``SET NX`` (of
    several processes creating the index at once, one wins and all check against its record);
    other parameters at open are a :class:`~.base.ParameterMismatch` naming the URL and fields.
``<prefix>:namespaces``
    Hash: namespace name → creation time (for ``stats``).
``<prefix>:{<ns>}:meta``
    The namespace's marker (the schema version), set at open. Every script call fails when it is
    gone: the server lost the index's keys (restarted without persistence, evicted keys), and an
    emptied index would let every story in again. At open, a server that may evict any key
    (``maxmemory-policy allkeys-*``) or does not persist is refused (``unsafe="refuse"``) or logged.
``<prefix>:{<ns>}:seq``
    Entry id counter (``INCR``): ids are never reused, so a decision cannot point at a newer entry.
``<prefix>:{<ns>}:e:<id>``
    Hash per entry; ``<id>`` is zero-padded to 15 digits so that string order is id order. Fields
    ``s`` first seen (the float's ``repr``), ``t``/``b`` title/body fingerprint (fixed-width lower-case
    hex, absent when that text was too short), ``u`` URL and ``n`` title (absent when None), ``m``
    number signature (:func:`~.rule.numbers_agree`), ``x`` sentence hashes (space-separated), ``h``
    the digest of a body too short to fingerprint and ``o`` the owner of a pending entry, each
    absent when the entry was added without one.
``<prefix>:{<ns>}:seen``
    Sorted set of entry ids scored by first-seen time: expiry (``not_before``), purge, stats, export.
``<prefix>:{<ns>}:tf:<hex>`` / ``bf:<hex>``
    Sorted set of the entries holding this title/body fingerprint, scored by first-seen time: the
    earliest non-expired holder is one ``ZRANGEBYSCORE … LIMIT 0 1`` however many share it.
``<prefix>:{<ns>}:tb:<band>:<value>`` / ``bb:…``
    The pigeonhole bands (:func:`~scrapy_simhash.simhash.band_layout`): a set of the fingerprints
    (hex) whose band ``<band>`` has this value (hex). A fingerprint is a member once however many
    entries share it, so boilerplate does not grow buckets. It leaves the band sets when its last
    entry goes (forget, purge, reset). ``<prefix>:{<ns>}:nbands`` counts band members for ``stats``.
``<prefix>:{<ns>}:sh:<hash>``
    The sentence tier: sorted set of the entries holding this sentence hash, scored by
    first-seen time.
``<prefix>:{<ns>}:pending:<owner>``, ``<prefix>:{<ns>}:owners``, ``<prefix>:{<ns>}:alive:<owner>``
    Delivery tracking (:mod:`.owners`): the members of an owner's pending entries (whose hashes
    carry ``o``, the owner), the owners with pending entries, and each owner's lease (a key that
    expires :data:`~.redis.LEASE` seconds after its last check-and-add or heartbeat).
``<prefix>:{<ns>}:r:<token>``
    The id an *added* outcome returned for a request token (expires after :data:`~.redis.TOKEN_TTL`).
``<prefix>:{<ns>}:u:<url>``
    Set of the entry ids with this URL (``forget(url)``).
``<prefix>:{<ns>}:d:<url>`` and ``<prefix>:{<ns>}:decided``
    The latest decision about a non-new URL (hash: status, tier, distance, original id, time, title),
    and the decided URLs scored by decision time (``decisions``, purge).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from ..simhash import split_bands
from .base import Entry, IndexError_, Query, Tier
from .meta import TITLE_CHARS, Layout

ID_WIDTH = 15  # zero-padded ids: string order is numeric order, and 10**15 < 2**53 (exact in Lua)
TIER_CHAR: dict[Tier, str] = {"title": "t", "body": "b", "sentence": "s"}
CHAR_TIER: dict[str, Tier] = {"t": "title", "b": "body", "s": "sentence"}


def member_of(entry_id: int) -> str:
    """An entry id as the member name the keys use."""
    return f"{entry_id:0{ID_WIDTH}d}"


def as_score(value: float) -> str:
    """A float as Redis parses it back exactly (``repr`` is the shortest exact form)."""
    value = float(value)
    if math.isnan(value):
        raise ValueError("time must be a number, not NaN")
    return "-inf" if value == -math.inf else "+inf" if value == math.inf else repr(value)


def pairs(flat: list[Any]) -> dict[str, str]:
    """A flat ``HGETALL`` reply as a dict."""
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


class Keys:
    """One namespace's fingerprints, band keys and entries in the form the keys and the script hold them."""

    def __init__(self, location: str, namespace: str, bits: int, tiers: dict[Tier, Layout]) -> None:
        self.location, self.namespace, self._width, self._tiers = location, namespace, bits // 4, tiers

    def hex(self, fp: int) -> str:
        return format(fp, f"0{self._width}x")

    def band_keys(self, tier: Tier, fp: int) -> list[str]:
        c = TIER_CHAR[tier]
        return [f"{c}b:{n}:{v:x}" for n, v in enumerate(split_bands(fp, self._tiers[tier]))]

    def keys(self, tfp: int | None, bfp: int | None) -> dict[str, list[str]]:
        """The band keys of an entry's fingerprints, per tier character."""
        return {
            "t": [] if tfp is None else self.band_keys("title", tfp),
            "b": [] if bfp is None else self.band_keys("body", bfp),
        }

    def entry(self, member: str | int, fields: Mapping[str, str]) -> Entry:
        """An entry from its hash; values not written by us are an :class:`IndexError_` naming it."""
        t, b = fields.get("t"), fields.get("b")
        try:
            return Entry(
                id=int(member),
                namespace=self.namespace,
                url=fields.get("u"),
                title=fields.get("n"),
                first_seen=float(fields["s"]),
                title_fp=None if t is None else int(t, 16),
                body_fp=None if b is None else int(b, 16),
                numbers=fields.get("m"),
                sentences=tuple(fields.get("x", "").split()),
                short_body=fields.get("h"),
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise IndexError_(f"index {self.location}: entry {member} is unreadable ({exc!r})") from exc

    def query(self, query: Query) -> dict[str, Any]:
        """A query as the script reads it (see the header of ``redis_rule.lua``; None: absent)."""
        tfp, bfp = query.title_fp, query.body_fp
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
            "sentences": sorted(set(query.sentences)),
            "sentences_shared": int(query.sentences_shared),
            "short_body": query.short_body,
            "figures": bool(query.figures),
            "owner": query.owner,
            "keys": self.keys(tfp, bfp),
        }
        return {k: v for k, v in fields.items() if v is not None}
