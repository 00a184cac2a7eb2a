"""Every setting of scrapy_simhash.settings is in the README's table with its default, and nothing else is."""

from __future__ import annotations

import re

from scrapy_simhash.settings import DEFAULTS, PER_SPIDER
from tests.conftest import REPO


def readme_table() -> dict[str, str]:
    rows = {}
    for line in (REPO / "README.md").read_text("utf-8").splitlines():
        m = re.match(r"^\| `(SIMHASH_[A-Z_]+)` \| (.*?) \| (yes)? ?\|", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def test_readme_lists_every_setting_with_its_default():
    table = readme_table()
    assert set(table) == set(DEFAULTS)
    for name, default in DEFAULTS.items():
        shown = json_like(default)
        assert table[name].startswith(f"`{shown}`"), (name, table[name], shown)


def json_like(value: object) -> str:
    """How the README writes a Python default: strings in double quotes."""
    return repr(value).replace("'", '"')


def test_per_spider_marks_match():
    marked = set()
    for line in (REPO / "README.md").read_text("utf-8").splitlines():
        m = re.match(r"^\| `(SIMHASH_[A-Z_]+)` \| .*? \| yes \|", line)
        if m:
            marked.add(m.group(1))
    assert marked == set(PER_SPIDER)
