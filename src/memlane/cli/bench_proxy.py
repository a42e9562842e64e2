"""CLI: ``memlane bench proxy``: the memory proxy's added latency and time to first byte against
the same fake upstream called directly (:mod:`memlane.eval.bench.proxy`, docs/proxy.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memlane.cli.app import JsonOption, handle_errors, out, print_json
from memlane.cli.bench import _home_or_temp, bench_app


@bench_app.command("proxy")
def proxy_cmd(
    requests: Annotated[
        int, typer.Option("--requests", min=10, help="Requests per mode (each sent twice).")
    ] = 100,
    turns: Annotated[int, typer.Option("--turns", min=1, help="User turns per conversation.")] = 6,
    home: Annotated[
        Path | None,
        typer.Option("--home", help="Store to use (default: a temporary one, removed after)."),
    ] = None,
    json_out: JsonOption = False,
) -> None:
    """Added latency per request (p50/p95, non-streaming) and added time to first byte
    (streaming) of `memlane proxy` against the same fake upstream called directly, in one run,
    beside the in-process injection's own p50/p95 (the real embedding model of [embedding]).

    Example:  memlane bench proxy --requests 100"""
    from memlane.config import Settings
    from memlane.engine import MemoryEngine
    from memlane.eval.bench.proxy import run

    with handle_errors(), _home_or_temp(home) as folder:
        engine = MemoryEngine.open(folder, Settings.load(folder))
        try:
            result = run(engine, folder, requests=requests, turns=turns)
        finally:
            engine.close()
    if json_out:
        print_json(result)
        return
    out.print(
        f"bench proxy: {result['requests']} requests per mode, {result['memories']} memories "
        f"({result['embedder']}), {result['turns_per_conversation']} turns a conversation"
    )
    rows = [
        ("in-process injection (engine.turn)", result["inject_ms"]),
        ("  the same, back to back before the proxy", result["inject_back_to_back_ms"]),
        ("non-streaming: direct", result["non_streaming"]["direct_ms"]),
        ("non-streaming: through the proxy", result["non_streaming"]["proxy_ms"]),
        ("non-streaming: added", result["non_streaming"]["added_ms"]),
        ("non-streaming: the proxy's memory step", result["non_streaming"]["memory_step_ms"]),
        ("streaming first byte: direct", result["streaming_first_byte"]["direct_ms"]),
        ("streaming first byte: through the proxy", result["streaming_first_byte"]["proxy_ms"]),
        ("streaming first byte: added", result["streaming_first_byte"]["added_ms"]),
        ("streaming: the proxy's memory step", result["streaming_first_byte"]["memory_step_ms"]),
    ]
    for name, figures in rows:
        out.print(f"  {name:<42} p50 {figures['p50']:>8.2f} ms   p95 {figures['p95']:>8.2f} ms")
