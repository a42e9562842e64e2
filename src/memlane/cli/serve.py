"""``memlane serve``: the HTTP API and the web pages (see docs/server.md).

FastAPI and uvicorn are imported inside the command: ``import memlane.cli`` stays light.
"""

from __future__ import annotations

import ipaddress
import logging
import signal
import sys
from types import FrameType
from typing import Annotated

import typer

from memlane.cli.app import HomeOption, app, err, fail
from memlane.errors import ConfigError

#: The signals that stop the server cleanly.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _stopped(sig: int, frame: FrameType | None) -> None:
    """Handler of :data:`STOP_SIGNALS` while uvicorn runs (it handles them first)."""


def _log_to_stderr() -> None:
    """The server's own notices (reloads, errors) on stderr; the engine's per-call INFO lines
    only with ``-v`` (a line per turn is too much for a service, and with ``-v`` the CLI has
    set the handler already)."""
    root = logging.getLogger("memlane")
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("memlane.server").setLevel(logging.INFO)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@app.command()
def serve(
    home: HomeOption = None,
    host: Annotated[
        str | None,
        typer.Option("--host", help="Address to bind (default [server] host, 127.0.0.1)."),
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Port (default [server] port, 8765).")
    ] = None,
) -> None:
    """Serve the HTTP API (/v1, OpenAPI at /docs) and the web pages until SIGTERM or ^C.

    Loopback by default; another address needs a token ([server] token or
    MEMLANE_SERVER__TOKEN)."""
    from memlane.config import Settings
    from memlane.engine import MemoryEngine

    settings = Settings.load(home)
    bind = host or settings.server.host
    bind_port = port if port is not None else settings.server.port
    server_cfg = settings.server
    if not is_loopback(bind) and not (server_cfg.token or server_cfg.owner_tokens):
        raise ConfigError(
            "server.token",
            "",
            f"binding to {bind} (not loopback) needs a token: set [server] token or "
            "MEMLANE_SERVER__TOKEN, or bind to 127.0.0.1",
        )
    try:
        import uvicorn

        from memlane.server.app import create_app
        from memlane.server.state import ServerState
    except ImportError as exc:
        raise fail(
            f"memlane serve needs the server extra: pip install 'memlane[server]' ({exc})"
        ) from None

    _log_to_stderr()
    engine = MemoryEngine.open(home, settings)
    try:
        err.print(f"loading the embedding model ({engine.embedder.name}) ...")
        engine.embed(["warm up"])  # ready only once the model answers
        state = ServerState(engine)
        state.start_watching()
        try:
            config = uvicorn.Config(
                create_app(state),
                host=bind,
                port=bind_port,
                log_level="info",
                timeout_graceful_shutdown=30,
            )
            # uvicorn finishes the in-flight requests on SIGTERM / SIGINT, then raises the
            # signal again under the handlers it found: these let the store close cleanly.
            previous = {sig: signal.signal(sig, _stopped) for sig in STOP_SIGNALS}
            try:
                uvicorn.Server(config).run()
            finally:
                for sig, old in previous.items():
                    signal.signal(sig, old)
        finally:
            state.stop_watching()
    finally:
        engine.close()
    err.print("memlane serve: stopped, store closed")
