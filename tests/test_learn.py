"""Learning from conversations: ``engine.learn`` and ``memlane learn TRANSCRIPT`` with a real
provider over HTTP (tests/llm_server.py); transcript formats; injected blocks never reach the
model; a clear error without an LLM."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from llm_server import Reply, Script, Status, serve
from memlane import MemoryEngine
from memlane.cli import app
from memlane.config import LLMSettings
from memlane.errors import ConfigError, InvalidArgument, LLMError
from memlane.learn import read_transcript
from memlane.llm import make_llm
from memlane.types import Decision, MemoryType

pytest.importorskip("openai")
pytest.importorskip("anthropic")

INJECTED = "[Context from memory]\n[fact] Bob's secret project is called Falcon"
CHAT = [
    {"role": "system", "content": INJECTED},
    {"role": "user", "content": "I moved to Berlin last month and I'm vegetarian now."},
    {"role": "assistant", "content": "Noted! Any restaurant tips you need?"},
]
LEARNED = {
    "memories": [
        {"content": "The user moved to Berlin last month.", "type": "event", "importance": 0.7},
        {"content": "The user is vegetarian.", "type": "preference", "importance": 0.8},
        {"content": "The user likes owls.", "type": "no-such-type", "importance": 0.3},
        {"content": "   ", "type": "fact", "importance": 0.5},
        {"content": INJECTED, "type": "fact", "importance": 0.5},
    ]
}


@pytest.fixture(params=["openai", "anthropic"])
def script(request: pytest.FixtureRequest) -> Script:
    return Script(request.param)


@pytest.fixture
def base_url(script: Script) -> Iterator[str]:
    with serve(script) as url:
        yield url


def learner_engine(make_engine: Any, script: Script, base_url: str) -> MemoryEngine:
    settings = LLMSettings(provider=script.kind, model="m", base_url=base_url, max_retries=0)
    engine: MemoryEngine = make_engine(llm=make_llm(settings))
    return engine


def test_learn_stores_typed_memories_and_never_shows_injected_context(
    make_engine: Any, script: Script, base_url: str
) -> None:
    script.steps = [Reply(json.dumps(LEARNED))]
    engine = learner_engine(make_engine, script, base_url)
    results = engine.learn(CHAT, owner="alice", agent="coach", session="s1")
    assert [r.decision for r in results] == [Decision.ADDED] * 3
    got = {m.content: m for m in engine.list(owner="alice")}
    assert set(got) == {
        "The user moved to Berlin last month.",
        "The user is vegetarian.",
        "The user likes owls.",
    }
    assert got["The user is vegetarian."].type is MemoryType.PREFERENCE
    assert got["The user is vegetarian."].importance == 0.8
    assert got["The user likes owls."].type is MemoryType.FACT  # unknown type -> fact
    assert got["The user moved to Berlin last month."].agent == "coach"
    prompt = json.dumps(script.requests[0]["json"])
    assert "vegetarian" in prompt and "Falcon" not in prompt and "Context from memory" not in prompt
    assert engine.count("default") == 0  # nothing learned outside the owner


def test_learning_the_same_conversation_twice_adds_nothing_new(
    make_engine: Any, script: Script, base_url: str
) -> None:
    script.steps = [Reply(json.dumps(LEARNED)), Reply(json.dumps(LEARNED))]
    engine = learner_engine(make_engine, script, base_url)
    engine.learn(CHAT)
    again = engine.learn(CHAT)
    assert [r.decision for r in again] == [Decision.HASH_EXACT] * 3
    assert engine.count() == 3


def test_a_learn_call_the_model_never_answers_fails_and_writes_nothing(
    make_engine: Any, script: Script, base_url: str
) -> None:
    script.steps = [Status(500)]
    engine = learner_engine(make_engine, script, base_url)
    with pytest.raises(LLMError):
        engine.learn(CHAT)
    assert engine.count() == 0


# --- a small model's answers: item by item, one retry -------------------------------------------


def test_an_importance_out_of_range_is_clamped_and_the_other_items_are_kept(
    make_engine: Any, script: Script, base_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    answer = {
        "memories": [
            {"content": "The user moved to Berlin last month.", "type": "event", "importance": 1.5},
            {"content": "The user is vegetarian.", "type": "preference", "importance": 0.8},
            {"content": "The user plays chess.", "type": "fact", "importance": "0.4"},
        ]
    }
    script.steps = [Reply(json.dumps(answer))]
    engine = learner_engine(make_engine, script, base_url)
    with caplog.at_level("WARNING", logger="memlane.llm"):
        results = engine.learn(CHAT, owner="alice")
    assert [r.decision for r in results] == [Decision.ADDED] * 3
    got = {m.content: m.importance for m in engine.list(owner="alice")}
    assert got == {
        "The user moved to Berlin last month.": 1.0,  # 1.5 clamped
        "The user is vegetarian.": 0.8,
        "The user plays chess.": 0.4,
    }
    assert "importance 1.5 out of 0..1, clamped to 1" in caplog.text
    assert len(script.requests) == 1  # something usable came back: no retry


def test_an_item_without_content_is_dropped_and_the_others_are_kept(
    make_engine: Any, script: Script, base_url: str
) -> None:
    answer = {
        "memories": [
            {"type": "fact", "importance": 0.5},
            {"content": 42, "type": "fact"},
            "not an object but a sentence: the user likes owls.",
            {"content": "The user is vegetarian.", "type": "preference", "importance": 0.8},
        ]
    }
    script.steps = [Reply(json.dumps(answer))]
    engine = learner_engine(make_engine, script, base_url)
    engine.learn(CHAT, owner="alice")
    assert sorted(m.content for m in engine.list(owner="alice")) == [
        "The user is vegetarian.",
        "not an object but a sentence: the user likes owls.",
    ]


def test_nothing_usable_is_asked_again_once_with_the_reason(
    make_engine: Any, script: Script, base_url: str
) -> None:
    script.steps = [
        Reply('{"memories": [{"content": "  ", "importance": 2}]}'),
        Reply(json.dumps(LEARNED)),
    ]
    engine = learner_engine(make_engine, script, base_url)
    results = engine.learn(CHAT)
    assert len(results) == 3 and engine.count() == 3
    assert len(script.requests) == 2
    retry = json.dumps(script.requests[1]["json"])
    assert "could not be used" in retry and "no text in" in retry
    assert "could not be used" not in json.dumps(script.requests[0]["json"])


@pytest.mark.parametrize("second", [Reply("still no json"), Status(500)], ids=["json", "500"])
def test_two_unusable_answers_learn_nothing_without_failing(
    make_engine: Any, script: Script, base_url: str, second: Any
) -> None:
    script.steps = [Reply("no json here"), second]
    engine = learner_engine(make_engine, script, base_url)
    assert engine.learn(CHAT) == []  # the model answered: no error, nothing learned
    assert engine.count() == 0
    assert len(script.requests) == 2
    retry = " ".join(str(m["content"]) for m in script.requests[1]["json"]["messages"])
    # the reason is in the retry (no JSON at all, or JSON without the list: the form decides)
    assert (
        'could not be used: the answer has no "memories" list' in retry
        or "could not be used: the answer is not a JSON object" in retry
    ), retry


def test_an_empty_list_is_nothing_to_learn_without_a_retry(
    make_engine: Any, script: Script, base_url: str
) -> None:
    script.steps = [Reply('{"memories": []}')]
    engine = learner_engine(make_engine, script, base_url)
    assert engine.learn(CHAT) == []
    assert len(script.requests) == 1


def test_learn_without_an_llm_names_the_setting(engine: MemoryEngine) -> None:
    with pytest.raises(ConfigError, match=r"llm\.provider") as info:
        engine.learn(CHAT)
    assert "learning from conversations needs an LLM" in str(info.value)


# --- transcripts --------------------------------------------------------------------------------


def test_transcript_formats(tmp_path: Path) -> None:
    as_json = tmp_path / "chat.json"
    as_json.write_text(json.dumps({"messages": CHAT}), encoding="utf-8")
    as_jsonl = tmp_path / "chat.jsonl"
    as_jsonl.write_text("\n".join(json.dumps(m) for m in CHAT) + "\n", encoding="utf-8")
    claude = tmp_path / "claude.jsonl"
    events = [
        {"type": "summary", "summary": "Earlier chat"},
        {"type": "user", "message": {"role": "user", "content": CHAT[1]["content"]}},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": CHAT[2]["content"]},
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {}},
                ],
            },
        },
    ]
    claude.write_text("\n".join(json.dumps(e) for e in events), encoding="utf-8")
    assert read_transcript(as_json) == CHAT
    assert read_transcript(as_jsonl) == CHAT
    assert read_transcript(claude) == CHAT[1:]


def test_a_transcript_without_messages_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\nnot json\n', encoding="utf-8")
    with pytest.raises(InvalidArgument, match="line 2"):
        read_transcript(bad)
    empty = tmp_path / "empty.json"
    empty.write_text("[]", encoding="utf-8")
    with pytest.raises(InvalidArgument, match="no user or assistant message"):
        read_transcript(empty)


# --- CLI ----------------------------------------------------------------------------------------


def test_memlane_learn_reads_a_claude_code_transcript(
    tmp_path: Path, script: Script, base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    (tmp_path / "memlane.toml").write_text(
        f'[llm]\nprovider = "{script.kind}"\nmodel = "m"\nbase_url = "{base_url}"\n',
        encoding="utf-8",
    )
    transcript = tmp_path / "session.jsonl"
    lines = [{"type": "user", "message": m} for m in CHAT]
    transcript.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    script.steps = [Reply(json.dumps(LEARNED))]
    args = ["learn", str(transcript), "--owner", "alice", "--home", str(tmp_path), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert len(data["results"]) == 3 and data["llm"]["calls"] == 1
    listed = CliRunner().invoke(
        app, ["list", "--owner", "alice", "--home", str(tmp_path), "--json"]
    )
    assert "The user is vegetarian." in {m["content"] for m in json.loads(listed.stdout)}


def test_memlane_learn_with_a_project_stores_in_that_project(
    tmp_path: Path, script: Script, base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``memlane learn --project FOLDER`` (what the Stop hook runs): the learned memories
    belong to the repository's project; a read in another project does not see them, a read
    in this one does, and a read outside any project does."""
    import subprocess

    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    (tmp_path / "memlane.toml").write_text(
        f'[llm]\nprovider = "{script.kind}"\nmodel = "m"\nbase_url = "{base_url}"\n',
        encoding="utf-8",
    )
    repos = {}
    for name in ("shop", "blog"):
        repos[name] = tmp_path / name
        subprocess.run(["git", "init", "-q", str(repos[name])], check=True)
        subprocess.run(["git", "-C", str(repos[name]), "remote", "add", "origin",
                        f"https://github.com/acme/{name}.git"], check=True)  # fmt: skip
    transcript = tmp_path / "chat.json"
    transcript.write_text(json.dumps(CHAT), encoding="utf-8")
    script.steps = [Reply(json.dumps(LEARNED))]
    home = ["--owner", "alice", "--home", str(tmp_path), "--json"]
    result = CliRunner().invoke(
        app, ["learn", str(transcript), "--project", str(repos["shop"] / "."), *home]
    )
    assert result.exit_code == 0, result.output
    learned = {r["memory"]["content"] for r in json.loads(result.stdout)["results"]}
    assert {"The user moved to Berlin last month.", "The user is vegetarian."} <= learned

    def listed(*project: str) -> dict[str, str | None]:
        done = CliRunner().invoke(app, ["list", *project, *home])
        assert done.exit_code == 0, done.output
        return {m["content"]: m["project"] for m in json.loads(done.stdout)}

    assert listed("--project", str(repos["shop"])) == dict.fromkeys(learned, "github.com/acme/shop")
    assert listed("--project", str(repos["blog"])) == {}
    assert listed() == dict.fromkeys(learned, "github.com/acme/shop")


def test_memlane_learn_without_an_llm_exits_with_the_setting_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    transcript = tmp_path / "chat.json"
    transcript.write_text(json.dumps(CHAT), encoding="utf-8")
    result = CliRunner().invoke(app, ["learn", str(transcript), "--home", str(tmp_path)])
    assert result.exit_code == 5
    assert "llm.provider" in result.stderr


def test_a_session_is_learned_from_its_new_messages_only(
    make_engine: Any, script: Script, base_url: str
) -> None:
    first = {"memories": [{"content": "The user moved to Berlin.", "type": "event"}]}
    later = {"memories": [{"content": "The user adopted a cat named Miso.", "type": "event"}]}
    script.steps = [Reply(json.dumps(first)), Reply(json.dumps(later))]
    engine = learner_engine(make_engine, script, base_url)
    engine.learn(CHAT, owner="alice", session="s1")
    grown = [
        *CHAT,
        {"role": "system", "content": INJECTED},  # a newer injected block: not a message
        {"role": "user", "content": "Also, I adopted a cat called Miso."},
    ]
    engine.learn(grown, owner="alice", session="s1")
    second_prompt = json.dumps(script.requests[1]["json"])
    assert "Miso" in second_prompt and "vegetarian" not in second_prompt
    assert {m.content for m in engine.list(owner="alice")} == {
        "The user moved to Berlin.",
        "The user adopted a cat named Miso.",
    }
    # nothing new: no call at all
    assert engine.learn(grown, owner="alice", session="s1") == []
    assert len(script.requests) == 2
    # another owner's session of the same name starts from the beginning
    script.steps = [Reply(json.dumps(first))]
    engine.learn(CHAT, owner="bob", session="s1")
    assert "vegetarian" in json.dumps(script.requests[2]["json"])


def test_a_failed_learn_call_reads_the_same_messages_again(
    make_engine: Any, script: Script, base_url: str
) -> None:
    script.steps = [Status(500), Reply(json.dumps(LEARNED))]
    engine = learner_engine(make_engine, script, base_url)
    with pytest.raises(LLMError):
        engine.learn(CHAT, session="s1")
    assert len(engine.learn(CHAT, session="s1")) == 3
    assert "vegetarian" in json.dumps(script.requests[1]["json"])
