"""The duplicate class of the write path (ARCHITECTURE.md, "Write path", step 2): text that differs
from a stored memory only in punctuation, case, whitespace, compatibility forms, quote forms or the
writing of a compound is the same memory; a name's or a number's symbols keep their meaning.

Covers the near-identical guard (memlane.dedup.guard) on those texts, its protections with them,
and the write path through MemoryEngine (hash embedder, scripted cosines, and the real model)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import ScriptedEmbedder
from memlane import Decision, MemoryEngine, Relation
from memlane.dedup.guard import GuardVerdict, compare, compound_variant, content_words

V = GuardVerdict
MakeEngine = Callable[..., MemoryEngine]

STORED = "Bob founded a startup in Berlin."

#: Texts that are the stored memory (``STORED``): each class of the duplicate class.
SAME_MEMORY = {
    "punctuation": "Bob founded a startup in Berlin",
    "case": "BOB FOUNDED A STARTUP IN BERLIN.",
    "whitespace": "  Bob  founded\ta startup\nin Berlin. ",
    "nfkc": "Ｂｏｂ founded a ｓｔａｒｔｕｐ in Berlin.",
    "quotes": "Bob founded a “startup” in ‘Berlin’.",
    "hyphenated": "Bob founded a start-up in Berlin!",
    "spaced": "Bob founded a start up in Berlin.",
}

#: Pairs that look alike but are different memories: a name's or a number's symbols.
LOOK_ALIKES = {
    "c++/c": ("Alice writes the parser in C++.", "Alice writes the parser in C."),
    "c#/c": ("Alice writes the parser in C#.", "Alice writes the parser in C."),
    "3.5/35": ("The service runs on Python 3.5.", "The service runs on Python 35."),
    "v1.2/v12": ("The billing API is at v1.2.", "The billing API is at v12."),
}


# --- the guard ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("existing", "new"),
    [
        ("Bob founded a start-up", "Bob founded a startup"),
        ("Bob founded a start up", "Bob founded a startup"),
        ("Bob founded a start-up", "Bob founded a start up"),
        ("Bob founded two start ups", "Bob founded two startups"),
        ("Alice checks her e-mail daily", "alice checks her email daily."),
        ("Alice set up the database", "Alice setup the database"),
        ("Alice’s “dog” barks", 'ALICE\'S "dog" barks!'),
        ("Bob uses node.js", "Bob uses Node.js."),
    ],
)
def test_compounds_punctuation_and_quotes_compare_same(existing: str, new: str) -> None:
    for a, b in ((existing, new), (new, existing)):
        result = compare(a, b)
        assert result.verdict is V.SAME, result.reason


@pytest.mark.parametrize(
    ("existing", "new", "verdict"),
    [
        ("Alice knows C++", "Alice knows C", V.DIFFERENT),
        ("Alice knows C#", "Alice knows C", V.DIFFERENT),
        ("Alice knows C++", "Alice knows C#", V.DIFFERENT),
        ("It runs on Python 3.5", "It runs on Python 35", V.NUMBERS_DIFFER),
        ("The API is at v1.2", "The API is at v12", V.NUMBERS_DIFFER),
        # Compounds never hide a swap, a number or a negation.
        ("Quaid gave Melina a key ring", "Melina gave Quaid a keyring", V.REORDERED),
        ("Quaid melina guitar ring", "Guitar melina quaid ring", V.REORDERED),  # no "guitarring"
        ("Bob founded a start up in 2019", "Bob founded a startup in 2020", V.NUMBERS_DIFFER),
        ("Bob founded a start up", "Bob never founded a startup", V.NEGATION_DIFFERS),
        # Articles, negations and number words are never joined into a compound.
        ("Alice lives a part of the year in Lisbon", "Alice lives apart of the year in Lisbon", V.DIFFERENT),
        ("He did not ice the cake", "He did notice the cake", V.NEGATION_DIFFERS),
        ("Bob has twenty five cats", "Bob has twentyfive cats", V.NUMBERS_DIFFER),
    ],
)  # fmt: skip
def test_names_numbers_and_protections_stay_apart(
    existing: str, new: str, verdict: GuardVerdict
) -> None:
    result = compare(existing, new)
    assert result.verdict is verdict, result.reason
    assert not result.passes


def test_a_name_keeps_its_symbols_as_a_content_word() -> None:
    assert content_words("I use C++, C# and C.") == ["i", "use", "c++", "c#", "c"]
    assert content_words("She got an A+") == ["she", "got", "a+"]  # not the article "a"


@pytest.mark.parametrize(
    ("existing", "new", "expected"),
    [
        ("Bob founded a start up.", "bob founded a startup", True),
        ("Bob founded a start-up.", "Bob founded a start up", True),
        ("Frank is a cow boy from Texas", "Frank is a cowboy from Texas!", True),
        ("Bob founded a start up", "Bob founded a startup in 2019", False),
        ("Bob founded a start up", "Bob founded startups", False),
        ("Bob founded a start up", "Bob found a startup", False),
        ("Alice lives a part of the year in Lisbon", "Alice lives apart of the year in Lisbon", False),
        ("He did not ice the cake", "He did notice the cake", False),
        ("Alice knows C++", "Alice knows C", False),
        ("Quaid gave Melina a key ring", "Melina gave Quaid a keyring", False),
    ],
)  # fmt: skip
def test_compound_variant(existing: str, new: str, expected: bool) -> None:
    assert compound_variant(existing, new) is expected
    assert compound_variant(new, existing) is expected


# Hypothesis: sentences of distinct content words (no trivial, negation or number words).
CONTENT = ["quaid", "melina", "ring", "garden", "berlin", "guitar", "coffee", "editor", "report"]
SENTENCES = st.lists(st.sampled_from(CONTENT), min_size=2, max_size=6, unique=True)
PUNCT = st.sampled_from(["", ".", ",", "!", "?", ";", ":", '"', "”", "’", ")"])


@st.composite
def noisy(draw: st.DrawFn, words: list[str]) -> str:
    case = draw(st.sampled_from([str.lower, str.upper, str.title]))
    return "  ".join(case(w) + draw(PUNCT) for w in words)


@given(SENTENCES, st.data())
def test_guard_ignores_punctuation_case_and_whitespace(
    words: list[str], data: st.DataObject
) -> None:
    assert compare(" ".join(words), data.draw(noisy(words))).verdict is V.SAME


@given(SENTENCES, st.data())
def test_guard_still_catches_swaps_under_noise(words: list[str], data: st.DataObject) -> None:
    i, j = sorted(
        data.draw(st.lists(st.integers(0, len(words) - 1), min_size=2, max_size=2, unique=True))
    )
    swapped = [*words]
    swapped[i], swapped[j] = words[j], words[i]
    assert compare(" ".join(words), data.draw(noisy(swapped))).verdict is V.REORDERED


@given(SENTENCES, st.integers(0, 99), st.integers(100, 999), st.data())
def test_guard_still_catches_numbers_and_negation_under_noise(
    words: list[str], a: int, b: int, data: st.DataObject
) -> None:
    text = " ".join(words)
    assert compare(f"{text} {a}", data.draw(noisy([*words, str(b)]))).verdict is V.NUMBERS_DIFFER
    assert compare(f"{a}.{b} {text}", f"{a}{b} {text}").verdict is V.NUMBERS_DIFFER
    negated = data.draw(noisy([words[0], "never", *words[1:]]))
    assert compare(text, negated).verdict is V.NEGATION_DIFFERS


# --- the write path ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [k for k in SAME_MEMORY if k != "spaced"])
def test_same_memory_is_hash_exact(engine: MemoryEngine, kind: str) -> None:
    first = engine.add(STORED)
    r = engine.add(SAME_MEMORY[kind])
    assert r.decision is Decision.HASH_EXACT
    assert r.memory.id == first.memory.id and r.memory.content == STORED
    assert engine.count() == 1


@pytest.mark.parametrize("cos", [0.99, 0.9, 0.5])
@pytest.mark.parametrize("order", ["joined first", "spaced first"])
def test_a_spaced_compound_is_auto_rejected_at_any_cosine(
    make_engine: MakeEngine, cos: float, order: str
) -> None:
    old, new = STORED, SAME_MEMORY["spaced"]
    if order == "spaced first":
        old, new = new, old
    emb = ScriptedEmbedder()
    emb.place(old)
    emb.place(new, like=old, cos=cos)
    engine = make_engine(embedder=emb)
    first = engine.add(old)
    r = engine.add(new)
    assert r.decision is Decision.AUTO_REJECT
    assert r.memory.id == first.memory.id and r.memory.content == old
    assert r.memory.confirmations == 1
    assert r.reasoning and "compound" in r.reasoning
    assert engine.count() == 1
    (row,) = engine.dedup_log()
    assert row.decision is Decision.AUTO_REJECT and row.existing_id == first.memory.id


def test_a_spaced_compound_with_another_word_is_not_a_variant(make_engine: MakeEngine) -> None:
    emb = ScriptedEmbedder()
    emb.place(STORED)
    emb.place("Bob founded a start up in Berlin in 2019.", like=STORED, cos=0.99)
    engine = make_engine(embedder=emb)
    engine.add(STORED)
    r = engine.add("Bob founded a start up in Berlin in 2019.")
    assert r.decision is Decision.GUARD_KEEP  # a number added without content words
    assert engine.count() == 2


@pytest.mark.parametrize("pair", list(LOOK_ALIKES))
def test_look_alikes_get_a_second_linked_row_even_at_high_cosine(
    make_engine: MakeEngine, pair: str
) -> None:
    old, new = LOOK_ALIKES[pair]
    emb = ScriptedEmbedder()
    emb.place(old)
    emb.place(new, like=old, cos=0.99)
    engine = make_engine(embedder=emb)
    first = engine.add(old)
    r = engine.add(new)
    assert r.decision is Decision.GUARD_KEEP, r.reasoning
    assert r.memory.id != first.memory.id and r.memory.content == new.strip()
    assert engine.count() == 2
    assert any(
        {a.source_id, a.target_id} == {first.memory.id, r.memory.id}
        and a.relation is Relation.RELATED_TO
        for a in engine.associations(r.memory.id)
    )


@pytest.mark.parametrize("pair", list(LOOK_ALIKES))
def test_look_alikes_are_two_memories_with_the_hash_embedder(
    engine: MemoryEngine, pair: str
) -> None:
    old, new = LOOK_ALIKES[pair]
    engine.add(old)
    r = engine.add(new)
    assert not r.duplicate
    assert engine.count() == 2


# --- with the real model -------------------------------------------------------------------------


@pytest.mark.model
def test_model_same_memory_is_one_row(model_engine: MemoryEngine) -> None:
    first = model_engine.add(STORED).memory
    got = {kind: model_engine.add(text).decision for kind, text in SAME_MEMORY.items()}
    assert got == {
        **{kind: Decision.HASH_EXACT for kind in SAME_MEMORY},
        "spaced": Decision.AUTO_REJECT,
    }
    assert model_engine.count() == 1
    assert model_engine.get(first.id).confirmations == len(SAME_MEMORY)


@pytest.mark.model
@pytest.mark.parametrize(
    ("joined", "spaced"),
    [
        ("Alice checks her email every morning.", "Alice checks her e mail every morning."),
        ("The team plans on a whiteboard.", "The team plans on a white board."),
        ("Frank is a cowboy from Texas.", "Frank is a cow boy from Texas."),  # cosine 0.84
        ("Dan keeps his notebook on the desk.", "Dan keeps his note book on the desk."),
    ],
)
def test_model_spaced_compounds_are_one_row(
    model_engine: MemoryEngine, joined: str, spaced: str
) -> None:
    for owner, old, new in (("a", joined, spaced), ("b", spaced, joined)):
        first = model_engine.add(old, owner=owner).memory
        r = model_engine.add(new, owner=owner)
        assert r.decision is Decision.AUTO_REJECT and r.memory.id == first.id
        assert model_engine.count(owner) == 1


@pytest.mark.model
@pytest.mark.parametrize("pair", list(LOOK_ALIKES))
def test_model_look_alikes_are_two_rows(model_engine: MemoryEngine, pair: str) -> None:
    old, new = LOOK_ALIKES[pair]
    first = model_engine.add(old).memory
    r = model_engine.add(new)
    assert not r.duplicate and r.memory.id != first.id
    assert model_engine.count() == 2
