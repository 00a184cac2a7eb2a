"""The compiled engine's modules come all together or not at all: every extension the build declares
(setup.py: one per ``scrapy_simhash/_*_c.pyx``) is one :mod:`scrapy_simhash._compiled` imports, each
is built wherever the segmenter's is (a half-built install is noticed here, not by slower crawls), and
where one is missing every compiled path is off, so a partly built install fingerprints as the
pure-Python engine does instead of mixing the two."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import setuptools

from scrapy_simhash import _compiled
from tests.conftest import REPO

PACKAGE = REPO / "scrapy_simhash"
# A text with Han and Latin blocks, sentences, spaces and a date: every compiled module has work.
TEXT = "北京市气象台今天发布暴雨预警。  Heavy rain is expected on 2023年7月31日!\n气象台提醒市民注意安全."


def declared_modules(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The extension modules setup.py declares (run without building anything)."""
    monkeypatch.setenv("SCRAPY_SIMHASH_PURE_PYTHON", "1")  # no cythonize
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: None)
    namespace = runpy.run_path(str(REPO / "setup.py"), run_name="setup")
    return [name.removesuffix(".pyx") for name in namespace["SOURCES"]]


def test_the_build_declares_the_modules_compiled_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    declared = declared_modules(monkeypatch)
    assert "_segment_c" in declared
    assert sorted(declared) == sorted(_compiled.MODULES)


def test_every_declared_module_is_built_where_the_segmenter_is(monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec("scrapy_simhash._segment_c") is None:
        pytest.skip("the compiled engine is not built (setup.py build_ext --inplace)")
    missing = []
    for name in declared_modules(monkeypatch):
        try:
            importlib.import_module(f"scrapy_simhash.{name}")
        except ImportError:
            missing.append(name)
    assert missing == [], "a half-built engine: rebuild (setup.py build_ext --inplace)"
    if not os.environ.get("SCRAPY_SIMHASH_PURE_PYTHON"):
        assert _compiled.MISSING == ()
        assert all(getattr(_compiled, name) is not None for name in _compiled.MODULES)


@pytest.mark.parametrize("absent", _compiled.MODULES)
@pytest.mark.parametrize("error", [ImportError, AttributeError, ValueError])
def test_one_missing_module_turns_every_compiled_path_off(absent: str, error: type[Exception]) -> None:
    """Not built (ImportError), or built against another build of a module it cimports (Cython's checks:
    ``module '…_segment_c' has no attribute '__pyx_capi__'``, a type's size changed)."""

    def import_module(name: str) -> ModuleType:
        if name == f"scrapy_simhash.{absent}":
            raise error(name)
        return ModuleType(name)

    loaded, missing = _compiled._load(import_module)
    assert missing == (absent,)
    assert loaded == dict.fromkeys(_compiled.MODULES)


def test_the_environment_variable_turns_every_compiled_path_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRAPY_SIMHASH_PURE_PYTHON", "1")
    loaded, missing = _compiled._load(ModuleType)
    assert missing == ()
    assert loaded == dict.fromkeys(_compiled.MODULES)


def _engine(package_parent: Path, pure: bool = False) -> str:
    """What the package under ``package_parent`` reports of its compiled parts and its fingerprint of TEXT."""
    code = (
        "import json, sys\n"
        # An editable install's finder would serve a module missing here from the installed tree.
        "sys.meta_path[:] = [f for f in sys.meta_path\n"
        "                    if not str(getattr(f, '__module__', '')).startswith('__editable__')]\n"
        "from scrapy_simhash import _compiled\n"
        "from scrapy_simhash.fingerprint import segment, signatures, simhash\n"
        "from scrapy_simhash.text import hints, normalize\n"
        "from scrapy_simhash.fingerprint.fingerprinter import Fingerprinter\n"
        f"text = {TEXT!r}\n"
        "fp = Fingerprinter()\n"
        "paths = {'segment': segment.COMPILED, 'vocabulary': fp.features._compiled is not None,\n"
        "         'vote': simhash._vote_compiled is not None, 'hints': hints.compiled() is not None,\n"
        "         'signatures': signatures._pieces is not signatures._pieces_python,\n"
        "         'normalize': normalize._changed_chars is not normalize._changed_chars_python}\n"
        "print(json.dumps([list(_compiled.MISSING), paths, repr(fp.fingerprint('标题', text))]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SIMHASH_PURE_PYTHON"}
    env["PYTHONPATH"] = str(package_parent)
    if pure:
        env["SCRAPY_SIMHASH_PURE_PYTHON"] = "1"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=package_parent, capture_output=True,
                          text=True, timeout=120, check=True)
    return done.stdout


def test_a_tree_with_one_extension_missing_fingerprints_as_the_pure_engine(tmp_path: Path) -> None:
    built = sorted(PACKAGE.glob("_text_c.*.so")) + sorted(PACKAGE.glob("_text_c.*.pyd"))
    if not built or importlib.util.find_spec("scrapy_simhash._segment_c") is None:
        pytest.skip("the compiled engine is not built (setup.py build_ext --inplace)")
    shutil.copytree(PACKAGE, tmp_path / "scrapy_simhash", ignore=shutil.ignore_patterns(
        "__pycache__", "_text_c.*.so", "_text_c.*.pyd", "*.c"))
    missing, paths, fingerprint = json.loads(_engine(tmp_path))
    assert missing == ["_text_c"]
    assert not any(paths.values()), paths  # the segmenter's and the vocabulary's extensions are there, unused
    pure_missing, pure_paths, pure_fingerprint = json.loads(_engine(REPO, pure=True))
    assert pure_missing == [] and not any(pure_paths.values())
    assert fingerprint == pure_fingerprint
    _, compiled_paths, compiled_fingerprint = json.loads(_engine(REPO))
    assert all(compiled_paths.values()), compiled_paths
    assert compiled_fingerprint == pure_fingerprint


# --- which engine runs is said: --version, stats, the crawl's INFO line at open -------------------------

CRAWL = """
import sys
from scrapy.crawler import CrawlerProcess
from tests.conftest import ItemsSpider, crawl_settings
process = CrawlerProcess(crawl_settings(sys.argv[1], SIMHASH_WORKERS=0))
item = {"url": "u", "title": "北京今日发布暴雨蓝色预警", "body": "北京市气象台今天发布暴雨预警。"}
process.crawl(ItemsSpider, items=[item])
process.start()
"""


def _run(args: list[str], pure: bool, cwd: Path) -> str:
    """stdout and stderr of a process of this tree, with the pure-Python engine selected or not."""
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SIMHASH_PURE_PYTHON"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    if pure:
        env["SCRAPY_SIMHASH_PURE_PYTHON"] = "1"
    done = subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


@pytest.mark.parametrize("pure", [False, True], ids=["default", "pure-on-purpose"])
def test_the_version_stats_and_the_crawl_say_which_engine_runs(tmp_path: Path, pure: bool) -> None:
    if not pure and (importlib.util.find_spec("scrapy_simhash._segment_c") is None or _compiled.MISSING):
        pytest.skip("the compiled engine is not built (setup.py build_ext --inplace)")
    said = ("pure-Python engine, selected by SCRAPY_SIMHASH_PURE_PYTHON=1" if pure else "compiled engine")
    version = _run(["-m", "scrapy_simhash.cli", "--version"], pure, tmp_path)
    assert version.strip().endswith(f"({said})"), version
    index = tmp_path / "i.sqlite3"
    crawl = _run(["-c", CRAWL, str(index)], pure, REPO)
    opening = [line for line in crawl.splitlines() if "scrapy-simhash: index" in line]
    assert len(opening) == 1 and "INFO" in opening[0] and opening[0].endswith(f"; {said}"), opening
    stats = _run(["-m", "scrapy_simhash.cli", "stats", "--index", str(index)], pure, tmp_path)
    assert f"engine     {said}" in stats, stats


def test_missing_modules_are_said_with_their_names(tmp_path: Path) -> None:
    """A tree without one compiled module (a source install without a C compiler) says so, and which."""
    built = sorted(PACKAGE.glob("_text_c.*.so")) + sorted(PACKAGE.glob("_text_c.*.pyd"))
    if not built or importlib.util.find_spec("scrapy_simhash._segment_c") is None:
        pytest.skip("the compiled engine is not built (setup.py build_ext --inplace)")
    shutil.copytree(PACKAGE, tmp_path / "scrapy_simhash", ignore=shutil.ignore_patterns(
        "__pycache__", "_text_c.*.so", "_text_c.*.pyd", "*.c"))
    code = ("import sys\nsys.meta_path[:] = [f for f in sys.meta_path\n"
            "                    if not str(getattr(f, '__module__', '')).startswith('__editable__')]\n"
            "from scrapy_simhash.cli import main\nmain(['--version'])\n")
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SIMHASH_PURE_PYTHON"}
    env["PYTHONPATH"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "pure-Python engine, several times slower: compiled modules missing or unusable: _text_c" in done.stdout


def test_a_jieba_that_cuts_by_other_patterns_turns_every_compiled_path_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCRAPY_SIMHASH_PURE_PYTHON", raising=False)
    assert _compiled._jieba_cuts_as_compiled()  # the jieba installed here
    monkeypatch.setattr(_compiled, "_load", lambda: ({name: ModuleType(name) for name in _compiled.MODULES}, ()))
    monkeypatch.setattr(_compiled, "_jieba_cuts_as_compiled", lambda: False)
    loaded, missing, why = _compiled._bind()
    assert loaded == dict.fromkeys(_compiled.MODULES) and missing == ()
    assert "other pieces than the compiled segmenter" in why
