# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The text passes compiled (optional: :mod:`.normalize` and :mod:`.hints` fall back to their regexes,
which give the same answers): which characters of a class a text holds (:func:`chars_in`), the
fingerprint's regex hints in one pass (:func:`hint_flags`) and the rewrites that share its class
table (:func:`collapse_spaces`, :func:`tidy_line_breaks`, :func:`numbers`)."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport (Py_UNICODE_ISDECIMAL, Py_UNICODE_ISSPACE, PyUnicode_4BYTE_KIND, PyUnicode_DATA,
                              PyUnicode_FromKindAndData, PyUnicode_GET_LENGTH, PyUnicode_KIND, PyUnicode_READ)
from libc.stdint cimport uint64_t
from libc.stdlib cimport free, malloc


# -- normalize.py -----------------------------------------------------------------------------------


def chars_in(object text_, bytes bitmap):
    """``set(re.findall(class, text))`` for the character class whose BMP code points have their
    bit set in ``bitmap`` (8,192 bytes, bit ``c & 7`` of byte ``c >> 3``): which of them ``text``
    holds."""
    cdef str text = _exact(text_)
    cdef const unsigned char *bits = <const unsigned char *> PyBytes_AS_STRING(bitmap)
    cdef Py_UCS4 c
    cdef uint64_t cp
    cdef set out = set()
    if PyBytes_GET_SIZE(bitmap) != 8192:
        raise ValueError("a bitmap of the BMP is 8,192 bytes")
    for c in text:
        cp = <uint64_t> c
        if cp < 65536 and bits[cp >> 3] >> (cp & 7) & 1:
            out.add(c)
    return out


# -- hints.py: the regex hints' answers in one pass --------------------------------------------------


cdef enum:
    # the bits of a character in hints.py's class table, and the flags hint_flags answers (hints.H_*)
    _C_DIGIT = 1
    _C_SPACE = 2
    _C_SYM = 4
    _C_CJK = 8
    _C_FOLD = 16  # not ASCII, yet a case-insensitive pattern's ASCII letter matches it (ſ for s, K for k)
    _H_SPACE_RUN = 1
    _H_YEAR = 2
    _H_DATE0 = 4
    _H_DATE1 = 8
    _H_DATE2 = 16
    _H_AP = 32
    _H_CN_TIME = 64
    _H_SPACE_NL = 128
    _H_ADVERSARIAL = 256
    _H_DATE_TIME = 512
    _H_DATE3 = 1024
    _H_DATE4 = 2048
    _H_MONTHS = 4096
    _H_EXACT = 8192
    _H_ALL = 8191


cdef inline Py_UCS4 _at(int kind, void *data, Py_ssize_t n, Py_ssize_t i) noexcept:
    """The character at ``i``, NUL past the end (a NUL is no digit, space or mark any hint needs)."""
    return PyUnicode_READ(kind, data, i) if 0 <= i < n else 0


cdef inline Py_ssize_t _skip_spaces(int kind, void *data, Py_ssize_t n, Py_ssize_t i,
                                     const unsigned char *cls) noexcept:
    cdef Py_UCS4 c
    while i < n:
        c = PyUnicode_READ(kind, data, i)
        if c > 0xFFFF or not cls[c] & _C_SPACE:
            break
        i += 1
    return i


cdef inline Py_ssize_t _digits(int kind, void *data, Py_ssize_t n, Py_ssize_t i,
                               const unsigned char *cls) noexcept:
    """How many digits (``\\d``) start at ``i``."""
    cdef Py_ssize_t j = i
    cdef Py_UCS4 c
    while j < n:
        c = PyUnicode_READ(kind, data, j)
        if c > 0xFFFF or not cls[c] & _C_DIGIT:
            break
        j += 1
    return j - i


cdef inline bint _is(Py_UCS4 c, const unsigned char *cls, unsigned char bit) noexcept:
    return c <= 0xFFFF and cls[c] & bit


cdef inline Py_UCS4 _lower(Py_UCS4 c) noexcept:
    """An ASCII letter lower-cased (what bytes.lower does), any other character as it is."""
    return <Py_UCS4> (<unsigned int> c + 32) if 65 <= c <= 90 else c


cdef inline bint _month(Py_UCS4 a, Py_UCS4 b, Py_UCS4 c) noexcept:
    """Are these three lower-case characters the start of a month's name (dates._MONTH_PREFIXES)?"""
    if a == 106:  # j
        return b == 97 and c == 110 or b == 117 and (c == 110 or c == 108)  # jan jun jul
    if a == 102:
        return b == 101 and c == 98  # feb
    if a == 109:
        return b == 97 and (c == 114 or c == 121)  # mar may
    if a == 97:
        return b == 112 and c == 114 or b == 117 and c == 103  # apr aug
    if a == 115:
        return b == 101 and c == 112  # sep
    if a == 111:
        return b == 99 and c == 116  # oct
    if a == 110:
        return b == 111 and c == 118  # nov
    if a == 100:
        return b == 101 and c == 99  # dec
    return False


cdef inline bint _ordinal(Py_UCS4 a, Py_UCS4 b) noexcept:
    """st, nd, rd or th (lower case)."""
    return (a == 115 and b == 116 or a == 110 and b == 100 or a == 114 and b == 100
            or a == 116 and b == 104)


cdef inline bint _year(int kind, void *data, Py_ssize_t n, Py_ssize_t i, const unsigned char *cls) noexcept:
    """(?:1[89]|2[01])\\d\\d at ``i``."""
    cdef Py_UCS4 c = _at(kind, data, n, i), d = _at(kind, data, n, i + 1)
    return (((c == 49 and (d == 56 or d == 57)) or (c == 50 and (d == 48 or d == 49)))
            and _is(_at(kind, data, n, i + 2), cls, _C_DIGIT) and _is(_at(kind, data, n, i + 3), cls, _C_DIGIT))


def hint_flags(object text_, bytes classes):
    """:func:`.hints.hint_flags` in one pass over ``text``: which of the hints hold (``hints.H_*``), with
    ``H_EXACT``; every hint without ``H_EXACT`` when the text holds a character outside the BMP or one
    the class table marks ``_C_FOLD``.
    ``classes``: 65,536 bytes, a BMP code point's ``hints`` class bits."""
    cdef str text = _exact(text_)
    cdef const unsigned char *cls = <const unsigned char *> PyBytes_AS_STRING(classes)
    cdef int kind = PyUnicode_KIND(text)
    cdef void *data = PyUnicode_DATA(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i, j, k
    cdef Py_UCS4 c, p = 0, d, s
    cdef unsigned char cc
    cdef bint digit_before = False  # the last character before this one that is not \s is a \d
    cdef int flags = 0
    cdef Py_UCS4 a1 = 0, a2 = 0  # the last two ASCII characters, lower-cased (text.encode("ascii", "ignore").lower())
    if PyBytes_GET_SIZE(classes) != 65536:
        raise ValueError("a class table of the BMP is 65,536 bytes")
    for i in range(n):
        c = PyUnicode_READ(kind, data, i)
        if c > 0xFFFF:
            return _H_ALL
        cc = cls[c]
        if cc & _C_FOLD:
            return _H_ALL
        if c < 128:
            c = _lower(c)
            if _month(a2, a1, c):
                flags |= _H_MONTHS
            a2, a1 = a1, c
            c = PyUnicode_READ(kind, data, i)
        if cc & _C_DIGIT:
            d = _at(kind, data, n, i + 1)
            if _is(d, cls, _C_DIGIT):  # of the hints at a digit, only the year goes on with one
                if (c == 49 or c == 50) and _year(kind, data, n, i, cls):
                    flags |= _H_YEAR  # (?:1[89]|2[01])\d\d
            else:
                if (d == 45 or d == 58) and _is(_at(kind, data, n, i + 2), cls, _C_DIGIT):  # \d[-:]\d
                    flags |= _H_DATE_TIME
                if d == 45 or d == 47 or d == 46:  # \d([-/.])\d{1,2}\1\d
                    s = d
                    if _is(_at(kind, data, n, i + 2), cls, _C_DIGIT) and (
                            (_at(kind, data, n, i + 3) == s and _is(_at(kind, data, n, i + 4), cls, _C_DIGIT))
                            or (_is(_at(kind, data, n, i + 3), cls, _C_DIGIT) and _at(kind, data, n, i + 4) == s
                                and _is(_at(kind, data, n, i + 5), cls, _C_DIGIT))):
                        flags |= _H_DATE1 | (_H_DATE2 if s == 47 else 0)
                elif d == 44 or _is(d, cls, _C_SPACE) or _ordinal(_lower(d), _lower(_at(kind, data, n, i + 2))):
                    # \d(?:st|nd|rd|th)?\s+(?:jan|feb|…) and \d(?:st|nd|rd|th)?,?\s+(?:1[89]|2[01])\d\d,
                    # case-insensitive: an ordinal, a comma or a space after the digit
                    j = i + 1
                    if _ordinal(_lower(d), _lower(_at(kind, data, n, i + 2))):
                        j += 2
                    k = _skip_spaces(kind, data, n, j, cls)
                    if k > j and _month(_lower(_at(kind, data, n, k)), _lower(_at(kind, data, n, k + 1)),
                                        _lower(_at(kind, data, n, k + 2))):
                        flags |= _H_DATE3
                    if _at(kind, data, n, j) == 44:
                        j += 1
                        k = _skip_spaces(kind, data, n, j, cls)
                    if k > j and _year(kind, data, n, k, cls):
                        flags |= _H_DATE4
        elif cc & _C_SPACE:
            if c != 10:
                d = _at(kind, data, n, i + 1)
                if c != 32 or (d != 10 and _is(d, cls, _C_SPACE)):  # [^\S\n](?:[^\S\n]+|(?<! ))
                    flags |= _H_SPACE_RUN
            elif p == 32 or _is(_at(kind, data, n, i + 1), cls, _C_SPACE):  # a \n that " *\n\s*" changes
                flags |= _H_SPACE_NL
        elif cc & _C_SYM:
            if p == 32 or _is(p, cls, _C_CJK):  # SYM(?<=[CJK ]SYM)
                flags |= _H_ADVERSARIAL
        elif c == 0x5E74 and digit_before:  # \d\s*年\s*\d{1,2}\s*月\s*\d{1,2}\s*[日号]
            j = _skip_spaces(kind, data, n, i + 1, cls)
            k = _digits(kind, data, n, j, cls)
            if 1 <= k <= 2:
                j = _skip_spaces(kind, data, n, j + k, cls)
                if _at(kind, data, n, j) == 0x6708:
                    j = _skip_spaces(kind, data, n, j + 1, cls)
                    k = _digits(kind, data, n, j, cls)
                    if 1 <= k <= 2:
                        j = _skip_spaces(kind, data, n, j + k, cls)
                        d = _at(kind, data, n, j)
                        if d == 0x65E5 or d == 0x53F7:
                            flags |= _H_DATE0
        elif (c == 65 or c == 97 or c == 80 or c == 112) and digit_before:  # \d\s*[AaPp]\.?\s?[Mm]
            j = i + 1
            if _at(kind, data, n, j) == 46:
                j += 1
            if _is(_at(kind, data, n, j), cls, _C_SPACE):
                j += 1
            d = _at(kind, data, n, j)
            if d == 77 or d == 109:
                flags |= _H_AP
        elif ((c == 0x5348 and (p == 0x4E0A or p == 0x4E0B or p == 0x4E2D))  # 上午 下午 中午
              or (c == 0x4E0A and (p == 0x65E9 or p == 0x665A))  # 早上 晚上
              or (c == 0x6668 and (p == 0x65E9 or p == 0x51CC or p == 0x6E05))  # 早晨 凌晨 清晨
              or (c == 0x665A and p == 0x508D)  # 傍晚
              or (c == 0x95F4 and (p == 0x665A or p == 0x591C))):  # 晚间 夜间: (?:上午|…)\s*\d{1,2}:\d{2}
            j = _skip_spaces(kind, data, n, i + 1, cls)
            k = _digits(kind, data, n, j, cls)
            if 1 <= k <= 2 and _at(kind, data, n, j + k) == 58 and _digits(kind, data, n, j + k + 1, cls) >= 2:
                flags |= _H_CN_TIME
        if cc & _C_DIGIT:
            digit_before = True
        elif not cc & _C_SPACE:
            digit_before = False
        p = c
    return flags | _H_EXACT




cdef inline bint _digit(Py_UCS4 c, const unsigned char *cls) noexcept:
    """``\\d`` (``str.isdecimal``): the class table in the BMP."""
    return cls[c] & _C_DIGIT if c <= 0xFFFF else Py_UNICODE_ISDECIMAL(c)


cdef inline bint _space(Py_UCS4 c, const unsigned char *cls) noexcept:
    """``\\s`` (``str.isspace``): the class table in the BMP."""
    return cls[c] & _C_SPACE if c <= 0xFFFF else Py_UNICODE_ISSPACE(c)


cdef const unsigned char *_classes(bytes classes) except NULL:
    if PyBytes_GET_SIZE(classes) != 65536:
        raise ValueError("a class table of the BMP is 65,536 bytes")
    return <const unsigned char *> PyBytes_AS_STRING(classes)


def collapse_spaces(object text_, bytes classes):
    """``re.sub(r"[^\\S\\n]+", " ", text)``: each run of whitespace other than line breaks as one space."""
    cdef str text = _exact(text_)
    cdef const unsigned char *cls = _classes(classes)
    cdef int kind = PyUnicode_KIND(text)
    cdef void *data = PyUnicode_DATA(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0, j = 0, start
    cdef Py_UCS4 c
    cdef Py_UCS4 *out
    cdef bint changed = False
    out = <Py_UCS4 *> malloc((n + 1) * sizeof(Py_UCS4))
    if out == NULL:
        raise MemoryError()
    try:
        while i < n:
            c = PyUnicode_READ(kind, data, i)
            i += 1
            if c != 10 and _space(c, cls):
                start = i - 1
                while i < n:
                    c = PyUnicode_READ(kind, data, i)
                    if c == 10 or not _space(c, cls):
                        break
                    i += 1
                changed = changed or i - start > 1 or PyUnicode_READ(kind, data, start) != 32
                out[j] = 32
            else:
                out[j] = c
            j += 1
        if not changed:
            return text
        return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, j)
    finally:
        free(out)


def tidy_line_breaks(object text_, bytes classes):
    """``re.sub(r" *\\n\\s*", "\\n", text)``: the spaces before a line break and the whitespace after it
    dropped (``normalize._SPACE_NL_RE``)."""
    cdef str text = _exact(text_)
    cdef const unsigned char *cls = _classes(classes)
    cdef int kind = PyUnicode_KIND(text)
    cdef void *data = PyUnicode_DATA(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0, j = 0, k, start
    cdef Py_UCS4 c
    cdef Py_UCS4 *out
    cdef bint changed = False
    out = <Py_UCS4 *> malloc((n + 1) * sizeof(Py_UCS4))
    if out == NULL:
        raise MemoryError()
    try:
        while i < n:
            c = PyUnicode_READ(kind, data, i)
            if c == 32:
                k = i
                while k < n and PyUnicode_READ(kind, data, k) == 32:
                    k += 1
                if k < n and PyUnicode_READ(kind, data, k) == 10:
                    changed = True
                    i = k  # the line break, below
                else:
                    while i < k:
                        out[j] = 32
                        j += 1
                        i += 1
                    continue
            if PyUnicode_READ(kind, data, i) == 10:
                out[j] = 10
                j += 1
                i += 1
                start = i
                while i < n and _space(PyUnicode_READ(kind, data, i), cls):
                    i += 1
                changed = changed or i > start
            else:
                out[j] = c
                j += 1
                i += 1
        if not changed:
            return text
        return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, j)
    finally:
        free(out)


def numbers(object text_, bytes classes):
    """``re.findall(r"\\d\\d*(?:[.,]\\d+)*", text)`` (``signatures._NUMBER``)."""
    cdef str text = _exact(text_)
    cdef const unsigned char *cls = _classes(classes)
    cdef int kind = PyUnicode_KIND(text)
    cdef void *data = PyUnicode_DATA(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0, start
    cdef Py_UCS4 c
    cdef list out = []
    while i < n:
        if not _digit(PyUnicode_READ(kind, data, i), cls):
            i += 1
            continue
        start = i
        i += 1
        while i < n and _digit(PyUnicode_READ(kind, data, i), cls):
            i += 1
        while i + 1 < n:
            c = PyUnicode_READ(kind, data, i)
            if (c != 46 and c != 44) or not _digit(PyUnicode_READ(kind, data, i + 1), cls):
                break
            i += 2
            while i < n and _digit(PyUnicode_READ(kind, data, i), cls):
                i += 1
        out.append(text[start:i])
    return out
