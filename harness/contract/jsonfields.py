"""A JSON object read field by field: each error is one line naming the file and the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.errors import UsageError
from harness.stats.noisefloor import BAND_NUMBERS, BANDS


def is_number(value: object) -> bool:
    """A JSON number: an int or a float, never a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Fields:
    """One JSON object of `file`, found at `where` in it ("rows[3]", "operators.mm"; "" the
    document itself). A field that is null reads as missing."""

    def __init__(self, file: str, where: str, value: object) -> None:
        if not isinstance(value, Mapping):
            raise UsageError(f"{file}: {where or 'the document'} is {value!r:.80}, not an object")
        self.file, self.where, self.value = file, where, value

    def name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, key: str, problem: str) -> UsageError:
        """The error of one field: `<file>: <where>.<key> <problem>`."""
        return UsageError(f"{self.file}: {self.name(key)} {problem}")

    def _get(self, key: str, kind: str, ok: bool) -> Any:
        value = self.value.get(key)
        if value is not None and not ok:
            raise self.fail(key, f"is {value!r:.60}, not {kind}")
        return value

    def _need(self, key: str, value: Any) -> Any:
        if value is None:
            raise self.fail(key, "is missing")
        return value

    def opt_text(self, key: str) -> str | None:
        found: str | None = self._get(key, "a string", isinstance(self.value.get(key), str))
        return found

    def text(self, key: str) -> str:
        found: str = self._need(key, self.opt_text(key))
        return found

    def opt_number(self, key: str) -> float | None:
        """A number as written (an int stays an int, so that it is written back alike)."""
        found: float | None = self._get(key, "a number", is_number(self.value.get(key)))
        return found

    def number(self, key: str) -> float:
        found: float = self._need(key, self.opt_number(key))
        return found

    def opt_integer(self, key: str) -> int | None:
        value = self.value.get(key)
        whole = isinstance(value, int) and not isinstance(value, bool)
        found: int | None = self._get(key, "an integer", whole)
        return found

    def integer(self, key: str) -> int:
        found: int = self._need(key, self.opt_integer(key))
        return found

    def opt_flag(self, key: str) -> bool | None:
        found: bool | None = self._get(key, "true or false", isinstance(self.value.get(key), bool))
        return found

    def opt_list(self, key: str) -> list[Any] | None:
        found: list[Any] | None = self._get(key, "a list", isinstance(self.value.get(key), list))
        return found

    def texts(self, key: str) -> tuple[str, ...]:
        """A list of strings; () when missing."""
        items = self.opt_list(key) or []
        if not all(isinstance(item, str) for item in items):
            raise self.fail(key, f"is {items!r:.60}, not a list of strings")
        return tuple(items)

    def numbers(self, key: str) -> tuple[float, ...]:
        """A list of numbers; () when missing."""
        items = self.opt_list(key) or []
        if not all(map(is_number, items)):
            raise self.fail(key, f"is {items!r:.60}, not a list of numbers")
        return tuple(items)

    def integers(self, key: str) -> tuple[int, ...]:
        """A list of integers; () when missing."""
        items = self.opt_list(key) or []
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in items):
            raise self.fail(key, f"is {items!r:.60}, not a list of integers")
        return tuple(items)

    def text_lists(self, key: str) -> tuple[tuple[str, ...], ...]:
        """A list of lists of strings; () when missing."""
        items = self.opt_list(key) or []
        for i, item in enumerate(items):
            if not (isinstance(item, list) and all(isinstance(x, str) for x in item)):
                raise self.fail(f"{key}[{i}]", f"is {item!r:.60}, not a list of strings")
        return tuple(tuple(item) for item in items)

    def objects(self, key: str) -> list[Fields]:
        """A list of objects; [] when missing."""
        return [Fields(self.file, f"{self.name(key)}[{i}]", item)
                for i, item in enumerate(self.opt_list(key) or [])]

    def opt_object(self, key: str) -> Fields | None:
        value = self.value.get(key)
        return None if value is None else Fields(self.file, self.name(key), value)

    def entries(self, key: str) -> dict[str, Fields] | None:
        """An object of objects, by key; None when missing."""
        found = self.opt_object(key)
        if found is None:
            return None
        return {str(k): Fields(self.file, found.name(str(k)), v) for k, v in found.value.items()}


def check_bands(caliber: Fields) -> None:
    """Check a caliber's noise-floor bands as any field is checked: UsageError naming it."""
    for band in caliber.objects(BANDS):
        for key in BAND_NUMBERS:
            band.number(key)
        band.integer("samples")
