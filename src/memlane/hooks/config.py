"""The ``[hooks]`` settings as the hook process reads them: ``memlane.toml`` and ``MEMLANE_*``
with the standard library only (pydantic costs ~0.1 s of import on every prompt); paths are
strings (:mod:`pathlib` costs milliseconds of import on every hook call) and :mod:`tomllib` is
imported only when ``memlane.toml`` changed since the hook last read it (:func:`read_toml`).

The keys, defaults and limits are those of :class:`memlane.config.HooksSettings` (a test checks
that both agree); the server's address comes from ``[server] host``/``port``/``token``.
"""

from __future__ import annotations

import os

from memlane.scope import configured_owner, project_identity, resolve_owner

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms per hook call)
if TYPE_CHECKING:
    from typing import Any

CONFIG_FILENAME = "memlane.toml"
#: The hooks' cache of repositories' root commits, under ``<home>/cache``.
ROOTS_CACHE = "roots.json"
#: The hooks' cache of ``memlane.toml``'s sections they read, under ``<home>/cache``.
TOML_CACHE = "hooks-toml.json"
DEFAULT_HOME = "~/.memlane"

#: The agent scope of each client when ``[hooks] agent`` is not set.
CLIENT_AGENTS = {"claude-code": "claude-code", "gemini": "gemini"}


class HookConfigError(ValueError):
    """A ``[hooks]`` or ``[server]`` value the hook cannot use (the message names the key)."""


#: The ``[hooks]`` keys and their defaults (those of :class:`memlane.config.HooksSettings`).
DEFAULTS: dict[str, object] = {
    "owner": "",
    "agent": "",
    "per_project": True,
    "url": "",
    "timeout_s": 8.0,
    "connect_timeout_s": 0.3,
    "max_chars": 9_000,
    "recent_messages": 2,
    "fallback": True,
    "learn": False,
    "token": "",
    "autostart": True,
    "idle_shutdown_s": 1800.0,
}


class HookConfig:
    """What one hook run needs (see :class:`memlane.config.HooksSettings` for each key), plus
    ``home`` and ``[server] token`` (sent as a bearer token when set). A plain class:
    :mod:`dataclasses` costs an import of :mod:`inspect` on every prompt."""

    __slots__ = ("home", "server_token", "scope_owner", "injection", "agents", *DEFAULTS)

    #: The home folder, absolute (``~`` expanded, links resolved).
    home: str
    #: ``[hooks] token`` (an owner-bound token, say); "" = the server's.
    token: str
    #: ``[server] token``: sent to a server named by ``[hooks] url`` when ``[hooks] token``
    #: is unset.
    server_token: str
    #: ``[scope] owner`` ("" = unset): the owner when ``[hooks] owner`` names none.
    scope_owner: str
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
    autostart: bool
    idle_shutdown_s: float

    def __init__(
        self,
        home: str | os.PathLike[str],
        server_token: str = "",
        scope_owner: str = "",
        **values: Any,
    ) -> None:
        unknown = set(values) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"unknown [hooks] keys: {sorted(unknown)}")
        self.home = os.fspath(home)
        self.server_token = server_token
        self.scope_owner = scope_owner
        #: ``[injection]`` and ``[agents]`` as read (for :meth:`ambient`), env overrides in.
        self.injection: dict[str, Any] = {}
        self.agents: dict[str, Any] = {}
        for key, default in DEFAULTS.items():
            setattr(self, key, values.get(key, default))

    @property
    def log_path(self) -> str:
        """``<home>/logs/hooks.log``: one line per failure (and per reset)."""
        return os.path.join(self.home, "logs", "hooks.log")

    def ambient(self, agent: str) -> bool:
        """Whether ``agent``'s injection may print pinned memories at a session's start
        (``[injection]`` ``enabled``, ``ambient_enabled``, ``pinned_types``, ``pinned_limit``,
        with ``[agents.<agent>.injection]`` over them): when not, ``SessionStart`` has nothing
        to print and the hook returns without a server or the engine. A value it cannot read
        counts as on (the engine decides)."""
        section = self.agents.get(agent) if isinstance(self.agents, dict) else None
        own = section.get("injection") if isinstance(section, dict) else None
        merged = {**self.injection, **(own if isinstance(own, dict) else {})}
        try:
            enabled = _coerce("learn", merged.get("enabled", True))
            ambient = _coerce("learn", merged.get("ambient_enabled", False))
            limit = int(merged.get("pinned_limit", 1))
        except (HookConfigError, TypeError, ValueError):
            return True
        types = merged.get("pinned_types", ())
        return bool(enabled and ambient and types and limit > 0)

    def server_url(self) -> str:
        """``[hooks] url`` ("" = the server recorded in the home: :mod:`memlane.hooks.daemon`)."""
        return self.url.rstrip("/")

    def scope(self, client: str, cwd: str | None) -> tuple[str, str, str | None]:
        """``(owner, agent, project)`` of a session of ``client`` run in ``cwd``
        (:meth:`owner_agent`, :meth:`project`)."""
        return (*self.owner_agent(client), self.project(cwd))

    def owner_agent(self, client: str) -> tuple[str, str]:
        """``(owner, agent)`` of a session of ``client``: the owner by the scope rule
        (``[hooks] owner`` > ``[scope] owner`` > ``"default"``,
        :func:`memlane.scope.resolve_owner`); the agent, the client's name unless ``[hooks]
        agent``."""
        owner = resolve_owner(self.owner, self.scope_owner)
        return owner, self.agent or CLIENT_AGENTS.get(client, client)

    def project(self, cwd: str | None) -> str | None:
        """With ``per_project`` (the default) the project of a session run in ``cwd``: the
        identity of the git repository holding it (:func:`memlane.scope.project_identity`:
        the same for its worktrees and clones, and for every assistant run in it), ``None``
        outside one. The root commit a repository without a remote needs is cached in
        ``<home>/cache/roots.json`` (git runs once per new HEAD, not on every call)."""
        if not (self.per_project and cwd):
            return None
        return project_identity(cwd, cache=os.path.join(self.home, "cache", ROOTS_CACHE))


#: (type, minimum, maximum) of the numeric keys: the limits of ``HooksSettings``.
_LIMITS: dict[str, tuple[type, float, float]] = {
    "timeout_s": (float, 1e-9, 600),
    "connect_timeout_s": (float, 1e-9, 30),
    "max_chars": (int, 100, 100_000),
    "recent_messages": (int, 0, 20),
    "idle_shutdown_s": (float, 0, 30 * 86400),
}
_BOOLS = {"per_project", "fallback", "learn", "autostart"}
_STRINGS = {"owner", "agent", "url", "token"}


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


#: The sections of ``memlane.toml`` the hook reads (all that :data:`TOML_CACHE` keeps).
TOML_SECTIONS = ("hooks", "server", "scope", "injection", "agents")
#: A ``memlane.toml`` changed less than this before its cache was written may change again
#: within its file system's time granularity without its size or time changing: the cache
#: is not trusted for it (git's "racily clean" rule for its index).
RACY_NS = 2_000_000_000


def _stat_key(info: os.stat_result) -> list[int]:
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


#: What the MAC of :data:`TOML_CACHE` signs before its text (:func:`memlane.hooks.daemon.mac`).
CACHE_CONTEXT = b"memlane-hooks-toml-cache-v1"


def read_toml(path: str, cache: str, home: str | None = None) -> dict[str, Any]:
    """The :data:`TOML_SECTIONS` of the TOML file ``path`` (``{}`` when there is none),
    through the JSON file ``cache``: :mod:`tomllib` (with :mod:`typing`, as long to import as
    :mod:`json`: ~5 ms a hook call) is imported only when the file changed since it was read
    (its device, inode, size, modification and change times), or changed within
    :data:`RACY_NS` of that read. The cache is readable by its user only (``[server] token``
    may be in it, as in the file). A cache that cannot be read or written is skipped.

    The cache cannot grant what the file does not say: it is used only with a MAC (HMAC-SHA256
    keyed by ``<home>/run/secret``, 0600, :func:`memlane.hooks.daemon.mac`) over its text,
    which holds the file's SHA-256 as well; the file is read (not parsed) and hashed on every
    call. A cache edited by hand, or left from another content of the file, is parsed again
    (and rewritten). Without ``home`` no cache is used.

    Raises:
        HookConfigError: the file is not TOML.
    """
    from memlane import _fastjson as json
    from memlane.hooks.daemon import ensure_secret, mac, read_secret, same_proof, sha256_hex

    try:
        info = os.stat(path)
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise HookConfigError(f"{path} cannot be read ({exc})") from None
    key = _stat_key(info)
    digest = sha256_hex(raw)
    secret = read_secret(home) if home is not None else None
    try:
        with open(cache, encoding="utf-8") as fh:
            stored = json.load(fh)
        text = stored["text"]
        if secret is not None and same_proof(
            stored["mac"], mac(secret, CACHE_CONTEXT, text.encode("utf-8"))
        ):
            cached = json.loads(text)
            if (
                cached["key"] == key
                and cached["digest"] == digest
                and cached["read_ns"] - info.st_mtime_ns > RACY_NS
                and isinstance(cached["data"], dict)
            ):
                return dict(cached["data"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    import time
    import tomllib

    read_ns = time.time_ns()
    try:
        parsed = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise HookConfigError(f"{path} is not valid TOML ({exc})") from None
    data = {name: parsed[name] for name in TOML_SECTIONS if name in parsed}
    if home is None:
        return data
    try:
        text = json.dumps({"key": key, "digest": digest, "read_ns": read_ns, "data": data})
        sealed = mac(ensure_secret(home), CACHE_CONTEXT, text.encode("utf-8"))
        folder = os.path.dirname(cache)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        tmp = os.path.join(folder, f".{os.path.basename(cache)}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps({"text": text, "mac": sealed}))
        os.replace(tmp, cache)
    except (OSError, TypeError, ValueError):
        pass  # a value JSON cannot hold (a TOML date), a read-only home: read it again next time
    return data


def load_config(home: str | os.PathLike[str] | None = None) -> HookConfig:
    """Read ``[hooks]``, ``[scope] owner`` and ``[server] token`` of ``<home>/memlane.toml``
    and their ``MEMLANE_*`` overrides (``MEMLANE_HOOKS__URL``, ``MEMLANE_SCOPE__OWNER`` ...).

    Raises:
        HookConfigError: the file is not TOML, or a value is out of its range.
    """
    raw = home if home is not None else os.environ.get("MEMLANE_HOME") or DEFAULT_HOME
    home_path = os.path.realpath(os.path.expanduser(os.fspath(raw)))
    path = os.path.join(home_path, CONFIG_FILENAME)
    data = read_toml(path, os.path.join(home_path, "cache", TOML_CACHE), home_path)
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
    token = server.get("token") or ""
    cfg = HookConfig(
        home=home_path, server_token=str(token), scope_owner=configured_owner(data), **values
    )
    injection = data.get("injection")
    cfg.injection = dict(injection) if isinstance(injection, dict) else {}
    for key in list(os.environ):
        if key.startswith("MEMLANE_INJECTION__"):
            cfg.injection[key.removeprefix("MEMLANE_INJECTION__").lower()] = os.environ[key]
    agents = data.get("agents")
    cfg.agents = dict(agents) if isinstance(agents, dict) else {}
    return cfg
