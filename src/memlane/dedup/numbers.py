"""Reading numbers for the near-identical guard (:mod:`memlane.dedup.guard`).

Numerals (``1,000``, ``3.5``, ``2nd``, ``1990s``) are cut out of the text first
(:data:`NUMERAL`, :class:`Num`); runs of numerals and English number words ("twenty five",
"one hundred and five", "3.5 million", "eleventh") are then read into canonical number strings by
:class:`NumberReader`, which :func:`memlane.dedup.guard.numbers` documents from the outside.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

__all__ = ["NUMBER_WORDS", "NUMERAL", "Num", "NumberReader", "Token", "format_number"]

_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}  # fmt: skip
_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}  # fmt: skip
_SCALES = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_ORDINAL_UNITS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
    "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13,
    "fourteenth": 14, "fifteenth": 15, "sixteenth": 16, "seventeenth": 17, "eighteenth": 18,
    "nineteenth": 19,
}  # fmt: skip
_ORDINAL_TENS = {
    "twentieth": 20, "thirtieth": 30, "fortieth": 40, "fiftieth": 50, "sixtieth": 60,
    "seventieth": 70, "eightieth": 80, "ninetieth": 90,
}  # fmt: skip
_ORDINAL_SCALES = {"hundredth": 100, "thousandth": 1_000, "millionth": 1_000_000}
_SMALL = {**_UNITS, **_TENS}
_ORDINAL_SMALL = {**_ORDINAL_UNITS, **_ORDINAL_TENS}

#: Every number word :class:`NumberReader` reads (cardinal and ordinal, "hundred" included).
NUMBER_WORDS: frozenset[str] = frozenset(
    {*_SMALL, *_SCALES, *_ORDINAL_SMALL, *_ORDINAL_SCALES, "hundred"}
)

#: A numeral: ``1,000`` (comma thousands groups), ``3.5``, ``42``, with an optional ordinal
#: (``2nd``) or decade (``1990s``) suffix when the suffix ends the word.
NUMERAL = re.compile(
    r"(\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|\d+(?:\.\d+)?)((?:st|nd|rd|th|s)(?![^\W_]))?"
)


@dataclass(frozen=True, slots=True)
class Num:
    """A numeral of the text: its value and suffix (``"th"`` for any ordinal, ``"s"`` decade)."""

    value: Decimal
    suffix: str = ""


Token = str | Num


def format_number(value: Decimal, suffix: str) -> str:
    """Canonical text of a number: ``1000``, ``3.5``, ``21st``, ``1990s``."""
    text = format(value.normalize(), "f")
    if suffix == "th" and value == value.to_integral_value():
        n = int(value)
        ending = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        return f"{n}{ending}"
    return text + suffix


class NumberReader:
    """Reads runs of number words/numerals into numbers ("twenty five" -> 25, "3.5 million")."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self._reset()

    def _reset(self) -> None:
        self._total = Decimal(0)
        self._current: Decimal | None = None
        self._last = ""  # "", "unit", "tens", "hundred", "scale", "numeral"

    def _emit(self, value: Decimal, suffix: str) -> None:
        self.out.append(format_number(value, suffix))
        self._reset()

    def flush(self) -> None:
        if self._current is not None or self._last:
            self._emit(self._total + (self._current or 0), "")

    def _add_small(self, value: int) -> None:
        """Add a unit/tens value to the run where English allows it ("twenty five", "hundred
        five"), else start a new number with it."""
        if (self._last == "tens" and self._current is not None and 0 < value < 10) or (
            self._last in ("hundred", "scale") and value < 100
        ):
            self._current = (self._current or Decimal(0)) + value
        else:
            self.flush()
            self._current = Decimal(value)
        self._last = "tens" if value >= 20 else "unit"

    def feed(self, token: Token, next_token: Token | None) -> bool:
        """Consume ``token`` if it is part of a number; False (run flushed) when it is not."""
        if isinstance(token, Num):
            self.flush()
            if token.suffix:
                self._emit(token.value, token.suffix)
            else:
                self._current, self._last = token.value, "numeral"
            return True
        if token in _SMALL:
            self._add_small(_SMALL[token])
            return True
        if token == "hundred":
            if self._last in ("unit", "tens", "numeral") and self._current is not None:
                self._current *= 100
            else:
                self.flush()
                self._current = Decimal(100)
            self._last = "hundred"
            return True
        if token in _SCALES:
            if not self._last:
                self._current = Decimal(1)
            self._total += (self._current if self._current is not None else 1) * _SCALES[token]
            self._current, self._last = Decimal(0), "scale"
            return True
        if token in _ORDINAL_SMALL:
            self._add_small(_ORDINAL_SMALL[token])
            self._emit(self._total + (self._current or 0), "th")
            return True
        if token in _ORDINAL_SCALES:
            scale = _ORDINAL_SCALES[token]
            base = self._total + (self._current or 0) if self._last else Decimal(0)
            self._emit(base * scale if base else Decimal(scale), "th")
            return True
        if (
            token == "and"
            and self._last in ("hundred", "scale")
            and isinstance(next_token, str)
            and (next_token in _SMALL or next_token in _ORDINAL_SMALL)
        ):
            return True  # "one hundred and five", "one hundred and twentieth"
        self.flush()
        return False
