"""Nothing a user typed is kept unless it is a memory, through every door (issue #33, item 1):
secrets (an ``AWS_SECRET_ACCESS_KEY=...``, a ``ghp_`` token, a ``postgres://admin:pw@`` URL)
and ``<private>`` spans are sent through the CLI, the HTTP API of a real ``memlane serve``, the
MCP server (the SDK's client), a Claude Code hook with a transcript (through the server and
in-process), ``memlane import`` and ``memlane learn`` (a scripted model that answers with them
too); then every file under the home (the store, its WAL and SHM, the search index files, the
logs) is read byte by byte: none holds any of them.

Each door gets secrets of its own (tests/privacy_support.py), so a failure names the door that let
one through. The framework adapters run in their own environments are scanned the same way by
their modules (tests/fwenvs/test_fw_*.py, ``test_no_secret_or_private_text_reaches_the_disk``)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from conftest import Backend
from hook_support import claude_payload, hook_env, run_hook
from llm_server import Reply, Script, serve
from memlane.cli import app
from server_support import run_server

pytest.importorskip("mcp", reason="needs the mcp extra")

from mcp import ClientSession

from mcp_support import data, with_session
from privacy_support import door_hex, leaks, secrets_of, text_of, url_of

DOORS = ("cli", "http", "mcp", "hook", "hookin", "import", "learn", "model")


@pytest.mark.parametrize("store_backend", ["sqlite"], indirect=True)  # its files are read
def test_no_door_leaves_a_secret_or_private_text_on_disk(
    store_backend: Backend, tmp_path: Path
) -> None:
    home = store_backend.home
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    # the model learn asks: it answers with secrets too (a model may repeat what it saw)
    script = Script("openai")
    learned = {"memories": [{"content": text_of("model", "learned: "), "type": "fact"}]}
    with serve(script) as base_url:
        env = store_backend.child_env()
        env.update(
            MEMLANE_LLM__PROVIDER="openai",
            MEMLANE_LLM__MODEL="m",
            MEMLANE_LLM__BASE_URL=base_url,
            MEMLANE_LLM__MAX_RETRIES="0",
        )
        runner = CliRunner()

        def cli(*args: str) -> str:
            done = runner.invoke(app, [*args, "--owner", "alice", "--json"], env=env)
            assert done.exit_code == 0, done.output
            return done.stdout

        # --- CLI
        session = "cli-" + door_hex("cli", 6)
        cli("add", text_of("cli"), "--source", url_of("cli"), "--session", session)
        cli("search", text_of("cli", "search: "))
        cli("inject", "--session", "cli-chat", text_of("cli", "inject: "))
        # --- import
        lines = [
            {
                "content": text_of("import"),
                "source": url_of("import"),
                "session": f"s {secrets_of('import')['github']}",
                "metadata": {f"AWS_SECRET_ACCESS_KEY={secrets_of('import')['aws']}": "x"},
            }
        ]
        jsonl = inputs / "memories.jsonl"
        jsonl.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
        cli("import", str(jsonl))
        # --- learn (the transcript holds the secrets; the model's answer holds its own)
        transcript = inputs / "chat.json"
        talk = [
            {"role": "user", "content": text_of("learn")},
            {"role": "assistant", "content": "noted, the kiwi cluster it is"},
        ]
        transcript.write_text(json.dumps(talk), encoding="utf-8")
        asked = len(script.requests)
        script.steps = [Reply(json.dumps(learned))]
        cli("learn", str(transcript), "--session", "learn-chat")
        assert len(script.requests) > asked, "learn should have asked the model"
        sent = json.dumps(script.requests)  # learn's, and the write path's verify calls
        for door in DOORS[:-1]:  # the model's own answer comes back in verify prompts, redacted
            for value in secrets_of(door).values():
                assert value not in sent, f"a secret or private text of {door} sent to the model"

        with run_server(store_backend) as served:
            assert served.proc.poll() is None, served.log.read_text()
            # --- HTTP
            with httpx.Client(base_url=served.url, timeout=60) as http:
                s = secrets_of("http")
                body = {
                    "owner": "alice",
                    "memory": {
                        "content": text_of("http"),
                        "source": url_of("http"),
                        "session": f"http {s['github']}",
                        "agent": f"agent <private>{s['private']}</private>",
                        "metadata": {f"token {s['github']}": f"AWS_SECRET_ACCESS_KEY={s['aws']}"},
                    },
                }
                assert http.post("/v1/memories", json=body).status_code == 200
                ask = text_of("http", "search: ")
                assert http.post("/v1/search", json={"query": ask, "owner": "alice"}).is_success
                inject = {
                    "session": "http-chat",
                    "text": text_of("http", "inject: "),
                    "recent": [text_of("http", "earlier: ")],
                    "owner": "alice",
                }
                assert http.post("/v1/inject", json=inject).is_success
                turn = {
                    "session": "http-turn",
                    "message": text_of("http", "turn: "),
                    "recent": inject["recent"],
                    "owner": "alice",
                    "kept": True,
                    "position": 1,
                }
                assert http.post("/v1/turn", json=turn).is_success
            # --- a Claude Code hook with a transcript, through the server and in-process
            for door, url in (("hook", served.url), ("hookin", "http://127.0.0.1:9")):
                talk_file = inputs / f"{door}.jsonl"
                entries = [
                    {"type": "user", "message": {"role": "user", "content": text_of(door)}},
                    {
                        "type": "assistant",
                        "message": {"role": "assistant", "content": [
                            {"type": "text", "text": text_of(door, "assistant: ")}
                        ]},
                    },
                ]  # fmt: skip
                talk_file.write_text("\n".join(json.dumps(e) for e in entries), encoding="utf-8")
                payload = claude_payload(
                    "UserPromptSubmit", door, inputs, prompt=text_of(door, "why that? ")
                )
                payload["transcript_path"] = str(talk_file)
                ran = run_hook(hook_env(store_backend, url=url), "UserPromptSubmit", payload)
                assert ran.returncode == 0, ran.stderr
                assert "kiwi cluster" in (ran.context() or ""), ran.stderr
            # --- MCP (the SDK's client on stdio)
            mcp_env = {**store_backend.child_env(), "MEMLANE_SCOPE__OWNER": "alice"}

            async def session(client: ClientSession) -> None:
                data(await client.call_tool("remember", {"content": text_of("mcp")}))
                data(await client.call_tool("recall", {"query": text_of("mcp", "recall: ")}))
                turn = {"session": "mcp-chat", "text": text_of("mcp", "turn: ")}
                data(await client.call_tool("context_for_turn", turn))

            with_session(mcp_env, session)
            served.proc.send_signal(signal.SIGTERM)  # a clean stop: it saves its caches
            served.proc.wait(timeout=60)

    listed = json.loads(cli("list", "--limit", "100"))
    stored = {m["content"].split(" deploy")[0].split()[-1] for m in listed}
    assert stored >= {"cli", "import", "model", "http", "mcp"}, stored  # hooks store nothing
    assert any("[redacted:github_token]" in m["content"] for m in listed)
    assert (home / "memlane.db").exists()
    found = leaks(home, DOORS)
    assert found == {}, found
