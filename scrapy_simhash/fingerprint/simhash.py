"""Features → fingerprint, Hamming distance, and the band layout of the index.

A simhash fingerprint is the sign of a weighted bit vote: every feature is hashed to ``bits`` bits
with a hash that is the same in every process and on every platform (BLAKE2b, never Python's
``hash()``, which is salted per process), each bit adds the feature's weight when set and
subtracts it when clear, and bits whose sum is positive are 1. Texts that share most of their
heavy features share most of their bits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from hashlib import blake2b
from itertools import repeat
from operator import add, mul
from typing import Any

from .._compiled import _vocabulary_c

# the vote in C, where the optional extension is built (setup.py) and wanted
_vote_compiled: Callable[[Iterable[tuple[str, float]], int], int] | None = (
    None if _vocabulary_c is None else _vocabulary_c.vote
)

_UNLOADED: Any = object()
#: numpy (``pip install scrapy-simhash[fast]``) for the vote where the extension is not built;
#: imported on first use, so that a process with the compiled vote never pays for its import.
#: None: not installed.
_np: Any = _UNLOADED


def _numpy() -> Any:
    global _np
    if _np is _UNLOADED:
        try:
            import numpy as loaded
        except ImportError:  # pragma: no cover - exercised where numpy is absent
            loaded = None  # type: ignore[assignment]
        _np = loaded
    return _np

SUPPORTED_BITS = (32, 64, 128)

FeatureHash = Callable[[str], int]


def _check_bits(bits: int) -> None:
    if bits not in SUPPORTED_BITS:
        raise ValueError(f"fingerprint size must be one of {SUPPORTED_BITS} bits, not {bits!r}")


@lru_cache(maxsize=1 << 16)
def _blake2b_hash(feature: str, nbytes: int) -> int:
    return int.from_bytes(blake2b(feature.encode("utf-8"), digest_size=nbytes).digest(), "big")


#: ``_BYTE_SIGNS[b][i]`` is +1.0 when bit i of byte b is set, else -1.0.
_BYTE_SIGNS = tuple(tuple(1.0 if (b >> i) & 1 else -1.0 for i in range(8)) for b in range(256))


@lru_cache(maxsize=1 << 14)
def _blake2b_signs(feature: str, nbytes: int) -> tuple[float, ...]:
    """±1.0 per bit (bit 0 first) of the feature's BLAKE2b hash: the vote of a unit weight."""
    digest = blake2b(feature.encode("utf-8"), digest_size=nbytes).digest()
    signs: tuple[float, ...] = ()
    for byte in reversed(digest):  # the hash is read big-endian: the last byte holds bits 0-7
        signs += _BYTE_SIGNS[byte]
    return signs


@lru_cache(maxsize=1 << 14)
def _blake2b_digest(feature: str, nbytes: int) -> bytes:
    return blake2b(feature.encode("utf-8"), digest_size=nbytes).digest()


#: The vote uses numpy from this many features on, the Python loop below it: numpy's set-up is paid
#: once a call, the loop's cost grows with every feature (docs/decisions/0013-numpy-vote.md).
NUMPY_MIN_FEATURES = 4


def feature_hash(feature: str, bits: int = 64) -> int:
    """Stable ``bits``-bit hash of one feature (BLAKE2b of its UTF-8 bytes)."""
    _check_bits(bits)
    return _blake2b_hash(feature, bits // 8)


def simhash(
    features: Mapping[str, float] | Iterable[tuple[str, float]],
    bits: int = 64,
    hash_func: FeatureHash | None = None,
) -> int:
    """Fingerprint of weighted features: bit i is 1 when the weights of features whose hash has
    bit i set outweigh those whose hash has it clear. No features (or all weights zero) → 0.

    ``hash_func`` replaces the feature hash (tests inject the 6-bit hashes of worked examples).
    """
    if hash_func is None:
        _check_bits(bits)
    items = features.items() if isinstance(features, Mapping) else features
    if hash_func is None and _vote_compiled is not None:
        return _vote_compiled(items, bits)
    if hash_func is None and _numpy() is not None:
        pairs = [(f, w) for f, w in items if w]
        if len(pairs) >= NUMPY_MIN_FEATURES:
            return _vote_numpy(pairs, bits)
        items = pairs
    return _vote_python(items, bits, hash_func)


def _vote_python(
    items: Iterable[tuple[str, float]], bits: int, hash_func: FeatureHash | None = None
) -> int:
    """The bit vote in pure Python: the reference (and the fallback where numpy is absent)."""
    nbytes = bits // 8
    votes = [0.0] * bits
    for feature, weight in items:
        if not weight:
            continue
        if hash_func is None:
            # Same additions in the same order as the loop below (w * ±1.0 is exact), done in C.
            votes = list(map(add, votes, map(mul, _blake2b_signs(feature, nbytes), repeat(weight))))
            continue
        h = hash_func(feature)
        for i in range(bits):
            votes[i] += weight if (h >> i) & 1 else -weight
    fingerprint = 0
    for i, vote in enumerate(votes):
        if vote > 0:
            fingerprint |= 1 << i
    return fingerprint


def _vote_numpy(pairs: list[tuple[str, float]], bits: int) -> int:
    """The bit vote of :func:`_vote_python` with numpy, bit for bit the same fingerprint.

    Each ``±weight`` is exact, and each bit's sum must add them in the Python loop's order (pairwise
    or BLAS summation could round a near-zero sum to the other sign). numpy sums pairwise only along
    the fast axis in memory (``numpy.sum``'s notes); along axis 0 of a C-contiguous (features ×
    bits) array it adds the rows one after another, as the loop does.
    """
    _numpy()
    assert _np is not None
    nbytes = bits // 8
    digests = b"".join([_blake2b_digest(f, nbytes) for f, _ in pairs])
    # Bytes are big-endian: reversed per feature, unpacked little-endian, column i is bit i.
    raw = _np.frombuffer(digests, dtype=_np.uint8).reshape(len(pairs), nbytes)[:, ::-1]
    set_bits = _np.unpackbits(raw, axis=1, bitorder="little").astype(bool)
    weights = _np.array([w for _, w in pairs], dtype=_np.float64)[:, None]
    votes = _np.add.reduce(_np.ascontiguousarray(_np.where(set_bits, weights, -weights)), axis=0)
    packed = _np.packbits(votes > 0, bitorder="little")[::-1]
    return int.from_bytes(packed.tobytes(), "big")


def hamming_distance(a: int, b: int) -> int:
    """Number of bits in which two fingerprints differ."""
    return (a ^ b).bit_count()


def band_layout(bits: int, max_distance: int) -> tuple[tuple[int, int], ...]:
    """``(shift, width)`` of the ``max_distance + 1`` bands a fingerprint is cut into.

    Pigeonhole: two fingerprints within ``max_distance`` bits differ in at most that many bands,
    so they agree exactly on at least one of ``max_distance + 1`` bands. Widths differ by at most
    one bit (64 bits, k=3 → 16/16/16/16; k=2 → 22/21/21).
    """
    nbands = max_distance + 1
    if not 1 <= nbands <= bits:
        raise ValueError(f"cannot cut {bits} bits into {nbands} bands")
    base, extra = divmod(bits, nbands)
    layout = []
    shift = 0
    for i in range(nbands):
        width = base + (1 if i < extra else 0)
        layout.append((shift, width))
        shift += width
    return tuple(layout)


def split_bands(fingerprint: int, layout: tuple[tuple[int, int], ...]) -> list[int]:
    """The value of each band of ``fingerprint`` for a layout from :func:`band_layout`."""
    return [(fingerprint >> shift) & ((1 << width) - 1) for shift, width in layout]


def to_signed64(value: int) -> int:
    """Unsigned 64-bit fingerprint → the signed integer SQLite can store (two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def from_signed64(value: int) -> int:
    """Inverse of :func:`to_signed64`."""
    return value + (1 << 64) if value < 0 else value
