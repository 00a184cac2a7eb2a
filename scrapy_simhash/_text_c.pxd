# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""What the compiled text passes share with the other compiled scans of a text (inline only: no
run-time import of :mod:`._text_c` comes with it)."""


cdef inline str _exact(object text):
    """``text`` as a ``str`` itself (a subclass, such as lxml's text results, copied)."""
    if type(text) is str:
        return <str> text
    if isinstance(text, str):
        return str.__str__(text)
    raise TypeError(f"expected a str, not {type(text).__name__}")
