"""The project scope on every backend (``memlane.scope``): a memory is global to its owner or
belongs to one project; a search or an injection in a project sees that project's memories and
the owner's global ones, never another project's; the write path deduplicates within what a
turn would see; the janitor never merges across projects; a store made before the project
column opens with its memories global."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import pytest

from conftest import Backend, ScriptedEmbedder
from memlane import MemoryEngine
from memlane._ids import new_id, utcnow
from memlane._text import content_hash
from memlane.errors import InvalidArgument, InvalidMemory
from memlane.store.base import NewMemory
from memlane.transfer import export_lines, import_lines
from memlane.types import Decision, MemoryType

MakeEngine = Callable[..., MemoryEngine]

APP = "github.com/acme/app"
API = "github.com/acme/api"
APP_FACT = "The app's deploy script lives in tools/ship.sh and needs the VPN"
API_FACT = "The api's deploy script lives in bin/release and needs a signed tag"
GLOBAL_FACT = "Alice prefers deploy scripts written in bash with set -euo pipefail"


def contents(memories: Any) -> set[str]:
    return {m.content for m in memories}


def seeded(engine: MemoryEngine) -> MemoryEngine:
    assert engine.add(APP_FACT, project=APP).memory.project == APP
    assert engine.add(API_FACT, project=API).memory.project == API
    assert engine.add(GLOBAL_FACT).memory.project is None
    return engine


def test_a_project_sees_its_memories_and_the_global_ones(engine: MemoryEngine) -> None:
    seeded(engine)
    in_app = engine.search("deploy script", project=APP, limit=10)
    assert contents(h.memory for h in in_app) == {APP_FACT, GLOBAL_FACT}
    in_api = engine.search("deploy script", project=API, limit=10)
    assert contents(h.memory for h in in_api) == {API_FACT, GLOBAL_FACT}
    # each leg alone keeps the scope too (the vector leg, BM25)
    for mode in ("vector", "fts"):
        hits = engine.search("deploy script", project=APP, limit=10, mode=mode)
        assert API_FACT not in contents(h.memory for h in hits), mode
    assert contents(engine.list(project=APP)) == {APP_FACT, GLOBAL_FACT}
    # no project: every project's (the library's and the CLI's view of the whole owner)
    assert contents(engine.list()) == {APP_FACT, API_FACT, GLOBAL_FACT}
    everywhere = engine.search("deploy script", limit=10)
    assert contents(h.memory for h in everywhere) == {APP_FACT, API_FACT, GLOBAL_FACT}
    # a project no memory belongs to sees the global ones only
    assert contents(engine.list(project="github.com/acme/new")) == {GLOBAL_FACT}


def test_injection_in_a_project_never_shows_another_projects_memory(
    engine: MemoryEngine,
) -> None:
    seeded(engine)
    for session, project, own, other in (("s-app", APP, APP_FACT, API_FACT),
                                         ("s-api", API, API_FACT, APP_FACT)):  # fmt: skip
        first = engine.inject(session, "where is the deploy script?", project=project)
        assert own in contents(i.memory for i in first.items)
        assert other not in contents(i.memory for i in first.items)
        assert other not in (first.block or "")
        # the owner's global memories are injected in every project (once a session)
        second = engine.inject(
            session, "does Alice want bash with set -euo pipefail?", project=project
        )
        shown = contents(i.memory for i in [*first.items, *second.items])
        assert GLOBAL_FACT in shown and other not in shown
    # outside any project (no project given): every project's memories
    shown = engine.inject("s-none", "the api's deploy script in bin/release")
    assert API_FACT in contents(i.memory for i in shown.items)


def test_two_agents_in_one_repository_share_its_memories(engine: MemoryEngine) -> None:
    seeded(engine)
    for agent in ("claude-code", "gemini"):
        shown = engine.inject(f"s-{agent}", "where is the deploy script?", agent=agent, project=APP)
        assert APP_FACT in contents(i.memory for i in shown.items), agent
        assert API_FACT not in contents(i.memory for i in shown.items), agent


def test_pinned_memories_follow_the_project(make_engine: MakeEngine) -> None:
    engine = make_engine(
        injection={"ambient_enabled": True, "pinned_types": ["identity"], "pinned_limit": 5}
    )
    engine.add("I work on the app's billing module", type=MemoryType.IDENTITY, project=APP)
    engine.add("I work on the api's gateway", type=MemoryType.IDENTITY, project=API)
    engine.add("My name is Alice", type=MemoryType.IDENTITY)
    shown = engine.inject_pinned("s1", project=APP)
    assert contents(i.memory for i in shown.items) == {
        "I work on the app's billing module",
        "My name is Alice",
    }


def test_an_exact_repeat_is_one_memory_within_what_a_turn_sees(engine: MemoryEngine) -> None:
    first = engine.add(APP_FACT, project=APP)
    again = engine.add(APP_FACT, project=APP)
    assert again.decision is Decision.HASH_EXACT and again.memory.id == first.memory.id
    # another project does not see the first: its copy is its own
    other = engine.add(APP_FACT, project=API)
    assert other.decision is Decision.ADDED and other.memory.project == API
    # a global memory is seen in every project: a project's repeat of it is that memory
    shared = engine.add(GLOBAL_FACT)
    repeat = engine.add(GLOBAL_FACT, project=APP)
    assert repeat.decision is Decision.HASH_EXACT and repeat.memory.id == shared.memory.id
    assert repeat.memory.project is None
    # a global draft is not a repeat of one project's memory (the other projects never saw it)
    wide = engine.add(APP_FACT)
    assert wide.decision is Decision.ADDED and wide.memory.project is None
    assert engine.count() == 4


def test_a_near_copy_is_compared_only_within_what_a_turn_sees(make_engine: MakeEngine) -> None:
    old, near = "Deploys go out on Tuesdays", "Deploys go out on Tuesday"
    emb = ScriptedEmbedder()
    emb.place(old)
    emb.place(near, like=old, cos=0.99)
    engine = make_engine(embedder=emb)
    engine.add(old, project=APP)
    # in another project the near copy is nobody's duplicate
    assert engine.add(near, project=API).decision is Decision.ADDED
    # in the same project it is
    same = engine.add(near, project=APP)
    assert same.duplicate and same.memory.project == APP


def test_a_near_copy_found_past_other_projects_crowding_the_neighbours(
    make_engine: MakeEngine,
) -> None:
    # more near copies in other projects than the write path's first ask for neighbours
    emb = ScriptedEmbedder()
    base = "The staging database is at db-staging.internal:5432"
    emb.place(base)
    engine = make_engine(embedder=emb)
    n = engine.settings.dedup.neighbours + 2
    for i in range(n):
        text = f"{base} (copy {i})"
        emb.place(text, like=base, cos=0.999)
        assert engine.add(text, project=f"github.com/acme/p{i}").decision is Decision.ADDED
    ours = engine.add(base, project=APP)
    assert ours.decision is Decision.ADDED
    near = "The staging database is at db-staging.internal port 5432"
    emb.place(near, like=base, cos=0.995)
    again = engine.add(near, project=APP)
    assert again.duplicate and again.matched_id == ours.memory.id


def plant(engine: MemoryEngine, text: str, projects: list[str | None]) -> None:
    """``text`` once per project in ``projects``, as it is (no dedup: as an import would)."""
    vectors = engine.embed([text] * len(projects))
    with engine.store.transaction():
        for project, vector in zip(projects, vectors, strict=True):
            draft = NewMemory(new_id(), text, content_hash(text), MemoryType.FACT, 0.5,
                              "default", None, None, None, utcnow(), {}, project)  # fmt: skip
            engine.store.insert(draft, vector)


def test_the_janitor_never_merges_across_projects(engine: MemoryEngine) -> None:
    # the same text in two projects and globally: three scopes, nothing to merge
    plant(engine, APP_FACT, [APP, API, None])
    report = engine.janitor(owner="default")
    assert report.merged == 0
    assert sorted((m.project or "") for m in engine.list()) == ["", API, APP]
    # twice within one scope (a project, or global): merged as before
    plant(engine, GLOBAL_FACT, [APP, APP, None, None])
    report = engine.janitor(owner="default")
    assert report.merged == 2
    assert sorted((m.project or "", m.content) for m in engine.list()) == sorted(
        [("", APP_FACT), (API, APP_FACT), (APP, APP_FACT), ("", GLOBAL_FACT), (APP, GLOBAL_FACT)]
    )


def test_bad_projects_are_refused_before_anything_is_written(engine: MemoryEngine) -> None:
    for bad in ("", "   ", 7):
        with pytest.raises(InvalidMemory, match="project"):
            engine.add(APP_FACT, project=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match="project"):
            engine.search("deploy", project=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidMemory, match="project"):
        engine.add(APP_FACT, project="x" * 100_000)
    assert engine.count() == 0


def test_export_and_import_keep_the_project(store_backend: Backend, tmp_path: Any) -> None:
    source = seeded(store_backend.engine())
    lines = list(export_lines(source))
    (tmp_path / "other").mkdir()
    other = store_backend.sibling(tmp_path / "other")
    target = other.engine()
    try:
        import_lines(target, lines)
        assert {(m.content, m.project) for m in target.list()} == {
            (APP_FACT, APP),
            (API_FACT, API),
            (GLOBAL_FACT, None),
        }
    finally:
        other.close_all()


# ------------------------------------------------------------------------------ migration
def _downgrade(backend: Backend) -> None:
    """Make the store look like one written before the project column existed."""
    if backend.name == "sqlite":
        conn = sqlite3.connect(backend.home / "memlane.db")
        try:
            conn.executescript(
                "DROP INDEX memories_owner_project; ALTER TABLE memories DROP COLUMN project; "
                "DELETE FROM migrations WHERE name = '0005_memories_project';"
            )
            conn.commit()
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(backend.dsn, autocommit=True) as conn:
        conn.execute("DROP INDEX memories_owner_project")
        conn.execute("ALTER TABLE memories DROP COLUMN project")
        conn.execute("DELETE FROM migrations WHERE name = '0003_memories_project'")


def test_an_older_store_opens_with_its_memories_global(store_backend: Backend) -> None:
    engine = store_backend.engine()
    engine.add(GLOBAL_FACT)
    engine.add("The release checklist is in docs/release.md")
    store_backend.close_all()
    _downgrade(store_backend)
    engine = store_backend.engine()  # migrates
    assert {m.project for m in engine.list()} == {None}
    # old memories are the owner's global ones: seen in every project
    assert contents(engine.list(project=APP)) == {
        GLOBAL_FACT,
        "The release checklist is in docs/release.md",
    }
    hits = engine.search("release checklist", project=API)
    assert hits and hits[0].memory.content == "The release checklist is in docs/release.md"
    # and new project memories live beside them
    engine.add(APP_FACT, project=APP)
    assert contents(engine.list(project=API)) == {
        GLOBAL_FACT,
        "The release checklist is in docs/release.md",
    }


# ------------------------------------------------------------------------------ owner rule
def test_the_library_follows_the_owner_rule(make_engine: MakeEngine) -> None:
    engine = make_engine(scope={"owner": "carol"})
    added = engine.add(APP_FACT)  # no owner: [scope] owner
    assert added.memory.owner == "carol"
    assert engine.add_many([{"content": API_FACT}])[0].memory.owner == "carol"
    assert contents(engine.list()) == {APP_FACT, API_FACT}
    assert engine.get(added.memory.id).owner == "carol"
    assert engine.inject("s1", "where is the deploy script?").items
    assert engine.add(GLOBAL_FACT, owner="bob").memory.owner == "bob"  # explicit wins
    assert contents(engine.list(owner="bob")) == {GLOBAL_FACT}
    with pytest.raises(InvalidArgument, match="owner"):
        engine.list(owner="")  # an explicit empty owner is an error, not the default
    plain = make_engine()  # nothing configured: "default"
    assert plain.owner_of(None) == "default"
