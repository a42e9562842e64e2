"""``memlane mcp`` as a client sees it at the edges of a session (#34 item 7), through the
official SDK's own client: it reports memlane's version, answers a bad argument in one line
naming the field, and ends with exit 0 and nothing on stderr when the client closes stdin."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from conftest import Backend

pytest.importorskip("mcp", reason="needs the mcp extra")

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import TextContent

import memlane


def test_a_closed_stdin_ends_the_server_with_exit_0_and_nothing_on_stderr(
    sqlite_backend: Backend,
) -> None:
    # what `printf '' | memlane mcp; echo $?` does: the client went away at once
    done = subprocess.run(
        [sys.executable, "-m", "memlane", "mcp"],
        input=b"",
        capture_output=True,
        env=sqlite_backend.child_env(),
        timeout=120,
    )
    assert (done.returncode, done.stderr.decode()) == (0, "")
    assert done.stdout == b""


def test_a_session_reports_memlanes_version_and_one_line_argument_errors(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    errlog_path = tmp_path / "mcp-stderr.log"
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memlane", "mcp"], env=sqlite_backend.child_env()
    )

    async def main() -> tuple[str, str, str]:
        with errlog_path.open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                with anyio.fail_after(120):  # bounded wait, not a timing assertion
                    info = await session.initialize()
                    empty = await session.call_tool("remember", {"content": ""})
                    wrong = await session.call_tool("recall", {"query": "db", "limit": 0})
        texts = []
        for result in (empty, wrong):
            assert result.isError
            texts.append(" ".join(c.text for c in result.content if isinstance(c, TextContent)))
        return info.serverInfo.version, texts[0], texts[1]

    version, empty, wrong = anyio.run(main)
    assert version == memlane.__version__
    for text in (empty, wrong):
        assert "\n" not in text and "http" not in text and "pydantic" not in text, text
    assert empty.startswith("remember: content: ") and "at least 1 character" in empty
    assert wrong.startswith("recall: limit: ") and "greater than or equal to 1" in wrong
    # the client closed stdin at the end of the session: no traceback from the server
    assert "Traceback" not in errlog_path.read_text(), errlog_path.read_text()
