"""The scope rule: whose memories a call acts on, and in which project. One function per
question, called by every door (library, CLI, HTTP API, pages, MCP, hooks); none of them
invents its own default.

Owner (:func:`resolve_owner`)::

    explicit argument  >  [scope] owner (memlane.toml / MEMLANE_SCOPE__OWNER)  >  "default"

Project (:func:`project_identity`): a memory is global to its owner (``project`` is ``None``)
or belongs to one project. Reads in a project see that project's memories and the owner's
global ones. A project is named by a stable identity of its git repository, so worktrees, moved
folders and fresh clones keep their memories, and two assistants in one repository share them:

1. the normalised URL of its remote (``origin``, else the first remote):
   ``git@github.com:Acme/App.git`` and ``https://github.com/acme/app`` are both
   ``github.com/acme/app``;
2. else its root commit: ``commit:<40 hex digits>`` (the oldest parentless commit of HEAD);
3. else the folder: ``path:/absolute/path`` (a repository with no commit yet, or no git).

Only the standard library is imported: the hooks call this on every prompt.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms per hook call)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: The owner when neither the call nor ``[scope] owner`` names one.
DEFAULT_OWNER = "default"
#: The environment variable of ``[scope] owner`` (pydantic-settings' nested delimiter).
OWNER_ENV = "MEMLANE_SCOPE__OWNER"
#: Longest project identity accepted (a URL or a path).
MAX_PROJECT_CHARS = 500


class ScopeError(ValueError):
    """A project that cannot be named (the message says why and what to pass instead)."""


def resolve_owner(explicit: str | None, configured: str | None = None) -> str:
    """The owner a call acts on: ``explicit`` when given (non-empty), else ``configured``
    (``[scope] owner``), else :data:`DEFAULT_OWNER`. Whitespace around a name is dropped."""
    for value in (explicit, configured):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return DEFAULT_OWNER


def configured_owner(toml: Mapping[str, Any] | None = None) -> str:
    """``[scope] owner`` from the parsed ``memlane.toml`` ``toml`` with ``MEMLANE_SCOPE__OWNER``
    over it ("" when neither sets it): for readers without :class:`memlane.config.Settings`
    (the hooks)."""
    env = os.environ.get(OWNER_ENV)
    if env is not None:
        return env.strip()
    section = (toml or {}).get("scope") or {}
    value = section.get("owner", "") if isinstance(section, dict) else ""
    return value.strip() if isinstance(value, str) else ""


# ------------------------------------------------------------------------------ project
def git_root(cwd: str | os.PathLike[str]) -> Path | None:
    """The top folder of the git work tree holding ``cwd`` (``None`` outside one): the nearest
    ancestor with a ``.git`` entry (a folder, or a worktree's ``.git`` file), found without
    running git."""
    try:
        path = Path(cwd).expanduser().resolve()
    except (OSError, RuntimeError):
        return None
    for folder in (path, *path.parents):
        if (folder / ".git").exists():
            return folder
    return None


def _git_dirs(root: Path) -> tuple[Path, Path]:
    """``(git dir, common dir)`` of the work tree at ``root``: a worktree's ``.git`` file points
    to its own git dir, whose ``commondir`` file points to the main repository's."""
    dot = root / ".git"
    git_dir = dot
    if dot.is_file():
        text = dot.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            target = Path(text.removeprefix("gitdir:").strip())
            git_dir = target if target.is_absolute() else (root / target).resolve()
    common = git_dir
    commondir = git_dir / "commondir"
    if commondir.is_file():
        rel = Path(commondir.read_text(encoding="utf-8", errors="replace").strip())
        common = rel if rel.is_absolute() else (git_dir / rel).resolve()
    return git_dir, common


_REMOTE = re.compile(r'^\s*\[\s*remote\s+"([^"]+)"\s*\]\s*$')
_SECTION = re.compile(r"^\s*\[")
_URL = re.compile(r"^\s*url\s*=\s*(.+?)\s*$")


def remote_url(root: Path) -> str | None:
    """The URL of remote ``origin`` of the repository at ``root`` (else of its first remote),
    read from its ``config`` file; ``None`` without one."""
    try:
        _, common = _git_dirs(root)
        text = (common / "config").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    urls: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        if m := _REMOTE.match(line):
            current = m.group(1)
        elif _SECTION.match(line):
            current = None
        elif current is not None and current not in urls and (m := _URL.match(line)):
            urls[current] = m.group(1).strip('"')
    if not urls:
        return None
    return urls.get("origin") or next(iter(urls.values()))


def normalise_remote(url: str) -> str:
    """``host/path`` of a git remote URL, lower-cased, without scheme, user, port, ``.git``
    or trailing slashes: the SSH (``git@host:path``) and HTTPS forms of one repository agree.
    A local path remote is returned resolved, as ``path:<folder>``."""
    url = url.strip()
    scp = re.match(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$", url)
    if "://" in url:
        rest = url.split("://", 1)[1]
        host, _, path = rest.partition("/")
        host = host.rsplit("@", 1)[-1].split(":", 1)[0]
        if url.startswith("file://"):
            return f"path:{Path('/' + path).resolve()}"
    elif scp and not url.startswith(("/", ".")):
        host, path = scp.group(1), scp.group(2)
    else:
        return f"path:{Path(url).expanduser().resolve()}"
    path = path.strip("/")
    path = path.removesuffix(".git").strip("/")
    return f"{host}/{path}".lower()


def root_commit(root: Path) -> str | None:
    """The root commit of HEAD (the oldest parentless one) of the repository at ``root``, via
    ``git rev-list`` (``None`` without git, commits, or within 5 s)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-list", "--max-parents=0", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.split() if done.returncode == 0 else []
    return lines[-1] if lines and re.fullmatch(r"[0-9a-f]{40,64}", lines[-1]) else None


def project_identity(cwd: str | os.PathLike[str]) -> str | None:
    """The project of a session run in ``cwd``: the identity of the git repository holding it
    (module docstring: remote URL, else ``commit:<root>``, else ``path:<root>``); ``None``
    outside a repository."""
    root = git_root(cwd)
    if root is None:
        return None
    url = remote_url(root)
    if url:
        return normalise_remote(url)
    commit = root_commit(root)
    if commit:
        return f"commit:{commit}"
    return f"path:{root}"


def resolve_project(value: str | None) -> str | None:
    """A ``--project`` value as given by a user: the path of a folder inside a repository
    becomes that repository's identity; anything else is taken as an identity as it is
    (``github.com/acme/app``, ``commit:...``). ``None`` or "" is no project (global).

    Raises:
        ScopeError: a folder outside any git repository, or an identity that is too long.
    """
    if value is None or not value.strip():
        return None
    value = value.strip()
    folder = Path(value).expanduser()
    if not value.startswith(("commit:", "path:")) and folder.is_dir():
        found = project_identity(folder)
        if found is None:
            raise ScopeError(
                f"--project {value}: the folder is not inside a git repository; pass a "
                "repository's folder, or a project identity as `memlane list` shows it"
            )
        return found
    if len(value) > MAX_PROJECT_CHARS:
        raise ScopeError(f"project identity longer than {MAX_PROJECT_CHARS} characters")
    return value
