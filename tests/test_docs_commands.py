"""The commands the README and the documentation show exist: every ``scrapy-simhash`` and ``scrapy simhash``
command line in them names a real subcommand and only options that subcommand has, and every ``SIMHASH_*``
name they mention is a real setting (the parser is read, nothing is run). And the transcripts of the
command-line page have the shape of a real run: ``dedup``, ``stats`` and ``reband`` rerun on three items."""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path

import pytest

from scrapy_simhash.cli.parser import build_parser
from scrapy_simhash.settings import BY_NAME
from tests.conftest import REPO

#: Where users read commands: the README and the documentation's own pages (the decision records are
#: evidence, with the benchmarks' commands, not instructions).
PAGES = [REPO / "README.md", REPO / "CHANGES.md", REPO / "example_project" / "README.md",
         *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "docs").glob("*.rst"))]
#: ``SIMHASH_*`` names that are not settings: the test suite's Redis variable, and patterns for a group.
NOT_SETTINGS = {"SIMHASH_TEST_REDIS_URL", "SIMHASH_TITLE_MAX_DISTANSE"}  # the warning's misspelled example
#: Log messages start with the plugin's name too: "scrapy-simhash cannot open its index …".
MESSAGE_WORDS = ("has", "cannot", "summary")
PROGRAMS = (("scrapy-simhash",), ("scrapy", "simhash"))
#: Where an example's command line ends.
ENDS = {"|", ">", ">>", "<", "2>", "&&", ";", "||"}


def _subcommands() -> dict[str, set[str]]:
    parser = build_parser()
    found = {"": {o for a in parser._actions for o in a.option_strings}}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[name] = {o for a in sub._actions for o in a.option_strings}
    return found


SUBCOMMANDS = _subcommands()


def command_lines(text: str) -> list[str]:
    """Command lines shown: ``$ …`` lines of examples, and inline code that starts with a program name."""
    lines = [m.group(1) for m in re.finditer(r"^\s*\$ (.+)$", text, re.M)]
    lines += [code for code in re.findall(r"``?((?:scrapy-simhash|scrapy simhash) [^`]+)``?", text)
              if code.split()[1 if code.startswith("scrapy-") else 2] not in MESSAGE_WORDS]
    return lines


def check(line: str) -> list[str]:
    """What is wrong with one shown command line (nothing when it is not one of ours)."""
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        tokens = line.split()
    problems = []
    i = 0
    while i < len(tokens):
        program = next((p for p in PROGRAMS if tuple(tokens[i:i + len(p)]) == p), None)
        if program is None:
            i += 1
            continue
        i += len(program)
        if program == ("scrapy", "simhash"):
            while i < len(tokens) and tokens[i] in ("-s", "--set"):  # Scrapy's own -s NAME=VALUE
                i += 2
        command = ""
        if i < len(tokens) and not tokens[i].startswith("-"):
            command = tokens[i]
            i += 1
            if command in ("SUBCOMMAND", "…"):
                continue
            if command not in SUBCOMMANDS:
                problems.append(f"{line!r}: no subcommand {command!r}")
                continue
        while i < len(tokens) and tokens[i] not in ENDS:
            token = tokens[i]
            if re.match(r"^--?[a-z]", token):
                option = token.split("=", 1)[0]
                if option not in SUBCOMMANDS[command]:
                    problems.append(f"{line!r}: {' '.join(program)} {command} has no option {option}")
            i += 1
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_command_shown_exists(page: Path) -> None:
    text = page.read_text("utf-8")
    problems = [p for line in command_lines(text) for p in check(line)]
    assert problems == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_setting_named_exists(page: Path) -> None:
    names = set(re.findall(r"\bSIMHASH_[A-Z_]*[A-Z]\b", page.read_text("utf-8")))
    assert sorted(names - set(BY_NAME) - NOT_SETTINGS) == []


def test_the_check_finds_what_it_is_for() -> None:
    assert check("scrapy-simhash lookup URL --index i.sqlite3")
    assert check("scrapy-simhash stats --index i.sqlite3 --verbose")
    assert check("scrapy simhash -s SIMHASH_BITS=32 dedup x.jsonl --title-max 3")
    assert not check("scrapy-simhash dedup x.jsonl --index i.sqlite3 -o kept.jsonl | head -1")
    assert not check("scrapy simhash -s SIMHASH_BITS=32 reband --body-bands 6")
    assert not check("scrapy crawl news -s SIMHASH_ENABLED=False -O articles.jsonl")
    assert command_lines("text `scrapy-simhash reband PATH --body-max-distance 5` more") == [
        "scrapy-simhash reband PATH --body-max-distance 5"]


def transcript(command: str) -> list[str]:
    """The output the command-line page shows after ``$ COMMAND`` (up to the next command)."""
    lines = (REPO / "docs" / "cli.rst").read_text("utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"$ {command}")
    shown = []
    for line in lines[start + 1:]:
        if not line.startswith("   ") or line.strip().startswith("$ "):
            break
        shown.append(line[3:])
    return shown


def labels(lines: list[str]) -> list[str]:
    """What each line of a command's output is (its first word), not its values; '…' lines are trims."""
    return [line.split()[0] if not line.startswith(" ") else "  " + line.split()[0]
            for line in lines if line.strip() and line.strip() != "…"]


def test_transcripts_have_the_shape_of_a_real_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The dedup summary, stats and reband lines the command-line page shows are what a run prints today:
    the same lines in the same order (the values differ from run to run)."""
    from scrapy_simhash import cli
    from tests.conftest import STORY_EN, STORY_ZH, repost_with_suffix

    items = tmp_path / "articles.jsonl"
    rows = [{**STORY_ZH, "url": "http://a.example/1"}, {**repost_with_suffix(STORY_ZH), "url": "http://b.example/1"},
            {**STORY_EN, "url": "http://a.example/2"}]
    items.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    index = str(tmp_path / "demo.sqlite3")
    assert cli.main(["dedup", str(items), "--index", index, "-o", str(tmp_path / "kept.jsonl")]) == 0
    dedup = capsys.readouterr().err.splitlines()
    assert labels(dedup) == labels(transcript(
        "scrapy-simhash dedup articles.jsonl --index demo.sqlite3 -o kept.jsonl --decisions decisions.jsonl"))
    assert cli.main(["stats", "--index", index]) == 0
    stats = capsys.readouterr().out.splitlines()
    assert labels(stats) == labels(transcript("scrapy-simhash stats --index demo.sqlite3"))
    assert cli.main(["reband", index, "--body-max-distance", "5"]) == 0
    out = capsys.readouterr()
    shown = transcript("scrapy-simhash reband warm.sqlite3 --body-max-distance 5")
    assert len(shown) == 1 and re.sub(r"[\d.]+", "N", shown[0].replace("warm.sqlite3", "PATH")) == re.sub(
        r"[\d.]+", "N", (out.out + out.err).strip().replace(index, "PATH"))
