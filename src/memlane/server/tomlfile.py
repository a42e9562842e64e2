"""Edits of ``memlane.toml`` that keep its comments and unrelated keys (tomlkit), written
atomically: a temporary file in the same folder, fsync, rename, fsync of the folder."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit


def set_injection(text: str, agent: str | None, values: Mapping[str, Any]) -> str:
    """``text`` with ``values`` set in ``[injection]`` (``agent`` None) or in
    ``[agents.<agent>.injection]``; every other line kept."""
    doc = tomlkit.parse(text)
    if agent is None:
        table = _table(doc, "injection")
    else:
        agents = _table(doc, "agents", super_table=True)
        entry = _table(agents, agent, super_table=True)
        table = _table(entry, "injection")
    for key, value in values.items():
        table[key] = list(value) if isinstance(value, tuple) else value
    return tomlkit.dumps(doc)


def remove_agent_injection(text: str, agent: str) -> str:
    """``text`` without ``[agents.<agent>.injection]`` (and without ``[agents.<agent>]`` or
    ``[agents]`` when that leaves them empty)."""
    doc = tomlkit.parse(text)
    agents = doc.get("agents")
    if isinstance(agents, dict) and isinstance(agents.get(agent), dict):
        entry = agents[agent]
        entry.pop("injection", None)
        if not entry:
            agents.pop(agent)
        if not agents:
            doc.pop("agents")
    return tomlkit.dumps(doc)


def agent_overrides(text: str, agent: str) -> dict[str, Any]:
    """The keys ``[agents.<agent>.injection]`` of ``text`` sets (empty when none)."""
    doc = tomlkit.parse(text).unwrap()
    section = doc.get("agents", {}).get(agent, {}).get("injection", {})
    return dict(section) if isinstance(section, dict) else {}


def _table(parent: Any, key: str, *, super_table: bool = False) -> Any:
    found = parent.get(key)
    if found is None:
        found = tomlkit.table(is_super_table=super_table) if super_table else tomlkit.table()
        parent[key] = found
    return found


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that a reader sees the old or the new file, never a
    part: temporary file in the same folder, fsync, rename, fsync of the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
