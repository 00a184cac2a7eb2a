"""An entry's record in the Redis index: one string an entry, written once, binary (never pickle).

First seen (a double) and flags, then each field its flag says it has: the title and body fingerprints
(``bits / 8`` bytes each), the number signature (a count and 4 bytes a hash, or its text when it is not
made of 8-hex-digit hashes), the sampled sentence hashes (a count and 8 bytes each), the short body's
digest, a short body's character key (its length in 2 bytes), the URL (its length in 4 bytes) and the
title (to the end).
"""

from __future__ import annotations

import struct

from .. import rule
from ..base import Entry, Query
from ..meta import TITLE_CHARS

_HEX = frozenset("0123456789abcdef")


def is_hex(text: str, digits: int) -> bool:
    """Is ``text`` exactly ``digits`` lower-case hex digits (a signature's hash as the index packs it)?"""
    return len(text) == digits and _HEX.issuperset(text)

_HEAD = struct.Struct(">dB")
_T, _B, _NP, _NT, _SHORT, _URL, _TITLE, _CHARS = 1, 2, 4, 8, 16, 32, 64, 128


def encode_record(query: Query, seen_at: float, fp_bytes: int) -> bytes:
    """An entry's record: first seen and flags, then each field its flag says it has (fingerprints
    and hashes as bytes, texts as UTF-8 with their lengths)."""
    flags, tail = 0, []
    for flag, fp in ((_T, query.title_fp), (_B, query.body_fp)):
        if fp is not None:
            flags |= flag
            tail.append(fp.to_bytes(fp_bytes, "big"))
    numbers = query.numbers
    if numbers is not None:
        hashes = numbers.split()
        if " ".join(hashes) == numbers and len(hashes) < 256 and all(is_hex(h, 8) for h in hashes):
            flags |= _NP
            tail.append(bytes((len(hashes),)) + b"".join(bytes.fromhex(h) for h in hashes))
        else:
            flags |= _NT
            text = numbers.encode("utf-8", "surrogatepass")
            tail.append(struct.pack(">H", len(text)) + text)
    stored = sorted(set(query.sentences))[: rule.SENTENCES_STORED]
    for h in stored:
        if not is_hex(h, 16):
            raise ValueError(f"a sentence hash must be 16 hex digits, not {h!r}")
    tail.append(bytes((len(stored),)) + b"".join(bytes.fromhex(h) for h in stored))
    if query.short_body is not None:
        flags |= _SHORT
        text = query.short_body.encode("utf-8", "surrogatepass")[:255]
        tail.append(bytes((len(text),)) + text)
    if query.chars is not None:
        flags |= _CHARS
        text = query.chars.encode("utf-8", "surrogatepass")
        tail.append(struct.pack(">H", len(text)) + text)
    if query.url is not None:
        flags |= _URL
        text = query.url.encode("utf-8", "surrogatepass")
        tail.append(struct.pack(">I", len(text)) + text)
    if query.title is not None:
        flags |= _TITLE
        tail.append(query.title[:TITLE_CHARS].encode("utf-8", "surrogatepass"))
    return _HEAD.pack(seen_at, flags) + b"".join(tail)


def decode_record(entry_id: int, namespace: str, raw: bytes, fp_bytes: int) -> Entry:
    """The :class:`~..base.Entry` a record holds (a value that is not one: ValueError)."""
    try:
        first_seen, flags = _HEAD.unpack_from(raw)
        at = _HEAD.size
        fps: list[int | None] = []
        for flag in (_T, _B):
            if flags & flag:
                fps.append(int.from_bytes(raw[at : at + fp_bytes], "big"))
                at += fp_bytes
            else:
                fps.append(None)
        numbers = None
        if flags & _NP:
            n = raw[at]
            numbers = " ".join(raw[at + 1 + 4 * i : at + 5 + 4 * i].hex() for i in range(n))
            at += 1 + 4 * n
        elif flags & _NT:
            (n,) = struct.unpack_from(">H", raw, at)
            numbers = raw[at + 2 : at + 2 + n].decode("utf-8", "surrogatepass")
            at += 2 + n
        n = raw[at]
        sentences = tuple(raw[at + 1 + 8 * i : at + 9 + 8 * i].hex() for i in range(n))
        at += 1 + 8 * n
        short = chars = url = title = None
        if flags & _SHORT:
            n = raw[at]
            short = raw[at + 1 : at + 1 + n].decode("utf-8", "surrogatepass")
            at += 1 + n
        if flags & _CHARS:
            (n,) = struct.unpack_from(">H", raw, at)
            chars = raw[at + 2 : at + 2 + n].decode("utf-8", "surrogatepass")
            at += 2 + n
        if flags & _URL:
            (n,) = struct.unpack_from(">I", raw, at)
            url = raw[at + 4 : at + 4 + n].decode("utf-8", "surrogatepass")
            at += 4 + n
        if flags & _TITLE:
            title = raw[at:].decode("utf-8", "surrogatepass")
        elif at != len(raw):
            raise ValueError("trailing bytes")
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"entry #{entry_id}: unreadable record, not one of ours ({exc})") from exc
    return Entry(id=entry_id, namespace=namespace, url=url, title=title, first_seen=first_seen, title_fp=fps[0],
                 body_fp=fps[1], numbers=numbers, sentences=sentences, short_body=short, chars=chars)
