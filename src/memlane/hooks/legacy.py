"""Memories stored by older releases' hooks under a per-project agent, moved into the project
scope (``memlane hooks migrate``).

Before the project scope (the ``project`` column, docs/integrations.md), hooks with
``[hooks] per_project = true`` named the project inside the agent of what they stored
(Claude Code's ``Stop`` learning, ``[hooks] learn = true``):

1. ``<agent>@<folder>-<6 hex>``: the repository's folder name and the first 6 hex digits of the
   SHA-1 of its resolved path (the oldest form). A hash of a path cannot be turned back into
   the path: only given the repository can memlane tell which memories are its own
   (:func:`legacy_suffix`).
2. ``<agent>@<project identity>`` (``github.com/acme/app``, ``commit:...``, ``path:...``): the
   store's migration moves these on open (SQLite ``0006_agent_suffix_projects``, PostgreSQL
   ``0004_agent_suffix_projects``); :func:`migrate` moves any left (a store written by an
   older process after the migration).

:func:`migrate` moves both forms, for one repository, into its project (its identity now:
:func:`memlane.scope.project_identity`) under the plain agent.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memlane.scope import ScopeError, git_root, project_identity

if TYPE_CHECKING:
    from memlane.engine import MemoryEngine


def legacy_suffix(root: str | Path) -> str:
    """The agent suffix the oldest per-project hooks gave the repository whose work tree is
    ``root`` (resolved, as :func:`memlane.scope.git_root` returns it): ``<folder>-<first 6 hex
    digits of SHA-1 of the path>`` (they hashed ``str(pathlib.Path(root))``)."""
    path = Path(root)
    digest = hashlib.sha1(str(path).encode("utf-8")).hexdigest()[:6]
    return f"{path.name}-{digest}"


@dataclass(frozen=True)
class Moved:
    """One older agent whose memories moved: ``agent`` (as stored), the ``new_agent`` (the
    part before ``@``), the ``project`` and how many memories (``count``, every status)."""

    agent: str
    new_agent: str
    project: str
    count: int


def migrate(engine: MemoryEngine, folder: str | Path, *, owner: str | None = None) -> list[Moved]:
    """Move ``owner``'s memories of the older per-project agents of the repository holding
    ``folder`` (both forms, module docstring; any agent before the ``@``) into its project.
    Memories already in a project are left as they are. Returns what moved (nothing when
    nothing was left to move: running it twice is harmless).

    Raises:
        ScopeError: ``folder`` is not inside a git repository.
    """
    root = git_root(folder)
    identity = project_identity(folder) if root is not None else None
    if root is None or identity is None:
        raise ScopeError(f"{folder}: not inside a git repository; pass a repository's folder")
    suffixes = {legacy_suffix(root), identity}
    owner = engine.owner_of(owner)
    moved: list[Moved] = []
    for who, agent, _ in engine.agent_counts():
        if who != owner or agent is None or "@" not in agent:
            continue
        plain, _, suffix = agent.partition("@")
        if plain and suffix in suffixes:
            count = engine.move_to_project(agent, plain, identity, owner=owner)
            if count:
                moved.append(Moved(agent, plain, identity, count))
    return moved
