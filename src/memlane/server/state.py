"""What one ``memlane serve`` process holds: the engine (opened once), the settings in use, the
last configuration error, and the thread that reloads ``memlane.toml`` when it changes."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlane.config import CONFIG_FILENAME, InjectionSettings, ServerSettings, Settings
from memlane.engine import MemoryEngine
from memlane.errors import ConfigError
from memlane.server import tomlfile

log = logging.getLogger("memlane.server")

#: Seconds between two looks at ``memlane.toml`` (a hand edit is used within a second).
POLL_S = 0.3


@dataclass(frozen=True)
class Principal:
    """Who is calling: ``owner`` is set for a token bound to one owner (None: any owner)."""

    owner: str | None = None


class ServerState:
    """The engine and its settings; :meth:`update_injection` and :meth:`revert_agent` write the
    file and use it at once; :meth:`start_watching` reloads hand edits."""

    def __init__(self, engine: MemoryEngine, *, overrides: Mapping[str, Any] | None = None):
        self.engine = engine
        self.home = engine.settings.home_path
        self.path = self.home / CONFIG_FILENAME
        #: Values given on the command line / by a test (kept across reloads).
        self.overrides = dict(overrides or {})
        #: ``[server]`` as read at start; a reload changes only the tokens, and only to revoke
        #: or replace them: a hand edit that drops every token must not open a server bound to
        #: a public address (:meth:`_use_tokens`).
        self.server = engine.settings.server
        self.started = time.time()
        self.config_error: str | None = None
        self.ready = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._seen = self._stamp()

    @property
    def settings(self) -> Settings:
        return self.engine.settings

    # ------------------------------------------------------------------ reads
    def file_text(self) -> str:
        return self.path.read_text(encoding="utf-8") if self.path.is_file() else ""

    def injection(self, agent: str | None) -> tuple[InjectionSettings, dict[str, Any]]:
        """``agent``'s injection settings and the keys its override sets (empty: defaults)."""
        settings = self.settings
        if agent is None:
            return settings.injection, {}
        entry = settings.agents.get(agent)
        return settings.injection_for(agent), dict(entry.injection) if entry else {}

    # ------------------------------------------------------------------ writes
    def update_injection(self, agent: str | None, values: Mapping[str, Any]) -> None:
        """Set ``values`` in the defaults (``agent`` None) or in ``agent``'s override, check the
        whole file as a load would, write it atomically and use it. Raises
        :class:`ConfigError` (nothing written)."""
        with self._lock:
            self._commit(tomlfile.set_injection(self.file_text(), agent, values))

    def revert_agent(self, agent: str) -> None:
        """Remove ``agent``'s override (it uses the defaults again)."""
        with self._lock:
            self._commit(tomlfile.remove_agent_injection(self.file_text(), agent))

    def _commit(self, text: str) -> None:
        settings = Settings.from_text(self.home, text, source=str(self.path), **self.overrides)
        tomlfile.write_atomic(self.path, text)
        self.engine.reload_settings(settings)
        self._use_tokens(settings)
        self.config_error = None
        self._seen = self._stamp()

    # ------------------------------------------------------------------ hot reload
    def reload(self) -> bool:
        """Read ``memlane.toml`` again; on an error keep the settings in use, log why and keep
        the message in :attr:`config_error`. True when the new file is in use."""
        with self._lock:
            self._seen = self._stamp()
            try:
                settings = Settings.load(self.home, **self.overrides)
            except ConfigError as exc:
                # Without the value: a misspelt section ([sever] token = ...) would quote a token.
                message = f"invalid setting {exc.key}: {exc.allowed}"
                if self.config_error != message:
                    log.error("memlane.toml not reloaded, the last good settings stay: %s", message)
                self.config_error = message
                return False
            self.engine.reload_settings(settings)
            self._use_tokens(settings)
            self.config_error = None
            log.info("memlane.toml reloaded")
            return True

    def _use_tokens(self, settings: Settings) -> None:
        """Take the reloaded file's tokens: an owner removed from ``owner_tokens`` (or a changed
        token) is refused from now on. A file with no token at all keeps the tokens in use (a
        reload never opens the server; restart it to run without tokens)."""
        old, new = self.server, settings.server
        if (old.token, old.owner_tokens) == (new.token, new.owner_tokens):
            return
        if not (new.token or new.owner_tokens):
            log.warning(
                "memlane.toml sets no token now: the tokens in use stay until a restart "
                "(a reload never opens the server)"
            )
            kept = self._recorded_token()
            if kept and kept != old.token:
                # another change this process did not see (a worker that got no request and
                # whose watcher was behind): take the token every process of this server keeps
                log.warning("tokens revoked by the reload: the server's token")
                self.server = old.model_copy(update={"token": kept})
            return
        revoked = sorted(o for o, t in old.owner_tokens.items() if new.owner_tokens.get(o) != t)
        if old.token and old.token != new.token:  # changed or removed (a new one is in use)
            revoked.insert(0, "the server's token")
        if revoked:
            log.warning("tokens revoked by the reload: %s", ", ".join(revoked))
        if not old.token and new.token:
            log.warning("the reload added a server token: every call needs it from now on")
        self.server = old.model_copy(
            update={"token": new.token, "owner_tokens": dict(new.owner_tokens)}
        )

    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def check_file(self) -> bool:
        """Reload when the file changed since the last look (what the watcher does)."""
        if self._stamp() == self._seen:
            return False
        return self.reload()

    def start_watching(self, interval: float = POLL_S) -> None:
        if self._thread is not None:
            return
        self._stop.clear()

        def watch() -> None:
            while not self._stop.wait(interval):
                try:
                    self.check_file()
                except Exception:  # keep watching whatever one look did
                    log.exception("watching memlane.toml")

        self._thread = threading.Thread(target=watch, name="memlane-config-watch", daemon=True)
        self._thread.start()

    def stop_watching(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _recorded_token(self) -> str:
        """The token this server's record (``run/server.json``) holds, when the record is this
        process's or its parent's (the workers of ``serve --workers N``); else ``""``. The
        record keeper applies :func:`token_after_reload` to every change of the file, so all
        processes of one server agree on the token kept when the file sets none, whichever
        intermediate changes each one saw (issue #34: a hook got 401 from a worker that had
        missed a change)."""
        import json
        import os

        try:
            with open(self.home / "run" / "server.json", encoding="utf-8") as fh:
                record = json.load(fh)
        except (OSError, ValueError):
            return ""
        if not isinstance(record, dict) or record.get("pid") not in (os.getpid(), os.getppid()):
            return ""
        token = record.get("token")
        return token if isinstance(token, str) else ""

    def uptime_s(self) -> float:
        return time.time() - self.started


def token_after_reload(in_use: str, new: ServerSettings) -> str:
    """The server token in use after a reload to ``new`` (:meth:`ServerState._use_tokens`):
    ``new``'s, unless ``new`` sets no token at all (then ``in_use`` stays: a reload never
    opens the server). What :class:`memlane.server.record.RecordKeeper` records for hooks."""
    return new.token if (new.token or new.owner_tokens) else in_use


def agent_names(settings: Settings) -> list[str]:
    return sorted(settings.agents)


def settings_path(home: Path) -> Path:
    return home / CONFIG_FILENAME
