"""The real Claude Code and Gemini CLI (pinned npm versions, ``tests/client_support.py``) with
memlane's hooks installed by ``memlane hooks install``, talking to fake model servers on
127.0.0.1: the assertions are on the requests the model servers received.

- a memory added with ``memlane add`` (no owner) reaches Claude Code's model;
- over a session it is injected once and no request holds it twice; after ``/compact``
  (Claude Code) or ``/clear`` (Gemini CLI) it comes back, once; a Gemini CLI compression,
  ``/compress`` or automatic inside a turn, leaves it in every request once;
- a ``memlane serve`` of another home on the configured port is not used;
- a memory the session wrote through memlane's MCP ``remember`` is not injected back into it
  (Claude Code and Gemini CLI);
- Claude Code and Gemini CLI in one repository share its project memories, and a second
  repository sees only the global ones.

Slow by nature (a Node.js client per step, several seconds each on a busy machine): marked
``clients``; run with the rest of the suite by ``make test``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import client_support as cs

pytestmark = pytest.mark.clients

DB = "The staging database is PostgreSQL 16 with pgvector, listening on port 5433"
ASKS = [
    "Which database does staging use?",
    "Which port does the staging database listen on?",
    "Is pgvector installed on the staging database?",
    "Remind me which database version staging runs",
]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[cs.Lab]:
    try:
        made = cs.make_lab(tmp_path)
    except RuntimeError as exc:
        pytest.fail(f"the clients could not be installed: {exc}")
    try:
        yield made
    finally:
        made.close()


def added(lab: cs.Lab, text: str, *args: str) -> dict[str, str]:
    memory = json.loads(lab.memlane("add", text, "--json", *args))["memory"]
    return {memory["id"]: memory["content"]}


def test_claude_code_injects_once_and_again_after_compact(lab: cs.Lab) -> None:
    repo = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    memory = added(lab, DB)  # no --owner: the scope rule's owner, as the hooks use
    (mid,) = memory
    session = cs.claude_session(lab, repo, ASKS[:3])
    cs.claude_once(lab, repo, "/compact", session)
    cs.claude_session(lab, repo, ASKS[3:] + ASKS[:1], session)
    found = cs.rows(lab.anthropic, memory)
    summaries = [r.n for r in found if r.summary]
    turns = [r for r in found if not r.summary]
    assert len(summaries) == 1 and len(turns) == 5, cs.table("claude", found, {mid: "DB"})
    assert all(r.memories.get(mid, 0) <= 1 for r in found)  # never twice in a request
    before = [r for r in turns if r.n < summaries[0]]
    after = [r for r in turns if r.n > summaries[0]]
    # injected once at the first turn; the block stays in the history (one copy each time)
    assert [r.memories.get(mid) for r in before] == [1, 1, 1]
    assert [r.blocks for r in before] == [1, 1, 1]
    # after /compact the model no longer had it: it comes back once
    assert [r.memories.get(mid) for r in after] == [1, 1]


def test_gemini_cli_injects_once_and_never_twice(lab: cs.Lab) -> None:
    """Gemini CLI 0.61 keeps BeforeAgent's context in its history and fires PreCompress every
    turn: a memory is injected once and no request holds it twice (before: a copy per turn)."""
    repo = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    memory = added(lab, DB)
    (mid,) = memory
    for n, ask in enumerate(ASKS):
        cs.gemini_once(lab, repo, ask, resume=n > 0)
    found = cs.rows(lab.google, memory)
    table = cs.table("gemini", found, {mid: "DB"})
    assert [r.memories.get(mid) for r in found] == [1, 1, 1, 1], table
    assert [r.blocks for r in found] == [1, 1, 1, 1], table


def gemini_rows(lab: cs.Lab, memory: dict[str, str]) -> tuple[list[cs.Row], str]:
    found = cs.rows(lab.google, memory)
    return found, cs.table("gemini", found, {mid: "DB" for mid in memory})


def snapshots(lab: cs.Lab) -> list[int]:
    """The numbers of the conversation requests whose history is a compressed one."""
    requests = lab.google.model_requests()
    return [n for n, r in enumerate(requests, 1) if "<state_snapshot>" in str(r.body)]


def test_gemini_cli_memory_stays_once_after_compress(lab: cs.Lab) -> None:
    """``/compress`` (a real compression: the CLI's summary calls, the history replaced by a
    ``<state_snapshot>``) takes the block out of the history; the BeforeModel hook sees it
    gone and adds it to that very request (Gemini CLI does not keep that change, so every
    later request of the window gets it the same way): every request holds the memory once.

    The first request with the snapshot is the ``/compress`` turn itself, or (seen under load)
    the next one: ``gemini -p /compress`` sent its prompt before the compressed history was in
    place. (Before: that first compressed request lacked the memory.)"""
    repo = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    memory = added(lab, DB)
    (mid,) = memory
    for n, ask in enumerate([ASKS[0], ASKS[1], "/compress", ASKS[2], ASKS[3]]):
        cs.gemini_once(lab, repo, ask, resume=n > 0)
    found, table = gemini_rows(lab, memory)
    assert snapshots(lab) in ([3, 4, 5], [4, 5]), table  # a real compression, kept from then on
    assert [r.memories.get(mid, 0) for r in found] == [1] * 5, table
    assert [r.blocks for r in found] == [1] * 5, table


def test_gemini_cli_automatic_compression_inside_a_turn_keeps_the_memory_once(
    lab: cs.Lab,
) -> None:
    """Gemini CLI compresses on its own, inside the turn: after ``BeforeAgent`` has run, when
    the history passes ``model.compressionThreshold`` of the model's window. Set to 0.0001
    here (about 100 of 1,048,576 tokens), every resumed turn compresses. The memory injected
    at the first turn is in every request exactly once: each compression takes it out of the
    history and the ``BeforeModel`` hook adds it to that same request. (Before: the request
    after each compression lacked it, and it came back one prompt late.)"""
    repo = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    cs.gemini_settings(lab, {"model": {"compressionThreshold": 0.0001}})
    memory = added(lab, DB)
    (mid,) = memory
    for n, ask in enumerate(ASKS + ASKS[:1]):
        cs.gemini_once(lab, repo, ask, resume=n > 0)
    found, table = gemini_rows(lab, memory)
    summaries = [
        r for r in lab.google.requests
        if ":generateContent" in r.path and "Generate a new <state_snapshot>" in str(r.body)
    ]  # fmt: skip
    assert summaries, table  # the CLI compressed on its own (no /compress)
    assert snapshots(lab) == [2, 3, 4, 5], table  # from the second turn on
    assert [r.memories.get(mid, 0) for r in found] == [1] * 5, table
    assert [r.blocks for r in found] == [1] * 5, table
    log = (lab.home / "logs" / "hooks.log").read_text()
    assert "no longer in the request (compressed away) added to it" in log


def test_gemini_cli_memory_comes_back_once_after_clear(lab: cs.Lab) -> None:
    repo = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    memory = added(lab, DB)
    (mid,) = memory
    for n, ask in enumerate([ASKS[0], "/clear", ASKS[1], ASKS[2]]):
        cs.gemini_once(lab, repo, ask, resume=n > 0)
    found, table = gemini_rows(lab, memory)
    assert [r.memories.get(mid, 0) for r in found] == [1, 0, 1, 1], table
    assert [r.blocks for r in found] == [1, 0, 1, 1], table
    assert ASKS[0] not in cs.request_text(lab.google.model_requests()[2].body)  # cleared


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_server_of_another_home_on_the_configured_port_is_not_used(lab: cs.Lab) -> None:
    """The lab's home names port P in ``[server] port``; a ``memlane serve`` of another home
    (its own memory) answers on P. Claude Code's request holds the lab's memory and not the
    other home's: the hook used its own store (its daemon), and its log says why."""
    repo = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    memory = added(lab, DB)
    port = free_port()
    (lab.home / "memlane.toml").write_text(f"[server]\nport = {port}\n")
    other = lab.root / "other-home"
    other.mkdir()
    env = {**lab.env, "MEMLANE_HOME": str(other)}
    theirs = "The staging database is MySQL 5.7 on port 3306, owned by the other team"
    subprocess.run([sys.executable, "-m", "memlane", "add", theirs], env=env, check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    log = (lab.root / "other-serve.log").open("w")
    server = subprocess.Popen([sys.executable, "-m", "memlane", "serve", "--port", str(port)],
                              env=env, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        end = time.monotonic() + 120  # a bound for the start, not a timing
        while time.monotonic() < end:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        cs.claude_once(lab, repo, ASKS[0])
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()
    (request,) = lab.anthropic.model_requests()
    text = " ".join(cs.request_text(request.body).split())
    assert DB in text and theirs not in text
    assert list(memory) == [r for r in cs.rows(lab.anthropic, memory)[0].memories]
    hooks_log = (lab.home / "logs" / "hooks.log").read_text()
    assert "in-process (no memlane server serves this home" in hooks_log


def test_claude_code_a_memory_remembered_through_mcp_is_not_injected_back(lab: cs.Lab) -> None:
    """The model calls memlane's MCP ``remember`` (the fake server answers the first prompt
    with that tool call; Claude Code runs the real ``memlane mcp``); on the next prompt of the
    same session the hook finds the call in the transcript and leaves that memory out: the
    request holds it only in the tool call and its result, no block. A new session gets it.
    (Before: a block with it on the next prompt, a third copy.)"""
    repo = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    lab.anthropic.tool_use_on["Please remember"] = ("mcp__memlane__remember", {"content": DB})
    mcp = cs.mcp_config(lab)
    # MCP servers connect in the background: its tools are there from the second request on
    hello = ["Hello there.", "Please remember the staging database."]
    session = cs.claude_session(lab, repo, hello, None, *mcp)
    for _ in range(2):
        if json.loads(lab.memlane("list", "--json")):
            break
        # on a loaded machine `memlane mcp` may connect after the request that called its
        # tool (Claude Code then answers "no such tool"): the user asks again, as here
        session = cs.claude_session(lab, repo, hello[-1:], session, *mcp)
    (stored,) = json.loads(lab.memlane("list", "--json"))
    assert stored["content"] == DB  # the real MCP server stored it
    memory = {stored["id"]: DB}
    asked = len(lab.anthropic.model_requests())
    cs.claude_session(lab, repo, [ASKS[0]], session, *mcp)
    later = cs.rows(lab.anthropic, memory)[asked:]
    table = cs.table("claude", later, {stored["id"]: "DB"})
    # its text twice (the tool call's input and its result), and no memlane block
    assert later and all(r.memories.get(stored["id"]) == 2 and r.blocks == 0 for r in later), table
    fresh = len(lab.anthropic.model_requests())
    cs.claude_once(lab, repo, ASKS[0])
    (other,) = cs.rows(lab.anthropic, memory)[fresh:]
    assert (other.memories.get(stored["id"]), other.blocks) == (1, 1)


def test_gemini_cli_a_memory_remembered_through_mcp_is_not_injected_back(lab: cs.Lab) -> None:
    """The model calls memlane's MCP ``remember`` (the fake Gemini server answers the prompt
    with that function call; Gemini CLI runs the real ``memlane mcp``, trusted); on the next
    prompt of the same session the hook finds the call in Gemini's transcript and leaves that
    memory out: the request holds it only in the call and its result, no block. A new session
    gets it. (Before: a block with it on the next prompt.)"""
    repo = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    server = {"command": sys.executable, "args": ["-m", "memlane", "mcp"], "env": lab.env,
              "trust": True}  # fmt: skip
    cs.gemini_settings(lab, {"mcpServers": {"memlane": server}})
    lab.google.tool_use_on["Please remember"] = ("mcp_memlane_remember", {"content": DB})
    cs.gemini_once(lab, repo, "Please remember the staging database.", resume=False)
    (stored,) = json.loads(lab.memlane("list", "--json"))
    assert stored["content"] == DB  # the real MCP server stored it
    memory = {stored["id"]: DB}
    asked = len(lab.google.model_requests())
    assert asked == 2  # the prompt, then the tool's result
    cs.gemini_once(lab, repo, ASKS[0], resume=True)
    (later,) = cs.rows(lab.google, memory)[asked:]
    table = cs.table("gemini", [later], {stored["id"]: "DB"})
    # its text in the call's arguments and in the result, and no memlane block
    assert later.memories.get(stored["id"], 0) >= 2 and later.blocks == 0, table
    cs.gemini_once(lab, repo, ASKS[0], resume=False)  # a new session: injected
    (other,) = cs.rows(lab.google, memory)[asked + 1 :]
    assert (other.memories.get(stored["id"]), other.blocks) == (1, 1)


def test_two_assistants_share_a_repositorys_memories_another_repository_does_not(
    lab: cs.Lab,
) -> None:
    """A memory of the project ``shop`` (``memlane add --project``, the repository's folder)
    reaches Claude Code and Gemini CLI in ``shop``, and not Claude Code in ``blog``; a global
    memory (no ``--project``) reaches all three."""
    shop = cs.make_repo(lab.root / "shop", "git@github.com:acme/shop.git")
    blog = cs.make_repo(lab.root / "blog", "https://github.com/acme/blog")
    ours = added(lab, DB, "--project", str(shop))
    ci = "The staging database credentials rotate every Monday; ask the ops channel"
    shared = added(lab, ci)
    both = {**ours, **shared}
    names = {next(iter(ours)): "DB(shop)", next(iter(shared)): "CI(global)"}
    cs.claude_once(lab, shop, ASKS[0])
    cs.gemini_once(lab, shop, ASKS[0], resume=False)
    cs.claude_once(lab, blog, ASKS[0])
    claude_rows = cs.rows(lab.anthropic, both)
    gemini_rows = cs.rows(lab.google, both)
    table = cs.table("claude", claude_rows, names) + "\n" + cs.table("gemini", gemini_rows, names)
    in_shop, in_blog = claude_rows
    (gemini_shop,) = gemini_rows
    assert set(in_shop.memories) == set(both), table
    assert set(gemini_shop.memories) == set(both), table
    assert set(in_blog.memories) == set(shared), table
