"""jieba's tables from our cache: the same tables as jieba's own, rebuilt when stale or damaged."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import jieba
import pytest

from scrapy_simhash import tables
from scrapy_simhash.segment import _hmm

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


def test_the_cached_idf_words_are_not_walked_by_the_garbage_collector(cache: Path) -> None:
    """The 270,000 words of the cached IDF table: a tuple of strings, untracked by the collector
    once it looked at them (a list was walked by every full collection: ~10 ms each, at exit too);
    the compiled engine still reads every word's IDF from it as the table has it."""
    import gc

    from scrapy_simhash._compiled import _vocabulary_c

    tables.load_idf(IDF_TXT)
    table, median = tables.load_idf(IDF_TXT)  # from the cache
    assert isinstance(table, tables.SortedTable)
    gc.collect()
    assert not gc.is_tracked(table._words)
    if _vocabulary_c is None:
        pytest.skip("the compiled engine is not built")
    seen: dict[str, float] = {}
    vocabulary = _vocabulary_c.Vocabulary(seen, frozenset(), table, median)
    reference = reference_idf()
    tokens = ["北京市", "气象台", "今天", "中华人民共和国", "国务院", "storm", "warning", "鑫淼淼淼", "zzqx"]
    assert vocabulary.words_of(tokens) == tokens
    assert seen == {word: reference.get(word, median) for word in tokens}
    assert any(w not in reference for w in tokens) and any(len(w) > 4 and w in reference for w in tokens)


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
