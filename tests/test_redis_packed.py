"""The index's own protocol: its encoder sends what redis-py's ``pack_commands`` sends, and its reply
parsers (pure Python, or hiredis when installed) read every kind of reply the same."""

from __future__ import annotations

import pytest

redis = pytest.importorskip("redis")

from scrapy_simhash.index.redis.client import packed  # noqa: E402


def test_packed_is_pack_commands() -> None:
    connection = redis.Connection(encoding="utf-8")
    commands = [
        ("EVALSHA", "0" * 40, 2, b"p:{ns}:b0t0:ab", "p:{ns}:ht:1f", 1, b"\x00\xff", 2, "新闻 é", b""),
        ("HSET", b"p:{ns}:d:https://x/\xe6", "decided_at", 1.5, "distance", 3, "x" * 70_000),
        ("MULTI",),
    ]
    assert packed(commands) == b"".join(connection.pack_commands(commands))


def _replies(url: str) -> list[object]:
    """What the index's connection answers to commands of every reply kind, errors and a
    transaction included (one with an error queued, whose replies cannot be passed over at once)."""
    from scrapy_simhash.index import open_index

    with open_index(url) as ix:
        base = ix._base.encode() + b"scratch:"  # keys of this test's own, not the namespace's counters
        out = ix._server.link().send([
            ("DEL", base + b"s", base + b"h", base + b"n"),
            ("SET", base + b"s", b"\x00\r\n$-1\r\n"), ("GET", base + b"s"), ("GET", base + b"none"),
            ("HSET", base + b"h", b"f", b"v"), ("HMGET", base + b"h", b"f", b"g"), ("INCRBY", base + b"n", 5),
            ("EVALSHA", "0" * 40, 0), ("NOSUCHCOMMAND",), ("GET", base + b"h"),
            ("MULTI",), ("INCRBY", base + b"n", 1), ("GET", base + b"s"), ("EXEC",),
            ("MULTI",), ("INCRBY", base + b"n", 1), ("HSET", base + b"s", b"f", b"v"), ("EXEC",),
            ("MULTI",), ("INCRBY", base + b"n"), ("EXEC",),
        ])
    return [(type(r).__name__, str(r)) if isinstance(r, Exception) else
            [(type(x).__name__, str(x)) if isinstance(x, Exception) else x for x in r] if isinstance(r, list) else r
            for r in out[1:]]


def test_both_reply_parsers_read_the_same_replies(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pure-Python parser (and its pass over a transaction's QUEUED replies) reads what the
    server sent; hiredis, when installed, reads the same."""
    from scrapy_simhash.index.redis import client

    installed = client.hiredis
    monkeypatch.setattr(client, "hiredis", None)
    pure = _replies(url)
    assert pure[:9] == [b"OK", b"\x00\r\n$-1\r\n", None, 1, [b"v", None], 5,
                        ("NoScriptError", pure[6][1]), ("ResponseError", pure[7][1]), ("ResponseError", pure[8][1])]
    assert pure[6][1].startswith("NOSCRIPT") and "WRONGTYPE" in pure[8][1]
    assert pure[9:13] == [b"OK", b"QUEUED", b"QUEUED", [6, b"\x00\r\n$-1\r\n"]]
    assert pure[13:17] == [b"OK", b"QUEUED", b"QUEUED", [7, ("ResponseError", pure[16][1][1])]]
    assert "WRONGTYPE" in pure[16][1][1]  # an error inside EXEC's reply, the others still read
    assert pure[17] == b"OK" and pure[18][0] == pure[19][0] == "ResponseError" and "EXECABORT" in pure[19][1]
    if installed is None:
        pytest.skip("hiredis is not installed")
    monkeypatch.setattr(client, "hiredis", installed)
    assert _replies(url) == pure


def test_hiredis_packs_what_packed_packs() -> None:
    from scrapy_simhash.index.redis import client

    if client.hiredis is None:
        pytest.skip("hiredis is not installed")
    commands = [("EVALSHA", "0" * 40, 2, b"p:{ns}:b0t0:ab", 1, b"\x00\xff", "新闻 é", b""), ("INCRBY", b"k", 7)]
    assert b"".join(map(client.hiredis.pack_command, commands)) == packed(commands)
