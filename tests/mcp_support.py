"""The MCP tests' client: ``memlane mcp`` on stdio driven by the official SDK's own client
(import only once the ``mcp`` extra is known to be installed)."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent

T = TypeVar("T")


def with_session(
    env: dict[str, str], fn: Callable[[ClientSession], Awaitable[T]], cwd: Path | None = None
) -> T:
    """Start ``memlane mcp`` on stdio (in ``cwd``: the client's project, when given),
    initialise, run ``fn`` with the SDK's session."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memlane", "mcp"],
        env=env,
        cwd=None if cwd is None else str(cwd),
    )

    async def main() -> T:
        with (Path(env["MEMLANE_HOME"]) / "mcp-stderr.log").open("a") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                with anyio.fail_after(120):  # bounded wait, not a timing assertion
                    await session.initialize()
                    return await fn(session)

    return anyio.run(main)


def data(result: CallToolResult) -> Any:
    """A tool's answer (its structured content, else its JSON text); fails on a tool error."""
    assert not result.isError, result.content
    if result.structuredContent is not None:
        return result.structuredContent.get("result", result.structuredContent)
    first = result.content[0]
    assert isinstance(first, TextContent)
    return json.loads(first.text)
