"""The near-identical guard of the write path (pure Python, no model).

Where the rules come from: ``ARCHITECTURE.md``, section "Write path", paragraph "The near-identical
guard". With the default embedding model (all-MiniLM-L6-v2) cosine similarity cannot tell a
paraphrase from a swap of roles ("Quaid gave Melina a ring" vs "Melina gave Quaid a ring"; the 105
same-multiset label-0 pairs of PAWS dev have a median cosine of about 0.99), so without an LLM the
write path merges two texts automatically only when this guard says the texts are

- :attr:`GuardVerdict.SAME`: the same content words in the same order, the same numbers in the same
  order, a negation on both or on neither; or
- :attr:`GuardVerdict.EXTENDS`: the new text keeps every word of the existing text that carries
  meaning, in order, with all its numbers and the same negation, and adds at least one content
  word (the newer, more detailed wording replaces the older one), none of which can change what the
  kept words state (:data:`_NO_INSERT_WORDS`: a possessive, "wanted to", "stopped", "hardly"...).

Every other verdict means "never merge without an LLM". Numbers and negation are checked first and
always fail.

How a text is compared (:func:`memlane.dedup.words.tokens`, then :func:`_analyse`):

1. :func:`memlane._text.normalise` (NFKC, casefold, collapsed whitespace); clitics split off by a
   tokeniser (PAWS writes ``do n't``, ``Quaid 's``) are re-attached to their word.
2. Numerals are cut out first (:data:`memlane.dedup.numbers.NUMERAL`), the rest is split into
   words: letters and digits with inner apostrophes; every other symbol (sentence punctuation,
   quotes, brackets, a hyphen) separates words, so punctuation, case and quote forms never matter
   and "start-up" is "start up". A trailing ``+``, ``++`` or ``#`` stays with its word, because it
   belongs to a name (``c++`` and ``c#`` are not ``c``); the digits of ``3.5`` and ``v1.2`` are a
   number (step 4), so ``3.5`` is not ``35`` and ``v1.2`` is not ``v12``.
3. Contractions are expanded: ``n't`` -> ``not`` (``can't`` -> ``can not``, ``won't`` ->
   ``will not``), ``cannot`` -> ``can not``, ``'ll`` -> ``will``, ``'d`` -> ``would``;
   ``'m``, ``'re`` and ``'ve`` are dropped (forms of be/have, which are trivial); ``'s``
   (possessive, or is/has) becomes the linking marker ``'s``.
4. Runs of number words and numerals are read as numbers (:func:`numbers`); they never count as
   content words.
5. Each remaining word is either ignored (:data:`TRIVIAL_WORDS`) or a content word, lightly stemmed
   (:func:`memlane.dedup.words.stem`). Negation words stay content words (as ``not``, ``never``, ``no``...) so their
   position is compared too, on top of :func:`negated`.

:func:`compare` first joins compounds across the two texts
(:func:`memlane.dedup.words.join_compounds`): a run of words of one text that the other writes as
one word ("start up" / "start-up" vs "startup") becomes that word, so spaced, hyphenated and joined
compounds compare equal. Articles, negations and number words are never joined ("a part" stays
apart from "apart", "no one" from "noone", "twenty five" from "twentyfive").

:data:`TRIVIAL_WORDS` has two kinds of words. Articles and forms of be/have/do are ignored outright.
The few prepositions/conjunctions in it ("linking words") are ignored when content words are
compared, so they may be added or dropped, but one may never be *swapped* for another ("made by
Quaid" vs "made for Quaid" is ``different``; "from Berlin to Paris" vs "to Berlin from Paris" is
``reordered``), and ``extends``/``narrows`` require the shorter text's content and linking words,
in order, inside the longer one's ("turned on the light" does not extend to "turned off the light").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from memlane._text import canonical
from memlane.dedup.numbers import NUMBER_WORDS, NumberReader, Token
from memlane.dedup.words import POSSESSIVE, compound_forms, join_compounds, stem, tokens

__all__ = [
    "TRIVIAL_WORDS",
    "GuardResult",
    "GuardVerdict",
    "TextAnalyses",
    "compare",
    "compound_variant",
    "content_words",
    "may_pass",
    "negated",
    "numbers",
    "squashed",
]

# --- word lists -------------------------------------------------------------------------------

#: Articles: they never change which facts a sentence states ("a man plays the guitar").
_ARTICLES = frozenset({"a", "an", "the"})

#: Forms of be/have/do: auxiliaries in paraphrases come and go ("A man is playing a guitar" vs "A man
#: plays a guitar"; "I do like tea"). Deliberately ignored with them: their tense ("is"/"was") and the
#: copula/possession contrast ("is a"/"has a"), which the write path leaves to recency and the LLM.
_AUXILIARIES = frozenset(
    {
        "be", "am", "is", "are", "was", "were", "been", "being",
        "have", "has", "had", "having",
        "do", "does", "did", "doing", "done",
    }
)  # fmt: skip

#: Linking words: the commonest prepositions/conjunctions, which paraphrases add or drop ("moved to
#: Paris" vs "moved Paris", "said that he..." vs "said he..."), and the ``'s`` marker. Ignored as
#: content words, but one may never replace another (see the module docstring), so "from"/"to" or
#: "by"/"for" keep their roles. No pronouns (swapping "he"/"she" changes the fact), no negations,
#: no numbers, no "or"/"but".
_LINKING = frozenset(
    {"of", "to", "in", "on", "at", "for", "by", "with", "from", "and", "that", POSSESSIVE}
)

#: Words ignored when content words are compared: articles, forms of be/have/do and the linking
#: words above. Never negations, numbers or pronouns.
TRIVIAL_WORDS: frozenset[str] = _ARTICLES | _AUXILIARIES | _LINKING

#: Negation markers (after contraction expansion, so ``n't`` and ``cannot`` give ``not``).
_NEGATIONS = frozenset(
    {"not", "no", "never", "without", "none", "nobody", "nothing", "neither", "nor"}
)

#: Words an ``extends`` (``narrows``) may not add (drop), though the rest of the old text is kept:
#: they make a kept noun a possessor ("Quaid likes tea" -> "Quaid's sister likes tea", "the sister
#: of Quaid likes tea") or turn the kept statement into a wish, plan, attempt, hedge, alternative
#: or reversal ("Quaid visited Japan" -> "Quaid wanted to visit Japan"; "Quaid plays guitar" ->
#: "Quaid stopped playing guitar"; "Quaid likes tea" -> "Quaid hardly likes tea"). Stemmed when
#: compared (:data:`_NO_INSERT`). Without them an added word only adds detail to the kept ones.
_NO_INSERT_WORDS = (
    "of", POSSESSIVE,
    "hardly", "barely", "rarely", "seldom", "scarcely", "almost", "nearly",
    "want", "wanted", "wish", "wished", "hope", "hoped", "plan", "planned", "intend", "intended",
    "try", "tried", "fail", "failed", "stop", "stopped", "quit", "used", "forget", "forgot",
    "refuse", "refused", "avoid", "avoided", "deny", "denied", "pretend", "pretended",
    "think", "thought", "believe", "believed", "allegedly", "reportedly",
    "might", "may", "could", "would", "should", "maybe", "perhaps", "possibly", "probably",
    "if", "whether", "unless", "except", "or",
)  # fmt: skip

#: :data:`_NO_INSERT_WORDS` as compared (stemmed, as content words are).
_NO_INSERT = frozenset(w if w in _LINKING else stem(w) for w in _NO_INSERT_WORDS)

# --- analysis ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Analysis:
    """One text, prepared for comparison.

    ``content``: content words (stemmed, in order). ``linking``: content and linking words in
    order (linking words unstemmed) - what ``extends``/``narrows`` must keep. ``gaps``: the linking
    words before each content word, plus one trailing gap (``len(content) + 1`` tuples).
    """

    content: tuple[str, ...]
    linking: tuple[str, ...]
    gaps: tuple[tuple[str, ...], ...]
    numbers: tuple[str, ...]
    negated: bool


#: Words :func:`memlane.dedup.words.join_compounds` never merges into a compound: joining them
#: would change the meaning ("a part"/"apart", "not ice"/"notice") or hide a number.
_KEEP_APART = _ARTICLES | _NEGATIONS | NUMBER_WORDS


def _analyse(text: str | Sequence[Token]) -> _Analysis:
    """Steps 4 and 5 of the module docstring, on ``text`` or on its :func:`tokens`."""
    words = tokens(text) if isinstance(text, str) else text
    reader = NumberReader()
    content: list[str] = []
    linking: list[str] = []
    gaps: list[tuple[str, ...]] = []
    gap: list[str] = []
    is_negated = False
    for i, token in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else None
        if reader.feed(token, nxt):  # numbers, and "and" inside one ("hundred and five")
            continue
        assert isinstance(token, str)
        if token in _NEGATIONS:
            is_negated = True
        if token in _LINKING:
            gap.append(token)
            linking.append(token)
        elif token in TRIVIAL_WORDS or not token:
            continue
        else:
            word = token if token in _NEGATIONS else stem(token)
            content.append(word)
            linking.append(word)
            gaps.append(tuple(gap))
            gap = []
    reader.flush()
    gaps.append(tuple(gap))
    return _Analysis(tuple(content), tuple(linking), tuple(gaps), tuple(reader.out), is_negated)


def content_words(text: str) -> list[str]:
    """Content words of ``text`` in order: ``list[str]``, lower-case, lightly stemmed.

    Words of :func:`memlane._text.words` minus :data:`TRIVIAL_WORDS`, punctuation and numbers
    (compared separately by :func:`numbers`), contractions expanded (``n't`` -> ``not``), each
    stemmed by :func:`memlane.dedup.words.stem`. Negation words are kept (``not``, ``never``...).
    Example: ``content_words("A man is playing a guitar.") == ["man", "play", "guitar"]``.
    """
    return list(_analyse(text).content)


def numbers(text: str) -> list[str]:
    """Numbers of ``text`` in order, each as canonical text: ``list[str]``.

    Read: numerals (``42``, ``3.5`` and ``3.50`` -> ``3.5``, ``1,000`` -> ``1000``, ``007`` ->
    ``7``), ordinals (``2nd``/``second`` -> ``2nd``, ``11th``/``eleventh`` -> ``11th``,
    first..nineteenth, twentieth..ninetieth, hundredth..millionth), decades (``1990s``), and number
    words zero..nineteen, twenty..ninety, hundred, thousand, million, billion, combined in runs
    ("twenty-five" -> ``25``, "one hundred and five" -> ``105``, "3.5 million" -> ``3500000``).
    A digit run inside a word counts too ("mp3" -> ``3``). "a hundred" reads as ``100``; "once",
    "dozen", "half" and plurals such as "hundreds" are ordinary words.
    """
    return list(_analyse(text).numbers)


def negated(text: str) -> bool:
    """True when ``text`` has a negation: not/n't, no, never, cannot, without, none, nobody,
    nothing, neither, nor. A boolean only (double negations are not resolved)."""
    return _analyse(text).negated


def _compound_analyses(existing: str, new: str, memo: TextAnalyses) -> tuple[_Analysis, _Analysis]:
    """:func:`_analyse` of both texts after joining each one's compounds that the other writes as
    one word."""
    old, cur = memo.tokens(existing), memo.tokens(new)
    joined_old = join_compounds(old, cur, _KEEP_APART, memo.forms(new))
    joined_cur = join_compounds(cur, old, _KEEP_APART, memo.forms(existing))
    # most pairs join nothing: their analyses are those of the texts alone (cached)
    return (
        memo.analysis(existing) if len(joined_old) == len(old) else _analyse(joined_old),
        memo.analysis(new) if len(joined_cur) == len(cur) else _analyse(joined_cur),
    )


_V = TypeVar("_V")


class TextAnalyses:
    """What the guard works out about each text on its own (its tokens, :func:`_analyse`, its
    content-word set, :func:`~memlane.dedup.words.compound_forms`, its squashed form), kept per
    text while this object lives; ``limit``: at most that many texts a table (then it starts
    again empty: a bounded cache without an LRU's bookkeeping). :func:`compare`, :func:`may_pass`
    and :func:`squashed` share one of 4,096 texts by default (a write compares a few texts). A
    caller comparing many pairs among more texts (the janitor's look-alike clusters: up to 25,000
    texts at 1,000,000 memories, where nearly every pair missed the shared tables) passes its own
    unbounded one: each text is analysed once, at a few KB a text."""

    __slots__ = ("_analysis", "_content", "_forms", "_squashed", "_tokens", "limit")

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self._tokens: dict[str, tuple[Token, ...]] = {}
        self._analysis: dict[str, _Analysis] = {}
        self._content: dict[str, frozenset[str]] = {}
        self._forms: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        self._squashed: dict[str, str] = {}

    def _get(self, table: dict[str, _V], text: str, make: Callable[[str], _V]) -> _V:
        got = table.get(text)
        if got is None:
            if self.limit is not None and len(table) >= self.limit:
                table.clear()
            got = table[text] = make(text)
        return got

    def tokens(self, text: str) -> tuple[Token, ...]:
        return self._get(self._tokens, text, lambda t: tuple(tokens(t)))

    def analysis(self, text: str) -> _Analysis:
        return self._get(self._analysis, text, lambda t: _analyse(self.tokens(t)))

    def content(self, text: str) -> frozenset[str]:
        return self._get(self._content, text, lambda t: frozenset(self.analysis(t).content))

    def forms(self, text: str) -> tuple[frozenset[str], frozenset[str]]:
        return self._get(self._forms, text, lambda t: compound_forms(self.tokens(t)))

    def squashed(self, text: str) -> str:
        return self._get(self._squashed, text, lambda t: "".join(canonical(t).split()))


_SHARED = TextAnalyses(limit=4096)


def squashed(text: str, memo: TextAnalyses | None = None) -> str:
    """``text``'s :func:`memlane._text.canonical` form with its spaces removed: equal for two
    texts that differ only in how a compound is written apart or joined (a necessary condition
    of :func:`compound_variant`)."""
    return (memo or _SHARED).squashed(text)


def _covered(words: frozenset[str], other: frozenset[str]) -> bool:
    """Each of ``words`` is one of ``other``'s, or could meet one once compounds are joined
    (a part is a substring of its compound: "start" of "startup", either way round)."""
    return all(any(w in x or x in w for x in other) for w in words - other)


def may_pass(existing: str, new: str, memo: TextAnalyses | None = None) -> bool:
    """A cheap necessary condition of :func:`compare` giving ``same``, ``extends`` or
    ``narrows``: those need one text's content words (after compound joining) to be among the
    other's, so a pair where each text has a content word the other cannot cover fails. False
    means the guard refuses the pair; True means compare() must decide. Cached per text
    (``memo``: see :class:`TextAnalyses`): the janitor compares one text with many (about 2 µs
    a pair against 76 µs for compare())."""
    m = memo or _SHARED
    a, b = m.content(existing), m.content(new)
    return _covered(a, b) or _covered(b, a)


def compound_variant(existing: str, new: str) -> bool:
    """True when ``existing`` and ``new`` are the same text up to how a compound is written.

    That is, the words of :func:`memlane._text.canonical` (case, whitespace, edge punctuation,
    quote forms and hyphens already gone) are equal once each run of 2 to 4 words of one text that
    the other writes as one word is joined (:func:`memlane.dedup.words.join_compounds`; never
    articles, negations or number words): "Bob founded a start up." / "bob founded a startup" is
    True; "Bob founded a start up in 2019" / "Bob founded a startup" or "... startups" is False.
    Much stricter than :attr:`GuardVerdict.SAME` (no word may be added, dropped, inflected or
    moved): this is the duplicate class of the content hash (``ARCHITECTURE.md``, "Write path",
    step 2) plus the spaced compound that a hash cannot see without a dictionary. The write path
    keeps the existing memory for such a text whatever the cosine (:mod:`memlane.dedup.pipeline`):
    the default model scores "startup" / "start up" at only about 0.95 and "cowboy" / "cow boy"
    at 0.84 (docs/dedup.md).
    """
    old, cur = canonical(existing).split(), canonical(new).split()
    if old == cur:
        return True
    return join_compounds(old, cur, _KEEP_APART) == join_compounds(cur, old, _KEEP_APART)


# --- comparison -------------------------------------------------------------------------------


class GuardVerdict(StrEnum):
    """How a new text relates to an existing one (see :func:`compare` for the order of checks)."""

    SAME = "same"
    EXTENDS = "extends"
    NARROWS = "narrows"
    REORDERED = "reordered"
    NUMBERS_DIFFER = "numbers_differ"
    NEGATION_DIFFERS = "negation_differs"
    DIFFERENT = "different"


@dataclass(frozen=True, slots=True)
class GuardResult:
    """Verdict of :func:`compare` and a human-readable ``reason`` ("number 35 became 36")."""

    verdict: GuardVerdict
    reason: str

    @property
    def passes(self) -> bool:
        """True only for :attr:`GuardVerdict.SAME` (near-identical texts)."""
        return self.verdict is GuardVerdict.SAME


def _added(short: Sequence[str], long: Sequence[str]) -> list[str]:
    """Items of ``long`` not used by a greedy in-order embedding of ``short`` (a subsequence)."""
    out: list[str] = []
    i = 0
    for item in long:
        if i < len(short) and item == short[i]:
            i += 1
        else:
            out.append(item)
    return out


def _kept(short: Sequence[str], long: Sequence[str]) -> list[str] | None:
    """What ``long`` adds when it keeps all of ``short`` in order (:func:`_added`), else None."""
    added = _added(short, long)
    return added if len(long) - len(added) == len(short) else None


def _join(items: Sequence[str]) -> str:
    return ", ".join(items) if items else "none"


def _numbers_reason(old: Sequence[str], new: Sequence[str]) -> str:
    if len(old) == len(new):
        if Counter(old) == Counter(new):
            return f"numbers {_join(old)} reordered as {_join(new)}"
        changed = [(a, b) for a, b in zip(old, new, strict=True) if a != b]
        return "; ".join(f"number {a} became {b}" for a, b in changed)
    if (added := _kept(old, new)) is not None:
        return f"number {_join(added)} added"
    if (dropped := _kept(new, old)) is not None:
        return f"number {_join(dropped)} dropped"
    return f"numbers {_join(old)} became {_join(new)}"


def _gap_swap(old: _Analysis, new: _Analysis) -> str | None:
    """First pair of gaps where a linking word was swapped for another (None: only adds/drops)."""
    for a, b in zip(old.gaps, new.gaps, strict=True):
        if _kept(a, b) is None and _kept(b, a) is None:
            return f"'{' '.join(a)}' became '{' '.join(b)}'"
    return None


def _grows(short: _Analysis, long: _Analysis, added: Sequence[str] | None) -> bool:
    """``long`` keeps ``short``'s content and linking words in order (``added``, from
    :func:`_kept`, is not None) and adds content words, none of them from :data:`_NO_INSERT`."""
    return (
        added is not None
        and len(long.content) > len(short.content)
        and not _NO_INSERT.intersection(added)
    )


def compare(existing: str, new: str, memo: TextAnalyses | None = None) -> GuardResult:
    """Compare a stored text with a new one; returns a :class:`GuardResult`. ``memo``: where
    each text's own analysis is kept (:class:`TextAnalyses`; default: shared caches).

    Checks, in this order (the first that applies wins):

    1. ``negation_differs``: :func:`negated` differs (always fails).
    2. ``numbers_differ``: the :func:`numbers` lists differ (order counts), unless the content
       words make it ``extends`` (``narrows``) and the existing (new) numbers are an in-order
       subsequence of the other side's (always fails).
    3. ``same``: equal :func:`content_words` in the same order, linking words only added or
       dropped (a swap such as by/for gives ``reordered`` if the linking words are the same
       multiset, else ``different``).
    4. ``extends``: the existing text's content and linking words are an in-order subsequence of
       the new text's, the new text has at least one more content word and adds no word of
       :data:`_NO_INSERT_WORDS` (such an addition gives ``different``).
    5. ``narrows``: the reverse of ``extends``.
    6. ``reordered``: the same multiset of content words in another order (a swap of roles).
    7. ``different``: anything else.

    Before the checks, compounds are joined across the two texts (module docstring), so
    ``compare("Bob founded a start-up", "bob founded a startup.")`` is ``same``.
    """
    m = memo or _SHARED
    old, cur = m.analysis(existing), m.analysis(new)
    # As many numbers, other ones ("born on May 3" / "May 4", most look-alike pairs): step 2
    # fails whatever the words, as extends/narrows need one list inside a longer one; and
    # compound joining keeps numbers and negation words apart, so the texts alone decide (the
    # joining is the costly part of a comparison)
    if (
        old.negated == cur.negated
        and len(old.numbers) == len(cur.numbers)
        and old.numbers != cur.numbers
    ):
        return GuardResult(GuardVerdict.NUMBERS_DIFFER, _numbers_reason(old.numbers, cur.numbers))
    old, cur = _compound_analyses(existing, new, m)
    if old.negated != cur.negated:
        where = "new" if cur.negated else "existing"
        return GuardResult(GuardVerdict.NEGATION_DIFFERS, f"negation in the {where} text only")

    adds = _kept(old.linking, cur.linking)  # None unless the new text keeps the old one's words
    drops = _kept(cur.linking, old.linking)
    extends = _grows(old, cur, adds)
    narrows = _grows(cur, old, drops)

    if old.numbers != cur.numbers:
        if extends and (new_numbers := _kept(old.numbers, cur.numbers)) is not None:
            added = _added(old.content, cur.content) + new_numbers
            return GuardResult(GuardVerdict.EXTENDS, f"new text adds {_join(added)}")
        if narrows and (old_numbers := _kept(cur.numbers, old.numbers)) is not None:
            dropped = _added(cur.content, old.content) + old_numbers
            return GuardResult(GuardVerdict.NARROWS, f"new text drops {_join(dropped)}")
        return GuardResult(GuardVerdict.NUMBERS_DIFFER, _numbers_reason(old.numbers, cur.numbers))

    if old.content == cur.content:
        swap = _gap_swap(old, cur)
        if swap is None:
            return GuardResult(GuardVerdict.SAME, "same content words in the same order")
        old_links = Counter(w for g in old.gaps for w in g)
        if old_links == Counter(w for g in cur.gaps for w in g):
            return GuardResult(GuardVerdict.REORDERED, f"linking words swapped: {swap}")
        return GuardResult(GuardVerdict.DIFFERENT, f"linking word changed: {swap}")
    if extends:
        return GuardResult(
            GuardVerdict.EXTENDS, f"new text adds {_join(_added(old.content, cur.content))}"
        )
    if narrows:
        return GuardResult(
            GuardVerdict.NARROWS, f"new text drops {_join(_added(cur.content, old.content))}"
        )
    if Counter(old.content) == Counter(cur.content):
        pairs = zip(old.content, cur.content, strict=True)
        first = next(i for i, (a, b) in enumerate(pairs) if a != b)
        return GuardResult(
            GuardVerdict.REORDERED,
            f"same content words in another order: '{old.content[first]}' became "
            f"'{cur.content[first]}' at word {first + 1}",
        )
    for changed, verb in ((adds, "adds"), (drops, "drops")):
        if changed is not None:
            return GuardResult(
                GuardVerdict.DIFFERENT,
                f"new text {verb} {_join(changed)}, which changes what the other words state",
            )
    only_old = sorted((Counter(old.linking) - Counter(cur.linking)).elements())
    only_new = sorted((Counter(cur.linking) - Counter(old.linking)).elements())
    return GuardResult(
        GuardVerdict.DIFFERENT,
        f"words differ: only in existing {_join(only_old)}; only in new {_join(only_new)}",
    )
