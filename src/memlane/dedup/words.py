"""Words for the near-identical guard (:mod:`memlane.dedup.guard`): tokenising, contractions,
light stemming and compound joining.

:func:`tokens` gives a text's words and numerals in order (steps 1 to 3 of the guard's module
docstring); :func:`stem` meets inflections; :func:`join_compounds` merges a spaced or hyphenated
compound ("start up", "start-up") into the one word the other text writes ("startup").
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from decimal import Decimal
from functools import lru_cache

from memlane._text import normalise
from memlane.dedup.numbers import NUMERAL, Num, Token

__all__ = ["POSSESSIVE", "compound_forms", "expand", "join_compounds", "stem", "tokens"]

#: The ``'s`` clitic (possessive, or is/has), kept as a marker so that it counts as a linking word.
POSSESSIVE = "'s"

#: Clitics a tokeniser split off ("do n't", "quaid 's"): re-attached to the word before them.
_SPLIT_CLITIC = re.compile(r"([^\W_])\s+(n['’]t|['’](?:s|m|re|ve|ll|d))(?![^\W_])")
_N_T = {"ca": "can", "wo": "will", "sha": "shall", "ai": "be"}
#: A word: letters/digits with inner apostrophes (as :func:`memlane._text.split_words`), plus a
#: trailing ``+``, ``++`` or ``#`` that ends it, which belongs to a name: ``c++`` and ``c#`` are
#: not ``c``, ``a+`` is not the article ``a``. Any other symbol separates words.
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*(?:\+\+?|#)?(?![^\W_])")
#: The longest run of words :func:`join_compounds` merges into one.
_MAX_PARTS = 4


def expand(word: str) -> list[str]:
    """Expand one lower-cased word's contraction (step 3 of :mod:`memlane.dedup.guard`)."""
    word = word.replace("’", "'")
    if word == "cannot":
        return ["can", "not"]
    if "'" not in word:  # most words: no clitic to look for
        return [word]
    if word.endswith("n't"):
        base = word[:-3]
        return ([_N_T.get(base, base)] if base else []) + ["not"]
    for clitic, expansion in (("'ll", "will"), ("'d", "would")):
        if word.endswith(clitic) and len(word) > len(clitic):
            return [word[: -len(clitic)], expansion]
    if word.endswith("'s") and len(word) > 2:
        return [word[:-2], POSSESSIVE]
    for clitic in ("'m", "'re", "'ve"):
        if word.endswith(clitic) and len(word) > len(clitic):
            return [word[: -len(clitic)]]
    return [word]


def tokens(text: str) -> list[Token]:
    """Words (expanded, lower-case, unstemmed) and numerals of ``text``, in order."""
    norm = _SPLIT_CLITIC.sub(r"\1\2", normalise(text))
    out: list[Token] = []
    pos = 0
    for match in NUMERAL.finditer(norm):
        for word in _WORD.findall(norm, pos, match.start()):
            out.extend(expand(word))
        digits, suffix = match.group(1), match.group(2) or ""
        out.append(Num(Decimal(digits.replace(",", "")), "s" if suffix == "s" else suffix and "th"))
        pos = match.end()
    for word in _WORD.findall(norm, pos):
        out.extend(expand(word))
    return out


_VOWELS = frozenset("aeiouy")


def _has_vowel(stem: str) -> bool:
    return any(ch in _VOWELS for ch in stem)


def _short_cvc(stem: str) -> bool:
    """Stem is one syllable ending consonant-vowel-consonant ("mak", "hop"): it lost an "e"."""
    if len(stem) < 2 or sum(1 for ch in stem if ch in _VOWELS) != 1:
        return False
    tail = ("#" + stem)[-3:]
    a, b, c = tail[0], tail[1], tail[2]
    return a not in _VOWELS and b in _VOWELS and c not in _VOWELS and c not in "wxy"


@lru_cache(maxsize=1 << 16)  # a pure function of one word, asked for the same words again
def stem(word: str) -> str:
    """Strip plural/-ing/-ed so inflections meet: "plays"/"playing"/"played" -> "play".

    A tiny suffix stripper after Porter's step 1 (possessive ``'s`` is removed earlier):

    - plural: ``-ies`` -> ``-y`` ("studies", words over 4 letters), ``-sses``/``-ches``/``-shes``/
      ``-xes``/``-zes`` lose ``-es``, otherwise a final ``-s`` goes unless the word ends in ``ss``,
      ``us`` or ``is`` or has 3 letters or fewer;
    - ``-ied`` -> ``-y`` ("studied"); ``-ed``/``-ing`` go when the rest has a vowel ("bed", "sing",
      "string" and ``-eed`` words stay); then a doubled final consonant is undone ("stopped" ->
      "stop", except l/s/z: "falling" -> "fall"), or an ``e`` is restored after ``at``/``bl``/``iz``
      or a one-syllable consonant-vowel-consonant stem ("making" -> "make", "created" -> "create").

    Irregular forms ("gave"/"given") are not merged: that only costs a missed duplicate.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("ied") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "ches", "shes", "xes", "zes")):
        return word[:-2]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and not word.endswith("eed"):
            stem = word[: -len(suffix)]
            if len(stem) < 2 or not _has_vowel(stem):
                return word
            if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in _VOWELS | set("lsz"):
                return stem[:-1]
            if stem.endswith(("at", "bl", "iz")) or _short_cvc(stem):
                return stem + "e"
            return stem
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def compound_forms(other: Sequence[Token]) -> tuple[frozenset[str], frozenset[str]]:
    """What :func:`join_compounds` looks for in a text ``other``: the forms of its words (each
    word and its :func:`stem`) and every proper prefix of those forms. A function of ``other``
    alone, so a caller comparing one text with many computes it once."""
    targets = frozenset(form for w in other if isinstance(w, str) for form in (w, stem(w)))
    return targets, frozenset(t[:k] for t in targets for k in range(1, len(t)))


def join_compounds(
    words: Sequence[Token],
    other: Sequence[Token],
    keep_apart: Collection[str],
    forms: tuple[frozenset[str], frozenset[str]] | None = None,
) -> list[Token]:
    """``words`` with each run of 2 to 4 adjacent words that the ``other`` text writes as one word
    merged into that word: "start up" or "start-up" (tokenised alike) -> ``startup`` when
    ``other`` has ``startup``; "start ups" -> ``startups`` when it has ``startups`` or
    ``startup`` (the last part is :func:`stem`-med, never the whole run: "guitar ring" must not
    stem to "guitar").

    Only plain alphabetic words are merged, never one of ``keep_apart`` (the guard passes its
    articles, negations and number words, so "a part" never becomes "apart", "not ice" never
    "notice"); the longest run wins, left to right. Without a dictionary a spaced compound can only
    be recognised against a text that writes it joined, which is what the guard compares.
    ``forms``: :func:`compound_forms` of ``other``, when the caller has it.
    """
    # A joined run is longer than its first word and starts with it: a word that is no proper
    # prefix of a target starts no run (most words of most texts; this skips their runs).
    targets, heads = compound_forms(other) if forms is None else forms
    out: list[Token] = []
    i = 0
    while i < len(words):
        first = words[i]
        for n in range(min(_MAX_PARTS, len(words) - i) if first in heads else 1, 1, -1):
            run = words[i : i + n]
            parts = [w for w in run if isinstance(w, str) and w.isalpha() and w not in keep_apart]
            if len(parts) == n and (
                (whole := "".join(parts)) in targets
                or "".join(parts[:-1]) + stem(parts[-1]) in targets
            ):
                out.append(whole)
                i += n
                break
        else:
            out.append(words[i])
            i += 1
    return out
