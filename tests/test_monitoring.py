"""The Spidermon suite (``scrapy_simhash.monitoring``) in real crawls of the example project.

A copy of ``example_project`` gets the one line that turns the suite on (with Spidermon's own two
settings) and is crawled over real HTTP, offline, as a user types it: a few daily crawls of the site
as it is (each with ``SIMHASH_RESET``: a day's new stories, the index's history of runs kept), then one
more, which the suite passes, then one of the site after a template change that makes every
article's body a copy of one article: its dedup rate jumps and the suite fails, naming the rate and
the band. The other monitors are exercised on the stats they read.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("spidermon")

from tests.conftest import REPO

EXAMPLE = REPO / "example_project"
SITE = EXAMPLE / "site"
MANIFEST = json.loads((SITE / "manifest.json").read_text(encoding="utf-8"))
#: What the user adds to settings.py (the last line is the suite; the others are Spidermon's own setup).
SPIDERMON_SETTINGS = """
SPIDERMON_ENABLED = True
EXTENSIONS = {"spidermon.contrib.scrapy.extensions.Spidermon": 500}
SPIDERMON_SPIDER_CLOSE_MONITORS = ("scrapy_simhash.monitoring.SimhashMonitorSuite",)
"""
#: Spidermon's result lines: "[Spidermon] <monitor name>... OK|FAIL".
RESULT_RE = re.compile(r"\[Spidermon\] (?P<name>[^\n]*?)\.\.\. (?P<result>OK|FAIL|SKIPPED|ERROR)")


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "example_project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".scrapy", "__pycache__", "*.jsonl"))
    settings = project / "news_example" / "settings.py"
    settings.write_text(settings.read_text(encoding="utf-8") + SPIDERMON_SETTINGS, encoding="utf-8")
    return project


def _copied_site(tmp_path: Path) -> Path:
    """The bundled site after a template change: every article page's body element (the one the
    spider reads) holds the body of one article, so every article is a copy of it; titles, list
    pages and the rest of each template are as they were."""
    import lxml.html

    sys.path.insert(0, str(EXAMPLE))
    try:
        from news_example.spiders.news import SELECTORS
    finally:
        sys.path.remove(str(EXAMPLE))
    site = tmp_path / "site"
    shutil.copytree(SITE, site)
    pages = MANIFEST["pages"]
    first = pages[0]
    source = lxml.html.fromstring((SITE / first["path"]).read_bytes())
    (text,) = source.cssselect(SELECTORS[first["portal"]]["body"])
    for page in pages:
        path = site / page["path"]
        doc = lxml.html.fromstring(path.read_bytes())
        (body,) = doc.cssselect(SELECTORS[page["portal"]]["body"])
        for child in list(body):
            body.remove(child)
        body.text = text.text
        for child in text:
            body.append(lxml.html.fromstring(lxml.html.tostring(child)))
        path.write_bytes(lxml.html.tostring(doc, encoding="utf-8", doctype="<!DOCTYPE html>"))
    return site


def _crawl(project: Path, *args: str, fails: bool = False) -> tuple[dict[str, Any], dict[str, str], str]:
    """One ``scrapy crawl news`` in ``project``: its simhash stats, Spidermon's results and its log."""
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "news", "-O", str(project / "out.jsonl"),
         "-s", "SIMHASH_RESET=1", "-s", "SIMHASH_MONITOR_MIN_RUNS=2", *args],
        cwd=project, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    # (Spidermon shows a failed monitor's assertion as a traceback)
    assert fails or "Traceback" not in proc.stderr, proc.stderr[-4000:]
    stats = dict(re.findall(r"'(simhash/[^']+)': ([^,\n]+)", proc.stderr))
    results = {m.group("name"): m.group("result") for m in RESULT_RE.finditer(proc.stderr)}
    return stats, results, proc.stderr


@pytest.mark.slow
def test_the_suite_fails_a_crawl_whose_dedup_rate_jumps_and_passes_a_normal_one(tmp_path: Path) -> None:
    project = _project(tmp_path)
    for _ in range(2):  # the history: two finished runs of the site as it is
        stats, results, log = _crawl(project)
        assert results and set(results.values()) == {"OK"}, log[-3000:]
    assert float(stats["simhash/dedup_rate"]) == pytest.approx(9 / 17, abs=1e-4)  # the manifest's 9 reposts
    stats, results, log = _crawl(project)  # the third day, compared with the band of two
    assert stats["simhash/history/runs"] == "2" and float(stats["simhash/history/dedup_rate_median"]) == \
        pytest.approx(9 / 17, abs=1e-4), stats
    assert len(results) == 5 and set(results.values()) == {"OK"}, results
    assert "dedup rate within the band of recent runs" in " ".join(results), results
    for key in ("p50_ms", "p95_ms", "max_ms"):
        assert float(stats[f"simhash/latency/{key}"]) > 0, stats
    assert stats["simhash/latency/items"] == "17", stats

    changed = _copied_site(tmp_path)
    stats, results, log = _crawl(project, "-s", f"NEWS_SITE_DIR={changed}", fails=True)
    assert float(stats["simhash/dedup_rate"]) > 0.9, stats  # every article but the first is a copy
    failed = [name for name, result in results.items() if result != "OK"]
    assert len(failed) == 1 and "dedup rate" in failed[0], results
    assert re.search(r"dedup rate 9\d\.\d% is outside the band of the last 3 runs of this spider: median 52\.9%",
                     log), log[-3000:]

    listed = subprocess.run([sys.executable, "-m", "scrapy", "simhash", "runs", "--json"], cwd=project,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert [r["checked"] for r in runs] == [17] * 4 and all(r["spider"] == "news" for r in runs)
    assert runs[0]["dedup_rate"] > 0.9 and {round(r["dedup_rate"], 4) for r in runs[1:]} == {round(9 / 17, 4)}


# -- each monitor on the stats it reads ------------------------------------------------------------------

QUIET = {"simhash/index": "/x/index.sqlite3", "simhash/index_error": 0, "simhash/unchecked": 0,
         "simhash/workers_died": 0, "simhash/latency/p95_ms": 40.0, "simhash/dedup_rate": 0.5,
         "simhash/history/runs": 3, "simhash/history/dedup_rate_median": 0.5,
         "simhash/history/dedup_rate_min": 0.45, "simhash/history/dedup_rate_max": 0.55}


def _failed(stats: dict[str, Any], **settings: Any) -> dict[str, str]:
    """The suite run by Spidermon's runner over ``stats``: failed monitors → their messages."""
    from scrapy import Spider
    from scrapy.utils.test import get_crawler
    from spidermon.runners import MonitorRunner

    from scrapy_simhash.monitoring import SimhashMonitorSuite

    result = MonitorRunner().run(SimhashMonitorSuite(), stats=stats, crawler=get_crawler(Spider, settings))
    assert not result.errors, result.errors
    return {test.monitor_name: trace for test, trace in result.failures}


@pytest.mark.parametrize(("stat", "setting", "limit"), [
    ("simhash/index_error", "SIMHASH_MONITOR_MAX_INDEX_ERRORS", 0),
    ("simhash/unchecked", "SIMHASH_MONITOR_MAX_UNCHECKED", 0),
    ("simhash/workers_died", "SIMHASH_MONITOR_MAX_WORKERS_DIED", 0),
    ("simhash/latency/p95_ms", "SIMHASH_MONITOR_LATENCY_P95_MS", 2000.0),
])
def test_each_threshold_monitor_fails_above_its_setting_only(stat: str, setting: str, limit: float) -> None:
    assert _failed(QUIET) == {}
    assert _failed({**QUIET, stat: limit}) == {}
    failed = _failed({**QUIET, stat: limit + 1})
    assert len(failed) == 1 and setting in next(iter(failed.values())) and stat in next(iter(failed.values()))
    assert _failed({**QUIET, stat: limit + 1}, **{setting: limit + 1}) == {}


def test_the_dedup_rate_monitor_compares_with_the_median_of_enough_runs() -> None:
    (name, message), = _failed({**QUIET, "simhash/dedup_rate": 0.7}).items()
    assert name == "scrapy-simhash dedup rate"
    assert "dedup rate 70.0% is outside the band of the last 3 runs of this spider: median 50.0% ± 15.0%" in message
    assert _failed({**QUIET, "simhash/dedup_rate": 0.3}) != {}  # a fall too
    assert _failed({**QUIET, "simhash/dedup_rate": 0.64}) == {}
    assert _failed({**QUIET, "simhash/dedup_rate": 0.7}, SIMHASH_MONITOR_DEDUP_TOLERANCE=0.25) == {}
    assert _failed({**QUIET, "simhash/dedup_rate": 0.7, "simhash/history/runs": 2}) == {}  # no band yet
    assert _failed({**QUIET, "simhash/dedup_rate": 0.7, "simhash/history/runs": 2}, SIMHASH_MONITOR_MIN_RUNS=2) != {}


def test_a_crawl_the_pipeline_did_not_run_in_passes() -> None:
    assert _failed({"item_scraped_count": 3}) == {}


def test_without_spidermon_the_import_names_the_install_command() -> None:
    proc = subprocess.run([sys.executable, "-c", "import sys; sys.modules['spidermon'] = None; "
                           "import scrapy_simhash.monitoring"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 1
    assert "ImportError: scrapy_simhash.monitoring needs Spidermon, which is not installed: pip install " \
           "'scrapy-simhash[monitoring]'" in proc.stderr, proc.stderr
    plain = subprocess.run([sys.executable, "-c", "import sys; sys.modules['spidermon'] = None; import scrapy_simhash; "
                            "import scrapy_simhash.scrapy.pipeline"], capture_output=True, text=True, cwd=REPO,
                           timeout=60)
    assert plain.returncode == 0, plain.stderr  # the plugin itself never needs it
