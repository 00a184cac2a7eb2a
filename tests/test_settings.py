"""scrapy_simhash.settings: one table of settings feeds the pipeline's engine and both command lines."""

from __future__ import annotations

import argparse
from pathlib import Path

from scrapy.settings import Settings

from scrapy_simhash import Deduplicator
from scrapy_simhash.cli import BUILTIN_DEFAULTS, build_parser
from scrapy_simhash.index import open_index
from scrapy_simhash.settings import (
    DEFAULTS,
    SETTINGS,
    check_settings,
    cli_defaults,
    effective_settings,
    engine_options,
    index_url_from_settings,
    redis_params_from_settings,
)

#: A value other than the default for some settings of each kind, as a project would write them.
CHANGED = {
    "SIMHASH_NAMESPACE": "news",
    "SIMHASH_BODY_FIELD": "content, text",
    "SIMHASH_TITLE_MAX_DISTANCE": 1,
    "SIMHASH_BODY_MAX_DISTANCE": "4",
    "SIMHASH_TITLE_ACTION": "flag",
    "SIMHASH_TTL_DAYS": "2.5",
    "SIMHASH_DYNAMIC_THRESHOLD": "True",
    "SIMHASH_TITLE_PATTERNS": ["_Site$"],
    "SIMHASH_TITLE_NUMBERS": 40,
    "SIMHASH_SENTENCES_SHARED": "50",
    "SIMHASH_BUSY_TIMEOUT": 5,
}


def _dests(parser: argparse.ArgumentParser) -> dict[str, dict[str, object]]:
    """Subcommand → option dest → default."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: {a.dest: a.default for a in p._actions} for name, p in sub.choices.items()}


def test_every_flag_and_engine_keyword_of_the_table_is_real(tmp_path: Path) -> None:
    dests = {d for options in _dests(build_parser()).values() for d in options}
    assert {s.flag for s in SETTINGS if s.flag} <= dests
    assert {s.flag: s.default for s in SETTINGS if s.flag} == BUILTIN_DEFAULTS
    # every engine keyword and index option is one Deduplicator.open takes
    with Deduplicator.open(str(tmp_path / "i.sqlite3"), **engine_options(effective_settings(Settings(), None))) as d:
        assert (d.title_max_distance, d.sentences_shared) == (DEFAULTS["SIMHASH_TITLE_MAX_DISTANCE"],
                                                              DEFAULTS["SIMHASH_SENTENCES_SHARED"])


def test_the_pipeline_and_scrapy_simhash_read_a_setting_the_same_way(tmp_path: Path) -> None:
    project = Settings(CHANGED)
    engine = engine_options(effective_settings(project, None))
    assert engine["sentences_shared"] == 50 and engine["title_numbers"] == 40 and engine["ttl_days"] == 2.5
    assert engine["dynamic_threshold"] is True and engine["title_patterns"] == ["_Site$"]
    assert engine["index_options"] == {"busy_timeout": 5.0, "redis_params": {}, "redis_unsafe": "refuse"}
    args = build_parser("scrapy simhash", cli_defaults(project)).parse_args(["check", "--title", "t"])
    for s in SETTINGS:
        if s.engine and s.flag:
            assert getattr(args, s.flag) == engine[s.engine], s.name
    assert args.body_field == ["content", "text"] and args.namespace == "news"
    assert args.index.startswith("sqlite:///") and args.index.endswith("index.sqlite3")
    # the engine opens with them: the index is built for the changed thresholds
    with Deduplicator.open(str(tmp_path / "i.sqlite3"), **engine) as d:
        assert (d.title_max_distance, d.body_max_distance, d.actions["title"]) == (1, 4, "flag")
        assert d.index.namespace == "news"


def test_spider_attributes_override_only_per_spider_settings() -> None:
    spider = type("S", (), {"simhash_namespace": "mine", "simhash_bits": 32, "simhash_reset": "0"})()
    s = effective_settings(Settings({"SIMHASH_RESET": True}), spider)  # type: ignore[arg-type]
    engine = engine_options(s)
    assert engine["namespace"] == "mine" and engine["reset"] is False
    assert engine["bits"] == DEFAULTS["SIMHASH_BITS"]  # SIMHASH_BITS is not per spider




def test_settings_select_the_url_and_params(url: str) -> None:
    assert index_url_from_settings(Settings({"SIMHASH_INDEX_URL": "redis://h:1/2"})) == "redis://h:1/2"
    assert index_url_from_settings(Settings({"REDIS_URL": "redis://q:1/0"})) is None  # no scrapy-redis
    scrapy_redis = {"SCHEDULER": "scrapy_redis.scheduler.Scheduler"}
    assert index_url_from_settings(Settings(scrapy_redis)) == "redis://localhost:6379/0"
    dupefilter = {"DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter", "REDIS_HOST": "r1", "REDIS_PORT": 7000}
    assert index_url_from_settings(Settings(dupefilter)) == "redis://r1:7000/0"
    settings = Settings({
        **scrapy_redis,
        "REDIS_URL": url,
        "REDIS_PARAMS": {"socket_timeout": 9, "redis_cls": "redis.StrictRedis"},
        "SIMHASH_REDIS_PARAMS": '{"client_name": "from-settings"}',  # JSON text, as on the command line
    })
    assert index_url_from_settings(settings) == url
    assert redis_params_from_settings(settings) == {"socket_timeout": 9, "client_name": "from-settings"}
    own = Settings({**scrapy_redis, "SIMHASH_INDEX_URL": "redis://own/0", "REDIS_PARAMS": {"socket_timeout": 9},
                    "SIMHASH_REDIS_PARAMS": {"ssl_cert_reqs": "none"}})
    assert redis_params_from_settings(own) == {"ssl_cert_reqs": "none"}  # scrapy-redis's are not ours
    assert redis_params_from_settings(Settings()) == {}
    # end to end: what the pipeline passes to the index
    options = engine_options(effective_settings(settings, None))["index_options"]
    with open_index(index_url_from_settings(settings), **options) as ix:
        assert ix.count() == 0
        assert ix._server.client.connection_pool.connection_kwargs["socket_timeout"] == 9  # type: ignore[attr-defined]


def test_every_setting_says_what_is_allowed_and_its_default_is_allowed() -> None:
    assert [s.name for s in SETTINGS if not s.allowed] == []
    check_settings(effective_settings(Settings(), None))  # the defaults themselves pass
