"""The index's own protocol encoder sends what redis-py's ``pack_commands`` sends."""

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
