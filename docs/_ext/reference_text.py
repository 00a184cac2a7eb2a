"""The settings and command-line references as reStructuredText, made from the code.

The settings reference comes from the settings table (:data:`scrapy_simhash.settings.SETTINGS`),
the command-line reference from the parser (:func:`scrapy_simhash.cli.parser.build_parser`). Each
function returns the text and the problems found: a setting without a description, an option or a
positional argument without help. The Sphinx extension (``simhash_reference.py``) turns each problem
into a warning, so a build with ``-W`` fails on it; the tests read the same text without Sphinx.
"""

from __future__ import annotations

import argparse
import os
import re
from typing import Any

from scrapy_simhash.cli.common import PROG
from scrapy_simhash.cli.parser import build_parser
from scrapy_simhash.settings import SETTINGS


def python_literal(value: Any) -> str:
    """A default as a project writes it in ``settings.py``: strings in double quotes."""
    return repr(value).replace("'", '"')


def plain(text: str) -> str:
    """Text from the parser (help, descriptions) as reStructuredText that shows it as written."""
    for char in "\\*`|":
        text = text.replace(char, "\\" + char)
    return re.sub(r"(\w)_(?=\W|$)", r"\1\\_", text)  # NAME_ would be a reference


def _lines(text: str, indent: str = "") -> list[str]:
    return [indent + line if line else "" for line in text.splitlines()]


def settings_rst() -> tuple[str, list[str]]:
    """The settings reference: a summary table, then one section per setting, in the table's order."""
    problems: list[str] = []
    out = [
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 40 30 10",
        "",
        "   * - setting",
        "     - default",
        "     - per spider",
    ]
    for s in SETTINGS:
        out += [f"   * - :setting:`{s.name}`", f"     - ``{python_literal(s.default)}``",
                f"     - {'yes' if s.per_spider else ''}"]
    out.append("")
    for s in SETTINGS:
        if not s.doc.strip():
            problems.append(f"setting {s.name} has no description (the doc= of its Setting in "
                            "scrapy_simhash/settings.py)")
        out += [f".. setting:: {s.name}", "", s.name, "~" * len(s.name), ""]
        out += [f":Default: ``{python_literal(s.default)}``"]
        if s.allowed:
            out += [f":Allowed: {s.allowed}"]
        if s.per_spider:
            attr = s.name.lower()
            out += [f":Per spider: yes: a spider attribute ``{attr}`` or ``-a {attr}=…``"]
        if s.option:
            out += [f":Command line: ``{s.option}`` (``scrapy-simhash``, ``scrapy simhash``)"]
        out += ["", *_lines(s.doc or "(no description)"), ""]
    return "\n".join(out) + "\n", problems


def _invocation(action: argparse.Action) -> str:
    if not action.option_strings:
        return action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    return ", ".join(f"{o} {metavar}" for o in action.option_strings)


def _help(action: argparse.Action, parser: argparse.ArgumentParser) -> str:
    text = action.help or ""
    if "%" in text:  # as argparse formats a help: %(default)s, %% …
        text = text % {**vars(action), "prog": parser.prog}
    return text


def subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    """Subcommand name → (its parser, its one-line help)."""
    found: dict[str, tuple[argparse.ArgumentParser, str]] = {}
    for action in parser._actions:  # argparse has no public walk of its subparsers
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                found[name] = (sub, helps.get(name, ""))
    return found


def _arguments(parser: argparse.ArgumentParser, where: str, problems: list[str]) -> list[str]:
    out: list[str] = []
    for group in parser._action_groups:
        actions = [a for a in group._group_actions
                   if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
        if not actions:
            continue
        title = group.title or "arguments"
        out += [f".. rubric:: {plain(title)}", ""]
        for action in actions:
            text = _help(action, parser)
            if not text.strip():
                problems.append(f"{where}: {_invocation(action)} has no help (scrapy_simhash/cli/parser.py)")
                text = "(no help)"
            out += [f".. option:: {_invocation(action)}", ""]
            out += _lines(plain(text), "   ")
            default = action.default
            if (action.option_strings and action.nargs != 0 and default not in (None, [], "")
                    and "default:" not in text and not isinstance(action, argparse.BooleanOptionalAction)):
                out += ["", f"   Default: ``{default}``."]
            if action.required and action.option_strings:
                out += ["", "   Required."]
            out.append("")
    return out


def cli_rst(prog: str = PROG) -> tuple[str, list[str]]:
    """The command-line reference: the program, then each subcommand (usage, description, options)."""
    problems: list[str] = []
    os.environ["COLUMNS"] = "100"  # the usage lines' width, whatever the terminal building the docs
    parser = build_parser(prog)
    out = [f".. program:: {prog}", "", "::", "", *_lines(parser.format_usage().strip(), "   "), ""]
    out += [*_lines(plain(parser.description or "")), ""]
    out += _arguments(parser, prog, problems)
    for name, (sub, one_line) in subcommands(parser).items():
        if not one_line.strip():
            problems.append(f"{prog} {name} has no help")
        title = f"{prog} {name}"
        out += [f".. _cli-{name}:", "", title, "-" * len(title), "", f"*{plain(one_line)}*", ""]
        out += [f".. program:: {prog} {name}", "", "::", "", *_lines(sub.format_usage().strip(), "   "), ""]
        out += [*_lines(plain(sub.description or "")), ""]
        out += _arguments(sub, f"{prog} {name}", problems)
        if sub.epilog:
            out += ["::", "", *_lines(sub.epilog, "   "), ""]
    return "\n".join(out) + "\n", problems
