"""Review of the dedup log: hash_exact rows confirmed automatically; confirm; reverse (the text
restored, or a conflict reported with nothing written); ``--llm`` with a real provider over HTTP
(tests/llm_server.py); the CLI."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import ScriptedEmbedder
from llm_server import Reply, Script, Status, serve
from memlane import MemoryEngine
from memlane.cli import app
from memlane.config import LLMSettings
from memlane.errors import ConfigError, InvalidArgument, NotFound
from memlane.llm import make_llm
from memlane.store.base import NewDedupLog
from memlane.types import Decision, Relation, ReviewStatus
from test_janitor import CAT, CAT_3, plant

MakeEngine = Callable[..., MemoryEngine]
BASE = "Alice prefers dark mode in her editor"
SAME = "Alice prefers dark mode in the editor"  # narrows: dropped "her"
LONGER = "Alice prefers dark mode in her editor at work"  # extends
GRAY = "Alice prefers a dark theme in her code editor"


def scripted() -> ScriptedEmbedder:
    emb = ScriptedEmbedder()
    emb.place(BASE)
    emb.place(SAME, like=BASE, cos=0.99)
    emb.place(LONGER, like=BASE, cos=0.975)
    emb.place(GRAY, like=BASE, cos=0.9)
    return emb


def test_hash_exact_rows_are_confirmed_automatically(engine: MemoryEngine) -> None:
    engine.add(CAT)
    engine.add(CAT + " ")  # the same text: hash_exact, written confirmed
    (row,) = engine.dedup_log()
    assert row.decision is Decision.HASH_EXACT and row.review_status is ReviewStatus.CONFIRMED
    with engine.store.transaction():  # an older row still unreviewed (written before the rule)
        engine.store.log_dedup(
            NewDedupLog("default", CAT, row.existing_id, CAT, 1.0, Decision.HASH_EXACT, None)
        )
    assert engine.review_pending() == []
    assert {r.review_status for r in engine.dedup_log()} == {ReviewStatus.CONFIRMED}


def test_confirm_and_reverse_a_rejection(make_engine: MakeEngine) -> None:
    engine = make_engine(embedder=scripted())
    kept = engine.add(BASE).memory
    assert engine.add(SAME).decision is Decision.AUTO_REJECT
    (row,) = engine.review_pending()
    assert row.decision is Decision.AUTO_REJECT and row.new_text == SAME
    reversed_ = engine.review(row.id, "reverse")
    assert reversed_.action == "reversed" and reversed_.restored is not None
    restored = engine.get(reversed_.restored.id)
    assert restored.content == SAME and restored.type is kept.type
    assert restored.metadata["restored_from_dedup_log"] == row.id
    links = engine.associations(restored.id)
    assert {a.relation for a in links} == {Relation.RELATED_TO, Relation.KEPT_APART}
    assert all(kept.id in (a.source_id, a.target_id) for a in links)
    assert engine.count() == 2 and engine.review_pending() == []
    assert engine.dedup_log()[0].review_status is ReviewStatus.REVERSED
    with pytest.raises(InvalidArgument, match="reversed already"):
        engine.review(row.id, "reverse")


def test_reversing_a_replacement_restores_the_older_text(make_engine: MakeEngine) -> None:
    engine = make_engine(embedder=scripted())
    first = engine.add(BASE).memory
    assert engine.add(LONGER).decision is Decision.REPLACED  # the memory now holds LONGER
    (row,) = engine.review_pending()
    outcome = engine.review(row.id, "reverse")
    assert outcome.action == "reversed" and outcome.restored is not None
    assert "the older text" in outcome.message
    assert engine.get(first.id).content == LONGER  # the newer wording stays where it was
    restored = engine.get(outcome.restored.id)
    assert restored.content == BASE and restored.id != first.id
    links = {
        (a.relation, frozenset((a.source_id, a.target_id)))
        for a in engine.associations(restored.id)
    }
    assert (Relation.KEPT_APART, frozenset((first.id, restored.id))) in links
    # never undone: the janitor does not merge the two again, dry run or not
    plan = engine.janitor(dry_run=True)
    assert plan.planned == 0 and plan.skipped.get("review") == 1
    engine.janitor()
    assert sorted(m.content for m in engine.list()) == sorted([BASE, LONGER])
    # nor a later write of either text: each lands on its own memory
    assert engine.add(BASE).memory.id == restored.id
    assert engine.add(LONGER).memory.id == first.id
    assert engine.count() == 2


def test_reversing_when_the_text_is_live_reports_and_writes_nothing(
    make_engine: MakeEngine,
) -> None:
    engine = make_engine(embedder=scripted())
    first = engine.add(BASE).memory
    assert engine.add(SAME).decision is Decision.AUTO_REJECT
    (row,) = engine.review_pending()
    engine.update(first.id, SAME)  # someone gave the memory that very text meanwhile
    before = (engine.count(), [e.to_dict() for e in engine.dedup_log()])
    outcome = engine.review(row.id, "reverse")
    assert outcome.action == "conflict" and outcome.conflict_id == first.id
    assert "nothing written" in outcome.message and outcome.restored is None
    assert (engine.count(), [e.to_dict() for e in engine.dedup_log()]) == before


def test_a_confirmed_keep_is_never_merged_by_the_janitor(make_engine: MakeEngine) -> None:
    emb = scripted()
    twin = "Alice prefers the dark mode in her editor"  # the guard's "same" as BASE
    emb.place(twin, like=BASE, cos=0.9)  # gray zone: kept apart by the write path
    engine = make_engine(embedder=emb)
    engine.add(BASE)
    assert engine.add(twin).decision is Decision.GRAY_KEEP
    assert engine.janitor(dry_run=True).planned == 1  # unreviewed: the janitor would merge
    (row,) = engine.review_pending()
    engine.review(row.id, "confirm")
    plan = engine.janitor(dry_run=True)
    assert plan.planned == 0 and plan.skipped.get("review") == 1
    engine.janitor()
    assert engine.count() == 2
    with pytest.raises(InvalidArgument, match="confirmed already: nothing changed"):
        engine.review(row.id, "confirm")


def test_a_reversed_janitor_merge_stays_split(engine: MemoryEngine) -> None:
    plant(engine, [CAT, CAT_3])
    engine.janitor()
    rows = {r.new_text: r for r in engine.review_pending()}
    engine.review(rows[CAT].id, "reverse")
    assert {m.content for m in engine.list()} == {CAT, CAT_3}
    plan = engine.janitor(dry_run=True)
    assert plan.planned == 0 and plan.skipped.get("review") == 1
    assert engine.janitor().merged == 0
    assert {m.content for m in engine.list()} == {CAT, CAT_3}


def test_confirm_and_the_errors(make_engine: MakeEngine) -> None:
    engine = make_engine(embedder=scripted())
    engine.add(BASE)
    assert engine.add(GRAY).decision is Decision.GRAY_KEEP
    (row,) = engine.review_pending()
    with pytest.raises(InvalidArgument, match="nothing to restore"):
        engine.review(row.id, "reverse")
    assert engine.review(row.id, "confirm").entry.review_status is ReviewStatus.CONFIRMED
    assert engine.review_pending() == []
    with pytest.raises(NotFound, match="no dedup-log entry 999"):
        engine.review(999, "confirm")
    with pytest.raises(NotFound):  # another owner's row is not found either
        engine.review(row.id, "confirm", owner="mallory")
    with pytest.raises(InvalidArgument, match="valid: confirm, reverse"):
        engine.review(row.id, "undo")


def test_a_janitor_merge_can_be_reversed(engine: MemoryEngine) -> None:
    survivor, _ = plant(engine, [CAT, CAT_3])
    engine.janitor()
    assert [m.content for m in engine.list()] == [CAT_3]
    rows = {r.new_text: r for r in engine.review_pending()}
    assert set(rows) == {CAT, CAT_3}
    live = engine.review(rows[CAT_3].id, "reverse")  # the text lives on in the survivor
    assert live.action == "conflict" and live.conflict_id == survivor.id
    outcome = engine.review(rows[CAT].id, "reverse")
    assert outcome.action == "reversed" and outcome.restored is not None
    assert {m.content for m in engine.list()} == {CAT, CAT_3}


# --- with the LLM -------------------------------------------------------------------------------


def verdict(action: str) -> Reply:
    return Reply(json.dumps({"action": action, "merged_text": None, "reasoning": "scripted"}))


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_review_with_the_llm(make_engine: MakeEngine, kind: str) -> None:
    pytest.importorskip(kind)
    other = "Bob prefers dark mode in his editor"
    emb = scripted()
    emb.place(other)
    emb.place(other + " today", like=other, cos=0.99)
    script = Script(kind)  # type: ignore[arg-type]
    with serve(script) as url:
        settings = LLMSettings(provider=kind, model="m", base_url=url, timeout_s=0.5, max_retries=0)  # type: ignore[arg-type]
        plain = make_engine(embedder=emb)
        plain.add(BASE)
        plain.add(SAME)  # auto_reject, decided without a model
        plain.add(other)
        plain.add(other + " today")  # extends: replaced, also decided without a model
        plain.add(GRAY)  # gray_keep: not a rejection, not asked
        with pytest.raises(ConfigError, match="review --llm needs an LLM"):
            plain.review_with_llm()
        engine = make_engine(embedder=emb, llm=make_llm(settings))
        script.steps = [verdict("keep"), Status(500)]
        outcomes = engine.review_with_llm()
    assert len(script.requests) == 2  # the two rejections, not the gray_keep
    (only,) = outcomes  # the failed call left its row unreviewed
    assert only.action == "reversed" and only.reasoning == "[verify-v3] scripted"
    assert only.restored is not None and only.restored.content == SAME
    pending = {r.decision for r in engine.review_pending()}
    assert pending == {Decision.REPLACED, Decision.GRAY_KEEP}


# --- the CLI ------------------------------------------------------------------------------------


def test_cli_review(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    home = str(tmp_path / "home")
    engine = MemoryEngine.open(home)
    try:
        plant(engine, [CAT, CAT_3])
        engine.janitor()
    finally:
        engine.close()
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(app, ["review", *args, "--home", home])
        assert result.exit_code == 0, f"{result.stdout}\n{result.stderr}\n{result.exception!r}"
        return result.stdout

    listed = run()
    assert "2 unreviewed dedup decisions" in listed and "janitor_merge" in listed
    rows = {r["new_text"]: r["id"] for r in json.loads(run("--json"))}
    done = json.loads(run("reverse", str(rows[CAT]), "--json"))
    assert done[0]["action"] == "reversed" and done[0]["restored"]["content"] == CAT
    # the survivor holds CAT_3's text: nothing to restore, and the exit code says so
    live = runner.invoke(app, ["review", "reverse", str(rows[CAT_3]), "--home", home])
    assert live.exit_code == 1 and "nothing written" in live.stderr
    assert "conflict" in live.stdout
    assert "confirmed" in run("confirm", str(rows[CAT_3]))
    assert json.loads(run("--json")) == []
    again = runner.invoke(app, ["review", "confirm", str(rows[CAT_3]), "--home", home])
    assert again.exit_code == InvalidArgument.exit_code and "nothing changed" in again.stderr
    missing = runner.invoke(app, ["review", "confirm", "999", "--home", home])
    assert missing.exit_code == NotFound.exit_code and "no dedup-log entry 999" in missing.stderr
