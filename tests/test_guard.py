"""Tests of the near-identical guard (memlane.dedup.guard): unit cases and the PAWS swap pairs."""

from __future__ import annotations

import csv
import dataclasses
import itertools
from collections import Counter
from pathlib import Path

import pytest

from memlane._text import normalise
from memlane.dedup.guard import (
    TRIVIAL_WORDS,
    GuardResult,
    GuardVerdict,
    TextAnalyses,
    compare,
    content_words,
    may_pass,
    negated,
    numbers,
)

PAWS_DEV = Path(__file__).parents[1] / ".." / "shared" / "data" / "paws" / "paws_dev.tsv"

V = GuardVerdict


# --- content words, numbers, negation ---------------------------------------------------------


def test_trivial_words_hold_no_negation_number_or_pronoun() -> None:
    forbidden = {"not", "no", "never", "n't", "none", "nor", "neither", "without", "nothing"}
    forbidden |= {"one", "two", "first", "second", "hundred", "0", "1"}
    forbidden |= {"i", "he", "she", "it", "we", "they", "you", "him", "her", "them"}
    forbidden |= {"or", "but"}
    assert not TRIVIAL_WORDS & forbidden
    assert {"a", "an", "the", "is", "was", "has", "did", "of"} <= TRIVIAL_WORDS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A man is playing a guitar.", ["man", "play", "guitar"]),
        ("A man plays the guitar.", ["man", "play", "guitar"]),
        ("He played.", ["he", "play"]),
        ("Quaid's studies", ["quaid", "study"]),
        ("Quaid 's dog", ["quaid", "dog"]),  # PAWS-style split clitic
        ("stopped making boxes", ["stop", "make", "box"]),
        ("falling horses", ["fall", "horse"]),
        ("I don't like tea", ["i", "not", "like", "tea"]),
        ("I do n't like tea", ["i", "not", "like", "tea"]),
        ("She can't; we cannot", ["she", "can", "not", "we", "can", "not"]),
        ("Quaid is 35 years old", ["quaid", "year", "old"]),
        ("twenty-five cats", ["cat"]),
        ("  ", []),
    ],
)
def test_content_words(text: str, expected: list[str]) -> None:
    assert content_words(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Quaid is 35", ["35"]),
        ("1,000 dogs and 3.5 cats", ["1000", "3.5"]),
        ("3.50 vs 007", ["3.5", "7"]),
        ("twenty-five", ["25"]),
        ("one hundred and five", ["105"]),
        ("the hundred and fiftieth anniversary", ["150th"]),
        ("3.5 million", ["3500000"]),
        ("two thousand three hundred", ["2300"]),
        (
            "the 2nd and second, the 11th and eleventh, twenty-first",
            ["2nd"] * 2 + ["11th"] * 2 + ["21st"],
        ),
        ("in the 1990s", ["1990s"]),
        ("1, 2, 3", ["1", "2", "3"]),
        ("scored 3 to 1", ["3", "1"]),
        ("five six", ["5", "6"]),
        ("mp3", ["3"]),
        ("hundreds of people", []),
        ("no numbers here", []),
    ],
)
def test_numbers(text: str, expected: list[str]) -> None:
    assert numbers(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I like tea", False),
        ("I don't like tea", True),
        ("I do n't like tea", True),
        ("I do not like tea", True),
        ("Quaid never drinks", True),
        ("She cannot swim", True),
        ("tea without milk", True),
        ("No one came", True),
        ("Nobody came", True),
        ("nothing happened", True),
        ("neither tea nor coffee", True),
        ("none of them", True),
        ("Notably, the note is known", False),
    ],
)
def test_negated(text: str, expected: bool) -> None:
    assert negated(text) is expected


# --- compare ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("existing", "new", "verdict"),
    [
        # The examples of ARCHITECTURE.md.
        ("Quaid gave Melina a ring", "Melina gave Quaid a ring", V.REORDERED),
        ("Quaid is 35", "Quaid is 36", V.NUMBERS_DIFFER),
        ("I like tea", "I don't like tea", V.NEGATION_DIFFERS),
        ("I don't like tea", "I like tea", V.NEGATION_DIFFERS),
        ("A man is playing a guitar.", "A man plays the guitar.", V.SAME),
        # Case, whitespace, punctuation.
        ("Quaid likes  green TEA.", "quaid likes green tea", V.SAME),
        ("I don't like tea", "I do not like tea", V.SAME),
        # Extends / narrows.
        ("Quaid moved to Paris", "Quaid moved to Paris with Melina", V.EXTENDS),
        ("Quaid moved to Paris", "Quaid moved to Paris in 2019", V.NUMBERS_DIFFER),
        ("Quaid moved to Paris", "Quaid moved to Paris with Melina in 2019", V.EXTENDS),
        ("Quaid is 35", "Quaid is 35 and lives in Berlin", V.EXTENDS),
        ("Quaid moved to Paris with Melina", "Quaid moved to Paris", V.NARROWS),
        ("Quaid is 35 and lives in Berlin", "Quaid is 35", V.NARROWS),
        ("Quaid is 35", "Quaid is 36 and lives in Berlin", V.NUMBERS_DIFFER),
        ("Quaid likes tea", "Quaid never likes tea", V.NEGATION_DIFFERS),
        # Linking words may come and go, never be swapped.
        ("Quaid moved to Paris", "Quaid moved Paris", V.SAME),
        ("The cake was made by Quaid", "The cake was made for Quaid", V.DIFFERENT),
        ("Quaid moved from Berlin to Paris", "Quaid moved to Berlin from Paris", V.REORDERED),
        ("Quaid turned on the light", "Quaid turned off the light", V.DIFFERENT),
        ("Quaid played with Melina", "Quaid played against Melina", V.DIFFERENT),
        # Additions that change what the kept words state are not extensions.
        ("Quaid likes tea", "Quaid likes green tea", V.EXTENDS),
        ("Quaid likes tea", "Quaid's sister likes tea", V.DIFFERENT),
        ("Quaid likes tea", "The sister of Quaid likes tea", V.DIFFERENT),
        ("Quaid visited Japan", "Quaid wanted to visit Japan", V.DIFFERENT),
        ("Quaid plays guitar", "Quaid stopped playing guitar", V.DIFFERENT),
        ("Quaid likes tea", "Quaid hardly likes tea", V.DIFFERENT),
        ("Quaid likes tea", "Quaid likes tea or coffee", V.DIFFERENT),
        ("Quaid wanted to visit Japan", "Quaid visited Japan", V.DIFFERENT),
        ("Quaid's dog barks", "Quaid's dog barks loudly", V.EXTENDS),
        ("It's raining", "It is raining", V.SAME),
        # Numbers: order counts, number words equal numerals.
        ("Quaid won 3 to 1", "Quaid won 1 to 3", V.NUMBERS_DIFFER),
        ("Quaid has twenty-five cats", "Quaid has 25 cats", V.SAME),
        ("Quaid came second", "Quaid came 2nd", V.SAME),
        ("Quaid came second", "Quaid came 2", V.NUMBERS_DIFFER),
        # Anything else.
        ("Quaid likes tea", "Quaid likes coffee", V.DIFFERENT),
        ("Quaid likes tea", "Melina hates coffee", V.DIFFERENT),
        ("He likes tea", "She likes tea", V.DIFFERENT),
    ],
)
def test_compare(existing: str, new: str, verdict: GuardVerdict) -> None:
    result = compare(existing, new)
    assert result.verdict is verdict, result.reason
    assert result.passes is (verdict is V.SAME)
    assert result.reason


def test_reasons() -> None:
    assert compare("Quaid is 35", "Quaid is 36").reason == "number 35 became 36"
    assert compare("Quaid moved", "Quaid moved in 2019").reason == "number 2019 added"
    assert compare("Quaid is 35", "Quaid is").reason == "number 35 dropped"
    assert "3, 1" in compare("won 3 to 1", "won 1 to 3").reason
    assert compare("I like tea", "I don't like tea").reason == "negation in the new text only"
    assert "melina" in compare("Quaid moved", "Quaid moved with Melina").reason
    assert "'by' became 'for'" in compare("made by Quaid", "made for Quaid").reason


def test_result_is_frozen_and_verdicts_are_strings() -> None:
    result = compare("a", "a")
    assert isinstance(result, GuardResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.verdict = V.DIFFERENT  # type: ignore[misc]
    assert str(V.SAME) == "same" and str(V.NUMBERS_DIFFER) == "numbers_differ"


def test_negation_and_numbers_are_checked_first() -> None:
    # Same words in the same order otherwise: negation wins over numbers, numbers over the rest.
    assert compare("Quaid is 35", "Quaid is not 36").verdict is V.NEGATION_DIFFERS
    assert compare("Quaid gave Melina 3 rings", "Melina gave Quaid 4 rings").verdict is (
        V.NUMBERS_DIFFER
    )


def test_identical_and_empty_texts_are_same() -> None:
    for text in ("Quaid gave Melina a ring on 3 May 2023.", "", "the a an"):
        assert compare(text, text).passes


# --- PAWS dev: adversarial swap pairs must never merge ----------------------------------------


def _paws_rows() -> list[dict[str, str]]:
    if not PAWS_DEV.is_file():
        pytest.skip(f"PAWS dev data not found at {PAWS_DEV}")
    with PAWS_DEV.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))


def test_paws_swap_pairs_never_merge() -> None:
    rows = _paws_rows()
    swaps = [
        row
        for row in rows
        if row["label"] == "0"
        and Counter(normalise(row["sentence1"]).split())
        == Counter(normalise(row["sentence2"]).split())
    ]
    assert len(swaps) == 105
    merged = [
        (row["id"], result.verdict, result.reason)
        for row in swaps
        if (result := compare(row["sentence1"], row["sentence2"])).verdict in (V.SAME, V.EXTENDS)
    ]
    assert merged == []


def test_paws_same_verdicts_are_paraphrases() -> None:
    # Not a rule of the design, a regression check: on PAWS dev every `same` is a label-1 pair.
    rows = _paws_rows()
    wrong = [
        row["id"]
        for row in rows
        if row["label"] == "0" and compare(row["sentence1"], row["sentence2"]).passes
    ]
    assert wrong == []


# --- the janitor's cheap pre-check --------------------------------------------------------------

PASSING = {V.SAME, V.EXTENDS, V.NARROWS}


def _bench_pairs() -> list[tuple[str, str]]:
    from memlane.eval.bench.generator import Generator

    texts = sorted(m.content for m in Generator(5, near_repeats=0.3).memories(3000))
    # sorted: a memory's near-repeats (the same words, one more, other punctuation) sit next to
    # it, among look-alikes of the same template
    return list(itertools.pairwise(texts)) + list(zip(texts, texts[3:], strict=False))


COMPOUNDS = [
    ("Bob founded a start up.", "bob founded a startup"),
    ("Bob founded a start-up in 2019", "Bob founded a startup in Berlin in 2019"),
    ("the cow boy rode home", "the cowboy rode home at dusk"),
    ("she hired two baby sitters", "she hired two babysitters for the weekend"),
    ("Ana likes home made bread", "Ana likes homemade bread"),
]


def test_may_pass_never_refuses_a_pair_the_guard_passes() -> None:
    """may_pass() lets the janitor skip compare() for most pairs; it must be a necessary
    condition: every pair compare() passes (same, extends, narrows), compounds included."""
    pairs = _bench_pairs() + COMPOUNDS + [(b, a) for a, b in COMPOUNDS]
    passing = [(a, b) for a, b in pairs if compare(a, b).verdict in PASSING]
    assert len(passing) > 50
    assert all(may_pass(a, b) for a, b in passing), [
        (a, b) for a, b in passing if not may_pass(a, b)
    ]
    refused = sum(not may_pass(a, b) for a, b in pairs)
    assert refused > len(pairs) // 2  # and it does skip most pairs of look-alike templates
    assert not may_pass("Anton Patel loves Brazilian food", "Jonas Abbott loves Brazilian food")


NUMBER_PAIRS = [
    ("Ana was born on May 3", "Ana was born on May 4"),
    ("the flight costs 3.5 million", "the flight costs 35 million"),
    ("she ran twenty five miles", "she ran 25 miles on Sunday"),
    ("Bob moved in 2019", "Bob did not move in 2020"),
    ("he owns 2 cats", "he owns 2 cats and 3 dogs"),
]


def test_numbers_swapped_for_others_fail_before_compounds_are_joined() -> None:
    """compare() refuses texts with as many numbers, other ones, before the costly compound
    joining (most pairs of the janitor's look-alike clusters): the verdict and its reason are
    those of the full comparison, and an added number may still extend."""
    assert compare("Ana was born on May 3", "Ana was born on May 4") == GuardResult(
        V.NUMBERS_DIFFER, "number 3 became 4"
    )
    moved = compare("Bob moved in 2019 and left in 2021", "Bob moved in 2021 and left in 2019")
    assert moved == GuardResult(V.NUMBERS_DIFFER, "numbers 2019, 2021 reordered as 2021, 2019")
    assert compare("Bob moved in 2019", "Bob did not move in 2020").verdict == V.NEGATION_DIFFERS
    assert compare("he owns 2 cats", "he owns 2 cats and 3 dogs").verdict == V.EXTENDS
    assert compare("she ran twenty five miles", "she ran 25 miles on Sunday").verdict == V.EXTENDS
    assert compare("the start-up raised 3.5 million", "the startup raised 35 million") == (
        GuardResult(V.NUMBERS_DIFFER, "number 3500000 became 35000000")
    )
    # the premise of the shortcut: joining compounds changes no text's numbers or negation
    from memlane.dedup.guard import _compound_analyses

    memo = TextAnalyses()
    pairs = _bench_pairs() + COMPOUNDS + NUMBER_PAIRS + [(b, a) for a, b in COMPOUNDS]
    joined = 0
    for a, b in pairs:
        old, cur = _compound_analyses(a, b, memo)
        joined += (old, cur) != (memo.analysis(a), memo.analysis(b))
        assert (list(old.numbers), old.negated) == (numbers(a), negated(a)), (a, b)
        assert (list(cur.numbers), cur.negated) == (numbers(b), negated(b)), (a, b)
    assert joined >= len(COMPOUNDS)  # pairs where compounds were joined were among them


def test_text_analyses_give_the_shared_caches_verdicts() -> None:
    """A caller's own TextAnalyses (the janitor's large clusters) changes no verdict or reason;
    a bounded one never holds more texts than its limit."""
    pairs = _bench_pairs()[:1500] + COMPOUNDS + NUMBER_PAIRS
    own, small = TextAnalyses(), TextAnalyses(limit=8)
    for a, b in pairs:
        expected = compare(a, b)
        assert compare(a, b, own) == expected
        assert compare(a, b, small) == expected
        assert may_pass(a, b, own) == may_pass(a, b)
    texts = {t for pair in pairs for t in pair}
    assert len(own._analysis) == len(texts)  # each text analysed once, kept
    assert 0 < len(small._analysis) <= 8 and 0 < len(small._tokens) <= 8
