"""Text normalisation shared by the content hash, the near-identical guard and the FTS query."""

from __future__ import annotations

import hashlib
import re
import unicodedata

#: Version tag of the content-hash format (bump if normalisation changes; old rows keep theirs).
HASH_VERSION = "v1"

_WS = re.compile(r"\s+")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)


def normalise(text: str) -> str:
    """NFKC-normalise, lower-case (casefold) and collapse whitespace."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text)).strip().casefold()


def content_hash(text: str) -> str:
    """``v1:`` + sha256 hex of :func:`normalise` (text), the exact-duplicate key of the write path."""
    digest = hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()
    return f"{HASH_VERSION}:{digest}"


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
