"""The threshold sweep (memlane.eval.calibrate, ``memlane dedup calibrate``): it must take the write
path's own decision, so its figures at the configured thresholds are those of ``dedup pairs``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memlane.cli import app
from memlane.cli import dedup as dedup_cli
from memlane.config import DedupSettings, Settings
from memlane.dedup import pipeline
from memlane.embeddings import HashEmbedder
from memlane.eval import calibrate, pairs
from memlane.types import Decision

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

#: Rows that reach every no-LLM decision with the hash embedder: a hash hit (case, punctuation),
#: a spaced compound (auto_reject at any cosine), a detail added (replaced at a low replace), swapped roles (same words: a swap
#: pair; words are split on whitespace, so no full stop) and another number (guard_keep), a paraphrase (gray zone or added), an unrelated sentence (added).
ROWS = [
    ("Alice works at Acme.", "alice works at ACME.", 1),
    ("Bob likes green tea", "Bob likes green tea!", 1),
    ("Bob founded a start up in Leeds.", "Bob founded a startup in Leeds.", 1),
    ("Carol lives in Lisbon.", "Carol lives in Lisbon near the river.", 1),
    ("Maria sold the car to Daniel", "Daniel sold the car to Maria", 0),
    ("Quaid is 35 years old.", "Quaid is 36 years old.", 0),
    ("The train to Leeds leaves at 7:40.", "The train to Leeds departs at 7:40.", 1),
    ("Dana adopted a beagle.", "Completely unrelated sentence about whales.", 0),
]


@pytest.fixture
def hash_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("MEMLANE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    tsv = tmp_path / "pairs.tsv"
    lines = ["sentence1\tsentence2\tlabel", *(f"{a}\t{b}\t{y}" for a, b, y in ROWS)]
    tsv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tsv


class _NoProgress:
    def add_task(self, description: str, *, total: float | None = None) -> int:
        return 0

    def advance(self, task_id: Any, advance: float = 1) -> None:
        pass


def _write_path_decisions(tsv: Path, settings: Settings) -> list[str]:
    rows, _ = pairs.read_pairs(tsv, pairs.ROW_NUMBER)
    pairs.evaluate(rows, settings, _NoProgress())
    return [r.result.decision.value if r.result else "invalid" for r in rows]


@pytest.mark.parametrize("replace", [0.97, 0.85])
def test_sweep_decisions_are_the_write_paths(hash_env: Path, replace: float) -> None:
    """Row by row, the sweep's decision is what the engine decides when sentence2 is offered to a
    store holding sentence1 (``dedup pairs``), at the default and at a lowered ``replace``."""
    settings = Settings.load()
    dedup = calibrate.with_replace(settings.dedup, replace)
    settings = settings.model_copy(update={"dedup": dedup})
    expected = _write_path_decisions(hash_env, settings)
    loaded = calibrate.load_pairs(hash_env)
    cos = calibrate.cosines(HashEmbedder(dimension=settings.embedding.dimension), loaded)
    got = [calibrate.write_decision(p, c, dedup).value for p, c in zip(loaded, cos, strict=True)]
    assert got == expected
    assert {"hash_exact", "auto_reject", "guard_keep", "added"} <= set(got)


def test_the_sweep_calls_the_write_paths_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    assert calibrate.decide is pipeline.decide
    calls: list[str] = []

    def spy(new_text: str, *args: Any, **kwargs: Any) -> pipeline.Plan:
        calls.append(new_text)
        return pipeline.Add(None, 0.99)

    pair = calibrate.Pair("Alice likes tea.", "Bob likes coffee.", duplicate=False)
    # at cosine 0.99 the real decision is not `added`: the spy's answer shows it was asked
    assert calibrate.write_decision(pair, 0.99, DedupSettings()) is not Decision.ADDED
    monkeypatch.setattr(calibrate, "decide", spy)
    assert calibrate.write_decision(pair, 0.99, DedupSettings()) is Decision.ADDED
    assert calls == ["Bob likes coffee."]
    same = calibrate.Pair("Alice likes tea.", "alice likes TEA.", duplicate=True)
    assert calibrate.write_decision(same, 0.1, DedupSettings()) is Decision.HASH_EXACT
    assert calls == ["Bob likes coffee."]  # a hash hit never reaches decide, as in the engine


def test_scores_and_swaps() -> None:
    ps = [
        calibrate.Pair("a b", "b a", duplicate=False, same_words=True),
        calibrate.Pair("x", "y", duplicate=True),
        calibrate.Pair("x", "z", duplicate=True),
    ]
    s = calibrate.scores([True, True, False], ps)
    assert s == {
        "precision": 0.5,
        "recall": 0.5,
        "f1": 0.5,
        "merged": 2,
        "false_merges": 1,
        "swaps": 1,
    }
    assert calibrate.grid(0.80, 0.83) == [0.8, 0.81, 0.82, 0.83]


def test_calibrate_command(hash_env: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["dedup", "calibrate", str(hash_env), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)["pairs"]
    assert data["pairs"] == len(ROWS) and data["duplicates"] == sum(y for _, _, y in ROWS)
    assert [r["replace"] for r in data["write_path"]] == calibrate.grid(0.80, 0.98)
    assert data["cosine_only"][0]["threshold"] == 0.70
    assert data["swap_pairs"]["count"] == 1
    assert data["settings"] == {"auto_reject": 0.98, "replace": 0.97, "gray_low": 0.8}
    # the decisions at the configured thresholds are those of `dedup pairs`
    counted = {k: v["duplicate"] + v["not_duplicate"] for k, v in data["decisions"].items()}
    expected = _write_path_decisions(hash_env, Settings.load())
    assert counted == {d: expected.count(d) for d in set(expected)}
    # the swapped pair is never merged by the write path, at any threshold
    assert all(r["swaps"] == 0 for r in data["write_path"])

    text = runner.invoke(app, ["dedup", "calibrate", str(hash_env), "--cos-low", "0.9"])
    assert text.exit_code == 0, text.output
    assert (
        f"=== pairs: {len(ROWS)} pairs, {sum(y for _, _, y in ROWS)} duplicates ===" in text.stdout
    )
    assert "write path, no LLM" in text.stdout and "cosine-only rule" in text.stdout
    assert "decisions at auto_reject 0.98, replace 0.97, gray_low 0.8" in text.stdout


def test_calibrate_command_errors(hash_env: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["dedup", "calibrate", "--data", str(tmp_path / "nowhere")])
    assert missing.exit_code == 3 and "cannot read" in missing.stderr
    unlabelled = tmp_path / "u.tsv"
    unlabelled.write_text("sentence1\tsentence2\na\tb\n", encoding="utf-8")
    result = runner.invoke(app, ["dedup", "calibrate", str(unlabelled)])
    assert result.exit_code == 3 and "no labelled pairs" in result.stderr


def test_cli_mirror_of_row_number() -> None:
    assert dedup_cli.ROW_NUMBER == pairs.ROW_NUMBER


def test_examples_file_loads() -> None:
    rows, _ = pairs.read_pairs(EXAMPLES / "pairs.tsv")
    loaded = calibrate.load_pairs(EXAMPLES / "pairs.tsv")
    assert len(loaded) == len(rows) > 0
    assert [p.duplicate for p in loaded] == [r.gold for r in rows]
