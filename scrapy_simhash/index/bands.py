"""Which band keys an entry stores and which a query probes: multi-index hashing, for every backend.

A fingerprint of ``bits`` bits is cut into ``m`` parts (:func:`~scrapy_simhash.fingerprint.simhash.band_layout`,
widths differing by at most one bit). Two fingerprints within ``k`` bits differ in at most
``k // m`` bits in at least one part (were every part ``k // m + 1`` or more bits apart, they would
be ``m * (k // m + 1) > k`` apart), so an entry stores one row per part (its value) and a query
probes, in each part, every value within ``radius = k // m`` bits of its own. Every entry within
``k`` is found; the rest of the candidates are verified by exact Hamming distance.

``m`` is the fewest parts whose probes stay within :data:`MAX_PROBES` per tier: wide parts make
random candidates vanish (64 bits, k=2 or 3: two 32-bit parts probed with their one-bit
neighbours, 66 probes; ~66·n/2³² random candidates, 1.5 at 100M entries, where the k+1 pigeonhole
bands of 16 bits read ~4·n/2¹⁶, 6,100 at 100M) and fewer rows are stored per entry (2 instead of
4). ``benchmarks/band_schemes.py`` compares the alternatives.

Fingerprints crowded around one centre still share part values; a backend splits a bucket that grows
dense by the other bits of its entries (:attr:`TierBands.splits`, :meth:`TierBands.rest`: the same
scheme one level down, and again below), as :mod:`.sqlite_dense` does. A bucket reached through a
probe that flipped bits holds fingerprints already that many bits away, so its sub-buckets are probed
for the bits that remain (:meth:`TierBands.probe_within`): with k=2, a neighbour's split bucket is
read through 2 exact sub-probes, not 34.

A :class:`TierBands` is recorded in the index's meta (:meth:`TierBands.record`) and rebuilt from the
record at open, so a file always answers with the layout its rows were written with.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, cached_property
from itertools import combinations
from math import comb
from typing import Any

from ..fingerprint.simhash import band_layout
from .base import IndexParams, Tier

#: Probes per tier and query at most, when choosing the number of parts.
MAX_PROBES = 200
#: The same for the layout that splits a dense bucket (:attr:`TierBands.splits`): its rows are only
#: the crowded fingerprints', and it is probed once per split bucket a check meets.
MAX_SPLIT_PROBES = 40
SCHEME = "mih"


@cache
def _masks(width: int, radius: int) -> tuple[int, ...]:
    """The XOR masks of every value within ``radius`` bits of a ``width``-bit value (0 first)."""
    masks = [0]
    for r in range(1, radius + 1):
        masks += [sum(1 << i for i in bits) for bits in combinations(range(width), r)]
    return tuple(masks)


@dataclass(frozen=True)
class TierBands:
    """The multi-index layout of one tier: ``parts`` as ``(shift, width)``, probed within ``radius``."""

    bits: int
    distance: int  # the largest distance answered exactly
    parts: tuple[tuple[int, int], ...]
    radius: int

    @cached_property
    def flips(self) -> tuple[tuple[int, ...], ...]:
        """Per part, the XOR masks of every value within ``radius`` of a value (0 first)."""
        return tuple(_masks(width, self.radius) for _, width in self.parts)

    def store(self, fp: int) -> list[tuple[int, int]]:
        """``(part number, value)`` of each row an entry with fingerprint ``fp`` stores."""
        return [(n, (fp >> shift) & ((1 << width) - 1)) for n, (shift, width) in enumerate(self.parts)]

    def probe(self, fp: int) -> list[tuple[int, int]]:
        """``(part number, value)`` of every row a query for ``fp`` reads (its own values first)."""
        own = self.store(fp)
        return [(n, value ^ mask) for (n, value), masks in zip(own, self.flips, strict=True) for mask in masks]

    @property
    def probes(self) -> int:
        return sum(len(masks) for masks in self.flips)

    # -- dense buckets, split further --------------------------------------------------------------

    @cached_property
    def splits(self) -> tuple[TierBands | None, ...]:
        """Per part, the layout of the other bits (the rest) that splits a dense bucket of that part
        (None: the part is the whole fingerprint, nothing is left to split by)."""
        return tuple(None if width == self.bits else
                     tier_bands(self.bits - width, min(self.distance, self.bits - width - 1), MAX_SPLIT_PROBES)
                     for _, width in self.parts)

    def rest(self, fp: int, part: int) -> int:
        """The bits of ``fp`` outside ``part``, packed (low bits first)."""
        shift, width = self.parts[part]
        return (fp & ((1 << shift) - 1)) | ((fp >> (shift + width)) << shift)

    def probes_within(self, remaining: int) -> int:
        """Probes of :meth:`probe_within` for ``remaining`` bits."""
        if remaining < len(self.parts):
            return remaining + 1
        radius = remaining // len(self.parts)
        return sum(sum(comb(width, r) for r in range(radius + 1)) for _, width in self.parts)

    def probe_within(self, fp: int, remaining: int) -> list[tuple[int, int, int]]:
        """``(part, value, bits spent)`` of the rows to read for every fingerprint within ``remaining``
        bits of ``fp``: each part within ``remaining // parts`` bits, or, when fewer
        bits remain than there are parts, the first ``remaining + 1`` parts exactly (the differing
        bits miss one of them). What a split bucket reached with some bits spent needs."""
        if remaining < len(self.parts):
            return [(n, value, 0) for n, value in self.store(fp)[: remaining + 1]]
        radius = remaining // len(self.parts)
        flips = self.flips if radius == self.radius else tuple(_masks(width, radius) for _, width in self.parts)
        return [(n, value ^ mask, mask.bit_count()) for (n, value), masks in zip(self.store(fp), flips, strict=True)
                for mask in masks]

    def record(self) -> dict[str, Any]:
        """What the meta records (JSON)."""
        return {"scheme": SCHEME, "distance": self.distance, "radius": self.radius,
                "parts": [list(part) for part in self.parts]}


def probes_needed(bits: int, distance: int, parts: int) -> int:
    """Probes per query of ``parts`` parts for this distance."""
    radius = distance // parts
    return sum(sum(comb(width, r) for r in range(radius + 1)) for _, width in band_layout(bits, parts - 1))


def tier_bands(bits: int, distance: int, max_probes: int = MAX_PROBES) -> TierBands:
    """The layout answering distances up to ``distance``: the fewest parts within ``max_probes``."""
    if not 0 <= distance < bits:
        raise ValueError(f"cannot answer distance {distance} on {bits}-bit fingerprints")
    parts = next(m for m in range(1, distance + 2) if probes_needed(bits, distance, m) <= max_probes
                 or m == distance + 1)
    return TierBands(bits, distance, band_layout(bits, parts - 1), distance // parts)


def bands_for(params: IndexParams) -> dict[Tier, TierBands]:
    """The layout of each fingerprint tier for these parameters (``*_bands - 1`` is the distance)."""
    return {"title": tier_bands(params.bits, params.max_title_distance),
            "body": tier_bands(params.bits, params.max_body_distance)}


def records(params: IndexParams) -> dict[Tier, dict[str, Any]]:
    """The meta record of each tier's layout."""
    return {tier: layout.record() for tier, layout in bands_for(params).items()}
