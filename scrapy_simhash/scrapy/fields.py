"""Reading an item's fields and writing the plugin's own (the flag, the story key) into it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from itemadapter import ItemAdapter
from scrapy import Field, Item

from ..engine import Verdict
from ..timefmt import iso

logger = logging.getLogger(__name__)


def first_field(adapter: ItemAdapter, names: Sequence[str]) -> tuple[str | None, Any]:
    """The first of ``names`` whose value is not empty, and that value (None, None if none is)."""
    for name in names:
        found = adapter.get(name)
        if found not in (None, "", b"", [], ()):
            return name, found
    return None, None


def story_key(verdict: Verdict) -> str:
    """An admitted item's story key: its title and body fingerprints in hex (zeros for one it has
    none of), the same whenever the same text is admitted again (after a release, in another crawl)."""
    return f"{verdict.title_fp or 0:016x}{verdict.body_fp or 0:016x}"


def flag_value(verdict: Verdict | dict[str, Any]) -> dict[str, Any]:
    """The flag field's value: the verdict, times in ISO 8601 UTC as the command line writes them."""
    if isinstance(verdict, dict):
        return verdict
    flag = verdict.as_dict()
    if flag["original"] is not None:
        flag["original"] = {**flag["original"], "first_seen": iso(flag["original"]["first_seen"])}
    return flag


class FieldWriter:
    """Sets a field on items of any kind; a ``scrapy.Item`` that does not declare the field is moved to
    a subclass that does, so exporters see it."""

    def __init__(self) -> None:
        self._classes: dict[tuple[type, str], type] = {}  # (item class, field) → its subclass with the field
        self._warned: set[str] = set()  # fields warned about

    def set(self, item: Any, field: str, content: Any, what: str) -> bool:
        """Set ``field`` of the item; False (warned once per field, naming ``what`` the user would
        miss) where it cannot be set."""
        if isinstance(item, Item) and field not in item.fields:
            cls = type(item)
            moved = self._classes.get((cls, field))
            if moved is None:
                moved = type(cls.__name__, (cls,), {field: Field()})
                self._classes[cls, field] = moved
            item.__class__ = moved
        try:
            ItemAdapter(item)[field] = content
        except (KeyError, AttributeError, TypeError):
            if field not in self._warned:
                self._warned.add(field)
                logger.warning("scrapy-simhash cannot set field %r on %s items: declare it to see %s", field,
                               type(item).__name__, what)
            return False
        return True
