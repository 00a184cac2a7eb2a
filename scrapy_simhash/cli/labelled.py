"""What ``review``, ``tune`` and ``stopwords`` share: where the labels file is, reading it for a
command, the items given with ``--items``/``INPUT``, and whether stored titles give their fingerprints back."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..labels import Label, LabelsError, default_labels_path, read_labels
from .common import CliError
from .input import Input, Reader

if TYPE_CHECKING:
    from ..fingerprint.fingerprinter import Fingerprinter
    from ..index import BandIndex


def labels_path(args: argparse.Namespace) -> Path:
    """``--labels``, else the file next to a SQLite index; a Redis index needs ``--labels``."""
    if getattr(args, "labels", None):
        return Path(args.labels)
    path = default_labels_path(args.index) if args.index else None
    if path is None:
        raise CliError("a Redis index has no directory to keep labels in: give --labels PATH")
    return path


def read_labels_for(path: Path, namespace: str | None, command: str) -> list[Label]:
    bad: list[tuple[int, str]] = []
    try:
        labels = read_labels(path, namespace, bad=lambda n, why: bad.append((n, why)))
    except LabelsError as exc:
        raise CliError(str(exc)) from exc
    if bad:
        n, why = bad[0]
        print(f"scrapy-simhash {command}: skipped {len(bad):,} line(s) of {path} that are not labels; "
              f"the first, line {n}: {why}", file=sys.stderr)
    return labels


def read_items(name: str, max_bytes: int) -> Iterator[dict[str, Any]]:
    """The JSON objects of an export (lines that are not objects are passed over)."""
    source = Input(name)
    try:
        for _, raw in Reader(source, max_bytes=max_bytes):
            if isinstance(raw, str):
                continue
            try:
                item = json.loads(raw)
            except (ValueError, RecursionError):
                continue
            if isinstance(item, dict):
                yield item
    finally:
        source.close()


def refingerprinting(fingerprinter: Fingerprinter, index: BandIndex, entries: Sequence[Any]) -> Any:
    """A function giving a stored (normalized) title's fingerprint again, or None when the stored
    titles of ``entries`` do not give their own fingerprints back (other title options, a cut title)."""
    sample = [e for e in entries if e.title and e.title_fp is not None][:20]
    if not sample or any(fingerprinter.title(e.title) != e.title_fp for e in sample):
        return None
    return fingerprinter.title


__all__ = ["labels_path", "read_items", "read_labels_for", "refingerprinting"]
