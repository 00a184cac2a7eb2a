"""The commands the README and the documentation show exist: every ``scrapy-simhash`` and ``scrapy simhash``
command line in them names a real subcommand and only options that subcommand has, and every
``SIMHASH_*`` name they mention is a real setting. Fast: the parser is read, nothing is run."""

from __future__ import annotations

import argparse
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
