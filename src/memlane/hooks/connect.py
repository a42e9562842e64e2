"""Which backend one hook call uses: the server that proves it serves this home's store, else
the engine in-process (with the daemon started for the next calls).

- ``[hooks] url`` set: that server, with ``[hooks] token`` (or ``[server] token``): the user
  named it.
- Otherwise the server recorded in ``<home>/run/server.json``, and only once it proved that it
  serves this home's store (:meth:`~memlane.hooks.backend.HttpBackend.prove`: a fresh nonce,
  answered with an HMAC keyed by ``<home>/run/secret``, readable by the home's owner only),
  before the token or the prompt is sent. A record is never believed on its pid: a server
  killed with ``kill -9`` leaves it behind, the pid may be reused and the port taken by any
  local process. What fails the proof gets nothing more; the call goes in-process, the reason
  is logged (WARNING), and a fresh daemon is started (its record replaces the stale one).
- A server that answers HTTP 401 (a token added, changed or removed in ``memlane.toml`` while
  it runs): the record is read again and, when its token changed, the call is sent again;
  otherwise the hook says so once in ``hooks.log`` and answers that call in-process.
"""

from __future__ import annotations

import os

from memlane.hooks.backend import (
    BackendError,
    HttpBackend,
    Injected,
    LocalBackend,
    NotOurServer,
    ServerUnavailable,
    Unauthorized,
)
from memlane.hooks.config import HookConfig

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms per hook call)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from memlane.hooks.backend import Backend

    T = TypeVar("T")
    Log = Callable[[str, str], None]


def recorded_server(
    cfg: HookConfig, deadline: float, *, not_token: str | None = None
) -> tuple[HttpBackend | None, str, bool]:
    """The server recorded in ``cfg.home``, connected and proven to serve this home's store,
    or ``None``, why not, and whether something answered without the proof (an impostor, or
    a server of another store). ``not_token``: ``None`` too when the record's token is this
    one (after an HTTP 401: the same token would be refused again)."""
    from memlane.hooks.daemon import read_record, read_secret, record_file, secret_file

    record, why = read_record(cfg.home)
    if record is None:
        return None, why, False
    token = cfg.token or str(record.get("token") or "")
    if not_token is not None and token == not_token:
        return None, "the record's token is the one refused", False
    key = read_secret(cfg.home)
    if key is None:
        return (
            None,
            f"{secret_file(cfg.home)} is missing: the recorded server is not trusted",
            False,
        )
    url = str(record["url"])
    try:
        server = HttpBackend(
            url, token=token, connect_timeout_s=cfg.connect_timeout_s, deadline=deadline
        )
    except (ServerUnavailable, BackendError) as exc:
        return None, f"the server recorded in {record_file(cfg.home)} is gone ({exc})", False
    try:
        server.prove(key, str(record["store_id"]))
    except NotOurServer as exc:
        server.close()
        why = (
            f"what answers at {url} (recorded in {record_file(cfg.home)}) did not prove that "
            f"it serves this home's store: {exc}; neither the token nor the prompt was sent"
        )
        return None, why, True
    return server, "", False


def choose(cfg: HookConfig, event: str, deadline: float, log: Log) -> Any:
    """The backend of one call of ``event`` (module docstring). ``log(level, message)``
    writes a line of ``hooks.log``.

    Raises:
        RuntimeError: no server answers and ``[hooks] fallback`` is off.
    """
    from memlane.hooks.daemon import start_daemon

    url = cfg.server_url()
    why = ""
    server: HttpBackend | None = None
    if url:
        try:
            server = HttpBackend(
                url,
                token=cfg.token or cfg.server_token,
                connect_timeout_s=cfg.connect_timeout_s,
                deadline=deadline,
            )
        except ServerUnavailable as exc:
            why = str(exc)
    else:
        server, why, impostor = recorded_server(cfg, deadline)
        if impostor:
            log("WARNING", f"{event}: {why}")
    if server is not None:
        return Guarded(server, cfg, event, deadline, log)
    if not cfg.fallback:
        raise RuntimeError(f"{why}; [hooks] fallback is off")
    started = ""
    if cfg.autostart and not url:
        pid = start_daemon(cfg.home, cfg.idle_shutdown_s)
        started = f"; started the memory daemon (pid {pid})" if pid else ""
    log("INFO", f"{event}: in-process ({why}){started}")
    return local_backend(cfg)


def local_backend(cfg: HookConfig) -> LocalBackend:
    """The engine of ``cfg.home`` in this process, its warnings to ``hooks.log``."""
    os.makedirs(os.path.dirname(cfg.log_path), exist_ok=True)
    return LocalBackend(cfg.home, cfg.log_path)


class Guarded:
    """A server backend whose HTTP 401 does not lose the call: the record is read again (a
    new token: sent again), else one ``hooks.log`` line and the call (and the rest of this
    hook run's calls) answered in-process. Without ``[hooks] fallback`` the 401 is raised."""

    name = "server"

    def __init__(
        self, server: HttpBackend, cfg: HookConfig, event: str, deadline: float, log: Log
    ) -> None:
        self.server = server
        self.cfg = cfg
        self.event = event
        self.deadline = deadline
        self.log = log
        self.local: LocalBackend | None = None

    def _run(self, call: Callable[[Backend], T]) -> T:
        if self.local is not None:
            return call(self.local)
        try:
            return call(self.server)
        except Unauthorized as exc:
            refused = exc
        if not self.cfg.server_url():  # the record may hold the new token by now
            again, _, _ = recorded_server(self.cfg, self.deadline, not_token=self.server.token)
            if again is not None:
                self.server.close()
                self.server = again
                try:
                    return call(again)
                except Unauthorized as exc:
                    refused = exc
        if not self.cfg.fallback:
            raise refused
        where = "[hooks] token" if self.cfg.token else "the token of run/server.json"
        if self.cfg.server_url() and not self.cfg.token:
            where = "[server] token"
        self.log(
            "WARNING",
            f"{self.event}: the server refused {where} ({refused}); this call is answered "
            "in-process (set the token the server requires, or restart it)",
        )
        self.local = local_backend(self.cfg)
        return call(self.local)

    def inject(self, session: str, text: str, **kwargs: Any) -> Injected:
        return self._run(lambda b: b.inject(session, text, **kwargs))

    def inject_pinned(self, session: str, **kwargs: Any) -> Injected:
        return self._run(lambda b: b.inject_pinned(session, **kwargs))

    def reset(self, session: str, reason: str, *, owner: str) -> None:
        self._run(lambda b: b.reset(session, reason, owner=owner))

    def sync(self, session: str, text: str, *, owner: str, agent: str) -> Injected:
        return self._run(lambda b: b.sync(session, text, owner=owner, agent=agent))

    def turn(self, session: str, message: str, **fields: Any) -> dict[str, Any]:
        return self._run(lambda b: b.turn(session, message, **fields))

    def close(self) -> None:
        self.server.close()
        if self.local is not None:
            self.local.close()
