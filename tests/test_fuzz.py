"""Fuzzing: strange items through real crawls (in-process) and the console script, and bounds.

Hypothesis builds items from ``None``, numbers, booleans, nested lists and dicts, bytes in odd
encodings, invalid UTF-8, lone surrogates, punctuation only, emoji only, right-to-left text and
HTML fragments. Every crawl must finish, log no error, and count every item exactly once (new,
dropped, flagged or skipped); the console script must read every line and never print a
traceback. Extreme inputs (a 50 MB body, 100,000-deep nesting, "billion laughs" entities, an
entity flood) are measured once in a separate process for time and peak memory.
"""

from __future__ import annotations

import json
import re
import string
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO, STORY_EN, STORY_ZH, crawl_settings, run_crawl

COUNTERS = ("simhash/new", "simhash/dropped/title", "simhash/dropped/body", "simhash/flagged",
            "simhash/skipped/no_text", "simhash/skipped/bad_input", "simhash/skipped/opt_out")

ENCODINGS = ("utf-8", "gbk", "gb18030", "big5", "shift_jis", "euc-kr", "utf-16", "utf-32", "latin-1", "cp1256")
CJK_PUNCT = "。，、；：？！“”‘’（）【】《》…—·「」『』〔〕"

surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
texts = st.one_of(
    st.text(max_size=80),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=40),  # anything, surrogates too
    st.text(surrogates, min_size=1, max_size=20),
    st.text(st.sampled_from(string.punctuation + CJK_PUNCT + " \n\t"), min_size=1, max_size=200),
    st.text(st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF), min_size=1, max_size=60),  # emoji
    st.text(st.characters(min_codepoint=0x0590, max_codepoint=0x06FF), min_size=5, max_size=200),  # he/ar
    st.just("\u202e" + "فيروس كورونا المستجد في مدينة " * 5 + "\u202c"),  # RTL override + Arabic
    st.just(STORY_ZH["body"]),
    st.builds(lambda t: f"<div><p>{t}</p><script>var x = '{t}';</script></div>", st.text(max_size=60)),
    st.builds(lambda n, t: "<b>" * n + t + "</b>" * (n // 2), st.integers(0, 3000), st.text(max_size=30)),
    st.builds(lambda n: "&amp;" * n + "&#x1F600;&#0;&#xD800;&#99999999;&bogus;", st.integers(0, 500)),
)
byte_values = st.one_of(
    st.binary(max_size=200),  # mostly invalid UTF-8
    st.builds(lambda t, enc: t.encode(enc, errors="ignore"), st.sampled_from([STORY_ZH["title"], STORY_ZH["body"],
              STORY_EN["title"], "Ünïcödé – “quotes” 中文 日本語 한국어"]), st.sampled_from(ENCODINGS)),
    st.builds(lambda b: b'<meta charset="big5">' + b, st.binary(max_size=100)),
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), texts, byte_values)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                      max_leaves=8)
FIELDS = ("title", "body", "content", "text", "url", "simhash_skip")
items = st.dictionaries(st.sampled_from(FIELDS), values, max_size=5)


def assert_counted(crawler: Any, n: int) -> None:
    stats = crawler.stats.get_stats()
    assert stats.get("finish_reason") == "finished"
    assert stats.get("log_count/ERROR") is None, "an item raised in the pipeline"
    counted = sum(stats.get(k, 0) for k in COUNTERS)
    assert counted == n, {k: stats.get(k) for k in COUNTERS}
    dropped = stats.get("simhash/dropped/title", 0) + stats.get("simhash/dropped/body", 0)
    assert len(crawler.spider.collected) + dropped == n


def drawn(strategy: st.SearchStrategy[Any], n: int) -> list[Any]:
    """``n`` examples drawn by Hypothesis (generation only: crawls run on the reactor, where a
    ``@given`` test cannot wait for them; a failing batch is printed whole instead of shrunk)."""
    out: list[Any] = []

    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(example: Any) -> None:
        out.append(example)

    collect()
    return out


@pytest_twisted.ensureDeferred
async def test_hypothesis_items_through_a_real_crawl(tmp_path: Path) -> None:
    for n, batch in enumerate(drawn(st.lists(items, min_size=1, max_size=8), 12)):
        crawler = await run_crawl(crawl_settings(tmp_path / f"i{n}.sqlite3", LOG_LEVEL="WARNING"), batch)
        try:
            assert_counted(crawler, len(batch))
        except AssertionError as exc:
            raise AssertionError(f"batch {batch!r}: {exc}") from exc


@pytest_twisted.ensureDeferred
async def test_extreme_items_through_a_real_crawl(tmp_path: Path) -> None:
    batch: list[Any] = [
        {"title": "deep", "body": "<div>" * 100_000 + "深层嵌套的正文。" * 10 + "</div>" * 100_000},
        {"title": "laughs", "body": LAUGHS},
        {"title": "flood", "body": "<p>" + "&amp;&lt;&#x4e2d;&#20013;&nbsp;" * 50_000 + "</p>"},
        {"title": "很长的正文" * 3, "body": b"plain words " * (50 * 1024 * 1024 // 12)},  # 50 MB, once
        {"title": b"\xed\xa0\x80 surrogate bytes", "body": ["\udc80" * 100, b"\xff" * 100, None]},
        {"title": "(iter)", "body": iter(["a generator of paragraphs, consumed once. " * 5] * 1000)},
        {"title": "list of numbers", "body": list(range(100))},
        {"url": 42, "title": STORY_EN["title"], "body": STORY_EN["body"]},
        {"url": ["x"], "title": STORY_EN["title"] + " copy", "body": STORY_EN["body"]},
    ]
    crawler = await run_crawl(crawl_settings(tmp_path / "i.sqlite3", LOG_LEVEL="WARNING"), batch)
    assert_counted(crawler, len(batch))


# -- console script ---------------------------------------------------------------------------------------

# Lone surrogates in JSON escapes have their own test (test_console_script_keeps_items_with_lone_surrogates),
# so the generated lines here leave them out.
no_surrogates = st.characters(exclude_categories=("Cs",))
json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                                     st.text(no_surrogates, max_size=40),
                                     texts.filter(lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t))),
                           lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                   st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                           max_leaves=6)
lines = st.one_of(
    st.builds(lambda d: json.dumps(d).encode(), st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=4)),
    st.builds(lambda d: json.dumps(d, ensure_ascii=False).encode("utf-8", "surrogatepass"),
              st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=4)),
    st.binary(max_size=80).map(lambda b: b.replace(b"\n", b" ")),  # garbage, invalid UTF-8
    st.just(b'{"title": "\\ud83d\\ude00 a valid surrogate pair", "body": "\\u0000 NUL and \\ufffe"}'),
    st.just(b"[" * 100_000 + b"]" * 100_000),
    st.just(b'{"title": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"),
    st.just(b""),
)


def run_dedup(batch: list[bytes], tmp: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """``scrapy-simhash dedup`` on these lines, with kept items and decisions written out."""
    source, decisions = Path(tmp) / "in.jsonl", Path(tmp) / "decisions.jsonl"
    source.write_bytes(b"\n".join(batch) + b"\n")
    script = Path(sys.executable).with_name("scrapy-simhash")
    exe = [str(script)] if script.exists() else [sys.executable, "-m", "scrapy_simhash.cli"]
    result = subprocess.run([*exe, "dedup", str(source), "--index", str(Path(tmp) / "i.sqlite3"), "--quiet",
                             "--no-progress", "--decisions", str(decisions), "-o", str(Path(tmp) / "kept.jsonl")],
                            capture_output=True, text=True, timeout=120, cwd=REPO)
    records = [json.loads(line) for line in decisions.read_text("utf-8").splitlines()] if decisions.exists() else []
    return result, records


# No shrinking: every example is a process start; a failing batch is printed as generated.
@settings(max_examples=4, deadline=None, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=st.lists(lines, min_size=1, max_size=40))
def test_hypothesis_lines_through_the_console_script(batch: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        result, records = run_dedup(batch, tmp)
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
    # every line accounted for, in order: a decision line each, except the lines that are no item
    # (blank, or no title and no body), which the summary counts
    recorded = [r["line"] for r in records]
    assert recorded == sorted(set(recorded)) and set(recorded) <= set(range(1, len(batch) + 1)), recorded
    assert all(r["status"] in ("new", "duplicate", "flagged", "skipped", "error") for r in records)
    unrecorded = [n for n in range(1, len(batch) + 1) if n not in set(recorded)]
    assert all(_no_item(batch[n - 1]) for n in unrecorded), [batch[n - 1] for n in unrecorded]
    assert f"dedup: {len(batch):,} line" in result.stderr, result.stderr
    counted = sum(int(n.replace(",", "")) for n in re.findall(r"(?:blank line|no title or body \(.*?\)): ([\d,]+)",
                                                            result.stderr))
    assert counted == len(unrecorded), result.stderr


def _no_item(raw: bytes) -> bool:
    """Is this input line no item to decide: blank, or a JSON object with a URL that is text (or
    none) and neither a non-empty title nor a non-empty body in the fields dedup looks at?"""
    try:
        text = raw.decode("utf-8")
        if not text.strip():
            return True
        item = json.loads(text)
    except (ValueError, RecursionError):
        return False
    if not isinstance(item, dict) or not isinstance(item.get("url"), str | None):
        return False
    return all(item.get(name) in (None, "", [], {}) for name in ("title", "body", "content", "text"))


def test_console_script_keeps_items_with_lone_surrogates(tmp_path: Path) -> None:
    line = b'{"title": "\\ud800\\udfff\\ud800 lone", "body": "\\udc00 lone surrogates in JSON escapes, a body"}'
    result, records = run_dedup([line], str(tmp_path))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert [r["line"] for r in records] == [1]
    kept = [json.loads(x) for x in (tmp_path / "kept.jsonl").read_text("utf-8").splitlines() if x]
    assert kept == [json.loads(line)], "the kept item must round-trip exactly"


# -- bounds -----------------------------------------------------------------------------------------------

LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY l0 "ha">'
    + "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    + "]><html><body><p>&l9;</p></body></html>"
)

_MEASURE = textwrap.dedent(
    """
    import json, resource, sys, time
    from scrapy_simhash.fingerprint.fingerprinter import Fingerprinter
    from scrapy_simhash.text.normalize import MAX_INPUT_CHARS
    LAUGHS = sys.argv[1]
    fp = Fingerprinter()
    fp.fingerprint("预热标题 一二三四五", "预热正文，一段足够长的中文文本用于加载结巴分词词典和逆文档频率表。" * 3)
    def peak_mb():
        # VmHWM, the resident high-water mark, reset before each case (below): without the reset a
        # peak reached earlier (jieba building its dictionary cache in a fresh environment) would be
        # charged to the case.
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    def reset_peak():
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass  # older kernels: the mark then covers the whole process, which can only overstate
    def current_mb():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() / 2**20
    N = 50 * 1024 * 1024
    cases = {
        "50 MB Chinese HTML (str)": lambda: "<p>" + "新闻正文内容，" * (N // 21) + "</p>",
        "100,000-deep nested <div>": lambda: "<div>" * 100_000 + "深层嵌套的正文。" * 10 + "</div>" * 100_000,
        "billion laughs (10^9 'ha' if expanded)": lambda: LAUGHS,
        "entity flood (2M references)": lambda: "<p>" + "&amp;&lt;&#x4e2d;&#20013;&nbsp;" * 400_000 + "</p>",
    }
    out = {"max_input_chars": MAX_INPUT_CHARS}
    for name, make in cases.items():
        data = make()
        reset_peak()
        before = current_mb()
        started = time.perf_counter()
        result = fp.fingerprint("标题：" + name, data)
        # The high-water mark since the reset, above the resident size before the call (input included).
        out[name] = {"seconds": time.perf_counter() - started,
                     "peak_rss_growth_mb": max(0.0, peak_mb() - before),
                     "input_bytes": len(data.encode("utf-8", "surrogatepass")), "body_chars": result.body_chars}
        del data
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))
    """
)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads the resident size from /proc (Linux)")
def test_time_and_memory_are_bounded_for_extreme_inputs() -> None:
    """Measured in a fresh process (ru_maxrss is a per-process high-water mark)."""
    result = subprocess.run([sys.executable, "-c", _MEASURE, LAUGHS], capture_output=True, text=True,
                            timeout=300, cwd=REPO)
    assert result.returncode == 0, (result.returncode, result.stderr[-3000:])
    m = json.loads(result.stdout)
    report = json.dumps(m, indent=1)
    print(report)  # the numbers quoted in the pipeline docstring
    for name, case in m.items():
        if not isinstance(case, dict):
            continue
        assert case["body_chars"] <= m["max_input_chars"], (name, report)  # cut before parsing
        assert case["peak_rss_growth_mb"] < 150, (name, report)  # beyond the input itself
        assert case["seconds"] < 60, (name, report)
    # Entities are never expanded recursively: the body is as short as its own text.
    assert m["billion laughs (10^9 'ha' if expanded)"]["body_chars"] < 100, report
    assert m["peak_rss_mb"] < 1024, report
