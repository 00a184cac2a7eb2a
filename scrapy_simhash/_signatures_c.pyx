# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The sentence signatures' scans compiled (optional: :mod:`.signatures` falls back to its
pure-Python versions, which give the same pieces): a text's sentence and line pieces
(:func:`sentence_pieces`) and its count of non-whitespace characters (:func:`non_space`)."""

from cpython.dict cimport PyDict_GetItem
from cpython.unicode cimport PyUnicode_4BYTE_KIND, PyUnicode_FromKindAndData
from libc.stdlib cimport free, malloc

from ._text_c cimport _exact


cdef inline bint _sentence_mark(Py_UCS4 c) noexcept:
    return c == u'。' or c == u'!' or c == u'?' or c == u';'


cdef inline bint _closer(Py_UCS4 c) noexcept:
    return c == u'"' or c == u"'" or c == u'”' or c == u'’' or c == u')' or c == u']' or c == u'」' or c == u'』'


cdef void _piece(dict found, str text, Py_ssize_t lo, Py_ssize_t hi, Py_UCS4 *buf, bint sentence) except *:
    """``text[lo:hi]`` without whitespace, lower-cased, into ``found``: 0 for a sentence, else
    ``_LINE_BIT`` unless it is there already."""
    cdef Py_ssize_t i, n = 0
    cdef Py_UCS4 c
    for i in range(lo, hi):
        c = text[i]
        if not c.isspace():
            buf[n] = c
            n += 1
    key = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, buf, n).lower()
    if sentence:
        found[key] = 0
    elif PyDict_GetItem(found, key) == NULL:
        found[key] = _LINE_BIT


cdef object _LINE_BIT = 1 << 63


def sentence_pieces(object text_):
    r"""``signatures._pieces_python(text)``: the pieces of a text, cut at line breaks and at
    ``signatures._SENTENCE_END`` (``[。!?;]+``, or a period before a space or the end with closing
    quotes and brackets between), each without its whitespace (``\s``: ``str.isspace``) and
    lower-cased → 0 for a sentence (a piece a mark ends), ``_LINE_BIT`` for a line (a piece only a
    line break or the end ends)."""
    cdef str text = _exact(text_)
    cdef dict found = {}
    cdef Py_ssize_t n = len(text), i = 0, j, line_end, start
    cdef Py_UCS4 c
    cdef Py_UCS4 *buf = <Py_UCS4 *> malloc((n + 1) * sizeof(Py_UCS4))
    if buf == NULL:
        raise MemoryError()
    try:
        while True:
            line_end = i
            while line_end < n and text[line_end] != u'\n':
                line_end += 1
            start = i
            while i < line_end:
                c = text[i]
                if _sentence_mark(c):
                    j = i + 1
                    while j < line_end and _sentence_mark(text[j]):
                        j += 1
                    _piece(found, text, start, i, buf, True)
                    start = i = j
                    continue
                if c == u'.':
                    j = i + 1
                    while j < line_end and _closer(text[j]):
                        j += 1
                    if j == line_end or (<Py_UCS4> text[j]).isspace():
                        _piece(found, text, start, i, buf, True)
                        start = i = i + 1
                        continue
                i += 1
            _piece(found, text, start, line_end, buf, False)
            if line_end == n:
                break
            i = line_end + 1
    finally:
        free(buf)
    return found


def non_space(object text_):
    r"""``len(re.sub(r"\s+", "", text))``: how many characters of ``text`` are not whitespace."""
    cdef str text = _exact(text_)
    cdef Py_ssize_t n = 0
    cdef Py_UCS4 c
    for c in text:
        if not c.isspace():
            n += 1
    return n
