"""jieba's tables from our cache: the same tables as jieba's own, rebuilt when stale or damaged."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import jieba
import pytest

from scrapy_simhash.fingerprint import dictionary as tables
from scrapy_simhash.fingerprint.segment import _hmm

IDF_TXT = Path(jieba.__file__).parent / "analyse" / "idf.txt"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "scrapy-simhash"


def fresh_tokenizer(dictionary: Path | None = None) -> jieba.Tokenizer:
    return jieba.Tokenizer() if dictionary is None else jieba.Tokenizer(str(dictionary))


def reference_idf() -> dict[str, float]:
    idf = {}
    for line in IDF_TXT.read_text("utf-8").splitlines():
        word, value = line.strip().split(" ")
        idf[word] = float(value)
    return idf


def test_prefix_dictionary_equals_jiebas_built_then_cached(cache: Path) -> None:
    jieba.setLogLevel(60)
    reference = fresh_tokenizer()
    reference.FREQ, reference.total = reference.gen_pfdict(reference.get_dict_file())
    for _ in range(2):  # built and written, then read from the cache
        tokenizer = fresh_tokenizer()
        tables.load_prefix_dict(tokenizer)
        assert tokenizer.initialized
        assert tokenizer.total == reference.total
        assert tokenizer.FREQ == reference.FREQ
    assert [p.name.split("-")[0] for p in cache.glob("*.table")] == ["prefix"]
    assert list(tokenizer.cut("他来到了网易杭研大厦")) == ["他", "来到", "了", "网易", "杭研", "大厦"]


def test_idf_table_equals_the_parsed_file(cache: Path) -> None:
    reference = reference_idf()
    median = sorted(reference.values())[len(reference) // 2]
    assert tables.load_idf(IDF_TXT) == (reference, median)
    assert tables.load_idf(IDF_TXT) == (reference, median)  # from the cache
    assert len(list(cache.glob("*.table"))) == 1


def _engine_idf(table: Any, median: float, words: list[str]) -> dict[str, float]:
    """The IDF the compiled engine gives each of ``words`` (feature words) from ``table``."""
    from scrapy_simhash._compiled import _vocabulary_c

    if _vocabulary_c is None:
        pytest.skip("the compiled engine is not built")
    seen: dict[str, float] = {}
    vocabulary = _vocabulary_c.Vocabulary(seen, frozenset(), table, median)
    assert vocabulary.words_of(words) == words
    return seen


ENGINE_WORDS = ["北京市", "气象台", "今天", "中华人民共和国", "国务院", "storm", "warning", "鑫淼淼淼", "zzqx",
                "a\ud800b", "\U00020000\U00020001", "x" * 40, "zzzzzzzzzzzzzz", "aa"]


def test_the_cached_idf_table_is_mapped_not_parsed(cache: Path) -> None:
    """From the cache, the IDF table is the file's bytes (no string made of its 270,000 words, none
    for the garbage collector to walk); Python lookups and the compiled engine's (a probe of its
    hashed words, else a bisection of their UTF-8 bytes) read every word's IDF as the file has it,
    and the median for a word it lacks."""
    import gc

    tables.load_idf(IDF_TXT)
    table, median = tables.load_idf(IDF_TXT)  # from the cache
    assert isinstance(table, tables.MappedTable)
    gc.collect()
    assert not any(type(o) is tuple and len(o) == len(table) for o in gc.get_objects())
    reference = reference_idf()
    words = [w for w in reference if w.strip() and w == w.strip().lower() and any(c.isalnum() for c in w)
             and len(w) > 1] + ENGINE_WORDS
    assert len(words) > 250_000
    assert _engine_idf(table, median, words) == {word: reference.get(word, median) for word in words}
    assert any(w not in reference for w in ENGINE_WORDS) and any(len(w) > 4 and w in reference for w in ENGINE_WORDS)
    assert dict(table.items()) == reference and len(table) == len(reference)
    assert table.get("zzqx", median) == median and table["北京市"] == reference["北京市"]


@pytest.mark.parametrize("damage", ["offsets", "order", "slot", "full"])
def test_damaged_mapped_arrays_are_looked_up_through_the_table(cache: Path, damage: str) -> None:
    """A cache file whose arrays do not hold together (its sections the right size, so it maps) is
    not probed by the compiled engine, which would read out of its bounds or never end a probe: it
    looks words up through the table's own (checked) lookups, or the table fails as not sorted."""
    tables.load_idf(IDF_TXT)
    [path] = cache.glob("idf.*.table")
    data = bytearray(path.read_bytes())
    head_end = data.index(b"\n")
    header = json.loads(data[:head_end])
    base = head_end + 1
    (off_at, off_size), (keys_at, keys_size) = header["sections"]["offsets"], header["sections"]["keys"]
    if damage == "offsets":  # the last word's end beyond the file
        data[base + off_at + off_size - 4 : base + off_at + off_size] = (1 << 31).to_bytes(4, sys.byteorder)
    elif damage == "order":
        data[base + off_at + 4 : base + off_at + 8] = (10**6).to_bytes(4, sys.byteorder)
    elif damage == "slot":  # an index beyond the table
        slots = memoryview(data)[base + keys_at : base + keys_at + keys_size].cast("d")
        used = next(i for i in range(1, len(slots), 2) if slots[i - 1] != 0)
        slots[used] = 1e9
        del slots
    else:  # no empty slot: a probe for an absent word would never end
        data[base + keys_at : base + keys_at + keys_size] = b"\x01" * keys_size
    path.write_bytes(bytes(data))
    table, median = tables.load_idf(IDF_TXT)
    assert isinstance(table, tables.MappedTable)
    reference = reference_idf()
    words = ["北京市", "气象台", "中华人民共和国", "zzqx", "鑫淼淼淼"]
    assert _engine_idf(table, median, words) == {w: reference.get(w, median) for w in words}


@pytest.mark.parametrize("damage", ["truncate", "garbage", "header", "empty"])
def test_a_damaged_cache_file_is_rebuilt(cache: Path, damage: str) -> None:
    tables.load_idf(IDF_TXT)
    [path] = cache.glob("*.table")
    data = path.read_bytes()
    path.write_bytes({"truncate": data[: len(data) // 2], "garbage": os.urandom(5000),
                      "header": b'{"format": "scrapy-simhash table 2", "typecode": "d", "count": 3}\n' + data,
                      "empty": b""}[damage])
    assert tables.load_idf(IDF_TXT)[0] == reference_idf()
    assert path.read_bytes() == data  # written again


def test_a_changed_dictionary_gets_its_own_table(cache: Path, tmp_path: Path) -> None:
    jieba.setLogLevel(60)
    small = tmp_path / "dict.txt"
    small.write_text("鑫淼犇龘 100 n\n集团 50 n\n", "utf-8")
    tokenizer = fresh_tokenizer(small)
    tables.load_prefix_dict(tokenizer)
    assert tokenizer.FREQ == {"鑫": 0, "鑫淼": 0, "鑫淼犇": 0, "鑫淼犇龘": 100, "集": 0, "集团": 50}
    assert tokenizer.total == 150
    small.write_text("鑫淼犇龘 100 n\n集团 50 n\n公司 7 n\n", "utf-8")
    os.utime(small, ns=(small.stat().st_atime_ns, small.stat().st_mtime_ns + 10**9))
    tokenizer = fresh_tokenizer(small)
    tables.load_prefix_dict(tokenizer)
    assert tokenizer.FREQ["公司"] == 7 and tokenizer.total == 157
    assert len(list(cache.glob("*.table"))) == 2


def test_no_writable_cache_directory_still_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert tables.load_idf(IDF_TXT)[0] == reference_idf()


def test_one_table_per_dictionary_content_and_stale_ones_go(cache: Path, tmp_path: Path) -> None:
    """Two virtualenvs (two paths, the same idf.txt) share one table; tables of the older path-keyed
    scheme and tables unused for STALE_DAYS are removed when a table is written."""
    tables.load_idf(IDF_TXT)
    [shared] = cache.glob("*.table")
    other_venv = tmp_path / "venv2" / "idf.txt"
    other_venv.parent.mkdir()
    other_venv.write_bytes(IDF_TXT.read_bytes())
    assert tables.load_idf(other_venv)[0] == reference_idf()
    assert list(cache.glob("*.table")) == [shared]

    legacy = cache / "idf-0123456789abcdef0123.table"  # the path-keyed name of earlier versions
    legacy.write_bytes(shared.read_bytes())
    unused = cache / "idf.00000000000000000000.table"
    unused.write_bytes(b"x")
    old = time.time() - (tables.STALE_DAYS + 1) * 86400
    os.utime(unused, (old, old))
    os.utime(shared, (old, old))
    tables.load_idf(IDF_TXT)  # a read marks the shared table used
    assert shared.stat().st_mtime > old
    small = tmp_path / "idf-small.txt"
    small.write_text("鑫淼 9.5\n集团 3.25\n", "utf-8")
    tables.load_idf(small)  # a write cleans up
    names = sorted(p.name for p in cache.glob("*.table"))
    assert shared.name in names and legacy.name not in names and unused.name not in names
    assert len(names) == 2


@pytest.fixture
def router_type() -> type:
    from scrapy_simhash._compiled import _segment_c

    if _segment_c is None:
        pytest.skip("the compiled segmenter is not built (setup.py build_ext --inplace)")
    return _segment_c.Router


def _route(router_type: type, tokenizer: jieba.Tokenizer) -> tuple[object, list[str]]:
    made = []

    def make(freq, total, tables_):  # type: ignore[no-untyped-def]
        try:
            router = router_type(dict(freq), math.log(total), tables_)
        except ValueError:
            made.append("refused")
            raise
        made.append("copied" if tables_ is not None else "built")
        return router

    return tables.load_route(tokenizer, "test", make), made


ROUTE_TEXTS = ["他来到了网易杭研大厦", "中华人民共和国中央人民政府今日成立，八一双鹿更名为八一南昌",
               "工信处女干事每月经过下属科室都要亲口交代24口交换机等技术性器件的安装工作"]


def test_the_compiled_route_is_cached_and_cuts_as_jieba(cache: Path, router_type: type) -> None:
    jieba.setLogLevel(60)
    reference = fresh_tokenizer()
    reference.initialize()
    expected = [tuple(reference.cut(text)) for text in ROUTE_TEXTS]
    for made_as in ("built", "copied"):
        tokenizer = fresh_tokenizer()
        router, made = _route(router_type, tokenizer)
        assert made == [made_as]
        assert not tokenizer.initialized
        hmm = _hmm()
        assert [router.cut_block(text, {}, hmm, set(), 1000) for text in ROUTE_TEXTS] == expected
    assert sorted(p.name.split(".")[0] for p in cache.iterdir()) == ["prefix-dict", "route"]


@pytest.mark.parametrize("damage", ["truncate", "layout", "full"])
def test_a_damaged_route_table_is_rebuilt(cache: Path, router_type: type, damage: str) -> None:
    jieba.setLogLevel(60)
    _route(router_type, fresh_tokenizer())
    [path] = cache.glob("route.*.table")
    data = path.read_bytes()
    head_end = data.index(b"\n")
    header = json.loads(data[:head_end])
    if damage == "truncate":
        path.write_bytes(data[:-100])
    elif damage == "layout":
        path.write_bytes(json.dumps({**header, "layout": "other"}).encode() + data[head_end:])
    else:  # a slot table with no empty slot: a probe for an absent word would never end
        one, slots, seen = header["blobs"]
        start = len(data) - one - slots - seen + one
        path.write_bytes(data[:start] + b"\x01" * slots + data[start + slots:])
    router, made = _route(router_type, fresh_tokenizer())
    assert made == (["refused", "built"] if damage == "full" else ["built"])
    assert router.cut_block(ROUTE_TEXTS[0], {}, _hmm(), set(), 1000) == ("他", "来到", "了", "网易", "杭研", "大厦")
    assert path.read_bytes() == data  # written again


def test_a_source_is_hashed_again_only_when_its_file_changed(cache: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The content hash that names a table is remembered by the source file's identity and times: a
    new process (here: the in-process memo emptied) reads it back instead of hashing 6 MB again, and
    a rewrite of the file (even to the same size and modification time) is hashed again."""
    source = tmp_path / "idf.txt"
    source.write_text("鑫淼 9.5\n集团 3.25\n", "utf-8")
    opened: list[str] = []

    def counting_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(path))
        return open(path, *args, **kwargs)

    monkeypatch.setattr(tables, "open", counting_open, raising=False)
    first = tables.load_idf(source)
    assert opened == [str(source)]
    tables._digest.cache_clear()
    assert tables.load_idf(source) == first and opened == [str(source)]  # from the memo, not hashed
    stat = source.stat()
    source.write_text("鑫淼 9.5\n集团 3.75\n", "utf-8")  # same size
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    tables._digest.cache_clear()
    assert tables.load_idf(source)[0] == {"鑫淼": 9.5, "集团": 3.75}
    assert opened == [str(source)] * 2


def test_cache_files_are_mapped_not_copied(cache: Path, router_type: type) -> None:
    """The tables' bytes are the file's pages, mapped (no copy of the route's 18 MB into the process at
    every start); the IDF table's arrays too."""
    import mmap

    jieba.setLogLevel(60)
    _route(router_type, fresh_tokenizer())
    [path] = cache.glob("route.*.table")
    _, _, blobs = tables._read(path, "q")  # type: ignore[misc]
    assert blobs and all(isinstance(blob.obj, mmap.mmap) for blob in blobs)
    tables.load_idf(IDF_TXT)
    table, _ = tables.load_idf(IDF_TXT)
    assert isinstance(table, tables.MappedTable) and isinstance(table.value_array.obj, mmap.mmap)


def test_a_cached_route_is_used_in_place_and_an_unaligned_one_copied(cache: Path, router_type: type) -> None:
    """The route's tables are written aligned, so a Router reads them where the mapped file has them
    (no 17 MB copy at every start); tables at an address it cannot read doubles at are copied. Both
    cut as jieba does."""
    jieba.setLogLevel(60)
    _route(router_type, fresh_tokenizer())
    router, made = _route(router_type, fresh_tokenizer())
    assert made == ["copied"] and router.shared is not None
    reference = fresh_tokenizer()
    reference.initialize()
    expected = [tuple(reference.cut(text)) for text in ROUTE_TEXTS]
    assert [router.cut_block(text, {}, _hmm(), set(), 1000) for text in ROUTE_TEXTS] == expected
    unaligned = []
    for blob in router.tables():
        room = bytearray(len(blob) + 1)
        room[1:] = blob
        unaligned.append(memoryview(room)[1:])
    copy = router_type(dict(router.unpacked()), router.logtotal, tuple(unaligned))
    assert copy.shared is None
    assert [copy.cut_block(text, {}, _hmm(), set(), 1000) for text in ROUTE_TEXTS] == expected
