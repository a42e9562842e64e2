"""The in-memory BM25 index behind the SQLite store's full-text leg: scores against the textbook
formula, tokenisation shared by memories and queries, agent scope, removal and compaction, and
the saved copy round trip."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from memlane.store.text_index import K1, B, TextIndex, tokens

DOCS = {
    1: "Caroline adopted a rescue dog named Max in March",
    2: "Melanie paints landscapes and went camping with her kids",
    3: "Caroline went to an LGBTQ support group meeting",
    4: "The dog park near Caroline's house opened in May",
    5: "Melanie's kids love the beach; they went camping twice",
}


def build(
    docs: dict[int, str],
    agents: dict[int, str] | None = None,
    types: dict[int, str] | None = None,
    projects: dict[int, str] | None = None,
) -> TextIndex:
    index = TextIndex()
    agents = agents or {}
    types = types or {}
    projects = projects or {}
    rows = (
        (k, True, text, agents.get(k), types.get(k, "fact"), projects.get(k))
        for k, text in docs.items()
    )
    index.apply(rows, watermark=len(docs))
    return index


def reference_bm25(docs: dict[int, str], query: str) -> dict[int, float]:
    """Okapi BM25 written out term by term (Lucene IDF), the definition the index must match."""
    toks = {k: tokens(t) for k, t in docs.items()}
    n = len(docs)
    avg = sum(len(t) for t in toks.values()) / n
    out: dict[int, float] = {}
    for term in dict.fromkeys(tokens(query)):
        df = sum(term in t for t in toks.values())
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for k, t in toks.items():
            tf = Counter(t)[term]
            if tf:
                denom = tf + K1 * (1 - B + B * len(t) / avg)
                out[k] = out.get(k, 0.0) + idf * tf * (K1 + 1) / denom
    return out


def test_tokens_stem_split_apostrophes_and_drop_stop_words() -> None:
    assert tokens("Caroline's dogs were running to the parks!") == ["carolin", "dog", "run", "park"]
    # query syntax of any engine is just text here
    assert tokens('NEAR("dark" AND mode*)') == ["near", "dark", "mode"]
    assert tokens("the and of a") == []


@pytest.mark.parametrize(
    "query", ["Caroline dog", "camping kids", "Melanie went camping", "LGBTQ group", "unknownword"]
)
def test_scores_match_the_bm25_formula(query: str) -> None:
    index = build(DOCS)
    expected = reference_bm25(DOCS, query)
    got = index.search(tokens(query), 10)
    assert {k for k, _ in got} == set(expected)
    for key, score in got:
        assert score == pytest.approx(expected[key], rel=1e-5)
    assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)


def test_rarer_terms_and_shorter_memories_rank_higher() -> None:
    docs = {
        1: "kestrel",
        2: "kestrel seen over the dunes near the long quiet northern beach path",
        3: "gull",
        4: "gull",
        5: "gull kestrel",
    }
    index = build(docs)
    ranked = [k for k, _ in index.search(tokens("kestrel"), 10)]
    assert ranked[0] == 1 and ranked[-1] == 2  # same tf: the short one first
    # kestrel and gull are both in 3 of 5; two more gulls make kestrel the rarer term
    index.apply(
        [(6, True, "gull", None, "fact", None), (7, True, "gull", None, "fact", None)], watermark=7
    )
    both = dict(index.search(tokens("kestrel gull"), 10))
    assert both[1] > both[3]  # kestrel (3/7) outweighs gull (5/7)


def test_agent_scope_keeps_shared_and_own_memories_only() -> None:
    index = build(DOCS, agents={1: "coder", 3: "writer"})
    keys = {k for k, _ in index.search(tokens("Caroline"), 10, agent="coder")}
    assert keys == {1, 4}  # 3 belongs to "writer"; 4 is shared
    assert {k for k, _ in index.search(tokens("Caroline"), 10, agent="nobody")} == {4}
    assert {k for k, _ in index.search(tokens("Caroline"), 10)} == {1, 3, 4}


def test_project_scope_filters_inside_the_index_with_the_owner_statistics() -> None:
    # 1 and 3 belong to two projects, 4 is global; a search in a project sees its own and the
    # global ones, scored as without a project, and k counts only what the scope sees
    index = build(DOCS, projects={1: "repo-a", 3: "repo-b"})
    everything = dict(index.search(tokens("Caroline"), 10))
    in_a = dict(index.search(tokens("Caroline"), 10, project="repo-a"))
    assert set(in_a) == {1, 4}
    assert in_a == {k: everything[k] for k in (1, 4)}
    assert set(dict(index.search(tokens("Caroline"), 10, project="repo-c"))) == {4}
    top = index.search(tokens("Caroline"), 1, project="repo-b")
    assert len(top) == 1 and top[0][0] in {3, 4}  # the best of the scope, never 1
    assert index.scope_size(project="repo-a") == len(DOCS) - 1  # all but repo-b's
    assert index.in_scope([1, 3, 4, 99], project="repo-a").tolist() == [1, 0, 1, -1]
    codes = index.scope_codes(np.array([1, 3, 4, 2, 99], dtype=np.uint64)).tolist()
    assert codes[2] == codes[3] and len({codes[0], codes[1], codes[2]}) == 3 and codes[4] == -1
    # a change reaches the next search of a scope asked for before
    index.apply([(7, True, "Caroline again", None, "fact", "repo-a")], watermark=9)
    assert set(dict(index.search(tokens("Caroline"), 10, project="repo-a"))) == {1, 4, 7}
    index.apply([(1, False, "", None, "fact", "repo-a")], watermark=10)
    assert set(dict(index.search(tokens("Caroline"), 10, project="repo-a"))) == {4, 7}
    assert index.scope_size(project="repo-a") == len(DOCS) - 1


def test_type_filter_keeps_the_owner_statistics() -> None:
    index = build(DOCS, types={3: "event", 4: "event"})
    everything = dict(index.search(tokens("Caroline"), 10))
    events = dict(index.search(tokens("Caroline"), 10, types=["event"]))
    assert set(events) == {3, 4}
    assert events == {k: everything[k] for k in (3, 4)}  # same scores as unfiltered
    assert index.search(tokens("Caroline"), 10, types=["preference"]) == []
    assert set(dict(index.search(tokens("Caroline"), 10, types=["event", "fact"]))) == {1, 3, 4}


def test_changed_and_removed_rows_and_compaction() -> None:
    index = build(DOCS)
    index.apply(
        [
            (1, True, "Caroline adopted a cat", None, "fact", None),
            (3, False, "", None, "fact", None),
        ],
        watermark=9,
    )
    assert index.watermark == 9
    assert {k for k, _ in index.search(tokens("dog"), 10)} == {4}
    assert {k for k, _ in index.search(tokens("cat"), 10)} == {1}
    assert 3 not in {k for k, _ in index.search(tokens("LGBTQ Caroline"), 10)}
    # many removals trigger compaction; the survivors still score exactly as a fresh index
    many = {k: f"note {k} about topic{k % 7} and caroline" for k in range(10, 4010)}
    index.apply(((k, True, t, None, "fact", None) for k, t in many.items()), watermark=10)
    index.apply(((k, False, "", None, "fact", None) for k in range(10, 3900)), watermark=11)
    assert index._used < 1000  # dead slots dropped
    live = {k: DOCS[k] for k in (2, 4, 5)} | {1: "Caroline adopted a cat"}
    live |= {k: many[k] for k in range(3900, 4010)}
    assert dict(index.search(tokens("caroline topic3"), 20)) == pytest.approx(
        dict(build(live).search(tokens("caroline topic3"), 20))
    )


def test_arrays_round_trip_gives_the_same_results() -> None:
    index = build(DOCS, agents={2: "writer"}, types={5: "event"}, projects={1: "a", 5: "b"})
    index.apply([(4, False, "", None, "fact", None)], watermark=6)  # a dead slot is not saved
    copy = TextIndex.from_arrays(index.to_arrays())
    for query in ("Caroline dog", "Melanie kids camping", "group"):
        for agent in (None, "writer", "coder"):
            for types in (None, ["event"]):
                for project in (None, "a", "b"):
                    assert copy.search(tokens(query), 10, agent, types, project) == index.search(
                        tokens(query), 10, agent, types, project
                    )
    assert len(copy) == 4
    broken = index.to_arrays()
    broken["offsets"] = np.asarray([0, 1], dtype=np.int64)
    with pytest.raises(ValueError):
        TextIndex.from_arrays(broken)
