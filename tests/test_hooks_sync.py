"""The hooks follow what the model really holds: Gemini CLI's ``BeforeModel`` request (its
blocks survive, or a compression or ``/clear`` took them), and the memories a Claude Code
session wrote itself through memlane's MCP ``remember`` (in its transcript). Each runs the
hook as the clients do (a process, the payload on stdin), in-process and against a real
``memlane serve``; and the HTTP API's ``/v1/inject`` without a text for the pinned memories.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import Backend
from hook_support import (
    OWNER,
    PATHS,
    claude_payload,
    gemini_payload,
    hook_env,
    hook_paths,
    run_hook,
)
from memlane.hooks.gemini import memlane_blocks, with_block
from server_support import run_server

DB = "The staging database is PostgreSQL 16 with pgvector, listening on port 5433"
ASK = "Which database does the staging environment use?"
ASK2 = "Which port does the staging database listen on?"


@pytest.fixture(params=PATHS)
def env(request: pytest.FixtureRequest, store_backend: Backend) -> Iterator[dict[str, str]]:
    engine = store_backend.engine()
    engine.add(DB, owner=OWNER)
    engine.close()
    with hook_paths(request.param, store_backend) as made:
        yield made


def injected(env: dict[str, str], payload: dict[str, Any], event: str = "BeforeAgent") -> str:
    """The block the hook printed ("" when nothing)."""
    done = run_hook(env, event, payload)
    assert done.returncode == 0
    return run_context(done.stdout)


def run_context(stdout: str) -> str:
    return str(json.loads(stdout)["hookSpecificOutput"]["additionalContext"]) if stdout else ""


def request_with(*user_turns: str) -> dict[str, Any]:
    """A ``BeforeModel`` ``llm_request`` as Gemini CLI 0.61 sends it (parts joined)."""
    messages: list[dict[str, str]] = []
    for text in user_turns:
        messages += [{"role": "user", "content": text}, {"role": "model", "content": "Noted."}]
    return {"model": "gemini-3.1-pro-preview", "messages": messages[:-1], "config": {}}


def before_model(env: dict[str, str], session: str, cwd: Path, request: dict[str, Any]) -> str:
    """The request's messages joined, as the hook leaves them: unchanged when it prints
    nothing, else with its ``llm_request`` change (which must keep every message)."""
    payload = gemini_payload("BeforeModel", session, cwd, llm_request=request)
    done = run_hook(env, "BeforeModel", payload)
    assert done.returncode == 0
    messages = request["messages"]
    if done.stdout:
        out = json.loads(done.stdout)["hookSpecificOutput"]
        assert out["hookEventName"] == "BeforeModel" and list(out) == ["hookEventName",
                                                                       "llm_request"]  # fmt: skip
        changed = out["llm_request"]["messages"]
        assert [m["role"] for m in changed] == [m["role"] for m in messages]
        messages = changed
    return "\n".join(m["content"] for m in messages)


def log_of(backend: Backend) -> str:
    path = backend.home / "logs" / "hooks.log"
    return path.read_text() if path.exists() else ""


def test_gemini_before_model_adds_what_a_compression_took_to_that_request(
    env: dict[str, str], store_backend: Backend, tmp_path: Path
) -> None:
    """A compression inside the turn (after BeforeAgent) took the block: BeforeModel adds it
    to that very request, once, and to every later request that lacks it (Gemini does not
    keep the change); BeforeAgent does not inject it again meanwhile."""
    first = injected(env, gemini_payload("BeforeAgent", "g1", tmp_path, prompt=ASK))
    assert DB in first
    held = f"{ASK}<hook_context>{first}</hook_context>"
    sent = before_model(env, "g1", tmp_path, request_with(held))
    assert sent.count(DB) == 1  # held: the request goes out as it is
    # the history holds the block: not injected again
    assert injected(env, gemini_payload("BeforeAgent", "g1", tmp_path, prompt=ASK2)) == ""
    assert before_model(env, "g1", tmp_path, request_with(held, ASK2)).count(DB) == 1
    assert "no longer in the request" not in log_of(store_backend)
    # a compression replaced the history by a summary: the block is gone, and comes back
    summary = "<state_snapshot>the user asked about staging</state_snapshot>"
    sent = before_model(env, "g1", tmp_path, request_with(summary, ASK2))
    assert sent.count(DB) == 1 and sent.endswith(f"{ASK2}<hook_context>{first}</hook_context>")
    assert "1 memories no longer in the request (compressed away) added" in log_of(store_backend)
    # the next prompt: still within the window, so not injected into the history again, and
    # its request (whose history lacks the block) gets it from BeforeModel once more
    assert injected(env, gemini_payload("BeforeAgent", "g1", tmp_path, prompt=ASK)) == ""
    again = before_model(env, "g1", tmp_path, request_with(summary, ASK2, ASK))
    assert again.count(DB) == 1 and again.endswith(f"{ASK}<hook_context>{first}</hook_context>")


def test_gemini_a_block_the_history_keeps_is_never_injected_twice(
    store_backend: Backend, tmp_path: Path
) -> None:
    """Past the window (depth 3 here) a memory the request still holds is recorded again at
    its last turn, so the next prompt does not add a second copy."""
    engine = store_backend.engine()
    engine.add(DB, owner=OWNER)
    engine.close()
    env = {**hook_env(store_backend), "MEMLANE_INJECTION__CONTEXT_WINDOW_DEPTH": "3"}
    first = injected(env, gemini_payload("BeforeAgent", "g2", tmp_path, prompt=ASK))
    turns = [f"{ASK}<hook_context>{first}</hook_context>"]
    for n in range(6):
        ask = f"{ASK2} (asked again, {n})"
        assert injected(env, gemini_payload("BeforeAgent", "g2", tmp_path, prompt=ask)) == ""
        turns.append(ask)
        assert before_model(env, "g2", tmp_path, request_with(*turns)).count(DB) == 1


def test_gemini_a_compressed_memory_is_added_to_every_request_that_lacks_it(
    store_backend: Backend, tmp_path: Path
) -> None:
    """Compressed away, a memory is added by BeforeModel to each request that lacks it, past
    the window too (depth 2 here): the turn model keeps a kept door's memories in the window
    while the session lasts, so the next prompt does not inject it into the history again
    (Gemini CLI keeps its blocks: a block it still holds must never come twice), and every
    request holds it once."""
    engine = store_backend.engine()
    engine.add(DB, owner=OWNER)
    engine.close()
    env = {**hook_env(store_backend), "MEMLANE_INJECTION__CONTEXT_WINDOW_DEPTH": "2"}
    first = injected(env, gemini_payload("BeforeAgent", "g3", tmp_path, prompt=ASK))
    summary = "<state_snapshot>the user asked about staging</state_snapshot>"
    asks = [ASK2, ASK, f"{ASK2} (again)", f"{ASK} (again)"]
    for n, ask in enumerate(asks):
        assert injected(env, gemini_payload("BeforeAgent", "g3", tmp_path, prompt=ask)) == "", n
        sent = before_model(env, "g3", tmp_path, request_with(summary, *asks[: n + 1]))
        assert sent.count(DB) == 1 and sent.endswith(f"<hook_context>{first}</hook_context>"), n


def test_memlane_blocks_reads_only_the_blocks() -> None:
    block = "[Context from memory]\n[Relevant to this message]\n[fact] x"
    request = request_with(f"hello<hook_context>{block}</hook_context>", "plain question")
    assert memlane_blocks(request) == block
    assert memlane_blocks({"messages": "not a list"}) == ""
    assert memlane_blocks(None) == ""
    # Gemini escapes < and > in BeforeAgent's context: read back as the memory's text
    typed = "[Context from memory]\n[Relevant to this message]\n[fact] use List<int>"
    escaped = typed.replace("<", "&lt;").replace(">", "&gt;")
    assert memlane_blocks(request_with(f"q<hook_context>{escaped}</hook_context>")) == typed


def test_with_block_adds_to_the_last_user_message_only() -> None:
    block = "[Context from memory]\n[Relevant to this message]\n[fact] use List<int>"
    request = request_with("first", "second")
    request["messages"].append({"role": "model", "content": "calling a tool"})
    changed = with_block(request, block)
    assert changed is not None and list(changed) == ["messages"]
    escaped = block.replace("<", "&lt;").replace(">", "&gt;")
    assert [m["content"] for m in changed["messages"]] == [
        "first", "Noted.", f"second<hook_context>{escaped}</hook_context>", "calling a tool"
    ]  # fmt: skip
    assert memlane_blocks(changed) == block  # what the next sync reads back
    assert request["messages"][2]["content"] == "second"  # the payload itself untouched
    assert with_block({"messages": [{"role": "model", "content": "hi"}]}, block) is None
    assert with_block(None, block) is None


def remember_turns(mid: str, *, tool: str = "mcp__memlane__remember") -> list[dict[str, Any]]:
    """Claude Code transcript entries of a ``remember`` call and its answer (2.1.197's shape;
    the answer is ``WriteResult.to_dict()`` as the MCP server returns it)."""
    answer = {"decision": "added", "memory": {"id": mid, "content": DB}, "duplicate": False}
    call = {"type": "tool_use", "id": "toolu_1", "name": tool, "input": {"content": DB}}
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": json.dumps(answer)}],
    }
    return [
        {"type": "user", "message": {"role": "user", "content": "Remember the staging DB."}},
        {"type": "assistant", "message": {"role": "assistant", "content": [call]}},
        {"type": "user", "message": {"role": "user", "content": [result]}},
    ]


def write_jsonl(path: Path, entries: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))


def test_a_memory_the_session_remembered_through_mcp_is_not_injected_back(
    env: dict[str, str], store_backend: Backend, tmp_path: Path
) -> None:
    engine = store_backend.engine()
    mid = engine.add(DB, owner=OWNER).memory.id  # already there: the same memory
    engine.close()
    transcript = tmp_path / "c1.jsonl"
    write_jsonl(transcript, remember_turns(mid))
    ask = claude_payload("UserPromptSubmit", "c1", tmp_path, prompt=ASK)
    assert injected(env, ask, "UserPromptSubmit") == ""  # the model holds it: its own call
    # another session did not write it: injected there
    other = claude_payload("UserPromptSubmit", "c2", tmp_path, prompt=ASK)
    assert DB in injected(env, other, "UserPromptSubmit")
    # after /compact the model no longer holds the call: it may come back
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "content": "Conversation compacted",
    }
    summary = {"type": "user", "isCompactSummary": True,
               "message": {"role": "user", "content": "Summary: the user set up staging."}}  # fmt: skip
    write_jsonl(transcript, [*remember_turns(mid), boundary, summary])
    compact = claude_payload("PreCompact", "c1", tmp_path, trigger="manual")
    assert run_hook(env, "PreCompact", compact).returncode == 0  # as Claude Code sends it
    assert DB in injected(env, ask, "UserPromptSubmit")


def gemini_remember_records(mid: str, tool: str = "mcp_memlane_remember") -> list[dict[str, Any]]:
    """Gemini CLI 0.61 transcript records of a ``remember`` call and its answer (the shape of a
    real session's JSONL: the call in the model's message and its ``toolCalls``, the answer as
    a ``functionResponse`` whose output wraps the tool's JSON in ``<untrusted_context>``)."""
    answer = {"decision": "added", "memory": {"id": mid, "content": DB}, "duplicate": False}
    output = f"<untrusted_context>\n{json.dumps(answer, indent=2)}\n</untrusted_context>"
    response = {"functionResponse": {"id": "c1", "name": tool, "response": {"output": output}}}
    call = {"functionCall": {"id": "c1", "name": tool, "args": {"content": DB}}}
    return [
        {"sessionId": "g9", "projectHash": "x", "startTime": "2026-11-26T11:58:41.206Z"},
        {"id": "u1", "type": "user", "content": [{"text": "Remember the staging DB."}]},
        {"id": "m1", "type": "gemini", "content": [call],
         "toolCalls": [{"id": "c1", "name": tool, "status": "success", "result": [response]}]},
        {"id": "u2", "type": "user", "content": [response]},
        {"$set": {"lastUpdated": "2026-11-26T11:58:49.053Z"}},
        {"id": "m2", "type": "gemini", "content": "Noted."},
    ]  # fmt: skip


def test_gemini_a_memory_the_session_remembered_through_mcp_is_not_injected_back(
    env: dict[str, str], store_backend: Backend, tmp_path: Path
) -> None:
    engine = store_backend.engine()
    mid = engine.add(DB, owner=OWNER).memory.id
    engine.close()
    transcript = tmp_path / "g9.json"  # gemini_payload's transcript_path
    records = gemini_remember_records(mid)
    write_jsonl(transcript, records)
    ask = gemini_payload("BeforeAgent", "g9", tmp_path, prompt=ASK)
    assert injected(env, ask) == ""  # the model holds it: its own call
    # another MCP server's remember does not count
    write_jsonl(tmp_path / "g8.json", gemini_remember_records(mid, tool="mcp_notes_remember"))
    assert DB in injected(env, gemini_payload("BeforeAgent", "g8", tmp_path, prompt=ASK))
    # a compression replaced the history (Gemini writes the new list as a $set): the call is
    # gone from the model's view, and the memory may come back
    summary = {"id": "s1", "type": "user", "content": [{"text": "<state_snapshot>…"}]}
    write_jsonl(transcript, [*records, {"$set": {"messages": [summary]}}])
    assert DB in injected(env, gemini_payload("BeforeAgent", "g9", tmp_path, prompt=ASK2))


def test_remember_of_another_mcp_server_does_not_count(
    store_backend: Backend, tmp_path: Path
) -> None:
    engine = store_backend.engine()
    mid = engine.add(DB, owner=OWNER).memory.id
    engine.close()
    write_jsonl(tmp_path / "c3.jsonl", remember_turns(mid, tool="mcp__notes__remember"))
    ask = claude_payload("UserPromptSubmit", "c3", tmp_path, prompt=ASK)
    assert DB in injected(hook_env(store_backend), ask, "UserPromptSubmit")


def test_inject_without_text_only_for_the_pinned_memories(store_backend: Backend) -> None:
    with run_server(store_backend) as served:
        assert served.proc.poll() is None, served.log.read_text()
        start = {"session": "p1", "owner": OWNER, "pinned_only": True}
        done = httpx.post(served.url + "/v1/inject", json=start, timeout=60)
        assert done.status_code == 200, done.text
        assert done.json()["block"] is None  # ambient awareness is off by default
        missing = httpx.post(served.url + "/v1/inject", json={"session": "p1"}, timeout=60)
        assert missing.status_code == 422
        assert "text is required" in missing.text and "pinned_only" in missing.text
        schema = httpx.get(served.url + "/openapi.json", timeout=60).json()
        body = schema["components"]["schemas"]["InjectRequest"]
        assert "text" not in body.get("required", [])
        assert {"required": ["text"], "properties": {"text": {"type": "string"}}} in body["anyOf"]
