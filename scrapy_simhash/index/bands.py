"""Which band keys an entry stores and which a query probes: multi-index hashing, for every backend.

A fingerprint of ``bits`` bits is cut into ``m`` parts (:func:`~scrapy_simhash.fingerprint.simhash.band_layout`,
widths differing by at most one bit). Two fingerprints within ``k`` bits differ in at most
``k // m`` bits in at least one part (were every part ``k // m + 1`` or more bits apart, they would
be ``m * (k // m + 1) > k`` apart), so an entry stores one row per part (its value) and a query
probes, in each part, every value within ``radius = k // m`` bits of its own. Every entry within
``k`` is found; the rest of the candidates are verified by exact Hamming distance.

``m`` is the fewest parts whose probes stay within the backend's budget (its :class:`Costs`; the
parts they give are recorded in the index's meta and verified at open). SQLite reads a probe as one
more key of a batched ``IN`` list, so wide parts pay: they make random candidates vanish (64 bits,
k=2 or 3: two 32-bit parts probed with their one-bit neighbours, 66 probes; ~66·n/2³² random
candidates, 1.5 at 100M entries, where the k+1 pigeonhole bands of 16 bits read ~4·n/2¹⁶, 6,100 at
100M) and fewer rows are stored per entry (2 instead of 4). Redis reads a probe as one more field of
a script and one more watched key, which cost more than the few random candidates of pigeonhole
parts at the sizes it serves, so it takes ``k + 1`` parts probed exactly (``radius = 0``).
``benchmarks/band_schemes.py`` compares the alternatives.

Fingerprints crowded around one centre still share part values, so a bucket can hold thousands of
them, every one a candidate of a check that probes it. A bucket that reaches :func:`split_at` is
*split*: it keeps a marker and its fingerprints move to sub-buckets, one per part of the layout of
their other bits (:attr:`TierBands.splits`, :meth:`TierBands.rest`: the same scheme one level down),
and a sub-bucket that grows dense splits once more (:data:`MAX_DEPTH` levels, :func:`plan`). Every
backend stores split buckets its own way but splits them here: :func:`children` says which
sub-buckets a fingerprint goes to, :func:`sub_probes` which ones a query reads. A bucket reached
through a probe that flipped ``s`` bits holds fingerprints ``s`` bits away in that part, so their
other bits must be within ``k - s`` (:meth:`TierBands.probe_within`): every fingerprint within ``k``
is still found, and a neighbour's split bucket costs few sub-probes (k=2: 2 exact ones, not 34). A
split bucket stays split even when its entries go.

A :class:`TierBands` is recorded in the index's meta (:meth:`TierBands.record`) and rebuilt from the
record at open, so a file always answers with the layout its rows were written with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache, cached_property
from itertools import combinations
from math import comb
from typing import Any

from ..fingerprint.simhash import band_layout
from .base import IndexParams, Tier

SCHEME = "mih"
#: Levels of sub-buckets below a bucket (``docs/decisions/0100-band-split-thresholds.md``).
MAX_DEPTH = 2
#: A bucket of fewer fingerprints is never split: a marker and a row per sub-part each cost more.
MIN_SPLIT = 4


@dataclass(frozen=True)
class Costs:
    """What reading costs on one backend, which chooses its layout: the number of parts (the fewest
    within ``max_probes`` probes a tier) and when a crowded bucket splits (:func:`split_at`). Costs
    are counted in stored fingerprints read (one read, decoded and compared is 1)."""

    #: Probes per tier and query at most, when choosing the number of parts.
    max_probes: int
    #: The same for the layout that splits a dense bucket (:attr:`TierBands.splits`): its rows are only
    #: the crowded fingerprints', and it is probed once per split bucket a check meets.
    max_split_probes: int
    #: One sub-probe of a split bucket.
    probe_rows: float
    #: One more level of sub-buckets read (a statement, a round trip).
    level_rows: float


#: SQLite reads a probe as one more key of a batched ``IN`` list
#: (``docs/decisions/0100-band-split-thresholds.md``).
SQLITE = Costs(max_probes=200, max_split_probes=40, probe_rows=0.5, level_rows=0.0)
#: Redis reads a probe as one more field of the read script and one more watched key, and a level of
#: sub-buckets as one more round trip: pigeonhole parts, buckets split late
#: (``docs/decisions/0103-redis-band-costs.md``).
REDIS = Costs(max_probes=16, max_split_probes=16, probe_rows=16.0, level_rows=100.0)
#: Sub-parts are numbered by one code per (path, part) below each top part, in one byte.
PATH_BITS = 8


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
    costs: Costs = SQLITE  # the backend's, which chose the parts and splits crowded buckets

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
                     tier_bands(self.bits - width, min(self.distance, self.bits - width - 1),
                                self.costs, split=True)
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


def tier_bands(bits: int, distance: int, costs: Costs = SQLITE, *, split: bool = False) -> TierBands:
    """The layout answering distances up to ``distance`` on a backend of these ``costs``: the fewest
    parts within its probes a tier (``split``: within those of a split bucket's layout)."""
    if not 0 <= distance < bits:
        raise ValueError(f"cannot answer distance {distance} on {bits}-bit fingerprints")
    most = costs.max_split_probes if split else costs.max_probes
    parts = next(m for m in range(1, distance + 2) if probes_needed(bits, distance, m) <= most
                 or m == distance + 1)
    return TierBands(bits, distance, band_layout(bits, parts - 1), distance // parts, costs)


def bands_for(params: IndexParams, costs: Costs = SQLITE) -> dict[Tier, TierBands]:
    """The layout of each fingerprint tier for these parameters (``*_bands - 1`` is the distance) on
    a backend of these ``costs``."""
    return {"title": tier_bands(params.bits, params.max_title_distance, costs),
            "body": tier_bands(params.bits, params.max_body_distance, costs)}


def records(params: IndexParams, costs: Costs = SQLITE) -> dict[Tier, dict[str, Any]]:
    """The meta record of each tier's layout on a backend of these ``costs``."""
    return {tier: layout.record() for tier, layout in bands_for(params, costs).items()}


# -- crowded buckets, split ------------------------------------------------------------------------

Path = tuple[int, ...]


@dataclass(frozen=True)
class Split:
    """How the buckets of one path split: the layout of their fingerprints' other bits, the code of
    each sub-part (distinct over the whole plan of a tier), and the depth of the sub-buckets (1: right
    below a top bucket)."""

    layout: TierBands
    codes: tuple[int, ...]
    depth: int


def plan(top: TierBands) -> dict[Path, Split]:
    """Per path of a splittable bucket (its part numbers, top part first), its :class:`Split`; a path
    without one is never split."""
    known = _PLANS.get(id(top))  # by identity: hashing the layout costs more than the rest of a lookup
    if known is None or known[0] is not top:
        known = _PLANS[id(top)] = (top, _plan(top))
    return known[1]


_PLANS: dict[int, tuple[TierBands, dict[Path, Split]]] = {}


@cache
def _plan(top: TierBands) -> dict[Path, Split]:
    out: dict[Path, Split] = {}
    code = 0

    def walk(path: Path, layout: TierBands, depth: int) -> None:
        nonlocal code
        sub = layout.splits[path[-1]]
        if sub is None or depth > MAX_DEPTH or code + len(sub.parts) > 1 << PATH_BITS:
            return
        out[path] = Split(sub, tuple(range(code, code + len(sub.parts))), depth)
        code += len(sub.parts)
        for j in range(len(sub.parts)):
            walk((*path, j), sub, depth + 1)

    for n in range(len(top.parts)):
        walk((n,), top, 1)
    return out


def split_at(top: TierBands, split: Split) -> int:
    """Fingerprints at which a bucket splits: where reading it costs more than a visit of its
    sub-buckets through a neighbour (one bit spent at each level above): one more level read and
    its sub-probes, at the backend's :class:`Costs`."""
    remaining = max(top.distance - split.depth, 0)
    costs = top.costs
    return max(MIN_SPLIT, math.ceil(costs.level_rows + costs.probe_rows * split.layout.probes_within(remaining)))


def rest_at(top: TierBands, path: Path, fp: int) -> int:
    """The bits of ``fp`` a bucket of ``path`` splits by (what its sub-buckets are made of)."""
    rest, layout = top.rest(fp, path[0]), top
    steps = plan(top)
    for i in range(1, len(path)):
        layout = steps[path[:i]].layout
        rest = layout.rest(rest, path[i])
    return rest


def children(top: TierBands, path: Path, rest: int) -> list[tuple[int, int, Path, int]]:
    """Where a fingerprint of a split bucket of ``path`` goes (``rest``: its :func:`rest_at`): per
    sub-part, ``(code, value, sub-path, the sub-bucket's rest)`` (it goes to every one)."""
    split = plan(top)[path]
    layout = split.layout
    return [(split.codes[j], value, (*path, j), layout.rest(rest, j)) for j, value in layout.store(rest)]


def sub_probes(top: TierBands, path: Path, rest: int, remaining: int) -> list[tuple[int, int, Path, int, int]]:
    """The sub-buckets to read below a split bucket of ``path`` for a query whose ``rest`` is that and
    which has ``remaining`` bits left: ``(code, value, sub-path, the query's rest there, bits left there)``.
    Empty when ``path`` is not split by the plan (a marker that is not ours)."""
    split = plan(top).get(path)
    if split is None:
        return []
    layout = split.layout
    return [(split.codes[j], value, (*path, j), layout.rest(rest, j), remaining - spent)
            for j, value, spent in layout.probe_within(rest, remaining)]


@cache
def probe_spent(top: TierBands) -> tuple[tuple[int, int], ...]:
    """Per probe of :meth:`TierBands.probe` (in its order), its part and the bits it flipped."""
    return tuple((n, mask.bit_count()) for n, masks in enumerate(top.flips) for mask in masks)
