"""``memlane proxy``: the memory proxy (docs/proxy.md). Starlette, httpx and uvicorn are imported
inside the command: ``import memlane.cli`` stays light."""

from __future__ import annotations

import logging
import signal
import sys
from typing import Annotated

import typer

from memlane.cli.app import HomeOption, app, err, fail
from memlane.cli.serve import STOP_SIGNALS, _stopped, check_port, is_loopback
from memlane.errors import ConfigError


@app.command()
def proxy(
    home: HomeOption = None,
    host: Annotated[
        str | None,
        typer.Option("--host", help="Address to bind (default [proxy] host, 127.0.0.1)."),
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Port (default [proxy] port, 8788).")
    ] = None,
    no_memory: Annotated[
        bool,
        typer.Option("--no-memory", help="Forward only, add no memory (for comparisons)."),
    ] = False,
) -> None:
    """Serve the memory proxy until SIGTERM or ^C: point an OpenAI- or Anthropic-compatible
    client's base URL at http://HOST:PORT/NAME/v1 (OpenAI style) or http://HOST:PORT/NAME
    (Anthropic style), NAME being an upstream of [proxy.upstreams] in memlane.toml. Every
    conversation gets memlane's memory in its requests; the client's API key goes to the
    upstream only. Loopback by default; another address needs [proxy] token (clients send it
    in X-Memlane-Token).

    Example:  memlane proxy --port 8788"""
    from memlane.config import Settings

    settings = Settings.load(home)
    cfg = settings.proxy
    bind = host or cfg.host
    bind_port = port if port is not None else cfg.port
    if not cfg.upstreams:
        raise fail(
            "no upstream configured: add one to memlane.toml, e.g.\n"
            '  [proxy.upstreams.openai]\n  url = "https://api.openai.com/v1"\n  api = "openai"\n'
            "(docs/proxy.md)"
        )
    if not is_loopback(bind) and not cfg.token:
        raise ConfigError(
            "proxy.token",
            "",
            f"binding to {bind} (not loopback) needs a token: set [proxy] token or "
            "MEMLANE_PROXY__TOKEN (clients send it in X-Memlane-Token), or bind to 127.0.0.1",
        )
    try:
        import uvicorn

        from memlane.proxy.app import create_app
    except ImportError as exc:
        raise fail(
            f"memlane proxy needs the server extra: pip install 'memlane[server]' ({exc})"
        ) from None
    from memlane.engine import MemoryEngine

    check_port(bind, bind_port)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("memlane").addHandler(handler)
    logging.getLogger("memlane.proxy").setLevel(logging.INFO)
    engine = None if no_memory else MemoryEngine.open(home, settings)
    try:
        if engine is not None:
            err.print(f"loading the embedding model ({engine.model_name}) ...")
            engine.embed(["warm up"])
        names = ", ".join(f"/{n}/ -> {u.url} ({u.api})" for n, u in cfg.upstreams.items())
        err.print(f"memlane proxy: http://{bind}:{bind_port} ({names})")
        previous = {sig: signal.signal(sig, _stopped) for sig in STOP_SIGNALS}
        try:
            # uvicorn's access log is off: its lines hold paths only, never headers, but the
            # proxy logs each request itself (memlane.proxy), without the query string
            uvicorn.run(
                create_app(engine, cfg), host=bind, port=bind_port, log_level="warning",
                access_log=False,
            )  # fmt: skip
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
    finally:
        if engine is not None:
            engine.close()
    err.print("memlane proxy: stopped")
