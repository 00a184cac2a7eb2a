"""Every setting is documented: the settings reference of the documentation is made from the settings
table (``docs/_ext/reference_text.py``), each setting with its description, default and per-spider mark;
the README's short table shows real settings with their real defaults."""

from __future__ import annotations

import re
import sys

from scrapy_simhash.settings import DEFAULTS, PER_SPIDER, SETTINGS
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "docs" / "_ext"))
import reference_text  # the documentation's own generator, read without Sphinx


def reference() -> dict[str, dict[str, str]]:
    """Setting → its fields (``Default``, ``Per spider`` …) in the generated reference."""
    text, _ = reference_text.settings_rst()
    found: dict[str, dict[str, str]] = {}
    for block in re.split(r"^\.\. setting:: ", text, flags=re.M)[1:]:
        name = block.split("\n", 1)[0].strip()
        found[name] = dict(re.findall(r"^:([A-Za-z ]+): (.*)$", block, re.M))
        found[name]["doc"] = block
    return found


def test_every_setting_has_a_description() -> None:
    """The Sphinx build (``-W``) fails on the same problems; this says which setting, fast."""
    assert [s.name for s in SETTINGS if not s.doc.strip()] == []
    assert reference_text.settings_rst()[1] == []


def test_reference_lists_every_setting_with_its_default() -> None:
    ref = reference()
    assert set(ref) == set(DEFAULTS)
    for name, default in DEFAULTS.items():
        assert ref[name]["Default"] == f"``{json_like(default)}``", (name, ref[name]["Default"])
    for s in SETTINGS:
        assert s.doc.strip() in ref[s.name]["doc"], s.name


def test_per_spider_marks_match() -> None:
    assert {name for name, fields in reference().items() if "Per spider" in fields} == set(PER_SPIDER)


def json_like(value: object) -> str:
    """How the documentation writes a Python default: strings in double quotes."""
    return repr(value).replace("'", '"')


def readme_table() -> dict[str, tuple[str, bool]]:
    rows = {}
    for line in (REPO / "README.md").read_text("utf-8").splitlines():
        m = re.match(r"^\| `(SIMHASH_[A-Z_]+)` \| (.*?) \| (yes)? ?\|", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3) == "yes")
    return rows


def test_readme_table_shows_real_settings_with_their_defaults() -> None:
    table = readme_table()
    assert len(table) >= 10
    assert set(table) <= set(DEFAULTS), set(table) - set(DEFAULTS)
    for name, (default, per_spider) in table.items():
        assert default.startswith(f"`{json_like(DEFAULTS[name])}`"), (name, default)
        assert per_spider == (name in PER_SPIDER), name


def test_cli_reference_documents_every_option() -> None:
    text, problems = reference_text.cli_rst()
    assert problems == []
    parser = reference_text.build_parser()
    for name, (sub, _) in reference_text.subcommands(parser).items():
        assert f"scrapy-simhash {name}\n" in text
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert re.search(rf"^\.\. option:: .*{re.escape(option)}\b", text, re.M), (name, option)
