"""The script calls' own protocol encoder sends what redis-py's ``pack_commands`` sends."""

from __future__ import annotations

import pytest

redis = pytest.importorskip("redis")

from scrapy_simhash.index.redis.client import _packed  # noqa: E402


@pytest.mark.parametrize("encoding", ["utf-8", "latin-1"])
def test_packed_is_pack_commands(encoding: str) -> None:
    connection = redis.Connection(encoding=encoding, encoding_errors="replace")
    commands = [
        ("FCALL", "simhash_x_check", "1", "p:{ns}:seq", '{"op":"check","title":"新闻 é"}', '{"base":"p:{ns}:"}'),
        ("FCALL_RO", "simhash_x_read", "1", "k", "", "x" * 70_000),
    ]
    assert _packed(connection, commands) == b"".join(connection.pack_commands(commands))
