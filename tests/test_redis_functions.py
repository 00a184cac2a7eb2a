"""How the Redis index calls its script: a library of Redis functions (Redis >= 7), else EVALSHA.

The library keeps the script's Lua functions and the layouts it decoded between calls; these tests
check that it is loaded again when the server lost it, that an index never calls another version's
library, and that a server refusing ``FUNCTION`` gets the script instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scrapy_simhash.index import IndexError_, open_index
from scrapy_simhash.index.redis import index as redis_index
from tests.test_index_protocol import raw_redis
from tests.test_index_redis import RedisProcess, _calls, q


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisProcess]:
    process = RedisProcess(tmp_path)
    yield process
    process.stop()


def _functions_or_skip(ix: Any) -> None:
    if ix._server._functions is None:
        pytest.skip("the server has no Redis functions (Redis < 7)")


def test_the_library_is_loaded_again_after_a_function_flush(server: RedisProcess) -> None:
    admin = raw_redis(server.url)
    with open_index(server.url) as ix:
        _functions_or_skip(ix)
        assert ix.check_and_add(q(11, 12, url="a")).match is None
        admin.execute_command("FUNCTION", "FLUSH")
        before = _calls(admin)
        m = ix.check_and_add(q(11 ^ 1, None, url="b")).match
        assert m is not None and m.entry.url == "a"
        delta = _calls(admin) - before
        assert (delta["fcall"], delta["function|load"], delta["evalsha"]) == (2, 1, 0)  # not found, load, again
        assert ix.peek(q(11 ^ 3, None)) is not None  # reads: FCALL_RO of the same library
        assert (_calls(admin) - before)["fcall_ro"] == 1
    admin.close()


def test_an_index_never_calls_the_library_of_another_script(server: RedisProcess,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Two versions of the script on one server (a crawl of the old code still running): each index
    calls its own library, named by its script's digest, not the one loaded first."""
    with open_index(server.url) as old:
        _functions_or_skip(old)
        changed = redis_index.SCRIPT.replace("unknown operation", "unknown operation (changed script)")
        assert changed != redis_index.SCRIPT
        monkeypatch.setattr(redis_index, "SCRIPT", changed)
        with open_index(server.url) as new:
            assert new._server._functions != old._server._functions
            for ix, expected in ((old, "unknown operation nope"), (new, r"\(changed script\) nope"),
                                 (old, "unknown operation nope")):
                with pytest.raises(IndexError_, match=expected):
                    ix._script("test", ix._args("nope"))
            assert new.check_and_add(q(5, 6, url="n")).match is None
            assert old.check_and_add(q(5 ^ 1, None)).match.entry.url == "n"  # type: ignore[union-attr]


def test_a_server_that_refuses_functions_gets_the_script(server: RedisProcess) -> None:
    """A user not allowed ``FUNCTION`` (ACL; also a renamed or disabled command): EVALSHA, same verdicts."""
    admin = raw_redis(server.url)
    admin.execute_command("ACL", "SETUSER", "nofn", "on", ">pw", "~*", "&*", "+@all",
                          "-function", "-fcall", "-fcall_ro")
    url = server.url.replace("redis://", "redis://nofn:pw@", 1)
    with open_index(url) as ix:
        assert ix._server._functions is None
        before = _calls(admin)
        assert ix.check_and_add(q(31, 32, url="a")).match is None
        assert ix.check_and_add(q(31 ^ 1, None, url="b")).match.entry.url == "a"  # type: ignore[union-attr]
        delta = _calls(admin) - before
        assert delta["evalsha"] == 2 and delta["fcall"] == 0
    admin.close()


def test_limits_changed_on_an_open_index_are_used_at_its_next_call(server: RedisProcess) -> None:
    """The library keeps the layouts it decoded, by the exact text of the limits: a limit changed
    after calls were made (here the load at which buckets split) holds from the next call on."""
    admin = raw_redis(server.url)
    with open_index(server.url) as ix:
        assert ix.check_and_add(q(1, 2, url="first")).match is None  # the default load is known now
        ix._limits["load"] = 1
        for n in range(20):
            ix.check_and_add(q(n * 7919 + 3, n * 104729 + 5, url=f"u{n}"))
        states = [tuple(map(int, v.split())) for v in admin.hgetall(ix._base + "lh").values()]
    assert states and all(level > 0 or pointer > 0 for level, pointer, _ in states), states  # every table split
    admin.close()


def test_purge_removes_the_libraries_of_other_versions_only(server: RedisProcess, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``scrapy-simhash purge`` deletes what older versions of the script left loaded (~1 MB each),
    never this version's or another application's library; a process of the old version still running
    loads its library again at its next call."""
    from scrapy_simhash.cli import main

    admin = raw_redis(server.url)
    admin.execute_command("FUNCTION", "LOAD", "#!lua name=someone_else\n"
                          "redis.register_function('someone_else_f', function() return 1 end)\n")
    with open_index(server.url) as old:
        _functions_or_skip(old)
        assert old.check_and_add(q(41, 42, url="old")).match is None
        monkeypatch.setattr(redis_index, "SCRIPT", redis_index.SCRIPT.replace("unknown operation", "unknown op (v2)"))
        with open_index(server.url) as new:
            own = new._server._library.split("\n", 1)[0].removeprefix("#!lua name=")
            assert len(admin.function_list(library="simhash_*")) == 2
            assert main(["purge", "--older-than", "30", "--index", server.url]) == 0
            assert "removed 1 script library of other versions" in capsys.readouterr().out
            names = {dict(zip(lib[::2], lib[1::2], strict=False))["library_name"] for lib in admin.function_list()}
            assert names == {own, "someone_else"}
            assert main(["purge", "--older-than", "30", "--index", server.url]) == 0
            assert "script librar" not in capsys.readouterr().out  # nothing left to remove
        m = old.check_and_add(q(41 ^ 1, None, url="again")).match  # the old version: its library again
        assert m is not None and m.entry.url == "old"
    admin.close()
