"""Sphinx configuration of the scrapy-simhash documentation (``sphinx-build -W -b html docs docs/_build/html``).

The settings and command-line references are made from the code (``_ext/simhash_reference.py``).
Nothing is fetched from the network: no intersphinx.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE / "_ext")]

from scrapy_simhash.__version__ import __version__  # noqa: E402

project = "scrapy-simhash"
author = "scrapy-simhash contributors"
copyright = "scrapy-simhash contributors"
release = version = __version__

extensions = ["myst_parser", "simhash_reference"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
default_role = "literal"
smartquotes = False  # "--index" stays two hyphens, quotes stay as typed
suppress_warnings: list[str] = []

html_theme = "furo"
html_title = f"scrapy-simhash {release}"
html_static_path: list[str] = []
