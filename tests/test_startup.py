"""Start-up work the engine avoids: jieba is imported without ``pkg_resources`` (~0.15 s), and
``pkg_resources`` still imports afterwards for whoever needs it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

CODE = """
import json, sys
import scrapy_simhash.features
import jieba
seen = "pkg_resources" in sys.modules
from scrapy_simhash.features import get_tokenizer
words = list(get_tokenizer().cut("他来到了网易杭研大厦"))
try:
    import pkg_resources  # noqa: F401
    later = True
except ImportError:
    later = False
print(json.dumps({"seen": seen, "later": later, "words": words}))
"""


@pytest.mark.skipif(importlib.util.find_spec("pkg_resources") is None, reason="pkg_resources is not installed")
def test_jieba_is_imported_without_pkg_resources_which_still_imports_later() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", CODE], capture_output=True, text=True, env=env,
                         check=True, cwd=str(REPO))
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"seen": False, "later": True, "words": ["他", "来到", "了", "网易", "杭研", "大厦"]}
