"""The write path (ARCHITECTURE.md, "Write path"): every decision, provenance, the dedup log, bad
input, failures, and the other writes (update, forget)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from conftest import FakeLLM, FlakyEmbedder, ScriptedEmbedder, snapshot
from memlane import (
    INJECTION_BLOCK_PREFIX,
    Decision,
    EmbeddingError,
    InvalidMemory,
    LLMError,
    LLMVerdict,
    MemoryEngine,
    MemoryInput,
    NotFound,
    Relation,
    Status,
)

MakeEngine = Callable[..., MemoryEngine]

BASE = "Alice prefers dark mode in every editor she uses at work"


def related(engine: MemoryEngine, a: str, b: str) -> bool:
    return any(
        {x.source_id, x.target_id} == {a, b} and x.relation is Relation.RELATED_TO
        for x in engine.associations(a)
    )


def log_rows(engine: MemoryEngine, owners: tuple[str, ...] = ("default", "alice")) -> list[Any]:
    """The dedup-log rows of ``owners`` (the log is read one owner at a time), newest first."""
    rows = [r for owner in owners for r in engine.dedup_log(owner=owner, limit=1000)]
    return sorted(rows, key=lambda r: r.id, reverse=True)


# --- added / hash_exact ------------------------------------------------------------------------


def test_first_memory_is_added_with_type_defaults(engine: MemoryEngine) -> None:
    r = engine.add(BASE, type="preference", owner="alice", agent="ui", session="s1", source="chat")
    assert r.decision is Decision.ADDED and r.decision.value == "added"
    assert not r.duplicate
    assert r.matched_id is None
    m = r.memory
    assert (m.content, m.type, m.owner, m.agent, m.session, m.source) == (
        BASE,
        "preference",
        "alice",
        "ui",
        "s1",
        "chat",
    )
    assert m.importance == 0.7  # preference default
    assert m.status is Status.ACTIVE and m.confirmations == 0
    assert engine.get(m.id, owner="alice") == m
    assert engine.get(m.id, owner="alice", agent="ui") == m
    for other in ({"owner": "bob"}, {}, {"owner": "alice", "agent": "cli"}):
        with pytest.raises(NotFound):
            engine.get(m.id, **other)  # outside the scope: as if it did not exist
    assert log_rows(engine) == []  # plain `added` is not logged


def test_content_is_stripped_and_importance_kept(engine: MemoryEngine) -> None:
    m = engine.add(f"  {BASE}\n", importance=0.25).memory
    assert m.content == BASE
    assert m.importance == 0.25


@pytest.mark.parametrize(
    "variant",
    [
        BASE,
        BASE.upper(),
        BASE.lower(),
        f"   {BASE}   ",
        BASE.replace(" ", "  \t "),
        BASE.replace(" ", "\n"),
        "Ａｌｉｃｅ" + BASE[5:],  # full-width letters: NFKC-normalised
    ],
    ids=["same", "upper", "lower", "padded", "tabs", "newlines", "fullwidth"],
)
def test_hash_exact_for_case_and_whitespace_variants(engine: MemoryEngine, variant: str) -> None:
    first = engine.add(BASE, owner="alice")
    r = engine.add(variant, owner="alice")
    assert r.decision is Decision.HASH_EXACT
    assert r.duplicate
    assert r.memory.id == first.memory.id == r.matched_id
    assert r.similarity == 1.0
    assert r.memory.content == BASE  # the stored text is untouched
    assert r.memory.confirmations == 1
    assert engine.count("alice") == 1
    (row,) = log_rows(engine)
    assert row.decision is Decision.HASH_EXACT
    assert row.review_status == "confirmed"  # hash hits are auto-confirmed
    assert row.existing_id == first.memory.id and row.new_text == variant.strip()


def test_confirmations_count_every_repeat(engine: MemoryEngine) -> None:
    mid = engine.add(BASE).memory.id
    for n in range(1, 4):
        assert engine.add(BASE).memory.confirmations == n
    assert engine.get(mid).confirmations == 3
    assert engine.count() == 1


def test_hyphen_only_difference_is_auto_rejected(engine: MemoryEngine) -> None:
    # Not the same hash ("dark-mode" is joined to "darkmode", "dark mode" is not) but the same
    # words: the hash embedder gives cosine 1 and the guard says same.
    first = engine.add(BASE)
    r = engine.add(BASE.replace("dark mode", "dark-mode"))
    assert r.decision is Decision.AUTO_REJECT
    assert r.memory.id == first.memory.id and r.memory.content == BASE
    assert r.memory.confirmations == 1
    assert engine.count() == 1
    (row,) = log_rows(engine)
    assert row.decision is Decision.AUTO_REJECT and row.review_status == "unreviewed"
    assert row.similarity == pytest.approx(1.0)


# --- thresholds, at exact cosines ----------------------------------------------------------------

EXTENDED = BASE + " daily"
TABS = "The user prefers tabs over spaces in Python code"
NARROWED = "The user prefers tabs over spaces in Python"  # guard: narrows (drops "code")
REWORDED = "Alice likes dark mode in every editor she uses at work"  # guard: different
SWAPPED = ("Quaid gave Melina a ring", "Melina gave Quaid a ring")
NUMBERS = ("Quaid is 35 years old", "Quaid is 36 years old")
NEGATED = ("Bob likes coffee in the morning", "Bob does not like coffee in the morning")
ARTICLE = BASE.replace("dark mode", "the dark mode")  # guard: same
# With the hash embedder: cosine ~0.94 (gray zone), guard "same".
SHORT = "Alice prefers dark mode in every editor"
SHORT_THE = "Alice prefers the dark mode in every editor"


@pytest.mark.parametrize(
    ("old", "new", "cos", "decision"),
    [
        (BASE, ARTICLE, 0.79, Decision.ADDED),
        (BASE, ARTICLE, 0.801, Decision.GRAY_KEEP),
        (BASE, ARTICLE, 0.94, Decision.GRAY_KEEP),
        (BASE, REWORDED, 0.90, Decision.GRAY_KEEP),
        (BASE, ARTICLE, 0.969, Decision.GRAY_KEEP),
        (BASE, ARTICLE, 0.971, Decision.REPLACED),
        (BASE, EXTENDED, 0.971, Decision.REPLACED),
        (BASE, EXTENDED, 0.99, Decision.REPLACED),  # extends is not "same": never auto_reject
        (TABS, NARROWED, 0.971, Decision.AUTO_REJECT),  # the existing text says more
        (BASE, ARTICLE, 0.979, Decision.REPLACED),
        (BASE, ARTICLE, 0.981, Decision.AUTO_REJECT),
        (BASE, ARTICLE, 1.0, Decision.AUTO_REJECT),
        (BASE, REWORDED, 0.99, Decision.GUARD_KEEP),  # other words: not merged without an LLM
        (*SWAPPED, 0.99, Decision.GUARD_KEEP),
        (*SWAPPED, 0.90, Decision.GUARD_KEEP),
        (*NUMBERS, 0.99, Decision.GUARD_KEEP),
        (*NEGATED, 0.99, Decision.GUARD_KEEP),
        (*NEGATED, 0.79, Decision.ADDED),
    ],
)
def test_decision_by_cosine_and_guard(
    make_engine: MakeEngine, old: str, new: str, cos: float, decision: Decision
) -> None:
    emb = ScriptedEmbedder()
    emb.place(old)
    emb.place(new, like=old, cos=cos)
    engine = make_engine(embedder=emb)
    first = engine.add(old).memory
    r = engine.add(new)
    assert r.decision is decision, r.reasoning
    assert r.similarity == pytest.approx(cos, abs=1e-5)
    kept_new = decision in {Decision.ADDED, Decision.GRAY_KEEP, Decision.GUARD_KEEP}
    assert engine.count() == (2 if kept_new else 1)
    assert r.duplicate is (not kept_new)
    if decision is Decision.ADDED:
        assert r.matched_id is None
        assert log_rows(engine) == []
    else:
        assert r.matched_id == first.id
        (row,) = log_rows(engine)
        assert row.decision is decision
        assert row.existing_id == first.id and row.existing_text == old and row.new_text == new
        assert row.similarity == pytest.approx(cos, abs=1e-5)
    if decision in {Decision.GRAY_KEEP, Decision.GUARD_KEEP}:
        assert r.memory.id != first.id and r.memory.content == new
        assert related(engine, r.memory.id, first.id)
        assert engine.get(first.id).content == old  # both facts are kept
    if decision is Decision.REPLACED:
        assert r.memory.id == first.id
        assert engine.get(first.id).content == new
        assert [v.content for v in engine.history(first.id)] == [old]
    if decision is Decision.AUTO_REJECT:
        assert engine.get(first.id).content == old
        assert engine.get(first.id).confirmations == 1


def test_thresholds_come_from_settings(make_engine: MakeEngine) -> None:
    emb = ScriptedEmbedder()
    emb.place(BASE)
    emb.place(ARTICLE, like=BASE, cos=0.6)
    engine = make_engine(embedder=emb, dedup={"gray_low": 0.5, "replace": 0.7, "auto_reject": 0.9})
    engine.add(BASE)
    assert engine.add(ARTICLE).decision is Decision.GRAY_KEEP


def test_replaced_keeps_the_old_text_in_history(make_engine: MakeEngine) -> None:
    engine = make_engine(dedup={"replace": 0.95})
    first = engine.add(BASE, source="chat").memory
    r = engine.add(EXTENDED, source="import")
    assert r.decision is Decision.REPLACED  # hash embedder: cosine ~0.957, guard "extends"
    assert r.memory.id == first.id
    assert engine.get(first.id).content == EXTENDED
    (version,) = engine.history(first.id)
    assert version.content == BASE and version.version == 1 and version.reason == "replaced"
    assert engine.count() == 1
    # the replaced text is what search finds now
    assert engine.search("daily", mode="fts")[0].memory.id == first.id


def test_gray_keep_links_the_two(engine: MemoryEngine) -> None:
    first = engine.add(SHORT).memory
    r = engine.add(SHORT_THE)  # hash embedder: cosine ~0.94
    assert r.decision is Decision.GRAY_KEEP
    assert related(engine, r.memory.id, first.id)
    (assoc,) = engine.associations(first.id)
    assert assoc.weight == pytest.approx(r.similarity, abs=1e-3)


def test_narrowed_text_is_auto_rejected(make_engine: MakeEngine) -> None:
    engine = make_engine(dedup={"replace": 0.95})
    first = engine.add(TABS).memory
    r = engine.add(NARROWED)  # hash embedder: cosine ~0.953
    assert r.decision is Decision.AUTO_REJECT
    assert r.memory.id == first.id and engine.get(first.id).content == TABS


# --- the guard with the real model (cosine is high for these) ----------------------------------


@pytest.mark.model
@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Quaid gave Melina a ring", "Melina gave Quaid a ring"),
        ("The meeting moved from Monday to Friday", "The meeting moved from Friday to Monday"),
        ("Quaid is 35 years old", "Quaid is 36 years old"),
        (
            "Caroline went to the LGBTQ support group on 7 May 2023",
            "Caroline went to the LGBTQ support group on 8 May 2023",
        ),
        ("Alice is allergic to peanuts", "Alice is not allergic to peanuts"),
    ],
    ids=["swapped-names", "swapped-days", "number", "date", "negation"],
)
def test_guard_keeps_swaps_numbers_and_negations(
    model_engine: MemoryEngine, old: str, new: str
) -> None:
    first = model_engine.add(old).memory
    r = model_engine.add(new)
    assert r.similarity is not None and r.similarity >= model_engine.settings.dedup.replace
    assert r.decision is Decision.GUARD_KEEP, r.reasoning
    assert r.memory.id != first.id
    assert {m.content for m in model_engine.list()} == {old, new}
    assert related(model_engine, first.id, r.memory.id)
    (row,) = log_rows(model_engine)
    assert row.decision is Decision.GUARD_KEEP and row.reasoning


@pytest.mark.model
def test_model_rewording_with_an_article_is_not_stored_twice(model_engine: MemoryEngine) -> None:
    first = model_engine.add(BASE).memory
    r = model_engine.add(ARTICLE)
    assert r.duplicate, r.decision
    assert model_engine.count() == 1 and r.memory.id == first.id


# --- with an LLM -------------------------------------------------------------------------------


def gray_pair(make_engine: MakeEngine, llm: FakeLLM, cos: float, new: str = ARTICLE) -> Any:
    emb = ScriptedEmbedder()
    emb.place(BASE)
    emb.place(new, like=BASE, cos=cos)
    engine = make_engine(embedder=emb, llm=llm)
    first = engine.add(BASE, source="chat").memory
    return engine, first


def test_an_invalid_llm_merge_keeps_both_texts(make_engine: MakeEngine) -> None:
    llm = FakeLLM(LLMVerdict("merge", merged_text="[Context from memory]\n[fact] x"))
    engine, first = gray_pair(make_engine, llm, 0.92)
    r = engine.add(ARTICLE)
    assert r.decision is Decision.FALLBACK_KEEP and not r.duplicate
    assert engine.get(first.id).content == BASE and engine.history(first.id) == []
    assert engine.count() == 2
    assert [row.decision for row in log_rows(engine)] == [Decision.FALLBACK_KEEP]


def test_llm_merge_replaces_text_and_keeps_history(make_engine: MakeEngine) -> None:
    merged = "Alice prefers dark mode in every editor and terminal she uses at work"
    llm = FakeLLM(LLMVerdict("merge", merged_text=f" {merged} ", reasoning="same preference"))
    engine, first = gray_pair(make_engine, llm, 0.92)
    r = engine.add(ARTICLE, source="import")
    assert llm.calls == [(BASE, ARTICLE)]
    assert r.decision is Decision.LLM_MERGE and r.duplicate
    assert r.memory.id == first.id and r.memory.content == merged
    assert engine.get(first.id).content == merged
    assert [v.content for v in engine.history(first.id)] == [BASE]
    assert engine.history(first.id)[0].reason == "llm_merge"
    assert engine.count() == 1
    (row,) = log_rows(engine)
    assert row.decision is Decision.LLM_MERGE and row.reasoning == "same preference"
    # the merged text is indexed: its new word is searchable
    assert engine.search("terminal", mode="fts")[0].memory.id == first.id


def test_llm_reject_keeps_existing_and_confirms(make_engine: MakeEngine) -> None:
    llm = FakeLLM(LLMVerdict("reject", reasoning="adds nothing"))
    engine, first = gray_pair(make_engine, llm, 0.92)
    r = engine.add(ARTICLE)
    assert r.decision is Decision.LLM_REJECT and r.duplicate
    assert r.memory.id == first.id and r.memory.content == BASE
    assert r.memory.confirmations == 1
    assert engine.count() == 1
    assert log_rows(engine)[0].decision is Decision.LLM_REJECT


def test_llm_keep_stores_both_and_links(make_engine: MakeEngine) -> None:
    llm = FakeLLM(LLMVerdict("keep", reasoning="different"))
    engine, first = gray_pair(make_engine, llm, 0.92)
    r = engine.add(ARTICLE)
    assert r.decision is Decision.LLM_KEEP and not r.duplicate
    assert r.memory.id != first.id
    assert engine.count() == 2
    assert related(engine, first.id, r.memory.id)
    assert log_rows(engine)[0].decision is Decision.LLM_KEEP


@pytest.mark.parametrize("error", [LLMError("timeout after 20s"), RuntimeError("HTTP 500")])
def test_llm_failure_on_near_identical_text_falls_back_to_reject(
    make_engine: MakeEngine, error: Exception
) -> None:
    llm = FakeLLM(error=error)
    engine, first = gray_pair(make_engine, llm, 0.975)
    r = engine.add(ARTICLE)
    assert llm.calls
    assert r.decision is Decision.FALLBACK_REJECT and r.duplicate
    assert r.memory.id == first.id and engine.count() == 1
    (row,) = log_rows(engine)
    assert row.decision is Decision.FALLBACK_REJECT and "LLM failed" in (row.reasoning or "")


@pytest.mark.parametrize(("new", "cos"), [(ARTICLE, 0.92), (REWORDED, 0.97)])
def test_llm_failure_otherwise_falls_back_to_keep(
    make_engine: MakeEngine, new: str, cos: float
) -> None:
    engine, first = gray_pair(make_engine, FakeLLM(error=LLMError("down")), cos, new)
    r = engine.add(new)
    assert r.decision is Decision.FALLBACK_KEEP and not r.duplicate
    assert engine.count() == 2
    assert related(engine, first.id, r.memory.id)
    assert log_rows(engine)[0].decision is Decision.FALLBACK_KEEP


@pytest.mark.parametrize(
    ("new", "cos", "decision"),
    [
        (SWAPPED[1], 0.99, Decision.GUARD_KEEP),
        (ARTICLE, 0.99, Decision.AUTO_REJECT),
        # below gray_low; 0.80 itself was float rounding (usearch 0.79999999, numpy and
        # pgvector 0.80000001)
        (ARTICLE, 0.79, Decision.ADDED),
    ],
)
def test_llm_not_asked_when_the_rules_decide(
    make_engine: MakeEngine, new: str, cos: float, decision: Decision
) -> None:
    llm = FakeLLM(error=AssertionError("the LLM must not be called"))
    old = SWAPPED[0] if new == SWAPPED[1] else BASE
    emb = ScriptedEmbedder()
    emb.place(old)
    emb.place(new, like=old, cos=cos)
    engine = make_engine(embedder=emb, llm=llm)
    engine.add(old)
    assert engine.add(new).decision is decision
    assert llm.calls == []


# --- scope and provenance ----------------------------------------------------------------------


def test_dedup_never_crosses_owners(engine: MemoryEngine) -> None:
    a = engine.add(BASE, owner="alice")
    b = engine.add(BASE, owner="bob")
    c = engine.add(BASE + ".", owner="carol")
    assert [a.decision, b.decision, c.decision] == [Decision.ADDED] * 3
    assert len({a.memory.id, b.memory.id, c.memory.id}) == 3
    assert engine.count("alice") == engine.count("bob") == engine.count("carol") == 1
    assert log_rows(engine) == []


def test_batch_dedup_never_crosses_owners(engine: MemoryEngine) -> None:
    results = engine.add_many(
        [MemoryInput(BASE, owner="alice"), MemoryInput(BASE, owner="bob"), {"content": BASE}]
    )
    assert [r.decision for r in results] == [Decision.ADDED] * 3


def test_duplicates_leave_their_provenance(engine: MemoryEngine) -> None:
    first = engine.add(
        BASE,
        source="chat",
        session="s1",
        metadata={"tags": ["ui", "editor"], "lang": "en", "nested": {"a": 1}},
    ).memory
    engine.add(
        BASE.upper(),
        source="import",
        session="s2",
        metadata={"tags": ["editor", "work"], "lang": "fr", "nested": {"b": 2}, "extra": True},
    )
    dark_mode = BASE.replace("dark mode", "dark-mode")
    engine.add(dark_mode, source="import", session="s3", metadata={"lang": "en"})  # auto_reject
    m = engine.get(first.id)
    assert m.confirmations == 2
    assert m.metadata["tags"] == ["ui", "editor", "work"]  # lists unioned, order kept
    assert m.metadata["lang"] == ["en", "fr"]  # differing scalars: both kept
    assert m.metadata["nested"] == {"a": 1, "b": 2}
    assert m.metadata["extra"] is True
    assert m.metadata["sources"] == ["import"]
    assert m.metadata["sessions"] == ["s2", "s3"]
    assert (m.source, m.session) == ("chat", "s1")  # the original provenance is untouched


def test_replace_and_merge_leave_provenance(make_engine: MakeEngine) -> None:
    engine = make_engine(dedup={"replace": 0.95})  # hash embedder: EXTENDED is at ~0.957
    first = engine.add(BASE, source="chat", metadata={"tags": ["a"]}).memory
    r = engine.add(EXTENDED, source="import", session="s9", metadata={"tags": ["b"]})
    assert r.decision is Decision.REPLACED
    m = engine.get(first.id)
    assert m.metadata["tags"] == ["a", "b"]
    assert m.metadata["sources"] == ["import"] and m.metadata["sessions"] == ["s9"]
    assert m.confirmations == 1


# --- batches -----------------------------------------------------------------------------------


def test_add_many_dedups_within_the_batch(make_engine: MakeEngine) -> None:
    engine = make_engine(dedup={"replace": 0.95})  # hash embedder: EXTENDED is at ~0.957
    results = engine.add_many(
        [
            MemoryInput(BASE, session="s1"),
            {"content": BASE.upper(), "session": "s2"},
            MemoryInput(BASE.replace("dark mode", "dark-mode")),  # same words, another hash
            MemoryInput(EXTENDED),
            MemoryInput("Bob drinks green tea every afternoon"),
            MemoryInput(BASE + " !"),
        ]
    )
    assert [r.decision for r in results] == [
        Decision.ADDED,
        Decision.HASH_EXACT,
        Decision.AUTO_REJECT,
        Decision.REPLACED,
        Decision.ADDED,
        Decision.AUTO_REJECT,  # narrows the text that this batch just replaced
    ]
    first = results[0].memory.id
    assert {r.matched_id for r in results[1:4]} == {first}
    assert results[5].matched_id == first
    assert engine.count() == 2
    assert engine.get(first).content == EXTENDED
    assert engine.get(first).confirmations == 4
    assert engine.get(first).metadata["sessions"] == ["s2"]
    assert [v.content for v in engine.history(first)] == [BASE]
    assert sorted(r.decision.value for r in log_rows(engine)) == [
        "auto_reject",
        "auto_reject",
        "hash_exact",
        "replaced",
    ]


def test_add_many_against_the_store_and_itself(engine: MemoryEngine) -> None:
    engine.add(SHORT)
    results = engine.add_many(
        [{"content": SHORT}, {"content": SHORT_THE}, {"content": "Trains leave at nine"}]
    )
    assert [r.decision for r in results] == [Decision.HASH_EXACT, Decision.GRAY_KEEP, "added"]


def test_add_many_empty_batch(engine: MemoryEngine) -> None:
    assert engine.add_many([]) == []


# --- bad input ---------------------------------------------------------------------------------

BAD_INPUT: list[tuple[dict[str, Any], str]] = [
    ({"content": ""}, "empty"),
    ({"content": "   \n\t "}, "empty"),
    ({"content": "x" * 50_001}, "50,000"),
    ({"content": f"{INJECTION_BLOCK_PREFIX}\n[Relevant to this message]\n[fact] x"}, "injected"),
    ({"content": f"  {INJECTION_BLOCK_PREFIX} [fact] x"}, "injected"),
    ({"content": "A fine memory", "type": "opinion"}, "valid types: identity, goal"),
    ({"content": "A fine memory", "importance": 2.0}, "0 to 1"),
    ({"content": "A fine memory", "importance": -0.1}, "0 to 1"),
    ({"content": "A fine memory", "importance": float("nan")}, "0 to 1"),
    ({"content": "A fine memory", "owner": ""}, "owner"),
    ({"content": "A fine memory", "owner": "  "}, "owner"),
    ({"content": "A fine memory", "agent": ""}, "agent"),
    ({"content": "A fine memory", "metadata": {"x": object()}}, "JSON"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD_INPUT)
def test_bad_input_raises_and_writes_nothing(
    engine: MemoryEngine, kwargs: dict[str, Any], message: str
) -> None:
    engine.add(BASE)
    engine.add(BASE)  # one dedup_log row
    before = snapshot(engine)
    kwargs = dict(kwargs)  # the parameter's dict is shared by every backend's run
    content = kwargs.pop("content")
    with pytest.raises(InvalidMemory, match=message):
        engine.add(content, **kwargs)
    assert snapshot(engine) == before


def test_unknown_type_lists_every_valid_type(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidMemory) as info:
        engine.add("A fine memory", type="opinion")
    for name in ("identity", "goal", "decision", "todo", "preference", "fact", "event"):
        assert name in str(info.value)
    assert "observation" in str(info.value)


def test_max_chars_is_a_setting(make_engine: MakeEngine) -> None:
    engine = make_engine(dedup={"max_chars": 10})
    engine.add("0123456789")
    with pytest.raises(InvalidMemory, match="over the limit of 10"):
        engine.add("0123456789a")


def test_one_bad_item_in_a_batch_writes_nothing(engine: MemoryEngine) -> None:
    engine.add(BASE)
    before = snapshot(engine)
    with pytest.raises(InvalidMemory, match="item 2"):
        engine.add_many(
            [
                MemoryInput("Bob drinks green tea every afternoon"),
                MemoryInput(BASE),
                MemoryInput("", type="fact"),
                MemoryInput("Carol moved to Lisbon in 2021"),
            ]
        )
    assert snapshot(engine) == before
    with pytest.raises(InvalidMemory, match="unknown field"):
        engine.add_many([{"content": "ok text here"}, {"content": "x", "colour": "red"}])
    with pytest.raises(InvalidMemory, match="content"):
        engine.add_many([{"content": "ok text here"}, {"type": "fact"}])
    assert snapshot(engine) == before


def test_embedding_failure_writes_nothing(make_engine: MakeEngine) -> None:
    emb = FlakyEmbedder()
    engine = make_engine(embedder=emb)
    engine.add(BASE)
    before = snapshot(engine)
    for mode in ("raise", "nan"):
        emb.mode = mode
        with pytest.raises(EmbeddingError, match=r"Nothing was written|NaN"):
            engine.add("Bob drinks green tea every afternoon")
        with pytest.raises(EmbeddingError):
            engine.add_many([MemoryInput("Carol moved to Lisbon"), MemoryInput("Dan plays cello")])
        assert snapshot(engine) == before
    # an exact repeat needs no embedding: it is still recognised while the model is down
    emb.mode = "raise"
    assert engine.add(BASE.lower()).decision is Decision.HASH_EXACT
    emb.mode = None
    assert engine.add("Bob drinks green tea every afternoon").decision is Decision.ADDED


# --- update / forget / get ---------------------------------------------------------------------


def test_update_keeps_history(engine: MemoryEngine) -> None:
    mid = engine.add(BASE, type="preference").memory.id
    updated = engine.update(mid, "Alice prefers light mode now")
    assert updated.id == mid and updated.content == "Alice prefers light mode now"
    assert updated.type == "preference"
    engine.update(mid, "Alice prefers solarized")
    history = engine.history(mid)
    assert [(v.version, v.content, v.reason) for v in history] == [
        (1, BASE, "update"),
        (2, "Alice prefers light mode now", "update"),
    ]
    assert engine.get(mid).content == "Alice prefers solarized"
    assert [h.memory.id for h in engine.search("solarized", mode="fts")] == [mid]
    assert engine.search("light", mode="fts") == []


def test_update_rejects_bad_text_and_keeps_the_memory(engine: MemoryEngine) -> None:
    mid = engine.add(BASE).memory.id
    for bad in ("", f"{INJECTION_BLOCK_PREFIX}\n[fact] x", "y" * 50_001):
        with pytest.raises(InvalidMemory):
            engine.update(mid, bad)
    assert engine.get(mid).content == BASE
    assert engine.history(mid) == []


def test_forget_hides_everywhere(engine: MemoryEngine) -> None:
    keep = engine.add("Bob drinks green tea every afternoon").memory
    gone = engine.add(BASE).memory
    forgotten = engine.forget(gone.id)
    assert forgotten.status is Status.FORGOTTEN
    with pytest.raises(NotFound):
        engine.get(gone.id)
    assert engine.get(gone.id, include_inactive=True).status is Status.FORGOTTEN
    assert [m.id for m in engine.list()] == [keep.id]
    for mode in ("hybrid", "vector", "fts"):
        assert gone.id not in {h.memory.id for h in engine.search(BASE, mode=mode)}
    assert engine.count() == 1
    with pytest.raises(NotFound):
        engine.forget(gone.id)
    # the same text offered again is a new memory, not a hit on the forgotten one
    again = engine.add(BASE)
    assert again.decision is Decision.ADDED and again.memory.id != gone.id


@pytest.mark.parametrize("call", ["get", "update", "forget", "history"])
def test_unknown_id_is_not_found(engine: MemoryEngine, call: str) -> None:
    args: tuple[Any, ...] = ("no-such-id",) if call != "update" else ("no-such-id", "text")
    with pytest.raises(NotFound, match="no-such-id"):
        getattr(engine, call)(*args)


def test_list_filters_and_orders(engine: MemoryEngine) -> None:
    a = engine.add("Alice is the team lead", type="identity").memory
    b = engine.add("Ship the release on Friday", type="todo").memory
    c = engine.add("Bob drinks green tea every afternoon", owner="bob").memory
    assert [m.id for m in engine.list()] == [b.id, a.id]  # newest first
    assert [m.id for m in engine.list(type="todo")] == [b.id]
    assert [m.id for m in engine.list(owner="bob")] == [c.id]
    assert len(engine.list(limit=1)) == 1


def test_dedup_log_filters(engine: MemoryEngine) -> None:
    engine.add(BASE, owner="alice")
    engine.add(BASE, owner="alice")
    engine.add(BASE, owner="bob")
    engine.add(BASE.replace("dark mode", "dark-mode"), owner="bob")
    assert [r.decision for r in engine.dedup_log(owner="bob")] == [Decision.AUTO_REJECT]
    assert [r.owner for r in engine.dedup_log(owner="alice", decision="hash_exact")] == ["alice"]
    assert engine.dedup_log(owner="bob", decision="hash_exact") == []
    assert engine.dedup_log() == []  # the default owner logged nothing
    assert len(engine.dedup_log(owner="alice", limit=1)) == 1


@pytest.mark.model
def test_the_shipped_examples_get_their_documented_decisions(model_engine: MemoryEngine) -> None:
    """examples/memories.jsonl states the decision each line should get with the default model
    and thresholds (docs/dedup.md): a calibration change that alters one shows up here."""
    import json
    from pathlib import Path

    path = Path(__file__).parents[1] / "examples" / "memories.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    results = model_engine.add_many(rows)
    got = [r.decision.value for r in results]
    want = [
        "added" if row["metadata"]["expect"] == "distinct" else row["metadata"]["expect"]
        for row in rows
    ]
    assert got == want
    assert {"hash_exact", "auto_reject", "guard_keep", "gray_keep"} <= set(got)
