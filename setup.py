"""The optional compiled segmenter (everything else is in pyproject.toml).

``scrapy_simhash/_segment_c.pyx`` is compiled when Cython (a build requirement) and a C compiler are
there; the extension is optional, so without a compiler the build goes on and the pure-Python
segmenter, which cuts the same words, runs instead. ``SCRAPY_SIMHASH_PURE_PYTHON=1`` skips it.
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
            [Extension("scrapy_simhash._segment_c", ["scrapy_simhash/_segment_c.pyx"])],
            compiler_directives={"language_level": "3"},
        )
        for ext in ext_modules:
            ext.optional = True  # a failed compile leaves the pure-Python fallback, not a failed install

setup(ext_modules=ext_modules)
