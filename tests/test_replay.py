"""The LoCoMo replay: report invariants on the shipped sample (hash embedder), the evidence
normaliser, the file loader and the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memlane.cli import app
from memlane.errors import InvalidArgument
from memlane.eval.replay import (
    load_locomo,
    normalise_evidence,
    replay_file,
    select_conversations,
)

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "locomo_sample.json"


@pytest.fixture
def hash_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("MEMLANE_HOME", str(home))
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    return home


@pytest.fixture
def report(hash_home: Path) -> dict[str, Any]:
    return replay_file(SAMPLE)


def _expected_questions() -> int:
    data = json.loads(SAMPLE.read_text(encoding="utf-8"))
    return sum(
        1
        for conv in data
        for qa in conv["qa"]
        if qa["category"] in (1, 2, 3, 4) and normalise_evidence(qa.get("evidence"))
    )


# --------------------------------------------------------------------------- evidence ids


def test_normalise_evidence_odd_cases() -> None:
    assert normalise_evidence("D1:3") == ["D1:3"]
    assert normalise_evidence(["D8:6; D9:17"]) == ["D8:6", "D9:17"]
    assert normalise_evidence("D26:14, D26:34, D26:42") == ["D26:14", "D26:34", "D26:42"]
    assert normalise_evidence("D30:05") == ["D30:5"]
    assert normalise_evidence(["D30:05", "D30:5", "D1:1 D1:2"]) == ["D30:5", "D1:1", "D1:2"]
    # Not a dia id at all: skipped (resolving against the turns is the caller's job).
    assert normalise_evidence(["D", "D:11:26", "", "x"]) == []
    assert normalise_evidence(None) == []
    assert normalise_evidence([["D2:1"], "D2:2"]) == ["D2:1", "D2:2"]


def test_loader_skips_unresolved_evidence(tmp_path: Path) -> None:
    data = [
        {
            "sample_id": "c1",
            "conversation": {
                "speaker_a": "A",
                "speaker_b": "B",
                "session_2_date_time": "later",
                "session_2": [{"speaker": "B", "dia_id": "D2:1", "text": "Second session."}],
                "session_1_date_time": "earlier",
                "session_1": [
                    {"speaker": "A", "dia_id": "D1:01", "text": "Hello there."},
                    {"speaker": "B", "dia_id": "D1:2", "text": "Hi!", "blip_caption": "a dog"},
                ],
                "session_3_date_time": "no session with this date",
            },
            "observation": {"session_1_observation": {"A": [["A said hello.", "D1:1"]]}},
            "qa": [
                {"question": "q1", "answer": "x", "evidence": ["D1:1; D9:9"], "category": 4},
                {"question": "q2", "answer": 3, "evidence": ["D7:7"], "category": 1},
                {"question": "q3", "adversarial_answer": "x", "evidence": ["D1:1"], "category": 5},
            ],
        }
    ]
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    (conv,) = load_locomo(path)
    assert [n for n, _ in conv.sessions] == [1, 2]
    assert conv.sessions[0][1][0].dia_id == "D1:1"
    assert conv.sessions[0][1][1].message() == "B: Hi! [shares a photo: a dog]"
    assert [(q.text, q.evidence) for q in conv.questions] == [("q1", ("D1:1",))]
    assert conv.unresolved_questions == 1
    assert conv.observations[1][0].evidence == ("D1:1",)


def test_loader_and_selection_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="no such file"):
        load_locomo(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(InvalidArgument, match="not valid JSON"):
        load_locomo(bad)
    bad.write_text(json.dumps([{"sample_id": "x"}]), encoding="utf-8")
    with pytest.raises(InvalidArgument, match="conversation"):
        load_locomo(bad)
    convs = load_locomo(SAMPLE)
    assert select_conversations(convs, None) == convs
    assert select_conversations(convs, "0") == convs[:1]
    assert select_conversations(convs, convs[0].sample_id) == convs[:1]
    with pytest.raises(InvalidArgument, match="out of range"):
        select_conversations(convs, "5")
    with pytest.raises(InvalidArgument, match="unknown conversation"):
        select_conversations(convs, "nope")


# --------------------------------------------------------------------------- the report


def test_report_invariants(report: dict[str, Any]) -> None:
    mem, inj, ret = report["memories"], report["injection"], report["retrieval"]
    assert mem["offered"] > 0
    assert sum(mem["decisions"].values()) == mem["offered"]
    assert 0 < mem["stored"] <= mem["offered"]

    assert inj["turns"] > 0
    assert inj["repeated_within_window"] == 0
    assert 1 <= inj["max_blocks_in_history"] <= 3
    assert 0 <= inj["skipped_turns"] < inj["turns"]
    assert inj["items"] > 0
    assert 0 < inj["tokens"] <= inj["tokens_naive"]
    assert inj["tokens_ratio"] == round(inj["tokens"] / inj["tokens_naive"], 4)
    for lat in (inj["latency_ms"], inj["latency_ms_searched"]):
        assert 0 < lat["p50"] <= lat["p95"] <= lat["max"]

    assert ret["questions"] == _expected_questions()
    for block in (ret, ret["baselines"]["vector"], ret["baselines"]["fts"]):
        assert block["questions"] == ret["questions"]
        for key in ("recall_at_5", "recall_at_10", "hit_at_10"):
            assert 0.0 <= block[key] <= 1.0
        assert block["recall_at_5"] <= block["recall_at_10"] <= block["hit_at_10"]
        assert sum(c["questions"] for c in block["by_category"].values()) == block["questions"]
    assert isinstance(report["seconds"], float)

    # one conversation: its own sections are the totals
    (conv,) = report["per_conversation"]
    assert conv["sample_id"] == report["conversations"][0]
    assert conv["memories"] == mem
    assert conv["retrieval"] == ret
    assert conv["injection"] == {k: v for k, v in inj.items() if k in conv["injection"]}


def test_replay_into_kept_home_refuses_a_used_store(hash_home: Path, tmp_path: Path) -> None:
    keep = tmp_path / "kept"
    first = replay_file(SAMPLE, home=keep)
    assert (keep / "memlane.db").is_file()
    assert first["memories"]["stored"] > 0
    with pytest.raises(InvalidArgument, match="fresh store"):
        replay_file(SAMPLE, home=keep)


# --------------------------------------------------------------------------- the CLI


def test_cli_json_and_out(hash_home: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        app, ["replay", str(SAMPLE), "--conversations", "0", "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    written = json.loads(out.read_text(encoding="utf-8"))
    assert printed["retrieval"]["questions"] == written["retrieval"]["questions"] > 0
    assert printed["injection"]["repeated_within_window"] == 0


def test_cli_tables_show_the_report(hash_home: Path, tmp_path: Path) -> None:
    (conversation,) = json.loads(SAMPLE.read_text(encoding="utf-8"))
    two = [{**conversation, "sample_id": name} for name in ("first", "second")]
    path = tmp_path / "two.json"
    path.write_text(json.dumps(two), encoding="utf-8")
    out = tmp_path / "report.json"
    result = CliRunner().invoke(app, ["replay", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    ret, inj = report["retrieval"], report["injection"]
    lines = result.stdout.splitlines()

    def row(label: str) -> str:
        return next(line for line in lines if label in line)

    recall = row(f"all ({ret['questions']}) recall@10")
    for block in (ret, ret["baselines"]["vector"], ret["baselines"]["fts"]):
        assert f"{block['recall_at_10']:.3f}" in recall
    tokens = f"{inj['tokens']:,} / {inj['tokens_naive']:,} ({inj['tokens_ratio']:.0%})"
    assert tokens in result.stdout
    assert row("repeated within").split("│")[-2].strip() == "0"
    assert "Per conversation" in result.stdout
    for conv in report["per_conversation"]:
        cells = [c.strip() for c in row(f"│ {conv['sample_id']} ").split("│")[1:-1]]
        assert cells[0] == conv["sample_id"]
        assert cells[3] == f"{conv['retrieval']['recall_at_10']:.3f}"
        assert cells[6] == f"{conv['injection']['tokens_ratio']:.0%}"
    assert f"report written to {out}" in result.stdout


def test_cli_errors(hash_home: Path, tmp_path: Path) -> None:
    missing = CliRunner().invoke(app, ["replay", str(tmp_path / "none.json")])
    assert missing.exit_code == 3
    assert "no such file" in missing.output
    bad = CliRunner().invoke(app, ["replay", str(SAMPLE), "--conversations", "7"])
    assert bad.exit_code == 3
    assert "out of range" in bad.output
    folder = CliRunner().invoke(app, ["replay", str(SAMPLE), "--out", str(tmp_path)])
    assert folder.exit_code == 3
    assert "is a folder" in folder.output
