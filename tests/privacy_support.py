"""The secrets of the byte scans that check nothing a user typed reaches the disk unless it is a
memory (issue #33): tests/test_privacy_doors.py (the CLI, HTTP, MCP, hooks, import, learn) and
the framework adapters run in their own environments (tests/fwenvs/test_fw_*.py, through
fw_support.check_nothing_secret_on_disk).

Each door gets secrets of its own (derived from its name), so a failure names the door that let
one through. Standard library only: the frameworks' environments under .fwenvs/ import it too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path


def door_hex(door: str, n: int) -> str:
    """The first ``n`` hex digits of the SHA-256 of ``door`` (a value of its own per door)."""
    return hashlib.sha256(door.encode()).hexdigest()[:n]


def secrets_of(door: str) -> dict[str, str]:
    """What must never reach the disk for ``door``: the secret values and the private text."""
    return {
        "aws": door_hex(door + "aws", 40),
        "github": "ghp_" + door_hex(door + "gh", 36),
        "password": "pw" + door_hex(door + "pw", 10),
        "private": f"diary of {door} entry {door_hex(door + 'p', 8)}",
    }


def text_of(door: str, prefix: str = "") -> str:
    """A message holding each of ``door``'s secrets and a ``<private>`` span; what may be kept
    of it starts with ``the {door} deploy uses`` and ends with ``for the staging kiwi
    cluster``."""
    s = secrets_of(door)
    return (
        f"{prefix}the {door} deploy uses AWS_SECRET_ACCESS_KEY={s['aws']} and token "
        f"{s['github']}, database postgres://admin:{s['password']}@db.internal:5432/app "
        f"<private>{s['private']}</private> for the staging kiwi cluster"
    )


def url_of(door: str) -> str:
    """A database URL holding ``door``'s password."""
    return f"postgres://admin:{secrets_of(door)['password']}@db.internal:5432/app"


def files_holding(home: Path, needle: bytes) -> list[str]:
    """The files under ``home`` (relative paths, sorted) whose bytes hold ``needle``."""
    return [
        str(path.relative_to(home))
        for path in sorted(home.rglob("*"))
        if path.is_file() and needle in path.read_bytes()
    ]


def leaks(home: Path, doors: Iterable[str]) -> dict[str, list[str]]:
    """``{file: [door/kind found]}`` for every file under ``home`` (the store, its WAL and SHM,
    the search index files, the logs) holding a secret or the private text of ``doors``."""
    found: dict[str, list[str]] = {}
    needles = {f"{d}/{k}": v.encode() for d in doors for k, v in secrets_of(d).items()}
    for path in sorted(home.rglob("*")):
        if path.is_file():
            raw = path.read_bytes()
            hits = [name for name, needle in needles.items() if needle in raw]
            if hits:
                found[str(path.relative_to(home))] = hits
    return found
