"""The janitor: duplicate clusters found after the fact and merged one per cluster, with the
provenance kept; the guard rule without an LLM; the model's merge with a real provider over HTTP
(tests/llm_server.py); the CLI; and properties over generated stores (hypothesis).

Duplicates are planted straight into the store (``store.insert``), as they arrive in real stores:
written before an LLM was configured, imported, or kept apart in the gray zone.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memlane import HashEmbedder, MemoryEngine, Settings
from memlane._ids import new_id, utcnow
from memlane._text import content_hash
from memlane.cli import app
from memlane.dedup.clusters import passes
from memlane.store import open_store
from memlane.store.base import NewMemory
from memlane.types import ChangeReason, Decision, Memory, MemoryType, Relation, Status

MakeEngine = Callable[..., MemoryEngine]

CAT = "Alice lives in Paris with her cat"
CAT_2 = "Alice lives in Paris with her cat."
CAT_3 = "Alice lives in Paris with her black cat"
AGE_35 = "Carol Smith turned 35 in Lisbon last spring"
AGE_36 = "Carol Smith turned 36 in Lisbon last spring"
UNRELATED = "The build server restarts every night at two"


def plant(
    engine: MemoryEngine,
    texts: Sequence[str],
    *,
    owner: str = "default",
    agent: str | None = None,
    importance: Sequence[float] | None = None,
    metadata: Sequence[dict[str, Any]] | None = None,
) -> list[Memory]:
    """Insert ``texts`` as they are (no dedup), one second apart, oldest first."""
    vectors = engine.embed(list(texts))
    start = utcnow() - timedelta(days=1)
    out = []
    with engine.store.transaction():
        for i, text in enumerate(texts):
            draft = NewMemory(
                id=new_id(),
                content=text,
                content_hash=content_hash(text),
                type=MemoryType.FACT,
                importance=importance[i] if importance else 0.5,
                owner=owner,
                agent=agent,
                session=None,
                source=None,
                created_at=start + timedelta(seconds=len(out)),
                metadata=metadata[i] if metadata else {},
            )
            out.append(engine.store.insert(draft, vectors[i]))
    return out


def snapshot(engine: MemoryEngine, owners: Sequence[str] = ("default",)) -> Any:
    """Everything the janitor may change, for "wrote nothing" checks."""
    rows = []
    for owner in owners:
        for status in Status:
            for m in engine.list(owner=owner, status=status, limit=10_000):
                rows.append((m.to_dict(), [v.content for v in engine.history(m.id, owner=owner)]))
        rows.append([e.to_dict() for e in engine.dedup_log(owner=owner, limit=10_000)])
    return json.dumps(rows, sort_keys=True, default=str)


# --- without an LLM: the guard rule ------------------------------------------------------------


def test_a_near_identical_cluster_is_merged_with_its_provenance(engine: MemoryEngine) -> None:
    a, b, c, other = plant(
        engine,
        [CAT, CAT_2, CAT_3, UNRELATED],
        importance=[0.3, 0.9, 0.5, 0.5],
        metadata=[{"sources": ["chat"]}, {"sessions": ["s2"]}, {}, {}],
    )
    with engine.store.transaction():  # b is linked to another memory: the link must move to a
        engine.store.add_association("default", b.id, other.id, Relation.CAUSED_BY, 0.7)
        engine.store.add_association("default", a.id, c.id, Relation.RELATED_TO, 0.9)
        engine.store.confirm("default", b.id, {})
        engine.store.confirm("default", c.id, {})
    report = engine.janitor()
    assert (report.clusters, report.merged, report.absorbed) == (1, 1, 2)
    assert report.llm_calls == 0 and report.candidate_pairs < 4 * 3 / 2 + 1
    survivor = engine.get(a.id)  # the oldest id lives on, with the newest text that holds all
    assert survivor.content == CAT_3
    assert survivor.importance == 0.9 and survivor.created_at == a.created_at
    assert survivor.confirmations == 2
    assert survivor.metadata["sources"] == ["chat"] and survivor.metadata["sessions"] == ["s2"]
    assert sorted(survivor.metadata["merged_from"]) == sorted([b.id, c.id])
    history = engine.history(a.id)
    assert {v.content for v in history} == {CAT, CAT_2, CAT_3}
    assert {v.reason for v in history} == {ChangeReason.JANITOR_MERGE}
    for gone in (b, c):
        old = engine.get(gone.id, include_inactive=True)
        assert old.status is Status.SUPERSEDED and old.valid_to is not None
        assert old.metadata["merged_into"] == a.id and old.content == gone.content
    links = engine.associations(a.id)
    assert [(x.source_id, x.target_id, x.relation) for x in links] == [
        (a.id, other.id, Relation.CAUSED_BY)
    ]  # moved from b; the link inside the cluster is gone (it would be a loop)
    assert [m.content for m in engine.list()] == [UNRELATED, CAT_3]
    log = engine.dedup_log()
    assert {(e.decision, e.new_text, e.existing_id) for e in log} == {
        (Decision.JANITOR_MERGE, CAT, a.id),  # the survivor's own old text: reversible too
        (Decision.JANITOR_MERGE, CAT_2, a.id),
        (Decision.JANITOR_MERGE, CAT_3, a.id),
    }
    hits = engine.search("Alice Paris cat")
    assert [h.memory.id for h in hits][:1] == [a.id]
    assert b.id not in {h.memory.id for h in hits}


def test_a_chain_of_look_alikes_over_the_size_limit_is_split_where_the_guard_passes(
    engine: MemoryEngine,
) -> None:
    """42 texts one number apart chain into one cluster over MAX_CLUSTER (32): it is not merged
    blindly; the parts its passing pairs connect (the two copies written twice) are."""
    from memlane.dedup.janitor import MAX_CLUSTER

    ages = [f"Carol Smith turned {n} in Lisbon last spring" for n in range(20, 60)]
    planted = plant(engine, [*ages, ages[5] + ".", ages[30] + "!"])
    report = engine.janitor()
    assert len(planted) > MAX_CLUSTER and report.clusters == 1
    assert (report.merged, report.absorbed, report.skipped) == (2, 2, {})
    merged = sorted(sorted(m.content for m in p.members) for p in report.plans)
    assert merged == [sorted([ages[5], ages[5] + "."]), sorted([ages[30], ages[30] + "!"])]
    assert engine.count() == 40  # every other look-alike kept, none lost
    assert engine.janitor().merged == 0


def test_guard_failures_are_never_merged_without_an_llm(engine: MemoryEngine) -> None:
    plant(engine, [AGE_35, AGE_36, "Quaid gave Melina a ring", "Melina gave Quaid a ring"])
    report = engine.janitor()
    assert report.clusters == 2 and report.merged == 0 and report.skipped_by_guard == 2
    assert engine.count() == 4
    assert all(p.outcome == "guard" and "guard" in p.reason for p in report.plans)


def test_dry_run_writes_nothing_and_prints_the_plan(engine: MemoryEngine) -> None:
    plant(engine, [CAT, CAT_2, AGE_35, AGE_36])
    before = snapshot(engine)
    report = engine.janitor(dry_run=True)
    assert snapshot(engine) == before
    outcomes = sorted(p.outcome for p in report.plans)
    assert outcomes == ["guard", "planned"] and report.merged == 0 and report.planned == 1
    planned = next(p for p in report.plans if p.outcome == "planned")
    assert planned.text == CAT_2 and [m.content for m in planned.members] == [CAT, CAT_2]
    assert engine.janitor().merged == 1  # the plan is what a real run then does


def test_a_second_run_finds_nothing_new(engine: MemoryEngine) -> None:
    plant(engine, [CAT, CAT_2, CAT_3, AGE_35, AGE_36, UNRELATED])
    first = engine.janitor()
    second = engine.janitor()
    assert first.merged == 1 and second.merged == 0 and second.absorbed == 0
    assert second.skipped == first.skipped == {"guard": 1}  # the same pair, still refused


def test_never_across_owners_or_agents(engine: MemoryEngine) -> None:
    plant(engine, [CAT], owner="alice")
    plant(engine, [CAT_2], owner="bob")
    plant(engine, [CAT_2], owner="alice", agent="coach")
    report = engine.janitor()
    assert report.owners == ["alice", "bob"] and report.clusters == 0 and report.merged == 0
    assert engine.count("alice") == 2 and engine.count("bob") == 1
    plant(engine, [CAT_3], owner="alice")
    only = engine.janitor(owner="alice")
    assert only.owners == ["alice"] and only.merged == 1
    assert {m.content for m in engine.list(owner="alice")} == {CAT_3, CAT_2}
    assert [m.content for m in engine.list(owner="bob")] == [CAT_2]


def test_progress_is_reported(engine: MemoryEngine) -> None:
    plant(engine, [CAT, CAT_2, UNRELATED])
    calls: list[tuple[str, int, int]] = []
    engine.janitor(progress=lambda label, done, total: calls.append((label, done, total)))
    assert ("pairs of default", 3, 3) in calls and ("clusters of default", 1, 1) in calls


# --- the CLI ------------------------------------------------------------------------------------


@pytest.fixture
def cli_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    home = tmp_path / "home"
    home.mkdir()
    engine = MemoryEngine.open(home)
    try:
        plant(engine, [CAT, CAT_2, AGE_35, AGE_36])
    finally:
        engine.close()
    return home


def test_cli_janitor_dry_run_then_run(cli_home: Path) -> None:
    runner = CliRunner()
    dry = runner.invoke(app, ["janitor", "--dry-run", "--home", str(cli_home)])
    assert dry.exit_code == 0, dry.stderr
    assert "would merge (dry run)" in dry.stdout and "nothing was written" in dry.stderr
    plan = json.loads(
        runner.invoke(app, ["janitor", "--dry-run", "--json", "--home", str(cli_home)]).stdout
    )
    (planned,) = [p for p in plan["plans"] if p["outcome"] == "planned"]
    (refused,) = [p for p in plan["plans"] if p["outcome"] == "guard"]
    # the merge's every id in full (copyable); the non-merge counted, not listed
    assert all(m["id"] in dry.stdout for m in planned["members"])
    assert not any(m["id"] in dry.stdout for m in refused["members"])
    assert "1 clusters not merged (--skipped lists them" in dry.stderr
    listed = runner.invoke(
        app, ["janitor", "--dry-run", "--skipped", "--home", str(cli_home)], terminal_width=200
    )
    merges_at, others_at = listed.stdout.index("would merge"), listed.stdout.index("not merged")
    assert merges_at < others_at  # merges first
    assert all(m["id"] in listed.stdout[others_at:] for m in refused["members"])
    assert "refused by the near-identical" in listed.stdout and "35 became 36" in listed.stdout
    assert "guard   guard" not in listed.stdout  # one column per fact
    assert planned["text"] == CAT_2 and plan["merged"] == 0
    data = json.loads(runner.invoke(app, ["janitor", "--json", "--home", str(cli_home)]).stdout)
    assert data["merged"] == 1 and data["skipped_by_guard"] == 1 and data["dry_run"] is False
    assert data["candidate_pairs_per_memory"] <= 30 and data["seconds"] >= 0
    assert set(data["phase_seconds"]) == {"candidates", "clusters", "merges"}
    again = json.loads(runner.invoke(app, ["janitor", "--json", "--home", str(cli_home)]).stdout)
    assert again["merged"] == 0


# --- properties ---------------------------------------------------------------------------------

NAMES = ["Alice", "Bruno", "Chen", "Dana"]
PLACES = ["Paris", "Lisbon", "Osaka"]
PETS = ["cat", "dog", "parrot"]


def _variant(base: tuple[str, str, str], kind: int) -> str:
    name, place, pet = base
    return [
        f"{name} lives in {place} with a {pet}",
        f"{name} lives in {place} with a {pet}.",  # punctuation: same words
        f"{name} lives in {place} with a small {pet}",  # extends
        f"{name} lives in {place} with 2 {pet}s",  # another number
        f"{name} does not live in {place} with a {pet}",  # a negation
        f"{place} lives in {name} with a {pet}",  # roles swapped
    ][kind]


memory_sets = st.lists(
    st.tuples(
        st.sampled_from(["o1", "o2"]),
        st.tuples(st.sampled_from(NAMES), st.sampled_from(PLACES), st.sampled_from(PETS)),
        st.integers(0, 5),
    ),
    min_size=2,
    max_size=14,
)


@pytest.fixture
def fresh_engine() -> Iterator[Callable[[], MemoryEngine]]:
    """A new engine on a new store per call (hypothesis runs many examples per test)."""
    opened: list[MemoryEngine] = []

    def make() -> MemoryEngine:
        home = Path(tempfile.mkdtemp(prefix="memlane-janitor-"))
        s = Settings.load(home, store={"backend": "sqlite", "path": str(home / "m.db")})
        emb = HashEmbedder()
        engine = MemoryEngine(s, open_store(s, emb), emb)
        opened.append(engine)
        return engine

    yield make
    for e in opened:
        e.close()
        shutil.rmtree(e.settings.home_path, ignore_errors=True)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(items=memory_sets)
def test_janitor_properties(fresh_engine: Callable[[], MemoryEngine], items: list[Any]) -> None:
    engine = fresh_engine()
    planted: list[Memory] = []
    for owner, base, kind in items:
        planted += plant(engine, [_variant(base, kind)], owner=owner)
    report = engine.janitor()
    by_id = {
        m.id: m
        for owner in ("o1", "o2")
        for status in Status
        for m in engine.list(owner=owner, status=status, limit=1000)
    }
    for m in planted:
        now = by_id[m.id]
        if now.status is Status.ACTIVE:
            # no text lost: its own text is the current one or in its history
            assert m.content == now.content or m.content in {
                v.content for v in engine.history(m.id, owner=m.owner)
            }
            continue
        survivor = by_id[now.metadata["merged_into"]]
        assert survivor.owner == m.owner  # never across owners
        assert survivor.status is Status.ACTIVE
        assert m.content in {v.content for v in engine.history(survivor.id, owner=m.owner)}
    for plan in report.plans:
        if plan.outcome == "merged":  # without an LLM: every pair of a merged cluster passes
            group = [x for x in plan.members if x.id in {plan.survivor, *plan.absorbed}]
            assert all(passes(x.content, y.content) for x in group for y in group if x is not y)
            assert len({x.owner for x in plan.members}) == 1
    second = engine.janitor()
    assert second.merged == 0 and second.absorbed == 0


def test_search_skips_expired_memories_unless_asked(engine: MemoryEngine) -> None:
    a, b, other = plant(engine, [CAT, CAT_2, "Alice keeps her cat's vet records in a folder"])
    engine.janitor()  # b is merged into a: superseded (expired)
    engine.forget(other.id)
    default = {h.memory.id for h in engine.search("Alice Paris cat")}
    assert default == {a.id}
    hits = engine.search("Alice Paris cat", include_inactive=True)
    assert {h.memory.id for h in hits} == {a.id, b.id}  # a forgotten memory never returns
    expired = next(h for h in hits if h.memory.id == b.id)
    assert expired.memory.status is Status.SUPERSEDED and "expired" in expired.ranks
    injected = engine.inject("s1", "Where does Alice live with her cat?")
    assert {i.memory.id for i in injected.items} <= {a.id}  # injection never shows expired ones


def test_candidate_pairs_are_never_all_pairs_and_stay_in_one_agent_scope(
    engine: MemoryEngine,
) -> None:
    from memlane.eval.bench import Generator

    texts = [m.content for m in Generator(3).memories(400)]
    plant(engine, texts[:200])
    plant(engine, texts[200:], agent="coach")
    plant(engine, [texts[0]], agent="coach")  # the same text in another agent scope
    found = engine.store.candidate_pairs("default", neighbours=10, min_similarity=0.8, max_df=4)
    assert found.memories == 401
    assert 0 < found.considered <= 30 * 401 < 401 * 400 // 2
    assert found.by_source["tokens"] > 0
    agent_of = {m.id: m.agent for m in engine.list(limit=1000)}
    assert found.pairs and all(agent_of[p.a] == agent_of[p.b] for p in found.pairs)
    assert all(p.similarity >= 0.8 for p in found.pairs)
    assert (
        engine.store.candidate_pairs("nobody", neighbours=10, min_similarity=0.8, max_df=4).pairs
        == []
    )


# --- candidates at a scale where the ANN index is approximate ----------------------------------


def test_exact_search_matches_brute_force() -> None:
    """The brute-force search the janitor falls back to (memories the HNSW graph does not lead
    back to) returns the true nearest, with and without a cosine floor."""
    import numpy as np

    from memlane.store.vector_index import OwnerIndex

    rng = np.random.default_rng(7)
    x = rng.normal(size=(3000, 32)).astype(np.float32)
    x[1500:1600] = x[:100] + 0.05 * rng.normal(size=(100, 32)).astype(np.float32)  # near-copies
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    keys = np.arange(10, 3010, dtype=np.uint64)
    index = OwnerIndex(32)
    index.apply(((int(k), True, v.tobytes()) for k, v in zip(keys, x, strict=True)), 1)
    queries = x[:200]
    truth = queries @ x.T
    found, cos, counts = index.exact_many(queries, 5, chunk=700)  # several chunks
    assert (counts == 5).all()
    assert np.allclose(cos, -np.sort(-truth, axis=1)[:, :5], atol=1e-5)
    assert (found[:, 0] == keys[:200]).all()  # each finds itself first
    found, cos, counts = index.exact_many(queries, 5, floor=0.9, chunk=700)
    want = np.minimum((truth >= 0.9).sum(axis=1), 5)
    assert (counts == want).all() and (want[:100] == 2).all()  # itself and its near-copy
    assert (found[:100, 1] == keys[1500:1600]).all()


def test_every_copy_is_merged_and_a_second_run_finds_next_to_nothing(tmp_path: Path) -> None:
    """Above the exact-search size (5,000) the vector index is an HNSW graph, weakest on
    identical vectors; every repeated text must still be merged by the first run (measured
    before the fix: 3 texts left stored twice at this size), and the second run finds next to
    nothing."""
    from memlane.eval.bench.janitor import build_janitor_store

    home = tmp_path / "h"
    home.mkdir()
    planted = build_janitor_store(home, 20_000, seed=3, near_repeats=0.5)["planted"]
    assert planted["repeat"] > 100
    s = Settings.load(home)
    emb = HashEmbedder()
    engine = MemoryEngine(s, open_store(s, emb), emb)
    try:
        first = engine.janitor(owner="bench")
        assert first.by_source["identical"] > 0 and first.merged > planted["repeat"] // 2
        live = engine.list(owner="bench", limit=100_000)
        hashes = [m.content_hash for m in live]
        assert len(hashes) == len(set(hashes)), "a text still stored twice after the janitor"
        second = engine.janitor(owner="bench")
        # Exact copies are found exactly (the "identical" leg); other pairs through the HNSW
        # graph, whose recall is below 1: a pair both directions missed may surface in the next
        # run, on the graph rebuilt without the absorbed members (measured at 100,000: 0 or 1
        # merge in the second run against 7,151 in the first; exact below 5,000 memories,
        # where test_a_second_run_finds_nothing_new asks for none).
        assert second.merged <= max(1, first.merged // 1000)
    finally:
        engine.close()
