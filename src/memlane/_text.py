"""Text normalisation shared by the content hash, the near-identical guard and the FTS query."""

from __future__ import annotations

import hashlib
import re
import unicodedata

#: Version of the content-hash scheme, the ``v<N>:`` prefix of every :func:`content_hash`. Bump it
#: whenever :func:`canonical` changes: stored hashes of an older version must then be recomputed
#: with :func:`content_hash` (a store migration), or a repeat of an old memory is no longer a hit.
#: 1: NFKC, casefold, collapsed whitespace (:func:`normalise`). 2: :func:`canonical`.
HASH_VERSION: int = 2

_WS = re.compile(r"\s+")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)

#: Typographic quotes NFKC leaves alone, mapped to their ASCII form (so ``Alice’s`` = ``Alice's``),
#: non-breaking/Unicode hyphens to ``-``, and invisible format characters (soft hyphen, zero-width
#: space, word joiner, BOM) removed.
_QUOTES_AND_HYPHENS = str.maketrans(
    {
        **dict.fromkeys("‘’‚‛′`", "'"),
        **dict.fromkeys("“”„‟″«»‹›", '"'),
        **dict.fromkeys("‐‑", "-"),
        **dict.fromkeys("\u00ad\u200b\u2060\ufeff", ""),
    }
)
#: Sentence punctuation dropped at the start of a word: quotes, opening brackets, ``, ; : ! ?``
#: and the Spanish ``¿ ¡``. Not ``.``: a leading dot belongs to the word (``.5``, ``.NET``).
_LEAD = frozenset("'\",;:!?¿¡([{「『")
#: Sentence punctuation dropped at the end of a word: ``. , ; : ! ?``, quotes, closing brackets,
#: and the CJK full stop and comma (NFKC leaves those two alone).
_TRAIL = frozenset(".,;:!?'\")]}」』。、")
_BRACKETS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = {close: open_ for open_, close in _BRACKETS.items()}
#: A hyphen between two letters: a hyphenated compound ("start-up"), joined by :func:`canonical`.
#: Not between digits ("3-5" is a range, not 35) nor at the edge of a word.
_COMPOUND_HYPHEN = re.compile(r"(?<=[^\W\d_])-(?=[^\W\d_])")


def normalise(text: str) -> str:
    """NFKC-normalise, lower-case (casefold) and collapse whitespace."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text)).strip().casefold()


def _closes_at_end(word: str) -> bool:
    """The bracket that opens ``word`` is closed by its last character (``(f(x))``, not
    ``(a)(b)`` nor ``(f(x)``)."""
    opener, closer = word[0], _BRACKETS[word[0]]
    depth = 0
    for i, ch in enumerate(word):
        depth += (ch == opener) - (ch == closer)
        if depth == 0:
            return i == len(word) - 1
    return False


def _strip_edges(word: str) -> str:
    """``word`` without the sentence punctuation at its edges (see :func:`canonical`).

    A bracket goes only when it is unmatched inside the word or encloses all of it, so ``f(x)``
    stays whole while ``(see`` and ``above)`` lose theirs and ``(c++)`` becomes ``c++``.
    """
    while word:
        first, last = word[0], word[-1]
        if first in _BRACKETS and last == _BRACKETS[first] and _closes_at_end(word):
            word = word[1:-1]
        elif first in _LEAD and (
            first not in _BRACKETS or word.count(first) > word.count(_BRACKETS[first])
        ):
            word = word[1:]
        elif last in _TRAIL and (
            last not in _CLOSERS or word.count(last) > word.count(_CLOSERS[last])
        ):
            word = word[:-1]
        else:
            break
    return word


def canonical(text: str) -> str:
    """The canonical form of ``text`` that :func:`content_hash` hashes (``ARCHITECTURE.md``,
    "Write path", step 2): texts that differ only in these ways are the same memory.

    1. Unicode NFKC (full-width letters, ligatures, compatibility forms: ``ﬁ`` -> ``fi``), then
       case-folded (``Straße`` -> ``strasse``), then NFKC again (casefolding can undo it);
       typographic quotes become ASCII (``’`` -> ``'``, ``“ ”`` -> ``"``), Unicode hyphens become
       ``-`` and invisible format characters (soft hyphen, zero-width space) go.
    2. Whitespace splits the text into words.
    3. Sentence punctuation at the edge of a word goes: ``. , ; : ! ?``, quotes and unmatched
       brackets at its end; quotes, brackets, ``, ; : ! ? ¿ ¡`` at its start. A word made only of
       them disappears. What is inside a word stays, and so does every other symbol: ``C++``,
       ``C#``, ``3.5``, ``v1.2``, ``node.js``, ``1,000``, ``5%``, ``$5``, ``f(x)``, ``Alice's``.
    4. A hyphen between two letters is removed (hyphenated compounds are joined: ``start-up`` ->
       ``startup``, ``e-mail`` -> ``email``); between digits or at an edge it stays (``3-5``,
       ``-5``, ``covid-19``).
    5. The words are joined with single spaces.

    Examples: ``canonical('  "Start-up" founders,  TALK.') == "startup founders talk"``;
    ``canonical("I use C++.") == "i use c++"`` but ``canonical("I use C.") == "i use c"``;
    ``canonical("Python 3.5!") == "python 3.5"`` and not ``"python 35"``.

    A spaced compound (``start up``) is *not* joined: that would need a dictionary. The
    near-identical guard (:mod:`memlane.dedup.guard`) treats it as the joined word instead.
    A text made only of punctuation (``"?!"``) keeps it: its canonical form is :func:`normalise`
    (text), so two such texts are not all one memory.
    """
    text = unicodedata.normalize("NFKC", text)
    text = unicodedata.normalize("NFKC", text.casefold()).translate(_QUOTES_AND_HYPHENS)
    out = []
    for word in text.split():
        word = _COMPOUND_HYPHEN.sub("", _strip_edges(word))
        if word:
            out.append(word)
    return " ".join(out) or normalise(text)


def content_hash(text: str) -> str:
    """``v2:`` (``v`` + :data:`HASH_VERSION`) + the sha256 hex digest of :func:`canonical` (text),
    UTF-8 encoded: the exact-duplicate key of the write path. A ``str`` of 67 characters."""
    digest = hashlib.sha256(canonical(text).encode("utf-8")).hexdigest()
    return f"v{HASH_VERSION}:{digest}"


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters/digits, inner apostrophes kept) of normalised text."""
    return split_words(normalise(text))


def split_words(normalised: str) -> list[str]:
    """:func:`words` of text that is already :func:`normalise`-d (no second normalisation)."""
    return _WORD.findall(normalised)


#: Words that carry no topic: left out of the full-text query (they match most memories and make
#: BM25 slow and noisy). A standard English list (function words, pronouns, auxiliaries).
STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "also",
        "get",
        "got",
        "really",
        "yeah",
        "yes",
        "oh",
        "ok",
        "okay",
        "hey",
        "hi",
        "hello",
        "thanks",
        "thank",
        "lol",
        "im",
        "ive",
        "dont",
        "didnt",
        "thats",
        "gonna",
        "wanna",
        "s",
        "t",
        "d",
        "ll",
        "m",
        "re",
        "ve",
        "let",
        "lets",
        "much",
        "many",
        "one",
        "things",
        "thing",
        "something",
        "anything",
        "like",
        "know",
    ]
)
