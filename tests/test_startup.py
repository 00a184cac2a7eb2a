"""Start-up work the engine avoids: jieba is imported without ``pkg_resources`` (~0.15 s), and
``pkg_resources`` still imports afterwards for whoever needs it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

CODE = """
import json, sys
import scrapy_simhash.fingerprint.features
import jieba
seen = "pkg_resources" in sys.modules
from scrapy_simhash.fingerprint.features import get_tokenizer
words = list(get_tokenizer().cut("他来到了网易杭研大厦"))
try:
    import pkg_resources  # noqa: F401
    later = True
except ImportError:
    later = False
print(json.dumps({"seen": seen, "later": later, "words": words}))
"""


@pytest.mark.skipif(importlib.util.find_spec("pkg_resources") is None, reason="pkg_resources is not installed")
def test_jieba_is_imported_without_pkg_resources_which_still_imports_later() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", CODE], capture_output=True, text=True, env=env,
                         check=True, cwd=str(REPO))
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"seen": False, "later": True, "words": ["他", "来到", "了", "网易", "杭研", "大厦"]}


LAZY = """
import json, os, sys
from scrapy_simhash import Deduplicator
import jieba
d = Deduplicator.open(sys.argv[1])
fp = d.fingerprint("北京今日发布暴雨蓝色预警", "北京市气象台今天下午发布暴雨蓝色预警信号，预计夜间有大到暴雨。")
built = jieba.dt.initialized
jieba.dt.tmp_dir = sys.argv[2]  # where jieba's own cache would be read or written
words = list(jieba.cut("他来到了网易杭研大厦"))
print(json.dumps({"built": built, "fp": fp.body is not None, "words": words, "initialized": jieba.dt.initialized,
                  "jieba_cache": os.listdir(sys.argv[2])}))
"""


def test_the_first_fingerprint_builds_no_prefix_dictionary_and_jieba_still_loads_from_our_cache(
        tmp_path: Path) -> None:
    """Start-up: the compiled route comes from the table cache, jieba's 500,000-word ``FREQ`` is not
    built; jieba's API, called afterwards, gets it from the table cache, not from its own."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    jieba_tmp = tmp_path / "jieba-tmp"
    jieba_tmp.mkdir()
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", LAZY, f"sqlite:///{tmp_path / 'i.sqlite3'}",
                          str(jieba_tmp)], capture_output=True, text=True, env=env, check=True, cwd=str(tmp_path))
    result = json.loads(out.stdout.strip().splitlines()[-1])
    from scrapy_simhash.fingerprint.segment import COMPILED

    assert result == {"built": not COMPILED, "fp": True, "words": ["他", "来到", "了", "网易", "杭研", "大厦"],
                      "initialized": True, "jieba_cache": []}


PLAIN = """
import json, sys
from scrapy_simhash.cli import main
code = main(["dedup", sys.argv[1], "--index", sys.argv[2], "-q", "--no-progress"])
plain = "lxml" in sys.modules
from scrapy_simhash.text.html import html_to_text
text = html_to_text("<div><p>第一段</p><p>second &amp; last</p></div>")
print(json.dumps({"code": code, "plain": plain, "text": text, "html": "lxml.html" in sys.modules}))
"""


def test_a_run_of_plain_text_does_not_import_lxml_which_the_first_html_loads(tmp_path: Path) -> None:
    """lxml (~12 ms of every start) is imported at the first HTML parsed, not by a run of plain text."""
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"url": "u", "title": "北京今日发布暴雨蓝色预警",
                               "body": "北京市气象台今天下午发布暴雨蓝色预警信号，预计夜间有大到暴雨。 Rain & wind."},
                              ensure_ascii=False) + "\n", "utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", PLAIN, str(src), str(tmp_path / "i.sqlite3")],
                         capture_output=True, text=True, env=env, check=True, cwd=str(tmp_path))
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"code": 0, "plain": False, "text": "第一段\nsecond & last", "html": True}
