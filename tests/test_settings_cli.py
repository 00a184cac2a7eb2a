"""Each setting is checked by one rule, the settings table's, wherever its value comes from: a Scrapy
setting (the pipeline), a command-line option (``scrapy-simhash``, ``scrapy simhash``) or a keyword
of the Deduplicator; and each setting's option is made from the table, not written out again."""

from __future__ import annotations

import argparse
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from scrapy_simhash import Deduplicator, SimhashPipeline
from scrapy_simhash.cli import build_parser
from scrapy_simhash.cli import parser as cli_parser
from scrapy_simhash.cli.parser import option_type
from scrapy_simhash.settings import (
    BY_FLAG,
    BY_NAME,
    SETTINGS,
    SettingError,
    check_settings,
    cli_defaults,
    effective_settings,
)

#: A value each setting with a command-line option refuses, written as on the command line (a
#: Scrapy setting given with ``-s`` is text too), and the setting it belongs to.
BAD: list[tuple[str, str]] = [
    ("SIMHASH_NAMESPACE", ""),
    ("SIMHASH_TITLE_FIELD", ""),
    ("SIMHASH_BODY_FIELD", " , "),
    ("SIMHASH_URL_FIELD", ""),
    ("SIMHASH_TITLE_MAX_DISTANCE", "-1"),
    ("SIMHASH_TITLE_MAX_DISTANCE", "two"),
    ("SIMHASH_TITLE_MAX_DISTANCE", "64"),  # 64-bit fingerprints differ by at most 63 bits
    ("SIMHASH_BODY_MAX_DISTANCE", "-1"),
    ("SIMHASH_BODY_MAX_DISTANCE", "200"),
    ("SIMHASH_BITS", "48"),
    ("SIMHASH_TOP_K", "0"),
    ("SIMHASH_MAX_SHARE", "1.5"),
    ("SIMHASH_MAX_SHARE", "-0.1"),
    ("SIMHASH_TITLE_ACTION", "delete"),
    ("SIMHASH_BODY_ACTION", "keep"),
    ("SIMHASH_TTL_DAYS", "-3"),
    ("SIMHASH_TTL_DAYS", "inf"),
    ("SIMHASH_USER_DICT", "/no/such/user.dict"),
    ("SIMHASH_STOP_WORDS", "/no/such/stop_words.txt"),
    ("SIMHASH_TITLE_PATTERNS", "(unclosed"),
    ("SIMHASH_TITLE_NUMBERS", "101"),
    ("SIMHASH_TITLE_NUMBERS", "-1"),
    ("SIMHASH_SENTENCES_SHARED", "100"),  # the command line took any value >= 0
    ("SIMHASH_SENTENCES_SHARED", "-5"),
    ("SIMHASH_MAX_LINE_BYTES", "0"),
    ("SIMHASH_REDIS_UNSAFE", "maybe"),
]
#: Options that cannot be given a bad value: on/off switches (--x / --no-x), and the index location
#: (checked where it is opened, by the index module's own reading of it, for the pipeline too).
NO_BAD_VALUE = {"SIMHASH_DYNAMIC_THRESHOLD", "SIMHASH_MAIN_CONTENT", "SIMHASH_INDEX_URL"}


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def refused_by_the_setting(name: str, raw: str) -> SettingError:
    with pytest.raises(SettingError) as exc:
        check_settings(effective_settings(Settings({name: raw}), None))
    assert exc.value.name == name
    return exc.value


def refused_by_the_option(argv: list[str], capsys: pytest.CaptureFixture[str], prog: str = "scrapy-simhash",
                          defaults: dict[str, Any] | None = None) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        build_parser(prog, defaults).parse_args(argv)
    assert exc.value.code == 2, argv
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_every_setting_with_an_option_has_a_bad_value_here() -> None:
    assert {name for name, _ in BAD} | NO_BAD_VALUE == {s.name for s in BY_FLAG.values()}


@pytest.mark.parametrize(("name", "raw"), BAD)
def test_a_bad_value_is_refused_by_the_pipeline_and_the_command_line_alike(
        name: str, raw: str, capsys: pytest.CaptureFixture[str]) -> None:
    setting = refused_by_the_setting(name, raw)
    # the pipeline refuses it when the crawler is built (scrapy crawl exits non-zero: test_misconfiguration)
    with pytest.raises(SettingError) as exc:
        SimhashPipeline.from_crawler(get_crawler(settings_dict={name: raw}))
    assert str(exc.value) == str(setting)
    # every subcommand with the option refuses it, with what the setting allows
    option = BY_NAME[name].option
    assert option is not None
    argv = {"dedup": ["dedup", "in.jsonl", "--index", "i.sqlite3"], "import": ["import", "in.jsonl", "--index", "i"],
            "check": ["check", "--index", "i.sqlite3", "--title", "t"],
            "report": ["report", "-o", "r.html", "--index", "i.sqlite3"]}
    bound_by_bits = name.endswith("_MAX_DISTANCE") and raw.isdigit()
    with_option = [c for c, p in subcommands(build_parser()).items() if option in p._option_string_actions
                   and (not bound_by_bits or "--bits" in p._option_string_actions)]
    assert with_option
    for command in with_option:
        if command not in argv:
            continue  # reband and the index-only subcommands: below
        line = refused_by_the_option([*argv[command], option, raw], capsys)
        assert line.endswith(f"error: argument {option}: {raw!r} is not allowed: {setting.allowed}"), (command, line)


def test_the_distances_are_bounded_by_the_bits_of_the_command_line_too(capsys: pytest.CaptureFixture[str]) -> None:
    check_settings(effective_settings(Settings({"SIMHASH_BITS": 32, "SIMHASH_BODY_MAX_DISTANCE": 31}), None))
    with pytest.raises(SettingError) as exc:
        check_settings(effective_settings(Settings({"SIMHASH_BITS": 32, "SIMHASH_BODY_MAX_DISTANCE": 32}), None))
    assert exc.value.allowed == "an integer from 0 to SIMHASH_BITS - 1 (31)"
    line = refused_by_the_option(["dedup", "x", "--index", "i", "--bits", "32", "--body-max-distance", "32"], capsys)
    assert line.endswith(f"argument --body-max-distance: '32' is not allowed: {exc.value.allowed}")
    build_parser().parse_args(["dedup", "x", "--index", "i", "--bits", "32", "--body-max-distance", "31"])


def test_reband_and_the_index_subcommands_check_their_setting_options(capsys: pytest.CaptureFixture[str]) -> None:
    allowed = BY_NAME["SIMHASH_TITLE_MAX_DISTANCE"].allowed
    line = refused_by_the_option(["reband", "i.sqlite3", "--title-max-distance", "-1"], capsys)
    assert line.endswith(f"argument --title-max-distance: '-1' is not allowed: {allowed}")
    for argv in (["reband", "i.sqlite3"], ["stats", "--index", "i.sqlite3"], ["forget", "1", "--index", "i"]):
        line = refused_by_the_option([*argv, "--redis-unsafe", "maybe"], capsys)
        assert line.endswith(f"'maybe' is not allowed: {BY_NAME['SIMHASH_REDIS_UNSAFE'].allowed}"), line
    line = refused_by_the_option(["stats", "--index", "i.sqlite3", "--namespace", ""], capsys)
    assert line.endswith(f"'' is not allowed: {BY_NAME['SIMHASH_NAMESPACE'].allowed}")
    args = build_parser().parse_args(["reband", "i.sqlite3"])
    assert args.title_max_distance is None and args.body_max_distance is None  # the recorded ones


def test_a_projects_bad_setting_is_refused_by_scrapy_simhash_with_its_message(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``scrapy simhash`` takes its defaults from the project's settings: a bad one is refused as
    the crawl refuses it (exit 2), not passed on to the engine."""
    for name, raw in (("SIMHASH_SENTENCES_SHARED", 100), ("SIMHASH_TITLE_NUMBERS", "101"), ("SIMHASH_BITS", 48),
                      ("SIMHASH_TITLE_ACTION", "delete"), ("SIMHASH_TITLE_MAX_DISTANCE", "x"),
                      ("SIMHASH_TITLE_FIELD", "")):
        setting = refused_by_the_setting(name, raw)  # type: ignore[arg-type]
        line = refused_by_the_option(["check", "--title", "t"], capsys, "scrapy simhash",
                                     cli_defaults(Settings({name: raw})))
        assert line.startswith("scrapy simhash check: error: "), line
        assert name in line or str(BY_NAME[name].option) in line, line
        assert line.endswith(setting.allowed) or line.endswith(f"{setting.allowed} (the default of "
                                                               f"{BY_NAME[name].option})"), line


def test_every_setting_option_is_made_from_the_table() -> None:
    """Each option of a setting, in every subcommand, is the table's: its name, its converter and
    check (one function per setting), no list of choices of its own; its default is the setting's."""
    parser = build_parser()
    seen = set()
    for command, sub in subcommands(parser).items():
        for action in sub._actions:
            setting = BY_FLAG.get(action.dest)
            if setting is None:
                continue
            seen.add(setting.name)
            assert action.option_strings[0] == setting.option, (command, action.option_strings)
            assert action.choices is None, (command, setting.name)
            if action.nargs != 0 and setting.flag != "index":  # a value, not an on/off switch; index: above
                assert action.type is option_type(setting), (command, setting.name)
            if setting.flag == "index" or (command == "reband" and action.default is None):
                continue  # required outside a project; reband: None keeps what the index records
            default = action.default
            if isinstance(default, str) and callable(action.type):
                default = action.type(default)  # argparse converts a default given as text
            expected = setting.parse(setting.default)
            assert default == expected or (expected is None and default is False), (command, setting.name)
    assert seen == set(BY_FLAG[s.flag].name for s in SETTINGS if s.flag)


def test_no_setting_option_is_written_out_in_the_parser() -> None:
    """The parser names a setting's option only through the table (one helper makes them all)."""
    source = inspect.getsource(cli_parser)
    for setting in BY_FLAG.values():
        assert not re.search(rf"add_argument\(\s*[\"']{setting.option}[\"']", source), setting.option


@pytest.mark.parametrize(("keyword", "bad"), [
    ("sentences_shared", 100), ("title_numbers", 101), ("ttl_days", -3.0), ("title_action", "delete"),
    ("top_k", 0), ("max_share", 1.5), ("bits", 48), ("title_max_distance", 64), ("body_max_distance", -1),
    ("namespace", ""), ("title_patterns", ["(unclosed"]),
])
def test_the_deduplicator_checks_its_keywords_by_the_same_rule(keyword: str, bad: Any, tmp_path: Path) -> None:
    setting = next(s for s in SETTINGS if s.engine == keyword)
    path = tmp_path / "i.sqlite3"
    with pytest.raises(SettingError) as exc:
        Deduplicator.open(str(path), **{keyword: bad})
    expected = (setting.allowed if keyword != "title_max_distance"
                else "an integer from 0 to SIMHASH_BITS - 1 (63)")
    assert str(exc.value) == f"{keyword} = {bad!r} is not allowed: {expected}"
    assert isinstance(exc.value, ValueError)  # what a caller caught before
    assert not path.exists()  # refused before anything is opened


def test_the_deduplicator_checks_the_rule_keywords_on_an_open_index(tmp_path: Path) -> None:
    with Deduplicator.open(str(tmp_path / "i.sqlite3")) as d:
        bad_keywords: tuple[tuple[str, Any], ...] = (
            ("sentences_shared", 100), ("title_numbers", -1), ("body_action", "keep"), ("ttl_days", 0),
            ("body_max_distance", 64))
        for keyword, bad in bad_keywords:
            with pytest.raises(SettingError, match=rf"^{keyword} = "):
                Deduplicator(d.index, d.fingerprinter, **{keyword: bad})


def test_zero_means_none_for_ttl_and_max_share_as_text_or_number(capsys: pytest.CaptureFixture[str]) -> None:
    """``0`` turns expiry and the share cap off in a setting; the command line reads the option the same way."""
    for raw in (0, "0", "0.0", "", "none"):
        s = effective_settings(Settings({"SIMHASH_TTL_DAYS": raw, "SIMHASH_MAX_SHARE": raw}), None)
        check_settings(s)
        assert BY_NAME["SIMHASH_TTL_DAYS"].read(s) is None and BY_NAME["SIMHASH_MAX_SHARE"].read(s) is None
        args = build_parser().parse_args(["check", "--index", "i", "--title", "t", "--ttl-days", str(raw),
                                          "--max-share", str(raw)])
        assert args.ttl_days is None and args.max_share is None
