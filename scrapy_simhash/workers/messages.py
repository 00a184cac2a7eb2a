"""What goes between the crawl process and a pipeline worker, as JSON (never pickle).

A call names a function of a module (``module:qualname``: the worker imports it, as a spawned
process imports what its parent names) and its arguments: the items' titles and bodies (``str``,
``bytes``, ``None`` or lists of them), URLs, request ids and entry ids. An answer holds the same
kinds of values plus verdicts, their entries and the index's errors, rebuilt on the other side from
a fixed set of types: nothing a message holds can make the reader run code of its choosing.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
import json
import sqlite3
from collections.abc import Callable
from typing import Any

from ..engine import Verdict
from ..fingerprint.fingerprinter import Fingerprints
from ..index.base import Entry, IndexOpenError, IndexWriteError, SimhashIndexError

#: The fields of :class:`Fingerprints`, in the order a worker sends them.
FINGERPRINT_FIELDS = tuple(f.name for f in dataclasses.fields(Fingerprints))
#: The errors an answer may carry, rebuilt as themselves; any other as a ``RuntimeError`` naming it.
_ERRORS: dict[str, type[Exception]] = {cls.__name__: cls for cls in (
    SimhashIndexError, IndexOpenError, IndexWriteError, TypeError, ValueError, OverflowError,
    sqlite3.Error, sqlite3.DatabaseError, sqlite3.OperationalError, sqlite3.IntegrityError,
    sqlite3.ProgrammingError, sqlite3.InterfaceError, sqlite3.DataError, sqlite3.NotSupportedError,
    sqlite3.InternalError)}


def _out(value: Any) -> Any:
    """``value`` as JSON values: bytes, verdicts and errors as tagged objects, tuples as lists."""
    if value is None or isinstance(value, (str, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [_out(v) for v in value]
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, Verdict):
        return {"verdict": {name: _out(field) for name, field in dataclasses.asdict(value).items()}}
    if isinstance(value, dict):  # (a verdict's entry, as asdict gives it)
        return {name: _out(field) for name, field in value.items()}
    if isinstance(value, Exception):
        return {"error": type(value).__name__, "message": str(value)}
    raise TypeError(f"a worker message cannot hold a {type(value).__name__}")


def _in(value: Any) -> Any:
    """What :func:`_out` made, back."""
    if isinstance(value, list):
        return [_in(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "bytes" in value:
        return base64.b64decode(value["bytes"])
    if "verdict" in value:
        fields = value["verdict"]
        original = fields["original"]
        if original is not None:
            original = Entry(**{**original, "sentences": tuple(original["sentences"])})
        return Verdict(**{**fields, "original": original})
    error = _ERRORS.get(value["error"])
    return error(value["message"]) if error is not None else RuntimeError(f"{value['error']}: {value['message']}")


def _encode(message: Any) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _decode(data: bytes) -> Any:
    return json.loads(data.decode("utf-8", "surrogatepass"))


def call(function: Callable[..., Any], args: tuple[Any, ...]) -> bytes:
    """A call of ``function(*args)`` in a worker."""
    return _encode([f"{function.__module__}:{function.__qualname__}", _out(args)])


def read_call(data: bytes) -> tuple[Callable[..., Any], list[Any]]:
    """The function a call names (imported here) and its arguments."""
    name, args = _decode(data)
    module, qualname = name.split(":")
    function: Any = importlib.import_module(module)
    for part in qualname.split("."):
        function = getattr(function, part)
    return function, _in(args)


def answer(kind: str, value: Any) -> bytes:
    """A worker's message: ``ready`` (its pid), ``failed`` (why it could not start), ``answer`` (a
    call's result), ``raised`` (why a call failed)."""
    return _encode([kind, _out(value)])


def read_answer(data: bytes) -> tuple[str, Any]:
    kind, value = _decode(data)
    return kind, _in(value)


def fingerprints(fields: list[Any]) -> Fingerprints:
    """The :class:`Fingerprints` of the fields a worker sent (in :data:`FINGERPRINT_FIELDS` order)."""
    values = dict(zip(FINGERPRINT_FIELDS, fields, strict=True))
    values["sentences"] = tuple(values["sentences"])
    return Fingerprints(**values)
