"""The BEAM replay (issue 26, item 1) on a small BEAM-format sample written for the tests
(tests/data/beam_sample: two chats): the loader, the format recognised from the files, messages
stored in order per batch, user turns injected, questions scored per BEAM category, the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memlane import MemoryEngine
from memlane.cli import app
from memlane.errors import InvalidArgument
from memlane.eval.replay import is_beam, load_beam, load_conversations, replay_file
from memlane.retrieval import LEVERS

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "data" / "beam_sample"
LOCOMO = ROOT / "examples" / "locomo_sample.json"


@pytest.fixture
def hash_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("MEMLANE_HOME", str(home))
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    return home


def test_loader_reads_batches_messages_and_evidence() -> None:
    one, two = load_beam(SAMPLE)
    assert (one.sample_id, two.sample_id) == ("1", "2")
    assert [n for n, _ in one.batches] == [1, 2]
    first = one.batches[0][1][0]
    assert first.role == "user" and first.id == 0
    assert not first.text.endswith("1,0") and "->->" not in first.text  # BEAM's marker cut off
    assert first.memory_text().startswith("user: I'm building a budgeting app")
    assert one.turns == 5 and two.turns == 2  # user messages
    by_category = {q.category: q.evidence for q in one.questions}
    assert by_category["knowledge_update"] == ("0", "6")  # a dict of lists, flattened
    assert by_category["temporal_reasoning"] == ("0",)  # id 999 is no message: dropped
    assert "abstention" not in by_category and one.abstention == 1
    assert "summarization" not in by_category and one.unresolved_questions == 1  # cites nothing
    assert load_beam(SAMPLE / "2")[0].sample_id == "2"  # one chat folder works too


def test_format_is_recognised_from_the_files(tmp_path: Path) -> None:
    assert is_beam(SAMPLE) and is_beam(SAMPLE / "1") and not is_beam(LOCOMO)
    assert [c.sample_id for c in load_conversations(SAMPLE)] == ["1", "2"]
    assert type(load_conversations(LOCOMO)[0]).__name__ == "Conversation"  # LoCoMo
    with pytest.raises(InvalidArgument, match="holds no BEAM chat"):
        load_conversations(tmp_path)
    bad = tmp_path / "bad"
    (bad / "probing_questions").mkdir(parents=True)
    (bad / "chat.json").write_text('{"turns": []}', encoding="utf-8")
    (bad / "probing_questions" / "probing_questions.json").write_text("{}", encoding="utf-8")
    with pytest.raises(InvalidArgument, match="is not a BEAM chat"):
        load_conversations(bad)


@pytest.fixture
def report(hash_home: Path, tmp_path: Path) -> tuple[dict[str, Any], Path]:
    home = tmp_path / "kept"
    return replay_file(SAMPLE, home=home, recipes=(LEVERS["fts-7"],)), home


def test_report_in_the_locomo_shape(report: tuple[dict[str, Any], Path]) -> None:
    r, _ = report
    assert r["format"] == "beam" and r["memories_from"] == "messages"
    assert r["conversations"] == ["1", "2"]
    assert r["memories"]["offered"] == 14  # every message of both chats
    assert r["memories"]["store_ms_per_memory"]["p50"] > 0
    inj = r["injection"]
    assert inj["turns"] == 7  # the user messages
    assert inj["repeated_within_window"] == 0
    assert inj["skipped"].get("trivial") == 1  # "ok thanks"
    assert 0 < inj["tokens"] <= inj["tokens_naive"]
    ret = r["retrieval"]
    assert ret["questions"] == 6 and ret["unresolved_questions"] == 1
    assert set(ret["by_category"]) == {
        "information_extraction",
        "knowledge_update",
        "instruction_following",
        "temporal_reasoning",
        "preference_following",
        "event_ordering",
    }
    assert ret["by_category"]["knowledge_update"]["name"] == "knowledge_update"
    assert list(ret["baselines"]) == ["vector", "fts", "fts-7"]  # a recipe, side by side
    for mode in ("vector", "fts", "fts-7"):
        assert ret["baselines"][mode]["questions"] == 6
        assert set(ret["baselines"][mode]["by_category"]) == set(ret["by_category"])
    # the question that shares its words with the one message it cites finds it
    assert ret["by_category"]["information_extraction"]["recall_at_10"] == 1.0
    assert ret["recall_at_10"] >= 0.5
    assert [c["sample_id"] for c in r["per_conversation"]] == ["1", "2"]


def test_messages_are_stored_in_order_per_batch(report: tuple[dict[str, Any], Path]) -> None:
    _, home = report
    engine = MemoryEngine.open(home)
    try:
        memories = sorted(engine.list(owner="1", limit=100), key=lambda m: m.created_at)
    finally:
        engine.close()
    assert [m.metadata["evidence"] for m in memories] == [[str(i)] for i in range(10)]
    assert [m.session for m in memories] == ["1:1"] * 4 + ["1:2"] * 6
    assert memories[1].content.startswith("assistant: Great choice.")
    assert memories[1].metadata["role"] == "assistant"


def test_cli_takes_the_parent_folder(hash_home: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ["replay", str(SAMPLE), "-c", "2", "--recipe", "fts-5", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "fts-5" in result.stdout
    assert "preference_following" in result.stdout
    saved = json.loads(out.read_text(encoding="utf-8"))
    assert saved["conversations"] == ["2"] and saved["retrieval"]["questions"] == 2
    unknown = CliRunner().invoke(app, ["replay", str(SAMPLE), "--recipe", "magic"])
    assert unknown.exit_code == InvalidArgument.exit_code and "known: hybrid" in unknown.stderr
    empty = CliRunner().invoke(app, ["replay", str(tmp_path)])
    assert empty.exit_code == InvalidArgument.exit_code and "holds no BEAM chat" in empty.stderr


def test_a_message_over_the_write_limit_is_stored_in_parts() -> None:
    from memlane.eval.replay.beam import Message

    text = "\n\n".join(f"paragraph {i} " + "word " * 30 for i in range(12))
    message = Message(7, "assistant", text)
    assert message.memory_texts(100_000) == [message.memory_text()]
    parts = message.memory_texts(500)
    assert len(parts) > 1 and all(len(p) <= 500 for p in parts)
    assert all(p.startswith("assistant: ") for p in parts)
    # nothing lost, in order
    joined = " ".join(p.removeprefix("assistant: ") for p in parts)
    assert joined.split() == message.memory_text().removeprefix("assistant: ").split()
    one_long_paragraph = Message(8, "assistant", "x" * 50 + " " + "y" * 900)
    assert all(len(p) <= 400 for p in one_long_paragraph.memory_texts(400))
