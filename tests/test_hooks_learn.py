"""``[hooks] learn``: Claude Code's ``Stop`` starts ``memlane learn`` on the transcript in the
background (the real openai SDK against a scripted server on 127.0.0.1); off by default."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import Backend
from hook_support import OWNER, claude_payload, hook_env, run_hook
from llm_server import Reply, Script, serve

pytest.importorskip("openai")

INJECTED = "[Context from memory]\n[Relevant to this message]\n[fact] Bob's project is Falcon"
LEARNED = {
    "memories": [
        {"content": "The user moved to Berlin last month.", "type": "event", "importance": 0.7},
        {"content": "The user is vegetarian.", "type": "preference", "importance": 0.8},
    ]
}


def transcript(path: Path) -> Path:
    events = [
        {"type": "user", "message": {"role": "user", "content": INJECTED}},
        {"type": "user", "message": {"role": "user", "content": "I moved to Berlin and I'm vegetarian."}},
        {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "Noted!"}]}},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(e) for e in events) + "\n")
    return path


@pytest.mark.parametrize("learn", [True, False])
def test_stop_learns_in_the_background_only_when_asked(
    store_backend: Backend, tmp_path: Path, learn: bool
) -> None:
    script = Script("openai", steps=[Reply(json.dumps(LEARNED))])
    with serve(script) as base_url:
        (store_backend.home / "memlane.toml").write_text(
            f'[llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "{base_url}"\n'
            'api_key_env = "TEST_KEY"\n'
        )
        env = {**hook_env(store_backend, learn=str(learn).lower()), "TEST_KEY": "k"}
        transcript(tmp_path / "s1.jsonl")
        payload = claude_payload("Stop", "s1", tmp_path, stop_hook_active=False)
        done = run_hook(env, "Stop", payload)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        engine = store_backend.engine()
        deadline = time.monotonic() + (90 if learn else 3)  # bounded wait for the background job
        contents: set[str] = set()
        while time.monotonic() < deadline and len(contents) < 2:
            contents = {m.content for m in engine.list(owner=OWNER)}
            time.sleep(0.2)
    if learn:
        assert contents == {"The user moved to Berlin last month.", "The user is vegetarian."}
        prompt = json.dumps(script.requests[0]["json"]["messages"])
        assert "Berlin" in prompt and "Falcon" not in prompt  # injected context never learned
        stored = engine.list(owner=OWNER)
        assert {m.agent for m in stored} == {"claude-code"} and {m.session for m in stored} == {
            "s1"
        }
    else:
        assert contents == set() and script.requests == []
