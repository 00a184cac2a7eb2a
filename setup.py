"""The optional compiled engine (everything else is in pyproject.toml).

Every ``scrapy_simhash/_*_c.pyx`` is compiled to an extension module of its own when Cython (a build
requirement) and a C compiler are there: ``_segment_c`` (the segmenter), ``_vocabulary_c`` (the words,
TF-IDF and the bit vote of a text), ``_signatures_c`` (the sentence pieces and the signatures' hashes),
``_text_c`` (the text passes); they share C-level types through their ``.pxd`` files. Each extension is
optional, so without a compiler the build goes on and the pure-Python code, which gives the same
fingerprints, runs instead (``scrapy_simhash/_compiled.py`` uses the compiled modules only when all of
them are there).
``SCRAPY_SIMHASH_PURE_PYTHON=1`` skips them. ``-ffp-contract=off``: no fused multiply-add (the
fingerprints depend on every rounding of the Python code's arithmetic, done in the same order).
"""

import os
from pathlib import Path

from setuptools import Extension, setup

#: The compiled modules' sources, one extension each.
SOURCES = sorted(p.name for p in (Path(__file__).resolve().parent / "scrapy_simhash").glob("_*_c.pyx"))

ext_modules = []
if not os.environ.get("SCRAPY_SIMHASH_PURE_PYTHON"):
    try:
        from Cython.Build import cythonize
    except ImportError:
        cythonize = None
    if cythonize is not None:
        ext_modules = cythonize(
            [Extension(f"scrapy_simhash.{name[:-len('.pyx')]}", [f"scrapy_simhash/{name}"],
                       extra_compile_args=[] if os.name == "nt" else ["-ffp-contract=off"])
             for name in SOURCES],
            compiler_directives={"language_level": "3"},
        )
        for ext in ext_modules:
            ext.optional = True  # a failed compile leaves the pure-Python fallback, not a failed install

setup(ext_modules=ext_modules)
