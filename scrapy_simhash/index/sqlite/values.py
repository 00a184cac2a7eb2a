"""How values are written into the SQLite index's columns, and read back: fingerprints (signed
64-bit integers, or big-endian BLOBs for 128 bits), the URL digest, whole-second times, hashes and
number signatures. The one place each mapping happens, shared by the tables, re-banding and
maintenance (:mod:`.tables` says what is stored where)."""

from __future__ import annotations

import math
from collections.abc import Callable
from hashlib import blake2b
from typing import Any

from ...fingerprint.simhash import from_signed64, to_signed64
from . import sentences as sqlite_sentences


def codec(bits: int) -> tuple[Callable[[int], Any], Callable[[Any], int]]:
    """How a fingerprint is stored: the one place the signed 64-bit mapping is applied."""
    if bits <= 64:
        return to_signed64, from_signed64
    nbytes = bits // 8

    def enc(fp: int) -> bytes:
        return fp.to_bytes(nbytes, "big")

    def dec(raw: Any) -> int:
        return int.from_bytes(raw, "big")

    return enc, dec


_M32 = (1 << 32) - 1


def url_key(ns: int, url: str | None) -> int | None:
    """``entry.url_key``: BLAKE2b of the URL (4 bytes) XOR the low 32 bits of the namespace's mask,
    signed (None: no URL). Only ``forget(url)`` looks it up, and it compares the row's ``ns`` and
    ``url`` too: a digest shared by chance (~n/2³² rows a lookup) costs a row read, never a removal."""
    if url is None:
        return None
    digest = int.from_bytes(blake2b(url.encode("utf-8", "surrogatepass"), digest_size=4).digest(), "big")
    return ((digest ^ sqlite_sentences.ns_mask(ns)) & _M32) - (1 << 31)


def whole_seconds(t: float) -> float:
    """``entry.first_seen`` for a time: its whole second (floor), which SQLite stores as a 4-byte
    integer in the row and in the fingerprint and time indexes where ``time.time()`` took 8 (read
    back as a float). Entries first seen in one second are told apart by id (commit order)."""
    return float(math.floor(t)) if math.isfinite(t) else t


def hash_int(digest: str) -> int:
    """A 16-hex-digit hash (a short body's digest) as the signed 64-bit integer stored."""
    return to_signed64(int(digest, 16))


def hash_hex(value: int) -> str:
    return f"{from_signed64(value):016x}"


def unpack_hashes(blob: bytes | None, size: int) -> tuple[str, ...]:
    return () if not blob else tuple(blob[i : i + size].hex() for i in range(0, len(blob), size))


def pack_numbers(signature: str | None) -> bytes | None:
    """A number signature (8-hex-digit hashes, space-separated) as a BLOB of 4-byte hashes."""
    return None if signature is None else bytes.fromhex(signature)  # fromhex skips the spaces between hashes


def unpack_numbers(blob: bytes | None) -> str | None:
    return None if blob is None else " ".join(unpack_hashes(blob, 4))
