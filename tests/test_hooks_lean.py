"""The hook process's own readers of JSON, URLs and git config agree with the standard
library's (``json``, ``re`` patterns, ``urllib``) that they replace on the hook's path: a hook
that parsed differently would send another project, URL or payload than before."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from typing import Any

import pytest

from memlane import _fastjson, scope
from memlane.hooks.backend import _plain_url

VALUES: list[Any] = [
    {"session_id": "s1", "prompt": 'caf\u00e9 \u4e2d\u6587 "quoted"\n\ttab', "n": [1, 2.5, -0.0]},
    [],
    {},
    "just a string \u2603",
    1.0,
    1e100,
    12345678901234567890,
    None,
    True,
    {"nested": {"deeper": [{"x": None}, [], [[]]]}, "": ""},
    {1: "int key", 2.5: "float key", None: "null key", False: "bool key"},
    {"inf": float("inf"), "ninf": float("-inf")},
    "\ud800 lone surrogate",
]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_dumps_writes_what_json_dumps_writes(value: Any, ensure_ascii: bool) -> None:
    assert _fastjson.dumps(value, ensure_ascii=ensure_ascii) == json.dumps(
        value, ensure_ascii=ensure_ascii
    )


@pytest.mark.parametrize("value", VALUES)
def test_loads_reads_what_json_loads_reads(value: Any) -> None:
    text = json.dumps(value)
    assert repr(_fastjson.loads(text)) == repr(json.loads(text))
    assert repr(_fastjson.loads(f" \n{text}\t\r\n".encode())) == repr(json.loads(text))


@pytest.mark.parametrize(
    "text",
    ["", "   ", "{", '{"a": 1} x', "[1,]", '{"a" 1}', "nul", b"\xff", "\ufeff{}", "[1] [2]"],
)
def test_bad_json_raises_the_value_error_json_raises(text: str | bytes) -> None:
    with pytest.raises(ValueError) as expected:
        json.loads(text)
    with pytest.raises(ValueError) as got:
        _fastjson.loads(text)
    assert type(got.value) is type(expected.value)
    assert str(got.value) == str(expected.value)


def test_bad_json_raises_json_s_error_in_a_process_without_json() -> None:
    """The hook's process has not imported :mod:`json`: the C scanner's errors still come as
    :class:`json.JSONDecodeError` (a ValueError), never a SystemError."""
    code = (
        "import sys\n"
        "from memlane import _fastjson\n"
        'for text in [\'{"session_id": "s6", "prompt": "Which\', \'{"a" 1}\', \'[1,]\', \'\']:\n'
        "    try:\n"
        "        _fastjson.loads(text)\n"
        "    except ValueError as exc:\n"
        "        print(type(exc).__name__, exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    expected = []
    for text in ['{"session_id": "s6", "prompt": "Which', '{"a" 1}', "[1,]", ""]:
        with pytest.raises(json.JSONDecodeError) as raised:
            json.loads(text)
        expected.append(f"JSONDecodeError {raised.value}")
    assert done.stdout.splitlines() == expected


def test_bytes_in_utf16_or_with_a_bom_are_read_as_json_reads_them() -> None:
    for raw in ('{"a": "\u00e9"}'.encode("utf-16"), b'\xef\xbb\xbf{"a": 1}'):
        assert _fastjson.loads(raw) == json.loads(raw)


def test_raw_decode_stops_where_the_value_ends() -> None:
    text = 'answer: {"memory": {"id": "m1"}} and more'
    start = text.index("{")
    assert _fastjson.JSONDecoder().raw_decode(text, start) == json.JSONDecoder().raw_decode(
        text, start
    )
    with pytest.raises(ValueError, match="Expecting value"):
        _fastjson.raw_decode("x", 0)


def test_what_json_cannot_hold_raises_as_json_raises() -> None:
    circular: list[Any] = []
    circular.append(circular)
    with pytest.raises(ValueError, match="Circular reference"):
        _fastjson.dumps(circular)
    with pytest.raises(TypeError, match="Object of type object is not JSON serializable"):
        _fastjson.dumps({"x": object()})
    assert _fastjson.dumps({"b": 1, "a": [1]}, indent=2, sort_keys=True) == json.dumps(
        {"b": 1, "a": [1]}, indent=2, sort_keys=True
    )


# The patterns the hook's string readers replace (memlane.scope and memlane.hooks.backend as
# they were), used here as the reference.
REMOTE = re.compile(r'^\s*\[\s*remote\s+"([^"]+)"\s*\]\s*$')
URL = re.compile(r"^\s*url\s*=\s*(.+?)\s*$")
SCP = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")
SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
PLAIN_URL = re.compile(
    r"(https?)://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::([0-9]{1,5}))?(/[^?#@]*)?"
)
PIECES = [*'ab:/@ "[]=\t.-_~?#1\u00e9', "remote", "url", "http://", "https://", "//", "git@",
          "[::1]", "0a", "12345", "99999", "\u00a0"]  # fmt: skip


def _texts(count: int) -> list[str]:
    rnd = random.Random(34)
    return ["".join(rnd.choice(PIECES) for _ in range(rnd.randint(0, 8))) for _ in range(count)]


def test_git_config_and_remote_readers_agree_with_the_patterns() -> None:
    """30,000 random lines made of the characters that matter: the section header, the url
    line, the scp-like remote and the plain URL shape read as the patterns read them (an
    ``url =`` with nothing after it is no URL now; the pattern took the blank)."""
    for text in _texts(30_000):
        m = REMOTE.match(text)
        assert scope._remote_section(text) == (m.group(1) if m else None), text
        m = URL.match(text)
        want = m.group(1) if m and m.group(1).strip() else None
        assert scope._url_value(text) == want, text
        m = SCP.match(text)
        assert scope._scp_like(text) == (m.groups() if m else None), text
        m = PLAIN_URL.fullmatch(text)
        got = _plain_url(text)
        assert (got is None) == (m is None), text
        if m is not None and got is not None:
            assert got == (m.group(1), m.group(2), m.group(3), m.group(4) or ""), text


def test_commit_ids_are_told_as_the_pattern_tells_them() -> None:
    for text in ["a" * 40, "f" * 64, "0" * 41, "A" * 40, "g" * 40, "", "1" * 63, "ab" * 32]:
        assert scope._is_sha(text) == bool(SHA.fullmatch(text)), text


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("git@github.com:Acme/Shop.git", "github.com/acme/shop"),
        ("https://github.com/acme/shop.git/", "github.com/acme/shop"),
        ("ssh://git@github.com:22/acme/shop.git", "github.com/acme/shop"),
        ("github.com:acme/shop", "github.com/acme/shop"),
    ],
)
def test_one_repository_has_one_identity_whatever_its_remote_url(url: str, expected: str) -> None:
    assert scope.normalise_remote(url) == expected
