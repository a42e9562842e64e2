"""The ``[hooks]`` settings as the hook process reads them: ``memlane.toml`` and ``MEMLANE_*``
with the standard library only (pydantic costs ~0.1 s of import on every prompt).

The keys, defaults and limits are those of :class:`memlane.config.HooksSettings` (a test checks
that both agree); the server's address comes from ``[server] host``/``port``/``token``.
"""

from __future__ import annotations

import getpass
import os
import tomllib
from pathlib import Path

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms per hook call)
if TYPE_CHECKING:
    from typing import Any

CONFIG_FILENAME = "memlane.toml"
DEFAULT_HOME = "~/.memlane"

#: The agent scope of each client when ``[hooks] agent`` is not set.
CLIENT_AGENTS = {"claude-code": "claude-code", "gemini": "gemini"}


class HookConfigError(ValueError):
    """A ``[hooks]`` or ``[server]`` value the hook cannot use (the message names the key)."""


#: The ``[hooks]`` keys and their defaults (those of :class:`memlane.config.HooksSettings`).
DEFAULTS: dict[str, object] = {
    "owner": "",
    "agent": "",
    "per_project": False,
    "url": "",
    "timeout_s": 8.0,
    "connect_timeout_s": 0.3,
    "max_chars": 9_000,
    "recent_messages": 2,
    "fallback": True,
    "learn": False,
}


class HookConfig:
    """What one hook run needs (see :class:`memlane.config.HooksSettings` for each key), plus
    ``home`` and ``[server] token`` (sent as a bearer token when set). A plain class:
    :mod:`dataclasses` costs an import of :mod:`inspect` on every prompt."""

    __slots__ = ("home", "token", *DEFAULTS)

    home: Path
    token: str
    owner: str
    agent: str
    per_project: bool
    url: str
    timeout_s: float
    connect_timeout_s: float
    max_chars: int
    recent_messages: int
    fallback: bool
    learn: bool

    def __init__(self, home: Path, token: str = "", **values: Any) -> None:
        unknown = set(values) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"unknown [hooks] keys: {sorted(unknown)}")
        self.home = home
        self.token = token
        for key, default in DEFAULTS.items():
            setattr(self, key, values.get(key, default))

    @property
    def log_path(self) -> Path:
        """``<home>/logs/hooks.log``: one line per failure (and per reset)."""
        return self.home / "logs" / "hooks.log"

    def server_url(self) -> str:
        return self.url.rstrip("/")

    def scope(self, client: str, cwd: str | None) -> tuple[str, str]:
        """``(owner, agent)`` of a session of ``client`` run in ``cwd``."""
        owner = self.owner or _os_user()
        agent = self.agent or CLIENT_AGENTS.get(client, client)
        if self.per_project and cwd:
            project = git_root(cwd)
            if project is not None:
                import hashlib

                digest = hashlib.sha1(str(project).encode("utf-8")).hexdigest()[:6]
                agent = f"{agent}@{project.name}-{digest}"
        return owner, agent


#: (type, minimum, maximum) of the numeric keys: the limits of ``HooksSettings``.
_LIMITS: dict[str, tuple[type, float, float]] = {
    "timeout_s": (float, 1e-9, 600),
    "connect_timeout_s": (float, 1e-9, 30),
    "max_chars": (int, 100, 100_000),
    "recent_messages": (int, 0, 20),
}
_BOOLS = {"per_project", "fallback", "learn"}
_STRINGS = {"owner", "agent", "url"}


def _os_user() -> str:
    try:
        return getpass.getuser() or "default"
    except (KeyError, OSError):  # no passwd entry and no $USER
        return "default"


def git_root(cwd: str) -> Path | None:
    """The top folder of the git work tree holding ``cwd`` (``None`` outside one): the nearest
    ancestor with a ``.git`` entry, found without running git."""
    try:
        path = Path(cwd).resolve()
    except OSError:
        return None
    for folder in (path, *path.parents):
        if (folder / ".git").exists():
            return folder
    return None


def _coerce(key: str, value: Any) -> Any:
    if key in _BOOLS:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in {"1", "true", "yes", "on"}:
            return True
        if isinstance(value, str) and value.strip().lower() in {"0", "false", "no", "off"}:
            return False
        raise HookConfigError(f"hooks.{key} = {value!r}: must be true or false")
    if key in _STRINGS:
        if not isinstance(value, str):
            raise HookConfigError(f"hooks.{key} = {value!r}: must be a string")
        return value.strip()
    kind, low, high = _LIMITS[key]
    try:
        number = kind(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        number = None
    if number is None or not low <= number <= high:
        raise HookConfigError(
            f"hooks.{key} = {value!r}: must be a {kind.__name__} in {low:g}..{high:g}"
        )
    return number


def load_config(home: str | os.PathLike[str] | None = None) -> HookConfig:
    """Read ``[hooks]`` and ``[server]`` of ``<home>/memlane.toml`` and their ``MEMLANE_*``
    overrides (``MEMLANE_HOOKS__URL``, ``MEMLANE_SERVER__PORT`` ...).

    Raises:
        HookConfigError: the file is not TOML, or a value is out of its range.
    """
    raw = home if home is not None else os.environ.get("MEMLANE_HOME") or DEFAULT_HOME
    home_path = Path(raw).expanduser().resolve()
    path = home_path / CONFIG_FILENAME
    data: dict[str, Any] = {}
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise HookConfigError(f"{path} is not valid TOML ({exc})") from None
    hooks = dict(data.get("hooks") or {})
    server = dict(data.get("server") or {})
    for key in list(os.environ):
        if key.startswith("MEMLANE_HOOKS__"):
            hooks[key.removeprefix("MEMLANE_HOOKS__").lower()] = os.environ[key]
        elif key.startswith("MEMLANE_SERVER__"):
            server[key.removeprefix("MEMLANE_SERVER__").lower()] = os.environ[key]
    known = set(DEFAULTS)
    values: dict[str, Any] = {}
    for key, value in hooks.items():
        if key not in known:
            raise HookConfigError(f"hooks.{key}: unknown setting (see docs/integrations.md)")
        values[key] = _coerce(key, value)
    if not values.get("url"):
        host = str(server.get("host") or "127.0.0.1")
        if host in {"0.0.0.0", "::", "[::]"}:  # bound to every address: reach it on loopback
            host = "127.0.0.1"
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        port = server.get("port", 8765)
        values["url"] = f"http://{host}:{port}"
    token = server.get("token") or ""
    return HookConfig(home=home_path, token=str(token), **values)
