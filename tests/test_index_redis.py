"""What only the Redis band index has: URLs, passwords, client parameters and the scrapy-redis
settings fallback, one round trip per check-and-add, the script cache, connection failures at open
and mid-crawl, a self-description that is refused when foreign, and four real processes feeding
the same 200 stories. Against real servers: the shared test server (``SIMHASH_TEST_REDIS_URL``)
and, where a test stops, restarts or locks one, a private ``redis-server`` on a free port.

Behaviours both backends share are in ``test_index_protocol.py``; the layout's own in ``test_redis_layout.py``.
"""

from __future__ import annotations

import collections
import itertools
import json
import pickle
import random
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from scrapy_simhash.engine import Deduplicator
from scrapy_simhash.fingerprint.simhash import hamming_distance
from scrapy_simhash.index import IndexOpenError, IndexParams, IndexWriteError, Query, SimhashIndexError, open_index
from scrapy_simhash.index.owners import new_owner
from scrapy_simhash.index.redis.index import FORMAT, SCHEMA_VERSION, redacted
from scrapy_simhash.index.redis.records import decode_record
from tests.conftest import STORY_EN, STORY_ZH, crawl_settings, repost_with_suffix, run_crawl
from tests.redis_server import RedisProcess, free_port
from tests.test_index_protocol import REPO, child_env, raw_redis, redis_server_url, with_prefix


def q(title_fp: int | None, body_fp: int | None, /, **kw: Any) -> Query:
    return Query(title_fp=title_fp, body_fp=body_fp, title_k=2, body_k=3, **kw)


@pytest.fixture
def private_server(tmp_path: Path) -> Iterator[RedisProcess]:
    server = RedisProcess(tmp_path)
    yield server
    server.stop()




def poison_band(raw: Any, ix: Any, title_fp: int) -> None:
    """Make ``title_fp`` a candidate of itself whose holders are unreadable: filed in its band
    buckets, with a list of holders of a length no list of ours has."""
    k = ix._k
    for n, value in k.tiers["title"].store(title_fp):
        raw.hset(*k.bucket("title", n, value), title_fp.to_bytes(8, "big"))
    raw.hset(*k.holders("title", title_fp), b"not holders")


def snapshot(server_url: str, prefix: str) -> list[tuple[str, Any]]:
    client = raw_redis(server_url, decode=False)
    keys = sorted(client.scan_iter(match=f"{prefix}:*".encode(), count=1000))
    state = [(k.decode(), client.dump(k)) for k in keys]
    client.close()
    return state


# -- opening: URLs, passwords, parameters, failures -------------------------------------------------


def test_unreachable_server_is_a_clear_open_error_without_the_password() -> None:
    port = free_port()  # nothing listens there
    start = time.monotonic()
    with pytest.raises(IndexOpenError) as err:
        open_index(f"redis://:s3cret@127.0.0.1:{port}/0")
    message = str(err.value)
    assert f"redis://:***@127.0.0.1:{port}/0" in message and "s3cret" not in message
    assert "cannot open Redis index" in message and "onnect" in message
    with pytest.raises(IndexOpenError, match=r"rediss://cache\.example\.invalid:6380/1"):
        open_index("rediss://cache.example.invalid:6380/1")
    assert time.monotonic() - start < 30


def test_missing_redis_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # "import redis" now raises ImportError
    with pytest.raises(IndexOpenError, match=r"scrapy-simhash\[redis\]") as err:
        open_index("redis://:s3cret@127.0.0.1:6379/0")
    assert "s3cret" not in str(err.value)


def test_redacted_hides_passwords_only() -> None:
    assert redacted("redis://user:pw@h:1/0?prefix=x") == "redis://user:***@h:1/0?prefix=x"
    assert redacted("rediss://:pw@h/2") == "rediss://:***@h/2"
    assert redacted("redis://h:6379/0") == "redis://h:6379/0"
    assert "pw" not in redacted("redis://h/0?password=pw&db=1")


def test_password_url(tmp_path: Path) -> None:
    server = RedisProcess(tmp_path, password="s3cret-Pa55")
    try:
        with open_index(server.url) as ix:
            assert ix.check_and_add(q(1, 2, url="u")).match is None
            shown = [ix.location, repr(ix), json.dumps(ix.stats())]
            assert all("s3cret-Pa55" not in text and ":***@" in text for text in shown)
        for wrong in (server.url.replace("s3cret-Pa55", "wrong-guess"), f"redis://127.0.0.1:{server.port}/0"):
            with pytest.raises(IndexOpenError, match=f"127.0.0.1:{server.port}") as err:
                open_index(wrong)
            assert "wrong-guess" not in str(err.value) and "s3cret" not in str(err.value)
        with open_index(server.url) as ix:  # the data is behind the password, not lost
            assert ix.count() == 1
    finally:
        server.stop()


def test_rediss_url_with_tls(tmp_path: Path) -> None:
    """rediss:// to a TLS-only server: the CA given through redis_params verifies the server's
    certificate; without it, or over plain redis://, opening fails clearly."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed: cannot make a certificate for the TLS server")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    server = RedisProcess(tmp_path, tls=(cert, key))
    try:
        with open_index(server.url, redis_params=server.client_params) as ix:
            assert ix.location.startswith("rediss://127.0.0.1:")
            assert ix.check_and_add(q(61, 62, url="a")).match is None
            assert ix.check_and_add(q(61, 62, url="b")).match.entry.url == "a"  # type: ignore[union-attr]
        with pytest.raises(IndexOpenError, match="certificate verify failed"):
            open_index(server.url)  # the default: verify against the system's CAs
        with pytest.raises(IndexOpenError, match=f"127.0.0.1:{server.port}"):
            open_index(server.url.replace("rediss://", "redis://"), busy_timeout=2.0)
    finally:
        server.stop()


def test_redis_params_pass_through(url: str) -> None:
    name = f"simhash-{uuid.uuid4().hex[:8]}"
    with open_index(url, redis_params={"client_name": name, "socket_timeout": 7.5}, busy_timeout=2.0) as ix:
        ix.check_and_add(q(3, 4))
        pool_kwargs = ix._server.client.connection_pool.connection_kwargs
        assert pool_kwargs["socket_timeout"] == 7.5  # the params win over busy_timeout
        admin = raw_redis(url.split("?")[0])
        assert name in {c.get("name") for c in admin.client_list()}
        admin.close()
    with open_index(url, busy_timeout=2.0) as ix:
        assert ix._server.client.connection_pool.connection_kwargs["socket_timeout"] == 2.0


def test_prefixes_and_databases_are_separate_indexes(url: str) -> None:
    server, prefix = url.split("?")[0], url.split("prefix=")[1]
    db1 = server[: server.rindex("/")] + "/1"
    with open_index(url) as a, open_index(f"{url}-other") as b, open_index(with_prefix(db1, prefix)) as c:
        try:
            for ix in (a, b, c):  # the same story is new in each
                assert ix.check_and_add(q(42, 43)).match is None
            assert a.check_and_add(q(42, 43)).match is not None
            assert (a.count(), b.count(), c.count()) == (1, 1, 1)
            assert a.reset() == 1 and (b.count(), c.count()) == (1, 1)
        finally:
            other_db = raw_redis(db1)
            other_db.delete(*other_db.scan_iter(match=f"{prefix}*"))
            other_db.close()
    with pytest.raises(IndexOpenError, match="prefix"):
        open_index(with_prefix(server, "{bad}"))


# -- self-description, no pickle --------------------------------------------------------------------


def test_meta_is_a_json_string_and_every_key_is_one_the_layout_documents(url: str) -> None:
    """Every key is one of store.py's, of its type, and every value is in its documented form:
    JSON or plain text, entry records that decode, packed lists of whole ids, holders or
    fingerprints — nothing else (never a pickle)."""
    server, prefix = url.split("?")[0], url.split("prefix=")[1]
    with open_index(url) as ix:
        sentences = tuple(f"{n:016x}" for n in range(1, 20))
        ix.check_and_add(q(0xABC, 0xDEF, url="https://x/1", title="标题", seen_at=1.5, numbers="0000000a",
                           sentences=sentences, request_id="r1"))
        ix.check_and_add(q(0xABC, None, url="https://x/2", seen_at=2.5))
        rng = random.Random(3)
        for n in range(40):  # one sentence held by 40 entries: boilerplate, its ids in a key of its own
            ix.check_and_add(q(None, rng.getrandbits(64), sentences=(f"{7:016x}",), seen_at=3.0 + n))
        ix.check_and_add(q(0x77, 0x88, owner=new_owner()))
    client = raw_redis(server)
    meta = json.loads(client.get(f"{prefix}:meta"))
    assert (meta["format"], meta["schema_version"], meta["backend"]) == (FORMAT, SCHEMA_VERSION, "redis")
    assert meta["params"] == ix.params.as_dict()
    assert meta["body_layout"] == {"scheme": "mih", "distance": 3, "radius": 0,
                                   "parts": [[0, 16], [16, 16], [32, 16], [48, 16]]}
    binary = raw_redis(server, decode=False)
    base = f"{prefix}:{{default}}:"
    kinds: collections.Counter[str] = collections.Counter()
    for raw_key in binary.scan_iter(match=f"{prefix}:*".encode()):
        key, kind = raw_key.decode(), binary.type(raw_key).decode()
        name = key[len(base):] if key.startswith(base) else key[len(prefix) + 1:]
        head = re.match(r"b\d+[tb]\d+|h[tb]|[a-zA-Z]+", name).group()  # type: ignore[union-attr]
        head = "b" if head[0] == "b" and head[1:2].isdigit() else head
        kinds[head] += 1
        expected = {"meta": "string", "namespaces": "hash", "seq": "string", "n": "string", "nbands": "string",
                    "e": "string", "t": "string", "hours": "zset", "r": "hash", "pending": "hash", "alive": "string",
                    "d": "hash", "decided": "zset", "b": "hash", "ht": "hash", "hb": "hash", "s": "hash",
                    "S": "string", "u": "hash"}
        assert expected.get(head) == kind, key
        if head in ("meta", "seq", "n", "nbands", "alive", "namespaces", "hours", "pending", "r"):
            values = {"string": lambda k: [binary.get(k)], "hash": lambda k: list(binary.hgetall(k).values()),
                      "zset": lambda k: binary.zrange(k, 0, -1)}[kind]
            for value in values(raw_key):
                value.decode("utf-8")  # plain text
        elif head == "e":
            decode_record(int(name[2:]), "default", binary.get(raw_key), 8)
        elif head == "b":  # fingerprints, or the mark of a split bucket
            assert all(len(v) % 8 == 0 or v == b"\0" for v in binary.hvals(raw_key))
        elif head in ("ht", "hb"):  # (first seen, id) each
            assert all(len(v) % 12 == 0 and v for v in binary.hvals(raw_key))
        elif head in ("s", "u"):  # ids, or the mark of a boilerplate sentence
            assert all((len(v) % 4 == 0 and v) or v == b"\0" for v in binary.hvals(raw_key))
        elif head in ("t", "S"):
            assert len(binary.get(raw_key)) % 4 == 0
    assert {"e", "b", "ht", "hb", "s", "S", "u", "t", "r", "pending"} <= set(kinds)
    client.close()
    binary.close()


class _Boom:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # unpickling this would create the marker file
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("version", [1, 7])
def test_an_index_of_the_previous_layout_is_refused_untouched_saying_what_to_do(url: str, version: int) -> None:
    """A key space of another format version (a development build's, made before this release's
    one format) is refused at open, read-only too, with a message naming both versions and the
    way out; nothing is written."""
    server, prefix = url.split("?")[0], url.split("prefix=")[1]
    client = raw_redis(server)
    old = {"backend": "redis", "format": FORMAT, "schema_version": version, "params": IndexParams().as_dict(),
           "fingerprint_storage": "hex" if version == 1 else "binary"}
    client.set(f"{prefix}:meta", json.dumps(old))
    client.hset(f"{prefix}:{{default}}:e:000000000000001", mapping={"s": "1.5", "t": "0" * 16})
    client.set(f"{prefix}:{{default}}:meta", "1")
    before = snapshot(server, prefix)
    for kwargs in ({}, {"readonly": True}):
        with pytest.raises(IndexOpenError, match=rf"schema version {version}; this scrapy-simhash reads version "
                           rf"{SCHEMA_VERSION}: it was made by an older scrapy-simhash.*delete it or use a new "
                           r"index.*\?prefix=.*redis-cli "
                           rf"--scan --pattern '{prefix}:\*' \| xargs redis-cli unlink"):
            open_index(url, **kwargs)
    assert snapshot(server, prefix) == before
    client.close()


def test_a_server_older_than_the_index_needs_is_refused_at_open(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Redis server older than 6.0 is refused at open with what to do, instead of an index whose
    every check-and-add fails; nothing is written."""
    import redis

    server, prefix = url.split("?")[0], url.split("prefix=")[1]
    info = redis.Redis.info

    def old_server(self: Any, section: Any = None, *args: Any) -> Any:
        answer = info(self, section, *args)
        return {**answer, "redis_version": "5.0.14"} if section == "server" else answer

    monkeypatch.setattr(redis.Redis, "info", old_server)
    before = snapshot(server, prefix)
    with pytest.raises(IndexOpenError, match=r"Redis 5\.0\.14; the index needs Redis 6\.0\.0 or newer"):
        open_index(url)
    assert snapshot(server, prefix) == before
    monkeypatch.setattr(redis.Redis, "info", info)
    open_index(url).close()


def test_foreign_or_hostile_meta_is_refused_untouched(url: str, tmp_path: Path) -> None:
    server, prefix = url.split("?")[0], url.split("prefix=")[1]
    client, binary = raw_redis(server), raw_redis(server, decode=False)
    marker = tmp_path / "pwned"
    cases = [
        (lambda: binary.set(f"{prefix}:meta", pickle.dumps(_Boom(str(marker)))), "unreadable"),
        (lambda: client.set(f"{prefix}:meta", json.dumps({"format": "someone-else"})), "not a scrapy-simhash index"),
        (lambda: client.set(f"{prefix}:meta", "[1, 2]"), "unreadable"),
        (lambda: client.rpush(f"{prefix}:meta", "x"), "holds something else"),
        (lambda: client.set(f"{prefix}:meta", json.dumps({"format": FORMAT, "schema_version": 99})),
         "schema version 99.*upgrade"),
    ]
    for write, message in cases:
        client.delete(f"{prefix}:meta")
        write()
        before = snapshot(server, prefix)
        for kwargs in ({}, {"readonly": True}):
            with pytest.raises(IndexOpenError, match=message):
                open_index(url, **kwargs)
        assert snapshot(server, prefix) == before
    assert not marker.exists()
    client.close()
    binary.close()


def test_hostile_values_under_our_keys_are_index_errors(url: str) -> None:
    """Values someone else wrote under the index's keys: an SimhashIndexError naming the index (the
    pipeline counts it and applies SIMHASH_ON_INDEX_ERROR), never a crash or a wrong verdict."""
    server = url.split("?")[0]
    client = raw_redis(server)
    with open_index(url) as ix:
        a = ix.check_and_add(q(71, 72, url="a")).entry_id
        ix.check_and_add(q(71, None, url="dup"))
        base = ix._base
        client.set(f"{base}e:{a}", "yesterday")  # not a record of ours
        client.hset(f"{base}d:dup", "distance", "far")
        for call in (lambda: ix.check_and_add(q(71, None)), lambda: list(ix.entries()),
                     lambda: ix.explain("dup"), lambda: ix.lookup(71, None, title_k=2, body_k=0)):
            with pytest.raises(SimhashIndexError, match=f"index {re.escape(url)}.*unreadable"):
                call()
        raw = raw_redis(server, decode=False)
        key, field = ix._k.bucket("title", 0, 0x99)
        raw.hset(key, field, b"abc")  # a foreign band member of another length: an error, never a candidate
        with pytest.raises(SimhashIndexError, match=f"index {re.escape(url)}.*unreadable"):
            ix.lookup(0x99, None, title_k=2, body_k=0)
        raw.hdel(key, field)
        poison_band(raw, ix, 0x99)  # holders of a length no list of ours has
        with pytest.raises(IndexWriteError, match=re.escape(url)):
            ix.check_and_add(q(0x99, None))
        with pytest.raises(SimhashIndexError, match=re.escape(url)):
            ix.lookup(0x99, None, title_k=2, body_k=0)
    client.close()
    raw.close()


def test_readonly_open_reads_and_refuses_writes(url: str) -> None:
    server, prefix = url.split("?")[0], url.split("prefix=")[1]
    with open_index(url) as ix:
        ix.check_and_add(q(77, 88, url="orig"))
        ix.check_and_add(q(77, None, url="dup"))
    before = snapshot(server, prefix)
    with open_index(url, readonly=True) as ro:
        assert ro.count() == 1 and ro.stats()["readonly"] is True
        assert ro.lookup(77, None, title_k=2, body_k=0)[0].entry.url == "orig"
        assert ro.explain("dup").tier == "title"  # type: ignore[union-attr]
        assert [e.url for e in ro.entries()] == ["orig"]
        for write in (lambda: ro.check_and_add(q(1, 2)), lambda: ro.add([(1, 2, None, None, 1.0)]),
                      lambda: ro.forget("orig"), lambda: ro.purge(time.time()), ro.reset):
            with pytest.raises(IndexWriteError, match=f"{prefix} was opened read-only"):
                write()
    with open_index(url, readonly=True, namespace="elsewhere") as ro:  # unknown namespace: empty, no write
        assert ro.count() == 0 and ro.lookup(77, None, title_k=2, body_k=0) == [] and list(ro.entries()) == []
        assert "elsewhere" not in ro.stats()["namespaces"]
    assert snapshot(server, prefix) == before


# -- one round trip, script cache, failures mid-crawl -----------------------------------------------


def _calls(client: Any) -> collections.Counter:
    stats = client.info("commandstats")
    return collections.Counter({k.removeprefix("cmdstat_"): v["calls"] for k, v in stats.items()})


def _monitored(url: str, work: Any) -> list[dict[str, Any]]:
    """Run ``work()`` while MONITOR records every command the server receives, then return them."""
    seen: list[dict[str, Any]] = []
    stop = f"end-{uuid.uuid4().hex}"
    watcher, admin = raw_redis(url), raw_redis(url)

    def listen(monitor: Any) -> None:
        for command in monitor.listen():
            if stop in command["command"]:
                return
            seen.append(command)

    with watcher.monitor() as monitor:  # MONITOR is acknowledged when this returns
        thread = threading.Thread(target=listen, args=(monitor,))
        thread.start()
        try:
            work()
        finally:
            admin.echo(stop)
            thread.join(timeout=30)
    watcher.close()
    admin.close()
    return seen


WRITES = {"SET", "HSET", "HDEL", "DEL", "APPEND", "ZADD", "ZREM", "EXPIRE", "INCRBY", "UNLINK"}


def test_a_check_and_add_writes_only_inside_its_transaction(private_server: RedisProcess) -> None:
    """Seen by the server (MONITOR): every key a check-and-add writes is written between MULTI and
    EXEC, after it WATCHed the keys it read (the entry ids it may add are reserved before); one EXEC
    a check-and-add, new or duplicate."""
    with open_index(private_server.url) as ix:
        rng = random.Random(4)
        stories = [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(25)]
        ix.check_and_add(q(1, 2))  # connected: the address the server sees for the index's calls
        host, port = ix._server._local.held[1]._sock.getsockname()[:2]
        ours = f"{host}:{port}"
        outcomes: list[Any] = []

        def work() -> None:
            for n in range(2):
                for i, (t, b) in enumerate(stories):
                    outcomes.append(ix.check_and_add(q(t ^ (1 << n), b, url=f"u{i}-{n}")))

        commands = _monitored(private_server.url, work)
    assert sum(o.match is None for o in outcomes) == 25 and len(outcomes) == 50
    sent = [c["command"].split()[0].upper() for c in commands
            if c.get("client_type") != "lua" and f"{c['client_address']}:{c['client_port']}" == ours]
    assert sent.count("EXEC") == 50 and sent.count("MULTI") == 50
    inside = False
    for n, command in enumerate(sent):
        if command in ("MULTI", "EXEC"):
            inside = command == "MULTI"
        elif command in WRITES and not inside:
            assert command == "INCRBY" and sent[n - 1] == "GET", sent[max(0, n - 3): n + 3]  # the ids it reserves
    assert all(sent[i - 1] != "MULTI" for i, c in enumerate(sent) if c == "WATCH")


def test_script_is_reloaded_after_a_script_flush(private_server: RedisProcess) -> None:
    admin = raw_redis(private_server.url)
    with open_index(private_server.url) as ix:
        assert ix.check_and_add(q(11, 12, url="a")).match is None
        admin.script_flush()
        before = _calls(admin)
        m = ix.check_and_add(q(11 ^ 1, None, url="b")).match
        assert m is not None and m.entry.url == "a"
        delta = _calls(admin) - before
        assert delta["script|load"] == 1 and delta["evalsha"] >= 2  # NOSCRIPT, load, read again
    admin.close()


def test_a_batch_is_decided_in_transactions_of_a_few_queries_and_answers_in_order(private_server: RedisProcess) -> None:
    """A batch's outcomes equal those of the same queries one by one (a later copy in the batch finds
    an earlier one, in its transaction or an earlier one), committed in one EXEC each
    :data:`~scrapy_simhash.index.redis.index.TXN_QUERIES` queries."""
    from scrapy_simhash.index.redis.index import TXN_QUERIES

    rng = random.Random(6)
    stories = [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(10)]
    batch = [q(t, b, url=f"n{i}") for i, (t, b) in enumerate(stories)]
    batch += [q(t ^ 1, None, url=f"d{i}") for i, (t, _) in enumerate(stories[:5])]
    batch.insert(3, q(stories[0][0] ^ 2, None, url="early"))  # a copy in the first transaction
    with open_index(private_server.url) as ix:
        ix.check_and_add(q(1, 2))
        host, port = ix._server._local.held[1]._sock.getsockname()[:2]
        outcomes: list[Any] = []
        commands = _monitored(private_server.url, lambda: outcomes.extend(ix.check_and_add_many(batch)))
    assert [o.match is None for o in outcomes] == [True] * 3 + [False] + [True] * 7 + [False] * 5
    assert outcomes[3].match.entry.url == "n0"  # type: ignore[union-attr]
    assert [o.match.entry.url for o in outcomes[11:]] == [f"n{i}" for i in range(5)]  # type: ignore[union-attr]
    sent = [c["command"].split()[0].upper() for c in commands
            if c.get("client_type") != "lua" and f"{c['client_address']}:{c['client_port']}" == f"{host}:{port}"]
    assert sent.count("EXEC") == -(-len(batch) // TXN_QUERIES)


def test_a_batch_after_a_script_flush_and_an_error_inside_a_batch(private_server: RedisProcess) -> None:
    admin = raw_redis(private_server.url)
    rng = random.Random(7)
    with open_index(private_server.url) as ix:
        ix.check_and_add(q(1, 2))
        admin.script_flush()  # the read script is gone: loaded again, read again
        out = ix.check_and_add_many([q(rng.getrandbits(64), None, url=f"f{n}") for n in range(3)])
        assert [o.match for o in out] == [None, None, None] and ix.count() == 4
        bad = rng.getrandbits(64)
        poison_band(raw_redis(private_server.url, decode=False), ix, bad)  # its holders are unreadable
        # the poisoned item alone fails; its neighbours are decided (and committed) as usual
        out = ix.check_and_add_many([q(rng.getrandbits(64), None), q(bad, None), q(rng.getrandbits(64), None)])
        assert [o.match for o in out] == [None, None, None] and ix.count() == 6
        assert [o.entry_id is None for o in out] == [False, True, False]
        assert out[1].error is not None and "check-and-add failed" in out[1].error
        # every reply of the failed batch was read: the connection answers the next call rightly
        m = ix.check_and_add(q(1, None)).match
        assert m is not None and m.entry.title_fp == 1
    admin.close()


def test_a_retried_call_does_not_find_itself(url: str) -> None:
    """A reply lost after the server added the entry: the retry (same token) returns that entry,
    instead of reporting the item as a duplicate of itself."""
    with open_index(url) as ix:
        first = ix.check_and_add(q(21, 22, url="a", request_id="token-1"))
        again = ix.check_and_add(q(21, 22, url="a", request_id="token-1"))
        assert first.match is None and again == first and ix.count() == 1
        other = ix.check_and_add(q(21, 22, url="a2", request_id="token-2"))
        assert other.match is not None and other.match.entry.id == first.entry_id


def test_a_batch_applied_in_part_and_retried_with_its_request_ids_keeps_its_verdicts(url: str) -> None:
    """The server applied the first two queries of a batch, then the connection broke: the retry of
    the whole batch (same request ids) gives the two their own entries back, as new."""
    rng = random.Random(4)
    batch = [replace(q(rng.getrandbits(64), rng.getrandbits(64), url=f"b{n}"), request_id=f"req-{n}") for n in range(3)]
    with open_index(url) as ix:
        applied = ix.check_and_add_many(batch[:2])
        retried = ix.check_and_add_many(batch)
        assert [o.match for o in retried] == [None, None, None]
        assert [o.entry_id for o in retried[:2]] == [o.entry_id for o in applied]
        assert ix.count() == 3
        fresh = ix.check_and_add_many([replace(batch[0], request_id="another")])
        assert fresh[0].match is not None and fresh[0].match.entry.id == applied[0].entry_id


def test_killed_connections_are_reconnected(url: str) -> None:
    admin = raw_redis(url.split("?")[0])
    with open_index(url) as ix:
        assert ix.check_and_add(q(31, 32, url="a")).match is None
        for _ in range(3):
            killed = admin.client_kill_filter(_type="normal", skipme=True)
            assert killed >= 1
            m = ix.check_and_add(q(31, 32, url="b")).match  # retried on a new connection
            assert m is not None and m.entry.url == "a"
        assert ix.count() == 1
    admin.close()


def test_server_gone_mid_crawl_is_a_write_error_then_recovers(private_server: RedisProcess) -> None:
    with open_index(private_server.url, busy_timeout=2.0) as ix:
        assert ix.check_and_add(q(41, 42)).match is None
        private_server.stop()
        start = time.monotonic()
        with pytest.raises(IndexWriteError) as err:
            ix.check_and_add(q(43, 44))
        assert time.monotonic() - start < 10  # bounded: 3 attempts, 0.05 + 0.1 s apart
        assert f"127.0.0.1:{private_server.port}" in str(err.value) and "after 3 attempts" in str(err.value)
        with pytest.raises(SimhashIndexError, match="count failed after 3 attempts"):
            ix.count()
        with pytest.raises(IndexWriteError, match="bulk add failed after 1 attempt:"):
            ix.add([(45, 46, None, None, 1.0)])  # never sent twice: a lost reply would add it twice
        for path in private_server.directory.iterdir():  # as if it had run without persistence
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        private_server.start()  # a new, empty server without our script or our keys
        with pytest.raises(IndexWriteError, match="lost its keys"):
            ix.check_and_add(q(43, 44))  # never an answer from an emptied index
    with open_index(private_server.url, busy_timeout=2.0) as ix:  # reopened: a new, empty index
        assert ix.check_and_add(q(43, 44)).match is None
        assert ix.check_and_add(q(43, 44)).match is not None and ix.count() == 1


def test_a_paused_server_times_out_as_a_write_error(private_server: RedisProcess) -> None:
    admin = raw_redis(private_server.url)
    with open_index(private_server.url, busy_timeout=0.2) as ix:
        ix.check_and_add(q(51, 52))
        admin.client_pause(2000)  # every client's commands wait: a server stuck or overloaded
        start = time.monotonic()
        with pytest.raises(IndexWriteError, match="after 3 attempts"):
            ix.check_and_add(q(53, 54))
        assert time.monotonic() - start < 1.9  # gave up before the pause ended: 3 × 0.2 s + 0.15 s
        admin.client_unpause()
        assert ix.check_and_add(q(51, 52)).match is not None
    admin.close()


# -- four real processes, the same 200 stories ------------------------------------------------------

_FEEDER = textwrap.dedent(
    """
    import json, os, random, sys, time
    from scrapy_simhash.index import open_index, Query
    url, seed, stories_path, go = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    stories = json.load(open(stories_path))
    items = [(i, v, t, b) for i, variants in enumerate(stories) for v, (t, b) in enumerate(variants)]
    random.Random(seed).shuffle(items)
    ix = open_index(url)
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.0005)
    out = []
    for i, v, t, b in items:
        o = ix.check_and_add(Query(title_fp=t, body_fp=b, title_k=2, body_k=3, url=f"https://p{seed}/{i}/{v}"))
        out.append([i, v, o.match is None, None if o.match is None else o.match.entry.url])
    ix.close()
    print(json.dumps(out), flush=True)
    """
)


def _stories(rng: random.Random, n: int = 200) -> list[list[tuple[int, int]]]:
    """``n`` stories, four copies each, pairwise within the thresholds (title ≤ 2 or body ≤ 3):
    the original, a retitled-by-2-bits copy with one body bit changed, a copy under an unrelated
    title whose body is 3 bits from the original and 2 from the first copy, and the original again."""
    stories = []
    for _ in range(n):
        t, b = rng.getrandbits(64), rng.getrandbits(64)
        p, r, s, u, w = rng.sample(range(64), 5)
        t1, b1 = t ^ (1 << p) ^ (1 << r), b ^ (1 << s)
        t2, b2 = rng.getrandbits(64), b1 ^ (1 << u) ^ (1 << w)
        stories.append([(t, b), (t1, b1), (t2, b2), (t, b)])
    return stories


def test_four_processes_feeding_the_same_200_stories_admit_exactly_200(url: str, tmp_path: Path) -> None:
    for round_ in range(3):
        rng = random.Random(1000 + round_)
        stories = _stories(rng)
        for variants in stories:  # the copies of a story all match each other …
            for (ta, ba), (tb, bb) in itertools.combinations(variants, 2):
                assert hamming_distance(ta, tb) <= 2 or hamming_distance(ba, bb) <= 3
        titles = [(i, t) for i, vs in enumerate(stories) for t, _ in vs]
        bodies = [(i, b) for i, vs in enumerate(stories) for _, b in vs]
        assert all(  # … and no other story's
            hamming_distance(x, y) > k for pairs, k in ((titles, 2), (bodies, 3))
                   for n, (i, x) in enumerate(pairs) for j, y in pairs[n + 1:] if i != j)
        path = tmp_path / f"stories{round_}.json"
        path.write_text(json.dumps(stories))
        go = tmp_path / f"go{round_}"
        round_url = f"{url}-r{round_}"
        procs = [subprocess.Popen([sys.executable, "-c", _FEEDER, round_url, str(seed), str(path), str(go)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
                                  cwd=REPO)
                 for seed in range(4)]
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        go.touch()
        results = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            results.append(json.loads(out))
        assert [len(r) for r in results] == [800] * 4  # every copy got an answer
        admitted = {i: f"https://p{seed}/{i}/{v}" for seed, r in enumerate(results) for i, v, new, _ in r if new}
        new_count = sum(new for r in results for _, _, new, _ in r)
        assert new_count == 200 and len(admitted) == 200, new_count  # exactly one copy of each story
        for r in results:  # every other copy matched its own story's admitted copy
            assert all(new or original == admitted[i] for i, _, new, original in r)
        with open_index(round_url) as ix:  # nothing lost: the index holds exactly the admitted copies
            assert ix.count() == 200
            assert sorted(e.url for e in ix.entries()) == sorted(admitted.values())
            assert len(ix.decisions(limit=10_000)) == 4 * 800 - 200
            ix.reset()


# -- a real crawl ---------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_crawls_share_the_redis_index(url: str, tmp_path: Path) -> None:
    """SIMHASH_INDEX_URL = redis://…: real crawls drop reposts, and a second crawler (another
    machine, as far as the index can tell) drops what the first one admitted."""
    originals = [{**STORY_ZH, "url": "http://a.example/zh1"}, {**STORY_EN, "url": "http://a.example/en1"}]
    repost = {**repost_with_suffix(STORY_ZH), "url": "http://b.example/zh1-copy"}
    settings = crawl_settings(tmp_path / "unused.sqlite3", SIMHASH_INDEX_URL=url)
    first = await run_crawl(settings, [*originals, repost])
    assert [i["url"] for i in first.spider.collected] == [o["url"] for o in originals]
    assert first.stats.get_value("simhash/new") == 2 and first.stats.get_value("simhash/dropped/title") == 1
    second = await run_crawl(settings, originals)
    assert second.spider.collected == [] and second.stats.get_value("simhash/initial") == 2
    assert not (tmp_path / "unused.sqlite3").exists()
    with open_index(url, readonly=True) as ix:
        assert ix.count() == 2 and ix.explain("http://b.example/zh1-copy").tier == "title"  # type: ignore[union-attr]


# -- same verdicts as SQLite ----------------------------------------------------------------------


def test_a_server_that_may_forget_is_refused_or_warned_about(tmp_path: Path, caplog: Any) -> None:
    """allkeys-lru evicted the meta key and entries (598 of 786 stories admitted again); a server
    without persistence empties the index at a restart. Both are refused by default, or logged."""
    for args, why in ((("--maxmemory-policy", "allkeys-lru"), "maxmemory-policy is allkeys-lru"),
                      (("--appendonly", "no"), "does not persist")):
        server = RedisProcess(tmp_path, *args)
        try:
            with pytest.raises(IndexOpenError, match=f"may forget entries.*{why}.*SIMHASH_REDIS_UNSAFE"):
                open_index(server.url)
            with caplog.at_level("WARNING"), open_index(server.url, redis_unsafe="warn") as ix:
                assert ix.check_and_add(q(1, 2)).match is None
            assert why in caplog.text
            with open_index(server.url, readonly=True) as ix:  # reading is never refused
                assert ix.count() == 1
        finally:
            server.stop()
    with pytest.raises(ValueError, match="unsafe"):
        open_index(redis_server_url(), redis_unsafe="maybe")


def test_a_reset_for_wider_thresholds_gives_a_redis_index_their_layout(url: str) -> None:
    """SIMHASH_RESET with a threshold the index cannot answer: the namespace is emptied and the index
    gets the band layout for it; a crawler that opened it before fails at its next call instead of
    filing entries under the old layout; one asking fewer bands is served by the new layout, and a
    plain reset keeps it usable."""
    with Deduplicator.open(url) as before, open_index(url) as stale:
        assert before.check_and_add(STORY_ZH["title"], STORY_ZH["body"]).status == "new"
        with Deduplicator.open(url, dynamic_threshold=True, reset=True) as wide:
            assert wide.index.params.body_bands == 6 and wide.index.count() == 0
            assert wide.check_and_add(STORY_ZH["title"], STORY_ZH["body"]).status == "new"
        for stale_call in (lambda: stale.check_and_add(q(5, 6)), lambda: before.index.add([(5, 6, None, None, 1.0)])):
            with pytest.raises(IndexWriteError, match="is being or was re-banded since it was opened"):
                stale_call()
        with pytest.raises(SimhashIndexError, match="re-banded since it was opened"):
            stale.lookup(5, None, title_k=2, body_k=0)
    with Deduplicator.open(url) as narrower:  # fewer bands asked for: the index's answer them
        assert narrower.index.params.body_bands == 6 and narrower.index.count() == 1
        assert narrower.check_and_add(STORY_ZH["title"], STORY_ZH["body"]).status == "duplicate"
        narrower.index.reset()
        assert narrower.check_and_add(STORY_ZH["title"], STORY_ZH["body"]).status == "new"


def test_a_reset_for_wider_thresholds_keeps_the_other_namespaces_entries(url: str) -> None:
    """The layout is the index's: another namespace's entries are re-banded with it, and answer the
    wider threshold too."""
    body = 0x0123456789ABCDEF
    with open_index(url, namespace="other") as other:
        assert other.check_and_add(q(1, body)).match is None
    with Deduplicator.open(url) as d:
        assert d.check_and_add(STORY_EN["title"], STORY_EN["body"]).status == "new"
    with Deduplicator.open(url, dynamic_threshold=True, reset=True) as d:
        assert d.index.params.body_bands == 6 and d.index.count() == 0
    with open_index(url, namespace="other", params=IndexParams(body_bands=6)) as other:
        assert other.count() == 1
        match = other.peek(Query(title_fp=None, body_fp=body ^ 0b11111, title_k=2, body_k=5))
        assert match is not None and match.distance == 5


def test_every_call_fails_once_the_namespace_marker_is_gone(url: str) -> None:
    """Keys evicted or lost: the script refuses to answer from what is left."""
    with open_index(url) as ix:
        assert ix.check_and_add(q(5, 6)).match is None
        raw_redis(url.split("?")[0]).delete(f"{ix._base}meta")
        with pytest.raises(IndexWriteError, match="lost its keys"):
            ix.check_and_add(q(5, 6))
        with pytest.raises(SimhashIndexError, match="lost its keys"):
            ix.lookup(5, None, title_k=2, body_k=0)
    with open_index(url) as ix:  # a new open marks the namespace again: what is left is what it has
        assert ix.check_and_add(q(5, 6)).match is not None
        ix.reset()  # a reset empties the namespace on purpose: still usable
        assert ix.check_and_add(q(5, 6)).match is None
