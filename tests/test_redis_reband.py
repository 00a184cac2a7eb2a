"""Re-banding a Redis index (:mod:`scrapy_simhash.index.redis.reband`): every entry kept, the new
threshold answered as a scan would, the old tables gone, and a SIGKILL midway leaving the index as it
was. Real ``redis-server`` (the ``url`` fixture: a fresh prefix)."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from scrapy_simhash.index import IndexOpenError, IndexParams, Query, open_index
from scrapy_simhash.index.bands import REDIS, bands_for
from scrapy_simhash.index.redis.index import SCHEMA_VERSION, RedisIndex, reband_lock
from scrapy_simhash.index.redis.reband import reband
from tests.test_bands import answers_as_a_scan, flips
from tests.test_cli import ok, run
from tests.test_index_protocol import REPO, raw_redis


def _fill(ix: Any, rng: random.Random, centre: int, crowd: int, scattered: int) -> list[int]:
    """``crowd`` body fingerprints 4-6 bits from ``centre`` (their band keys split) and ``scattered``
    random ones, added in bulk with random titles; the body fingerprints."""
    fps = list({flips(rng, centre, 64, rng.randint(4, 6)) for _ in range(crowd)})
    fps += [rng.getrandbits(64) for _ in range(scattered)]
    ix.add([(rng.getrandbits(64), fp, f"u{fp}", None, float(i)) for i, fp in enumerate(fps)])
    return fps


def _tables(url: str, base: str) -> set[str]:
    """The band parts namespace ``base`` has bucket keys of (``<tier>b<part>``, then ``g<generation>``
    past the first), from the keys ``…:b<generation><t|b><part>:…``."""
    raw = raw_redis(url.split("?")[0])
    try:
        found = (re.match(r"b(\d+)([tb])(\d+):", key[len(base):])
                 for key in raw.scan_iter(match=f"{base}b[0-9]*", count=1000))
        return {f"{m[2]}b{m[3]}" + (f"g{m[1]}" if m[1] != "0" else "") for m in found if m}
    finally:
        raw.close()


def _layout(gen: int, body_bands: int, title_bands: int = 3) -> set[str]:
    """The band parts of the shared layout (at Redis's costs) for these bands, as :func:`_tables` names them."""
    tiers = bands_for(IndexParams(title_bands=title_bands, body_bands=body_bands), REDIS)
    return {f"{tier[0]}b{n}" + (f"g{gen}" if gen else "") for tier, layout in tiers.items()
            for n in range(len(layout.parts))}


def test_a_rebanded_index_keeps_every_entry_and_answers_its_new_threshold(url: str) -> None:
    """6 body bands (distance 5) from 4, every namespace's entries kept (a crowd among them), the old
    generation's tables gone; a second re-banding goes back to 4 bands, where the crowd's keys split
    again."""
    rng = random.Random(11)
    centre = rng.getrandbits(64)
    with open_index(url, namespace="other") as other:
        others = _fill(other, rng, rng.getrandbits(64), 0, 300)
    with open_index(url) as ix:
        fps = _fill(ix, rng, centre, 1500, 500)
        assert _tables(url, ix._base) == _layout(0, 4)
        done = reband(ix, body_bands=6)
        base = ix._base
    assert done["entries"] == len(fps) + len(others) and done["params"]["body_bands"] == 6
    assert done["previous"]["body_bands"] == 4
    with open_index(url, params=IndexParams(body_bands=6)) as ix:
        assert ix.count() == len(fps) and ix.params.body_bands == 6
        assert _tables(url, base) == _layout(1, 6)
        answers_as_a_scan(ix, fps, centre, rng, 5)
        answers_as_a_scan(ix, fps, centre, rng)
        near = Query(title_fp=None, body_fp=flips(rng, fps[-1], 64, 5), title_k=0, body_k=5)
        assert ix.check_and_add(near).match.entry.body_fp == fps[-1]  # type: ignore[union-attr]
        fresh = rng.getrandbits(64)  # a new entry is filed under the new tables
        assert ix.check_and_add(Query(title_fp=None, body_fp=fresh, title_k=0, body_k=5)).match is None
        assert ix.peek(Query(title_fp=None, body_fp=fresh ^ 0b11111, title_k=0, body_k=5)).entry.body_fp == fresh  # type: ignore[union-attr]
        fps.append(fresh)
        stats = ix.stats()
        band_rows = stats["band_rows"]
        assert stats["layout_generation"] == 1 and stats["schema_version"] == SCHEMA_VERSION
    assert band_rows == done["band_rows"] + len(bands_for(IndexParams(body_bands=6), REDIS)["body"].parts)
    with open_index(url, namespace="other") as other:
        assert other.count() == len(others)
        for fp in others[:50]:
            assert other.peek(Query(title_fp=None, body_fp=fp ^ 0b11111, title_k=0, body_k=5)).entry.body_fp == fp
    with open_index(url) as ix:
        reband(ix, body_bands=4)
    with open_index(url) as ix:
        assert ix.params.body_bands == 4 and ix.count() == len(fps)
        assert _tables(url, base) == _layout(2, 4)
        raw = raw_redis(url.split("?")[0])
        assert any("/" in k for k in raw.scan_iter(match=f"{base}b2b*"))  # the crowd's split buckets' sub-buckets
        raw.close()
        answers_as_a_scan(ix, fps, centre, rng)


def test_opens_wait_for_a_reband_and_a_second_one_is_refused(url: str) -> None:
    with open_index(url) as ix:
        ix.check_and_add(Query(title_fp=1, body_fp=2, title_k=2, body_k=3))
        prefix = ix.prefix
    raw = raw_redis(url.split("?")[0])
    try:
        raw.set(reband_lock(prefix), "someone", ex=60)
        with pytest.raises(IndexOpenError, match="is being re-banded"):
            open_index(url)
        raw.delete(reband_lock(prefix))
        with open_index(url) as ix:
            raw.set(reband_lock(prefix), "someone", ex=60)
            with pytest.raises(Exception, match="is being re-banded by another process"):
                reband(ix, body_bands=6)
            assert raw.get(reband_lock(prefix)) == "someone"  # not ours: left alone
            raw.delete(reband_lock(prefix))
            assert ix.count() == 1 and ix.check_and_add(Query(title_fp=1, body_fp=2, title_k=2, body_k=3)).match
    finally:
        raw.close()


_REBANDER = """
import sys, time
from scrapy_simhash.index import open_index
from scrapy_simhash.index.redis.reband import reband

def progress(done, total):
    print(done, total, flush=True)
    time.sleep(0.5)

with open_index(sys.argv[1]) as ix:
    reband(ix, body_bands=6, lease=1, progress=progress)
"""


def test_a_sigkill_during_a_reband_leaves_the_index_as_it_was(url: str) -> None:
    """Killed between batches: once its lease runs out the index opens with its old layout and every
    entry; the next re-banding (to another layout) deletes what the killed one built and completes."""
    rng = random.Random(5)
    centre = rng.getrandbits(64)
    with open_index(url) as ix:
        fps = _fill(ix, rng, centre, 1000, 3000)
        base = ix._base
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", _REBANDER, url], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    done, total = map(int, proc.stdout.readline().split())  # a batch is filed: the new tables half built
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 0 < done < total
    assert {t for t in _tables(url, base) if t.endswith("g1")}  # what it built so far
    deadline = time.monotonic() + 10
    while True:
        try:
            ix = open_index(url)
            break
        except IndexOpenError as exc:
            assert "being re-banded" in str(exc) and time.monotonic() < deadline
            time.sleep(0.2)
    with ix:
        assert ix.params.body_bands == 4 and ix.count() == len(fps)
        answers_as_a_scan(ix, fps, centre, rng)
        for fp in fps[-100:]:
            assert ix.peek(Query(title_fp=None, body_fp=fp ^ 0b111, title_k=0, body_k=3)).entry.body_fp == fp
        during: list[set[str]] = []  # tables after the first batch: the killed run's went first
        reband(ix, body_bands=5, progress=lambda done, total: during.append(_tables(url, base)))
        gen1 = _layout(1, 5)
        assert {t for t in during[0] if t.endswith("g1")} == gen1
    with open_index(url) as ix:
        assert ix.params.body_bands == 5 and ix.count() == len(fps)  # another layout than the killed one's
        assert _tables(url, base) == gen1
        answers_as_a_scan(ix, fps, centre, rng, 4)


def test_the_cli_rebands_a_redis_index(url: str) -> None:
    with open_index(url) as ix:
        ix.add([(None, 0x0123456789ABCDEF, "u", None, 1.0)])
    proc = ok(run("reband", url, "--body-max-distance", "5"))
    assert "1 entries" in proc.stdout and "body up to 5 (was 3)" in proc.stdout
    with open_index(url, params=IndexParams(body_bands=6)) as ix:
        match = ix.peek(Query(title_fp=None, body_fp=0x0123456789ABCDEF ^ 0b11111, title_k=0, body_k=5))
        assert match is not None and match.distance == 5


def test_an_open_that_meets_a_reband_starting_is_refused(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A re-banding that takes the lock and freezes the markers while an open reads the record: the
    open must not keep the frozen marker's value (its calls would pass and add entries the new
    tables miss); it is refused like any open during a re-banding."""
    with open_index(url) as ix:
        ix.check_and_add(Query(title_fp=1, body_fp=2, title_k=2, body_k=3))
        prefix, base = ix.prefix, ix._base
    verify_record = RedisIndex._verify_record

    def rebanding_meanwhile(self: Any, client: Any, *args: Any) -> str:
        raw = verify_record(self, client, *args)
        client.set(reband_lock(prefix), "token", ex=60)
        client.set(base + "meta", f"{SCHEMA_VERSION}:reband:token")
        return raw

    monkeypatch.setattr(RedisIndex, "_verify_record", rebanding_meanwhile)
    with pytest.raises(IndexOpenError, match="is being re-banded"):
        open_index(url)


@pytest.mark.parametrize("command", ["reband", "stats"])
def test_a_redis_password_never_shows_in_a_cli_error(command: str) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"redis://:hunter2@127.0.0.1:{port}/0"
    proc = run(command, *([url] if command == "reband" else ["--index", url]))
    assert proc.returncode == 2 and "cannot open index redis://:***@" in proc.stderr
    assert "hunter2" not in proc.stderr + proc.stdout
