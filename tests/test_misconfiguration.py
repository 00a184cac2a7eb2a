"""A bad setting stops ``scrapy crawl`` before it starts, with a non-zero exit and one message naming the
setting, its value and what is allowed; an index that cannot be opened keeps its own message.

Real ``scrapy crawl`` subprocesses in a tiny project made in tmp_path (one offline ``data:`` page).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import scrapy

from scrapy_simhash import Deduplicator
from tests.conftest import REPO
from tests.redis_server import free_port

SCRAPY = tuple(int(p) for p in scrapy.__version__.split(".")[:2])

SPIDER = textwrap.dedent('''
    import scrapy

    class Items(scrapy.Spider):
        name = "items"
        start_urls = ["data:,"]

        def parse(self, response):
            yield {"title": "江城地铁十二号线今日开通 全长三十八公里设站二十五座", "url": "http://a.example/1",
                   "body": "本报讯 江城地铁十二号线正式开通运营，该线路全长38公里，共设车站25座。" * 3}
''')


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("proj")
    (root / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
    (root / "proj" / "spiders").mkdir(parents=True)
    (root / "proj" / "__init__.py").write_text("")
    (root / "proj" / "spiders" / "__init__.py").write_text(SPIDER)
    (root / "proj" / "settings.py").write_text(
        'SPIDER_MODULES = ["proj.spiders"]\nADDONS = {"scrapy_simhash.Addon": 300}\nLOG_LEVEL = "INFO"\n'
        'TELNETCONSOLE_ENABLED = False\n'
    )
    return root


def crawl(project: Path, *settings: str) -> subprocess.CompletedProcess[str]:
    args = [a for s in settings for a in ("-s", s)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "scrapy", "crawl", "items", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("setting", "allowed"), [
    ("SIMHASH_TITLE_MAX_DISTANCE=abc", "an integer from 0"),
    ("SIMHASH_BITS=48", "32, 64 or 128"),
    ("SIMHASH_TITLE_ACTION=delete", '"drop" or "flag"'),
    ("SIMHASH_TTL_DAYS=-3", "a positive number of days"),
    ("SIMHASH_ON_INDEX_ERROR=ignore", '"drop", "pass" or "close"'),
    ("SIMHASH_DROP_LOG_LEVEL=LOUD", "DEBUG, INFO, WARNING, ERROR or CRITICAL"),
    ("SIMHASH_INDEX_URL=postgres://db/x", "redis://"),
    ("SIMHASH_ENABLED=maybe", "True or False"),  # read before the other settings are checked
    ("SIMHASH_SUMMARY=maybe", "True or False"),  # read by the summary extension, built before the pipeline
    ("SIMHASH_TITLE_MAX_DISTANCE=2.5", "an integer from 0"),
    ("SIMHASH_SPAM_PATTERNS=/nonexistent/spam.txt", "a path to a readable file"),
])
def test_a_bad_setting_stops_the_crawl_with_a_non_zero_exit(project: Path, setting: str, allowed: str) -> None:
    proc = crawl(project, f"SIMHASH_INDEX_URL=sqlite:///{project / 'i.sqlite3'}", setting)
    name, value = setting.split("=", 1)
    assert proc.returncode != 0, proc.stderr[-3000:]
    [line] = [line for line in proc.stderr.splitlines() if "bad setting" in line]
    assert f"{name} = {value!r} is not allowed: " in line and allowed in line, line
    assert "cannot open its index" not in proc.stderr  # not blamed on the index
    assert "Crawled (200)" not in proc.stderr  # stopped before any request
    assert "Traceback" not in proc.stderr  # the one line, not echoed by the event loop with a traceback


def test_a_spam_patterns_file_with_a_bad_regex_stops_the_crawl(project: Path) -> None:
    """The file is read while the crawler is built: a bad ``re:`` line is refused as a bad setting is."""
    spam = project / "spam.txt"
    spam.write_text("加微信\nre:(unclosed\n", encoding="utf-8")
    proc = crawl(project, f"SIMHASH_INDEX_URL=sqlite:///{project / 'spam.sqlite3'}", f"SIMHASH_SPAM_PATTERNS={spam}")
    assert proc.returncode != 0, proc.stderr[-3000:]
    [line] = [line for line in proc.stderr.splitlines() if "bad setting" in line]
    assert f"SIMHASH_SPAM_PATTERNS = {str(spam)!r} is not allowed: " in line and "line 2" in line, line
    assert "Crawled (200)" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_float_where_an_integer_is_meant_is_refused_from_settings_py_too() -> None:
    """``SIMHASH_TITLE_MAX_DISTANCE = 2.5`` in a project's settings.py is refused as ``-s …=2.5`` is,
    not cut to 2."""
    from scrapy.settings import Settings

    from scrapy_simhash.settings import DEFAULTS, SettingError, check_settings

    with pytest.raises(SettingError, match=r"SIMHASH_TITLE_MAX_DISTANCE = 2\.5 is not allowed"):
        check_settings(Settings({**DEFAULTS, "SIMHASH_TITLE_MAX_DISTANCE": 2.5}))
    check_settings(Settings({**DEFAULTS, "SIMHASH_TITLE_MAX_DISTANCE": 3.0}))  # a whole number as a float is one


def test_good_settings_crawl_and_exit_0(project: Path) -> None:
    proc = crawl(project, f"SIMHASH_INDEX_URL=sqlite:///{project / 'ok.sqlite3'}", "SIMHASH_TITLE_MAX_DISTANCE=3",
                 "SIMHASH_ON_INDEX_ERROR=close", "SIMHASH_DROP_LOG_LEVEL=debug")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "'simhash/new': 1" in proc.stderr
    assert "scrapy-simhash summary for spider 'items'" in proc.stdout  # shipped with the add-on


def _unopenable(project: Path, case: str) -> tuple[list[str], str]:
    """Settings whose index cannot be opened, and what the error line names."""
    if case == "corrupt":
        bad = project / "not-an-index.sqlite3"
        bad.write_bytes(b"not a database" * 100)
        return [f"SIMHASH_INDEX_URL=sqlite:///{bad}"], "not-an-index.sqlite3"
    if case == "unwritable path":  # its directory would be under a regular file (root ignores file modes)
        (project / "a-file").write_text("")
        return [f"SIMHASH_INDEX_URL=sqlite:///{project / 'a-file' / 'i.sqlite3'}"], "a-file"
    if case == "unreachable redis":
        return [f"SIMHASH_INDEX_URL=redis://127.0.0.1:{free_port()}/0"], "127.0.0.1"
    narrow = project / "narrow.sqlite3"  # made with the default thresholds, asked for more
    Deduplicator.open(f"sqlite:///{narrow}").close()
    return [f"SIMHASH_INDEX_URL=sqlite:///{narrow}", "SIMHASH_TITLE_MAX_DISTANCE=12"], "cannot answer these queries"


@pytest.mark.parametrize("case", ["corrupt", "unwritable path", "unreachable redis", "thresholds"])
def test_an_index_that_cannot_be_opened_exits_non_zero_with_its_own_message(project: Path, case: str) -> None:
    settings, named = _unopenable(project, case)
    proc = crawl(project, *settings, "SIMHASH_INDEX_RETRIES=0")
    assert proc.returncode == 1, proc.stderr[-3000:]
    [line] = [line for line in proc.stderr.splitlines() if "ERROR" in line]
    assert "scrapy-simhash cannot open its index" in line and named in line, line
    assert "bad setting" not in proc.stderr and "is not allowed" not in proc.stderr
    assert "Crawled (200)" not in proc.stderr  # refused before any request
    if SCRAPY >= (2, 14):  # Scrapy 2.13's Twisted crawler process prints the failure again, as text
        assert "Traceback" not in proc.stderr
