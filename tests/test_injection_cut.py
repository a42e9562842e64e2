"""The injection's cut (memlane.injection.cut): a hit only one search leg found, and weakly, does
not enter the block; ``memlane inject --explain`` says for each candidate why it was kept or cut.

The small-store case runs the real model on a store written for this test: one owner, ~30
everyday memories, four of them about her editor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlane import MemoryEngine
from memlane.cli import app
from memlane.config import InjectionSettings
from memlane.injection import Injector
from memlane.injection import cut as cut_module
from memlane.injection.cut import cut, decide, explaining, judge
from memlane.retrieval import LegScores
from memlane.types import SearchHit

EDITOR = [
    "Alice uses Neovim as her code editor, configured with LazyVim.",
    "Alice wants her editor in the Gruvbox dark theme with JetBrains Mono at 14 pt.",
    "Alice's editor should format Python on save with ruff and show line numbers relative.",
    "Alice maps the editor's leader key to the space bar.",
]
UNRELATED = [
    "Alice is allergic to peanuts.",
    "Alice has a grey cat called Miso.",
    "Alice's brother Tomas lives in Lisbon.",
    "Alice runs 5 km every Tuesday and Thursday morning.",
    "Alice's birthday is on 14 March.",
    "Alice works as a data engineer at Acme.",
    "Alice prefers tea to coffee, green tea in the afternoon.",
    "Alice is learning Portuguese on Duolingo.",
    "Alice drives a blue Toyota Corolla.",
    "Alice's dentist appointment is next Friday at 9 am.",
    "Alice reads science fiction; her favourite author is Ursula K. Le Guin.",
    "Alice's partner Sam is a nurse working night shifts.",
    "Alice plays the piano and practises scales every evening.",
    "Alice is saving for a trip to Japan next spring.",
    "Alice's flat is on the fourth floor, with no lift.",
    "Alice volunteers at the food bank on Saturdays.",
    "Alice is vegetarian since 2019.",
    "Alice's manager at Acme is Priya.",
    "Alice's laptop is a ThinkPad X1 Carbon running Fedora.",
    "Alice deploys the data pipelines with Airflow on Kubernetes.",
    "Alice wants weekly reports sent to her on Monday mornings.",
    "Alice's mother lives in Porto and calls on Sundays.",
    "Alice keeps her passwords in Bitwarden.",
    "Alice grows tomatoes and basil on her balcony.",
    "Alice is afraid of flying but takes planes anyway.",
    "Bob, Alice's neighbour, borrows her drill.",
]


def _cfg(**changes: object) -> InjectionSettings:
    return InjectionSettings().model_copy(update=changes)


def test_both_legs_keep_a_hit_that_one_of_them_holds_strongly() -> None:
    ev = LegScores(top_bm25=6.0, best_cosine=0.70)
    ok, rule = judge({"vector": 3, "fts": 2}, 0.66, 5.0, ev, _cfg())
    assert ok and rule.startswith("kept: both legs found it (vector #3")
    # found by both, but far below the best in each: cut
    ok, rule = judge({"vector": 18, "fts": 19}, 0.30, 0.4, ev, _cfg())
    assert not ok and rule.startswith("cut: both legs found it")


def test_a_full_text_hit_carried_by_a_common_word_is_cut() -> None:
    # the owner's name is in nearly every memory: its IDF, and so its BM25 score, is near 0
    ev = LegScores(top_bm25=5.2, best_cosine=0.62)
    ok, rule = judge({"fts": 7}, 0.21, 0.11, ev, _cfg())
    assert not ok
    assert "BM25 0.11 is below" in rule and "common in this owner's memories" in rule
    ok, rule = judge({"fts": 1}, 0.40, 5.2, ev, _cfg())
    assert ok and rule.startswith("kept: only full-text found it (#1)")


def test_a_vector_hit_far_below_the_best_cosine_is_cut() -> None:
    cfg = _cfg()
    ev = LegScores(top_bm25=0.0, best_cosine=0.70)
    assert judge({"vector": 2}, 0.70 - cfg.cut_cosine_gap / 2, None, ev, cfg)[0]
    ok, rule = judge({"vector": 9}, 0.45, None, ev, cfg)
    assert not ok and "0.250 below the best (0.700" in rule
    # a neighbour in time is judged by its own cosine
    assert not judge({"neighbour": 1}, 0.45, None, ev, cfg)[0]


def test_a_long_hit_must_be_the_best_cosine_or_near_the_best_bm25() -> None:
    """A long memory (a chat's long assistant answer) that the both-legs rule keeps enters the
    block only as the query's best cosine or with BM25 >= cut_long_bm25_relative x the best; a
    short one with the same scores is kept."""
    cfg = _cfg()
    ev = LegScores(top_bm25=6.0, best_cosine=0.70)
    both = {"vector": 2, "fts": 3}
    assert judge(both, 0.68, 3.0, ev, cfg)[0]  # short: within the both-legs gap
    ok, rule = judge(both, 0.68, 3.0, ev, cfg, long=True)
    assert (
        not ok and rule.startswith("cut: it is long") and "; without that, kept: both legs" in rule
    )
    assert decide(both, 0.68, 3.0, ev, cfg, long=True) == (False, "long")
    ok, rule = judge(both, 0.68, 0.9 * 6.0, ev, cfg, long=True)
    assert ok and rule.endswith("long, and the best cosine or BM25 >= 0.9 x the best")
    assert judge({"vector": 1}, 0.70, None, ev, cfg, long=True)[0]  # the best cosine
    # a rule that cuts it already says so, not the long bar
    ok, rule = judge({"vector": 9}, 0.45, None, ev, cfg, long=True)
    assert not ok and rule.startswith("cut: only the vector leg")
    assert judge(both, 0.30, 0.1, ev, _cfg(cut=False), long=True)[0]


def test_a_short_hit_a_long_answer_follows_is_let_in() -> None:
    """A short hit the rules cut enters when the long hit right after it in its session was
    found too (``answered``): the block holds the user's words for the long answer; not when
    ``cut_answered`` is off, and a kept hit keeps its own rule."""
    cfg = _cfg()
    ev = LegScores(top_bm25=6.0, best_cosine=0.70)
    far = {"vector": 9}
    assert not judge(far, 0.45, None, ev, cfg)[0]
    ok, rule = judge(far, 0.45, None, ev, cfg, answered=True)
    assert ok and rule.startswith("kept: the long memory right after it in its session")
    assert "; without that, cut: only the vector leg found it (#9)" in rule
    assert decide(far, 0.45, None, ev, cfg, answered=True) == (True, "answered")
    assert not judge(far, 0.45, None, ev, _cfg(cut_answered=False), answered=True)[0]
    assert decide({"vector": 1}, 0.70, None, ev, cfg, answered=True) == (True, "vector")


def test_the_cut_can_be_turned_off() -> None:
    ev = LegScores(top_bm25=5.0, best_cosine=0.9)
    assert judge({"fts": 9}, 0.1, 0.01, ev, _cfg(cut=False)) == (
        True,
        "kept: the cut is off (cut = false)",
    )


def test_the_hot_path_decides_without_putting_it_in_words(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every turn runs the cut over every candidate: the words are built only while
    :func:`explaining` collects them (review note on #37), and the decision is the same."""
    ev = LegScores(top_bm25=5.0, best_cosine=0.70, bm25={})
    cfg = _cfg()
    grid = [
        (ranks, cos, bm25)
        for ranks in ({"vector": 1, "fts": 2}, {"fts": 3}, {"vector": 4}, {"neighbour": 1})
        for cos in (0.70, 0.62, 0.50, 0.30)
        for bm25 in (None, 0.2, 1.0, 4.0)
    ]
    for ranks, cos, bm25 in grid:
        assert decide(ranks, cos, bm25, ev, cfg)[0] == judge(ranks, cos, bm25, ev, cfg)[0]
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    with MemoryEngine.open(tmp_path) as engine:
        mems = [engine.add(f"memory {n} about the editor", owner="a").memory for n in range(4)]
    hits = [SearchHit(m, 0.0, 0.70 - 0.1 * n, {"vector": n + 1}) for n, m in enumerate(mems)]
    worded: list[str] = []
    real = cut_module.reason

    def counting(*args: object, **kwargs: object) -> str:
        worded.append("x")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cut_module, "reason", counting)
    kept, dropped = cut(hits, ev, cfg)
    assert worded == [] and (len(kept), dropped) == (2, 2)
    with explaining() as verdicts:
        assert cut(hits, ev, cfg) == (kept, dropped)
    assert len(worded) == 4 and [v.kept for v in verdicts] == [True, True, False, False]


@pytest.mark.model
def test_set_up_the_editor_injects_the_editor_memories_and_nothing_else(
    model_engine: MemoryEngine,
) -> None:
    for text in EDITOR + UNRELATED:
        model_engine.add(text, owner="alice")
    with explaining() as verdicts:
        injection = model_engine.inject("s1", "set up the editor for alice", owner="alice")
    shown = {item.memory.content for item in injection.items}
    assert shown == set(EDITOR), [v.rule for v in verdicts]
    # the unrelated memories were candidates (her name is in each of them) and were cut
    assert injection.skipped.get("weak_match", 0) >= 5
    assert all(v.kept == (v.memory.content in EDITOR) for v in verdicts)
    # without the cut the block fills with her other memories (what the issue measured)
    off = model_engine.settings.injection.model_copy(update={"cut": False})
    plain = Injector(model_engine.store, model_engine.retriever, lambda agent: off)
    before = plain.inject("s2", "set up the editor for alice", owner="alice")
    assert len({i.memory.content for i in before.items} - set(EDITOR)) >= 5


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    monkeypatch.delenv("MEMLANE_HOME", raising=False)
    return tmp_path


def test_inject_explain_shows_each_candidate_its_legs_and_the_rule(home: Path) -> None:
    runner = CliRunner()
    common = ["--home", str(home), "--owner", "alice"]
    for text in EDITOR[:2] + UNRELATED[:6]:
        assert runner.invoke(app, ["add", text, *common]).exit_code == 0
    args = ["inject", "set up the editor for alice", "--session", "s", *common]
    result = runner.invoke(app, [*args, "--json", "--explain"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    rows = data["explain"]
    assert rows, data
    in_block = {i["memory"]["id"] for i in data["items"]}
    for row in rows:
        assert set(row) == {"id", "content", "ranks", "cosine", "bm25", "kept", "outcome", "rule"}
        assert row["rule"].startswith("kept: " if row["kept"] else "cut: ")
        assert (row["outcome"] == "in block") == (row["id"] in in_block)
        assert set(row["ranks"]) <= {"vector", "fts", "neighbour", "graph"}
    cut = [r for r in rows if not r["kept"]]
    assert data["skipped"].get("weak_match", 0) == len(cut)
    # the table (stderr) next to the plain block (stdout, unchanged)
    shown = runner.invoke(app, [*args, "--explain"])
    assert shown.exit_code == 0
    assert "candidates:" in shown.stderr and "passed the cut" in shown.stderr
    plain = runner.invoke(app, args)
    assert "passed the cut" not in plain.stderr
