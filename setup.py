"""The optional compiled engine (everything else is in pyproject.toml).

``scrapy_simhash/_segment_c.pyx`` (the segmenter, the words, TF-IDF and the bit vote of a text) is
compiled when Cython (a build requirement) and a C compiler are there; the extension is optional, so
without a compiler the build goes on and the pure-Python code, which gives the same fingerprints, runs
instead. ``SCRAPY_SIMHASH_PURE_PYTHON=1`` skips it. ``-ffp-contract=off``: no fused multiply-add (the
fingerprints depend on every rounding of the Python code's arithmetic, done in the same order).
"""

import os

from setuptools import Extension, setup

ext_modules = []
if not os.environ.get("SCRAPY_SIMHASH_PURE_PYTHON"):
    try:
        from Cython.Build import cythonize
    except ImportError:
        cythonize = None
    if cythonize is not None:
        ext_modules = cythonize(
            [Extension("scrapy_simhash._segment_c", ["scrapy_simhash/_segment_c.pyx"],
                       extra_compile_args=[] if os.name == "nt" else ["-ffp-contract=off"])],
            compiler_directives={"language_level": "3"},
        )
        for ext in ext_modules:
            ext.optional = True  # a failed compile leaves the pure-Python fallback, not a failed install

setup(ext_modules=ext_modules)
