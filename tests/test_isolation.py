"""Owner isolation (issue item 1): no call of one owner ever returns, changes, deduplicates
against, links or injects another owner's data.

Two parts:

- :class:`IsolationMachine`, a hypothesis state machine over a real engine (a store file of the
  backend under test, :class:`HashEmbedder`): random interleavings of ``add``, ``add_many``
  (owners mixed in one batch), ``update``, ``forget``, ``get``/``history``/``associations`` (own
  and foreign ids), ``search``, ``inject`` (both owners in the *same* session ids),
  ``reset_session``, ``session`` and ``dedup_log`` by two owners (and agents of each), plus
  store-level by-id calls with mixed ids. Texts come from a small shared vocabulary, so both
  owners often write the same and near-same texts: what would deduplicate, link or inject across
  owners if a scope filter were missing. The machine keeps a model (every memory's owner, agent,
  last state returned to its owner, history length and links; each owner's dedup-log rows; each
  ``(owner, session)``'s turn, injected window and last reset) and after every step compares the
  whole store with it.
- Example tests of each by-id method, engine and store level, with another owner's id.

Everything goes through ``store_backend``, so a new backend runs the same tests.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from numpy.typing import NDArray

from conftest import Backend
from memlane import HashEmbedder, MemoryEngine, MemoryInput, NotFound
from memlane._text import content_hash
from memlane.store.base import NewDedupLog, PinnedQuery
from memlane.types import (
    ChangeReason,
    Decision,
    Memory,
    MemoryType,
    PinnedSort,
    Relation,
    ResetReason,
    Status,
    WriteResult,
)

OWNERS = ("alice", "bob")
#: Agents that write (``None``: the owner's shared memories) and that read (one never writes).
WRITE_AGENTS: tuple[str | None, ...] = (None, "a1")
READ_AGENTS: tuple[str | None, ...] = (None, "a1", "a2")
SESSIONS = ("s1", "s2")

#: A small vocabulary: both owners draw from it, so they write the same texts all the time.
BASES = (
    "the user prefers dark mode in the code editor",
    "the user works at the river bakery on weekends",
    "the project deadline is friday at noon",
    "the user has 2 cats named miso and tofu",
    "deploys go through the staging cluster first",
    "the user likes spicy ramen for lunch",
    # long texts: one added word stays above `replace`, so near copies are rewritten in place
    "the user keeps the weekly team meeting notes in the shared drive folder named planning "
    "and reviews them every monday morning before standup",
    "deploys of the billing service go through the staging cluster first and need a green "
    "integration test run plus a second reviewer approval",
)
#: Variants of a base text: the same, the same words another way (hash or cosine 1.0), near
#: copies (replace / gray zone) and guard cases (numbers, negation: kept apart, linked).
VARIANTS = {
    "same": lambda t: t,
    "upper": lambda t: t.upper(),
    "dot": lambda t: t + ".",
    "extra": lambda t: t + " these days",
    "prefix": lambda t: "note: " + t,
    "number": lambda t: t + " 3 times",
    "negation": lambda t: t.replace("the user", "the user does not say", 1),
}
texts = st.builds(
    lambda base, variant: VARIANTS[variant](base),
    st.sampled_from(BASES),
    st.sampled_from(sorted(VARIANTS)),
)
queries = st.one_of(texts, st.sampled_from(BASES), st.just("ok"))  # "ok" is a trivial prompt
owners = st.sampled_from(OWNERS)
write_agents = st.sampled_from(WRITE_AGENTS)
read_agents = st.sampled_from(READ_AGENTS)
sessions = st.sampled_from(SESSIONS)
types = st.sampled_from([MemoryType.FACT, MemoryType.PREFERENCE])

#: Engine settings of the machine: pinned ("ambient") memories on, so ``store.pinned`` is used;
#: a short window, so that sessions re-inject and prune their tracking within a run.
DEPTH = 3
INJECTION = {
    "ambient_enabled": True,
    "pinned_types": ["preference"],
    "pinned_limit": 2,
    "context_window_depth": DEPTH,
}

KEEP = {Decision.HASH_EXACT, Decision.AUTO_REJECT, Decision.LLM_REJECT, Decision.FALLBACK_REJECT}
REWRITE = {Decision.REPLACED, Decision.LLM_MERGE}

MACHINE_SETTINGS = settings(
    max_examples=60,
    stateful_step_count=50,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def comparable(memory: Memory) -> Memory:
    """``memory`` without its access counters (searches of its owner change those, buffered)."""
    return dataclasses.replace(memory, access_count=0, last_accessed_at=None)


def not_found_message(engine: MemoryEngine, owner: str) -> str:
    """The message of ``NotFound`` for an id that exists nowhere, with ``ID`` for the id."""
    missing = f"missing-{uuid.uuid4().hex}"
    with pytest.raises(NotFound) as exc:
        engine.get(missing, owner=owner)
    return str(exc.value).replace(missing, "ID")


# ---------------------------------------------------------------------------------------------
# the model


@dataclass
class Known:
    """What the machine knows of one memory: its last state returned to its owner."""

    memory: Memory
    versions: int = 0

    @property
    def owner(self) -> str:
        return self.memory.owner

    @property
    def agent(self) -> str | None:
        return self.memory.agent

    @property
    def active(self) -> bool:
        return self.memory.status is Status.ACTIVE


@dataclass
class SessionModel:
    turn: int = 0
    injected: dict[str, int] = field(default_factory=dict)
    reset_reason: str | None = None


def visible(known: Known, owner: str, agent: str | None) -> bool:
    """Whether ``(owner, agent)`` may see the memory (reads: the agent's and shared ones)."""
    return known.owner == owner and (agent is None or known.agent in (None, agent))


class IsolationMachine(RuleBasedStateMachine):
    """Two owners (and agents of each) on one store; see the module docstring. Subclassed per
    backend (``on``): each run gets a fresh store of that backend."""

    #: The backend under test (its name; run folders go under its home).
    source: ClassVar[Backend]

    @classmethod
    def on(cls, backend: Backend) -> type[IsolationMachine]:
        return type(f"IsolationMachine_{backend.name}", (cls,), {"source": backend})

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="iso-", dir=self.source.home))
        self.backend = self.source.sibling(self.dir)
        self.engine = self.backend.engine(injection=INJECTION)
        self.store = self.engine.store
        self.embedder = HashEmbedder()
        self.vectors: dict[str, NDArray[np.float32]] = {}
        self.gray_low = self.engine.settings.dedup.gray_low
        self.memories: dict[str, Known] = {}
        self.links: set[tuple[str, str]] = set()
        self.log: dict[str, list[tuple[str, str | None, Decision]]] = {o: [] for o in OWNERS}
        self.sessions: dict[tuple[str, str], SessionModel] = {
            (o, s): SessionModel() for o in OWNERS for s in SESSIONS
        }
        self.missing_message = {o: not_found_message(self.engine, o) for o in OWNERS}

    def teardown(self) -> None:
        self.backend.close_all()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------------ helpers
    def ids_of(self, owner: str) -> list[str]:
        return sorted(mid for mid, k in self.memories.items() if k.owner == owner)

    def foreign_ids(self, owner: str) -> list[str]:
        return sorted(mid for mid, k in self.memories.items() if k.owner != owner)

    def vector(self, text: str) -> NDArray[np.float32]:
        vec = self.vectors.get(text)
        if vec is None:
            raw = self.embedder.embed_batch([text])[0]
            vec = self.vectors[text] = raw / max(float(np.linalg.norm(raw)), 1e-12)
        return vec

    def check_memory(self, memory: Memory, owner: str, agent: str | None = None) -> None:
        """A memory returned to ``(owner, agent)``: in the scope and as the model knows it."""
        known = self.memories.get(memory.id)
        assert known is not None, f"{owner} was given an unknown memory {memory.id}"
        assert memory.owner == owner and known.owner == owner, (
            f"{owner} was given {known.owner}'s memory {memory.id}"
        )
        assert visible(known, owner, agent), f"{owner}/{agent} was given {known.agent}'s memory"
        assert comparable(memory) == comparable(known.memory)

    def expect_not_found(self, call: Callable[[], object], memory_id: str, owner: str) -> None:
        with pytest.raises(NotFound) as exc:
            call()
        assert str(exc.value).replace(memory_id, "ID") == self.missing_message[owner]

    def expect_write(self, result: WriteResult, item: MemoryInput) -> None:
        """Check one write result against the model (before it is applied), then apply it."""
        owner, agent = item.owner, item.agent
        text = item.content.strip()
        scope = [
            k for k in self.memories.values() if k.active and (k.owner, k.agent) == (owner, agent)
        ]
        assert result.memory.owner == owner and result.memory.agent == agent, (
            f"a write by {owner}/{agent} returned {result.memory.owner}/{result.memory.agent}'s "
            f"memory ({result.decision.value})"
        )
        if result.matched_id is not None:
            matched = self.memories.get(result.matched_id)
            assert matched is not None and (matched.owner, matched.agent) == (owner, agent), (
                f"{owner}/{agent}'s text was compared with another scope's memory "
                f"{result.matched_id} ({result.decision.value})"
            )
        # Dedup is exact-scope: with no twin or near copy in (owner, agent), the text is added,
        # however many other owners hold the very same text.
        twins = [k for k in scope if k.memory.content_hash == content_hash(text)]
        vec = self.vector(text)
        best = max((float(self.vector(k.memory.content) @ vec) for k in scope), default=0.0)
        if twins:
            assert result.decision is Decision.HASH_EXACT
            assert result.matched_id in {k.memory.id for k in twins}
        elif best < self.gray_low - 0.01:
            others = [
                k
                for k in self.memories.values()
                if k.active
                and (k.owner, k.agent) != (owner, agent)
                and float(self.vector(k.memory.content) @ vec) > 0.99
            ]
            assert result.decision is Decision.ADDED and result.matched_id is None, (
                f"{owner}/{agent}: {result.decision.value} matched {result.matched_id} with no "
                f"near copy in scope (other scopes' near copies: {[k.memory.id for k in others]})"
            )
        # apply
        mid = result.memory.id
        if result.decision is Decision.ADDED or result.decision not in KEEP | REWRITE:
            assert mid not in self.memories, f"{result.decision.value} reused the id {mid}"
            self.memories[mid] = Known(result.memory)
        else:
            assert mid == result.matched_id and mid in self.memories
            self.memories[mid].memory = result.memory
            if result.decision in REWRITE:
                self.memories[mid].versions += 1
        if result.decision is not Decision.ADDED:
            assert result.matched_id is not None
            self.log[owner].append((text, result.matched_id, result.decision))
        if result.decision not in KEEP | REWRITE | {Decision.ADDED}:
            self.links.add((mid, result.matched_id or ""))

    # ------------------------------------------------------------------ writes
    @initialize(text=texts)
    def same_text_for_both(self, text: str) -> None:
        """Every run starts with one text written by both owners (each gets its own memory)."""
        for owner in OWNERS:
            item = MemoryInput(text, owner=owner)
            result = self.engine.add(text, owner=owner)
            assert result.decision is Decision.ADDED
            self.expect_write(result, item)

    @rule(
        text=texts,
        owner=owners,
        agent=write_agents,
        type=types,
        session=st.sampled_from([None, *SESSIONS]),
    )
    def add(
        self, text: str, owner: str, agent: str | None, type: MemoryType, session: str | None
    ) -> None:
        item = MemoryInput(text, type, owner, agent, session, source="iso")
        self.expect_write(
            self.engine.add(
                text, type=type, owner=owner, agent=agent, session=session, source="iso"
            ),
            item,
        )

    @rule(
        batch=st.lists(
            st.builds(
                lambda text, owner, agent, session: MemoryInput(
                    text, owner=owner, agent=agent, session=session
                ),
                texts,
                owners,
                write_agents,
                st.sampled_from([None, *SESSIONS]),
            ),
            min_size=1,
            max_size=6,
        )
    )
    def add_many(self, batch: list[MemoryInput]) -> None:
        results = self.engine.add_many(batch)
        assert len(results) == len(batch)
        for item, result in zip(batch, results, strict=True):
            self.expect_write(result, item)

    @rule(data=st.data(), owner=owners, agent=read_agents, text=texts)
    def update(self, data: st.DataObject, owner: str, agent: str | None, text: str) -> None:
        if not self.memories:
            return
        mid = data.draw(st.sampled_from(sorted(self.memories)), label="id")
        known = self.memories[mid]
        call = functools.partial(self.engine.update, mid, text, owner=owner, agent=agent)
        if not (visible(known, owner, agent) and known.active):
            self.expect_not_found(call, mid, owner)
            return
        updated = call()
        assert updated.id == mid and updated.owner == owner and updated.content == text.strip()
        known.memory = updated
        known.versions += 1

    @rule(data=st.data(), owner=owners, agent=read_agents)
    def forget(self, data: st.DataObject, owner: str, agent: str | None) -> None:
        if not self.memories:
            return
        mid = data.draw(st.sampled_from(sorted(self.memories)), label="id")
        known = self.memories[mid]
        call = functools.partial(self.engine.forget, mid, owner=owner, agent=agent)
        if not (visible(known, owner, agent) and known.active):
            self.expect_not_found(call, mid, owner)
            return
        forgotten = call()
        assert forgotten.id == mid and forgotten.status is Status.FORGOTTEN
        known.memory = forgotten

    @rule(data=st.data(), owner=owners)
    def store_writes_with_foreign_ids(self, data: st.DataObject, owner: str) -> None:
        """The store's by-id writes refuse another owner's id (and link nothing to it)."""
        foreign = self.foreign_ids(owner)
        if not foreign:
            return
        theirs = data.draw(st.sampled_from(foreign), label="foreign id")
        mine = self.ids_of(owner)
        vec = self.vector("a foreign write")
        calls: list[Callable[[], object]] = [
            lambda: self.store.confirm(owner, theirs, {"sources": ["intruder"]}),
            lambda: self.store.set_status(owner, theirs, Status.FORGOTTEN),
            lambda: self.store.replace_content(
                owner, theirs, "overwritten", content_hash("overwritten"), vec, ChangeReason.UPDATE
            ),
            lambda: self.store.add_association(owner, theirs, theirs, Relation.RELATED_TO, 1.0),
        ]
        if mine:
            ours = data.draw(st.sampled_from(mine), label="own id")
            calls += [
                lambda: self.store.add_association(owner, ours, theirs, Relation.UPDATES, 1.0),
                lambda: self.store.add_association(owner, theirs, ours, Relation.UPDATES, 1.0),
            ]
        for call in calls:
            with pytest.raises(NotFound), self.store.transaction():
                call()

    # ------------------------------------------------------------------ by-id reads
    @rule(data=st.data(), owner=owners, agent=read_agents, inactive=st.booleans())
    def get(self, data: st.DataObject, owner: str, agent: str | None, inactive: bool) -> None:
        if not self.memories:
            return
        mid = data.draw(st.sampled_from(sorted(self.memories)), label="id")
        known = self.memories[mid]
        call = functools.partial(
            self.engine.get, mid, owner=owner, agent=agent, include_inactive=inactive
        )
        if visible(known, owner, agent) and (known.active or inactive):
            self.check_memory(call(), owner, agent)
        else:
            self.expect_not_found(call, mid, owner)

    @rule(data=st.data(), owner=owners, agent=read_agents)
    def history(self, data: st.DataObject, owner: str, agent: str | None) -> None:
        if not self.memories:
            return
        mid = data.draw(st.sampled_from(sorted(self.memories)), label="id")
        known = self.memories[mid]
        call = functools.partial(self.engine.history, mid, owner=owner, agent=agent)
        if not visible(known, owner, agent):
            self.expect_not_found(call, mid, owner)
            return
        versions = call()
        assert [v.memory_id for v in versions] == [mid] * known.versions
        assert [v.version for v in versions] == list(range(1, known.versions + 1))

    @rule(data=st.data(), owner=owners, agent=read_agents)
    def associations(self, data: st.DataObject, owner: str, agent: str | None) -> None:
        if not self.memories:
            return
        mid = data.draw(st.sampled_from(sorted(self.memories)), label="id")
        known = self.memories[mid]
        call = functools.partial(self.engine.associations, mid, owner=owner, agent=agent)
        if not visible(known, owner, agent):
            self.expect_not_found(call, mid, owner)
            return
        links = {(a.source_id, a.target_id) for a in call()}
        assert links == {link for link in self.links if mid in link}
        for link in links:
            assert all(self.memories[end].owner == owner for end in link)

    @rule(owner=owners, data=st.data())
    def store_reads_with_mixed_ids(self, owner: str, data: st.DataObject) -> None:
        """The store's by-id reads, given every id there is (and one that never was), return
        ``owner``'s rows only."""
        every = [*sorted(self.memories), "never-was"]
        ids = data.draw(st.permutations(every), label="ids")
        mine = set(self.ids_of(owner))
        got = self.store.get_many(owner, ids)
        assert set(got) == mine
        for memory in got.values():
            self.check_memory(memory, owner)
        assert set(self.store.embeddings(owner, ids)) == mine
        assert set(self.store.cosines(owner, ids, self.vector("the user"))) == mine
        links = {(a.source_id, a.target_id) for a in self.store.neighbours(owner, ids)}
        assert links == {link for link in self.links if link[0] in mine}
        for mid in self.foreign_ids(owner):
            assert self.store.get(owner, mid) is None
            for read in (self.store.history, self.store.associations):
                with pytest.raises(NotFound):
                    read(owner, mid)

    @rule(query=queries, owner=owners, agent=read_agents, session=sessions)
    def store_scoped_reads(self, query: str, owner: str, agent: str | None, session: str) -> None:
        """The store's scoped reads on their own (the engine filters some results again, which
        would hide a store that leaks): every id they give is in the scope."""
        vec = self.vector(query)
        legs = [
            self.store.vector_search(owner, agent, vec, 50),
            self.store.fts_search(owner, agent, query, 50),
        ]
        for hit in (h for leg in legs for h in leg):
            known = self.memories[hit.id]
            assert visible(known, owner, agent) and known.active, (
                f"a search of {owner}/{agent} found {known.owner}/{known.agent}'s {hit.id}"
            )
        pinned = PinnedQuery(list(MemoryType), 50, PinnedSort.RECENT)
        for memory in self.store.turn_context(owner, session, agent, pinned).pinned:
            self.check_memory(memory, owner, agent)
        if agent != "a2":  # exact scopes: the dedup lookups
            for memory, _ in self.store.nearest(owner, agent, vec, 50):
                assert (memory.owner, memory.agent) == (owner, agent)
                self.check_memory(memory, owner, agent)
            twin = self.store.find_by_hash(owner, agent, content_hash(query))
            if twin is not None:
                assert (twin.owner, twin.agent) == (owner, agent)
                self.check_memory(twin, owner, agent)
        learned = self.store.session_memory_ids(owner, session, None)
        assert learned == {
            mid
            for mid in self.ids_of(owner)
            if self.memories[mid].active and self.memories[mid].memory.session == session
        }

    # ------------------------------------------------------------------ read path
    @rule(
        query=queries,
        owner=owners,
        agent=read_agents,
        mode=st.sampled_from(["hybrid", "vector", "fts"]),
    )
    def search(self, query: str, owner: str, agent: str | None, mode: str) -> None:
        hits = self.engine.search(query, owner=owner, agent=agent, limit=50, mode=mode)
        for hit in hits:
            self.check_memory(hit.memory, owner, agent)
            assert hit.memory.status is Status.ACTIVE

    @rule(session=sessions, text=queries, owner=owners, agent=read_agents)
    def inject(self, session: str, text: str, owner: str, agent: str | None) -> None:
        model = self.sessions[(owner, session)]
        # the window of the coming turn: what it must not show again
        window = {mid for mid, t in model.injected.items() if model.turn + 1 - t < DEPTH}
        injection = self.engine.inject(session, text, owner=owner, agent=agent)
        model.turn += 1
        assert injection.turn == model.turn, (
            f"{owner}'s turn of {session} is {injection.turn}, expected {model.turn}"
        )
        for item in injection.items:
            self.check_memory(item.memory, owner, agent)
            assert item.memory.status is Status.ACTIVE
            assert item.memory.id not in window, f"{item.memory.id} was injected twice"
            model.injected[item.memory.id] = model.turn

    @rule(session=sessions, owner=owners, reason=st.sampled_from(list(ResetReason)))
    def reset_session(self, session: str, owner: str, reason: ResetReason) -> None:
        state = self.engine.reset_session(session, reason, owner=owner)
        model = self.sessions[(owner, session)]
        model.injected.clear()
        model.reset_reason = reason.value
        assert (state.owner, state.turn, dict(state.injected)) == (owner, model.turn, {})

    # ------------------------------------------------------------------ invariants
    @invariant()
    def memories_match_the_model(self) -> None:
        """Every row of every owner is as its own owner's calls left it: nothing another owner
        did changed it (content, hash, confirmations, status, metadata, updated_at)."""
        total = 0
        for owner in OWNERS:
            mine = self.ids_of(owner)
            stored = self.store.get_many(owner, mine)
            assert set(stored) == set(mine)
            for mid, memory in stored.items():
                assert comparable(memory) == comparable(self.memories[mid].memory), (
                    f"{owner}'s memory {mid} changed behind its owner's back"
                )
            active = sum(self.memories[m].active for m in mine)
            assert self.engine.count(owner) == active
            total += active
            for agent in READ_AGENTS:
                listed = {m.id for m in self.engine.list(owner=owner, agent=agent, limit=1000)}
                assert listed == {
                    mid
                    for mid in mine
                    if self.memories[mid].active and visible(self.memories[mid], owner, agent)
                }
        assert self.engine.count() == total

    @invariant()
    def dedup_logs_are_per_owner(self) -> None:
        for owner in OWNERS:
            rows = self.engine.dedup_log(owner=owner, limit=10_000)
            assert all(r.owner == owner for r in rows)
            for r in rows:
                assert r.existing_id is not None and self.memories[r.existing_id].owner == owner
            got = [(r.new_text, r.existing_id, r.decision) for r in reversed(rows)]
            assert got == self.log[owner], f"{owner}'s dedup log differs from its writes"

    @invariant()
    def sessions_are_per_owner(self) -> None:
        """Both owners use the same session ids: each one's turn counter, injected window and
        last reset are its own."""
        for (owner, session), model in self.sessions.items():
            state = self.engine.session(session, owner=owner)
            assert state.owner == owner
            assert state.turn == model.turn, (
                f"{owner}'s {session} is at turn {state.turn}, expected {model.turn}"
            )
            assert dict(state.injected) == {
                mid: t for mid, t in model.injected.items() if model.turn - t < DEPTH
            }
            assert state.last_reset_reason == model.reset_reason
            events = self.store.injection_events(owner, session, limit=1000)
            assert [e["turn"] for e in events] == list(range(model.turn, 0, -1))
            mine = set(self.ids_of(owner))
            assert all(set(e["memory_ids"]) <= mine for e in events)


def test_isolation_state_machine(store_backend: Backend) -> None:
    run_state_machine_as_test(IsolationMachine.on(store_backend), settings=MACHINE_SETTINGS)


# ---------------------------------------------------------------------------------------------
# examples: each by-id method with another owner's id

TEXT = "the user prefers dark mode in the code editor"


@pytest.fixture
def pair(engine: MemoryEngine) -> tuple[MemoryEngine, str, str]:
    """An engine where alice and bob hold the same text (and alice a linked near copy)."""
    a = engine.add(TEXT, owner="alice").memory.id
    engine.add(TEXT + " 3 times", owner="alice")  # guard_keep: linked to `a`
    b = engine.add(TEXT, owner="bob").memory.id
    assert engine.associations(a, owner="alice")
    return engine, a, b


def message(exc: pytest.ExceptionInfo[NotFound], memory_id: str) -> str:
    return str(exc.value).replace(memory_id, "ID")


@pytest.mark.parametrize("method", ["get", "update", "forget", "history", "associations"])
def test_engine_by_id_with_a_foreign_id_is_not_found(
    pair: tuple[MemoryEngine, str, str], method: str
) -> None:
    engine, a, b = pair
    before = engine.get(a, owner="alice")

    def call(memory_id: str) -> Any:
        fn = getattr(engine, method)
        if method == "update":
            return fn(memory_id, "bob rewrote this", owner="bob")
        return fn(memory_id, owner="bob")

    with pytest.raises(NotFound) as foreign:
        call(a)
    with pytest.raises(NotFound) as missing:
        call("no-such-id")
    # the same error as for an id that exists nowhere: nothing tells bob the id is taken
    assert message(foreign, a) == message(missing, "no-such-id")
    assert engine.get(a, owner="alice") == before
    assert engine.history(a, owner="alice") == []
    call(b)  # bob's own id works


def test_engine_agent_scope_by_id(engine: MemoryEngine) -> None:
    """An agent sees its own and the shared memories by id, never another agent's."""
    shared = engine.add(TEXT, owner="alice").memory.id
    own = engine.add(TEXT, owner="alice", agent="a1").memory.id
    assert own != shared
    assert engine.get(shared, owner="alice", agent="a2").id == shared
    with pytest.raises(NotFound):
        engine.get(own, owner="alice", agent="a2")
    with pytest.raises(NotFound):
        engine.forget(own, owner="alice", agent="a2")
    assert engine.get(own, owner="alice", agent="a1").status is Status.ACTIVE


def test_store_reads_with_a_foreign_id_return_nothing(pair: tuple[MemoryEngine, str, str]) -> None:
    engine, a, b = pair
    store = engine.store
    vec = engine.embed_query(TEXT)
    assert store.get("bob", a) is None
    assert store.get("bob", a, agent="a1") is None
    assert set(store.get_many("bob", [a, b])) == {b}
    assert set(store.embeddings("bob", [a, b])) == {b}
    assert set(store.cosines("bob", [a, b], vec)) == {b}
    assert store.neighbours("bob", [a, b]) == []
    assert store.neighbours("alice", [a, b]) != []
    for read in (store.history, store.associations):
        with pytest.raises(NotFound):
            read("bob", a)


def test_store_writes_with_a_foreign_id_raise_and_change_nothing(
    pair: tuple[MemoryEngine, str, str],
) -> None:
    engine, a, b = pair
    store = engine.store
    before = engine.get(a, owner="alice")
    vec = engine.embed_query("overwritten")
    calls: dict[str, Callable[[], object]] = {
        "confirm": lambda: store.confirm("bob", a, {"sources": ["bob"]}),
        "set_status": lambda: store.set_status("bob", a, Status.FORGOTTEN),
        "replace_content": lambda: store.replace_content(
            "bob", a, "overwritten", content_hash("overwritten"), vec, ChangeReason.UPDATE
        ),
        # bob's own id with alice's, in either direction, and alice's alone
        "link mine -> theirs": lambda: store.add_association("bob", b, a, Relation.UPDATES, 1.0),
        "link theirs -> mine": lambda: store.add_association("bob", a, b, Relation.UPDATES, 1.0),
        "link theirs -> theirs": lambda: store.add_association("bob", a, a, Relation.UPDATES, 1.0),
    }
    for name, call in calls.items():
        with pytest.raises(NotFound), store.transaction():
            call()
        assert engine.get(a, owner="alice") == before, name
    assert engine.associations(b, owner="bob") == []
    assert [(x.source_id, x.relation) for x in engine.associations(a, owner="alice")] == [
        (x.source_id, x.relation) for x in store.associations("alice", a)
    ]
    assert engine.history(a, owner="alice") == []


def test_record_access_with_a_foreign_id_counts_nothing(store_backend: Backend) -> None:
    engine = store_backend.engine()
    a = engine.add(TEXT, owner="alice").memory.id
    engine.store.record_access("bob", [a])
    engine.close()
    again = store_backend.engine()
    assert again.get(a, owner="alice").access_count == 0


def test_dedup_log_rows_stay_with_their_owner(engine: MemoryEngine) -> None:
    a = engine.add(TEXT, owner="alice").memory.id
    assert engine.add(TEXT, owner="alice").decision is Decision.HASH_EXACT
    with engine.store.transaction():  # a row the store is told is alice's, naming bob's nothing
        engine.store.log_dedup(NewDedupLog("alice", "x", a, TEXT, 1.0, Decision.HASH_EXACT, None))
    assert engine.dedup_log(owner="bob") == []
    assert {r.owner for r in engine.dedup_log(owner="alice")} == {"alice"}
    # bob's first copy of alice's text is his own memory, not a duplicate of hers
    first = engine.add(TEXT, owner="bob")
    assert first.decision is Decision.ADDED and first.memory.id != a and first.matched_id is None


def test_same_session_id_is_per_owner(engine: MemoryEngine) -> None:
    a = engine.add(TEXT, owner="alice").memory.id
    b = engine.add(TEXT, owner="bob").memory.id
    question = "which mode does the user prefer in the code editor?"
    assert [i.memory.id for i in engine.inject("s", question, owner="alice").items] == [a]
    # alice's injection neither counts bob's turn nor hides bob's copy as "already injected"
    bob = engine.inject("s", question, owner="bob")
    assert (bob.turn, [i.memory.id for i in bob.items]) == (1, [b])
    engine.reset_session("s", "clear", owner="bob")
    alice = engine.session("s", owner="alice")
    assert (alice.turn, dict(alice.injected), alice.last_reset_reason) == (1, {a: 1}, None)
    assert engine.store.injection_events("bob", "s")[0]["memory_ids"] == [b]
    assert [e["memory_ids"] for e in engine.store.injection_events("alice", "s")] == [[a]]


def test_links_across_owners_are_never_read(sqlite_backend: Backend) -> None:
    """Belt and braces: a link between two owners' memories (which no store call can make) is
    written straight into the table, and still neither owner reads it."""
    engine = sqlite_backend.engine()
    a = engine.add(TEXT, owner="alice").memory.id
    b = engine.add(TEXT, owner="bob").memory.id
    conn = engine.store.db.conn  # type: ignore[attr-defined]
    with engine.store.transaction():
        conn.execute(
            "INSERT INTO associations (source_id, target_id, relation, weight, created_at) "
            "VALUES (?, ?, 'related_to', 1.0, '2024-01-01T00:00:00+00:00')",
            (a, b),
        )
    for owner, mine in (("alice", a), ("bob", b)):
        assert engine.associations(mine, owner=owner) == []
        assert engine.store.neighbours(owner, [a, b]) == []


def test_long_sessions_prune_only_their_own_tracking(make_engine: Any) -> None:
    """One owner's many turns in a session prune its own old tracking, never the other's."""
    engine = make_engine(injection={"context_window_depth": 2})
    b = engine.add(TEXT, owner="bob").memory.id
    question = "which mode does the user prefer in the code editor?"
    assert [i.memory.id for i in engine.inject("s", question, owner="bob").items] == [b]
    for _ in range(8):
        engine.inject("s", "ok", owner="alice")  # trivial turns: counted, nothing shown
    assert engine.session("s", owner="alice").turn == 8
    assert dict(engine.session("s", owner="bob").injected) == {b: 1}
    assert engine.inject("s", question, owner="bob").items == ()  # still within bob's window
