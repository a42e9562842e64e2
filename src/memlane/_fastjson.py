"""JSON for the hook process without importing :mod:`json`.

:mod:`json` imports :mod:`re` (for its number and whitespace patterns), and :mod:`re` imports
:mod:`enum`, :mod:`functools` and :mod:`collections`: ~5 ms of every hook call's CPU on an
idle machine (``python -X importtime``), several times that on a loaded one. The work itself
is done by the same C accelerator :mod:`json` uses (:mod:`_json`: its scanner and encoder),
so the results are those of :func:`json.loads` and :func:`json.dumps` (``tests/
test_hooks_lean.py`` compares them). Anything beyond the shapes below (``indent``, a
``bytes`` input in UTF-16 or with a BOM, an interpreter without :mod:`_json`) goes to
:mod:`json` itself.

Errors: :class:`ValueError` (:class:`json.JSONDecodeError` where the C scanner raises it) for
text that is not JSON, :class:`TypeError` for a value JSON cannot hold, as :mod:`json`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import IO, Any

_c: Any
try:
    import _json as _c
except ImportError:  # pragma: no cover - an interpreter without the accelerator
    _c = None

#: What JSON allows around a value (``json.decoder.WHITESPACE``).
_WS = " \t\n\r"
#: ``json``'s non-standard constants (``json.decoder._CONSTANTS``).
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Context:
    """The attributes the C scanner reads from its ``json.JSONDecoder`` (its defaults)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


_scan: Any = None if _c is None else _c.make_scanner(_Context())


def _default(value: Any) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def _expecting_value(text: str, at: int) -> ValueError:
    from json import JSONDecodeError

    return JSONDecodeError("Expecting value", text, at)


def raw_decode(text: str, idx: int = 0) -> tuple[Any, int]:
    """``(value, end)`` of the JSON value starting at ``text[idx]`` (as
    :meth:`json.JSONDecoder.raw_decode`: no whitespace skipped). Raises ``ValueError``."""
    if _scan is None:  # pragma: no cover
        import json

        return json.JSONDecoder().raw_decode(text, idx)
    try:
        found: tuple[Any, int] = _scan(text, idx)
    except StopIteration as exc:
        raise _expecting_value(text, exc.value) from None
    except SystemError:
        # the C scanner raises json.decoder.JSONDecodeError only when json.decoder is in
        # sys.modules (it looks it up there, CPython 3.11): load it and scan again
        import json.decoder

        found = _scan(text, idx)
    return found


class JSONDecoder:
    """The :class:`json.JSONDecoder` with its defaults, for its :meth:`raw_decode`."""

    def raw_decode(self, text: str, idx: int = 0) -> tuple[Any, int]:
        return raw_decode(text, idx)


def loads(text: str | bytes | bytearray) -> Any:
    """:func:`json.loads` with its defaults. Raises ``ValueError`` (text not JSON)."""
    if not isinstance(text, str):
        head = bytes(text[:4])
        if _scan is None or head.startswith(b"\xef\xbb\xbf") or b"\x00" in head:
            import json  # a BOM or UTF-16/32: json detects the encoding

            return json.loads(text)
        text = bytes(text).decode("utf-8")  # UnicodeDecodeError is a ValueError, as json's
    if _scan is None or text.startswith("\ufeff"):  # a BOM: json's own error
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(_WS))
    value, end = raw_decode(text, start)
    rest = text[end:].lstrip(_WS)
    if rest:
        from json import JSONDecodeError

        raise JSONDecodeError("Extra data", text, len(text) - len(rest))
    return value


def load(fh: IO[str]) -> Any:
    """:func:`json.load` with its defaults."""
    return loads(fh.read())


def dumps(value: Any, *, ensure_ascii: bool = True, **options: Any) -> str:
    """:func:`json.dumps` of ``value``; other keyword arguments (``indent``, ``sort_keys``,
    ...) go to :func:`json.dumps` itself. Raises ``TypeError`` / ``ValueError`` as it."""
    if options or _c is None:
        import json

        return json.dumps(value, ensure_ascii=ensure_ascii, **options)
    quote = _c.encode_basestring_ascii if ensure_ascii else _c.encode_basestring
    if isinstance(value, str):
        return str(quote(value))
    # a fresh encoder per call, as json's: its markers (circular references) start empty
    encode = _c.make_encoder({}, _default, quote, None, ": ", ", ", False, False, True)
    return "".join(encode(value, 0))


def dump(value: Any, fh: IO[str], **options: Any) -> None:
    """:func:`json.dump`: :func:`dumps` written to ``fh``."""
    fh.write(dumps(value, **options))
