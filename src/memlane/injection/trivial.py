"""Trivial prompts (the injection pipeline's step 1): text that needs no memory at all, so no
search is made ("ok", "thanks!!", "/compact", "Mel: Bye! Take care.")."""

from __future__ import annotations

import re
import unicodedata

from memlane._text import words

#: Bare acknowledgements: a prompt made only of these (plus at most one capitalised word after
#: the first, e.g. a name: "Thanks, Mel!") carries nothing to search for.
ACKNOWLEDGEMENTS = frozenset(
    [
        "ok",
        "okay",
        "k",
        "kk",
        "yes",
        "yeah",
        "yea",
        "yep",
        "yup",
        "no",
        "nope",
        "nah",
        "sure",
        "thanks",
        "thank",
        "thx",
        "ty",
        "you",
        "cool",
        "great",
        "nice",
        "good",
        "awesome",
        "perfect",
        "wow",
        "lol",
        "lmao",
        "haha",
        "hahaha",
        "hehe",
        "hmm",
        "hm",
        "mhm",
        "right",
        "alright",
        "fine",
        "got",
        "gotcha",
        "it",
        "agreed",
        "indeed",
        "exactly",
        "true",
        "totally",
        "sounds",
        "done",
        "continue",
        "go",
        "ahead",
        "please",
        "yay",
        "oh",
        "ah",
        "aw",
        "aww",
        "wonderful",
        "amazing",
        "congrats",
        "congratulations",
        "cheers",
        "bye",
        "goodbye",
        "later",
        "ttyl",
        "cya",
        "hi",
        "hello",
        "hey",
        "welcome",
        "appreciate",
        "that",
    ]
)
#: Multi-word acknowledgements and farewells, matched as one unit (words of ``_text.words``).
#: Their words are not acknowledgements on their own ("take the dog" is not trivial).
ACKNOWLEDGEMENT_PHRASES = frozenset(
    [
        ("take", "care"),
        ("see", "ya"),
        ("see", "you"),
        ("see", "you", "later"),
        ("see", "you", "soon"),
        ("see", "you", "around"),
        ("bye", "for", "now"),
        ("talk", "soon"),
        ("talk", "later"),
        ("talk", "to", "you", "later"),
        ("talk", "to", "you", "soon"),
        ("chat", "soon"),
        ("chat", "later"),
        ("catch", "you", "later"),
        ("catch", "you", "soon"),
        ("you", "too"),
        ("me", "too"),
        ("same", "here"),
        ("same", "to", "you"),
        ("no", "problem"),
        ("no", "worries"),
        ("will", "do"),
        ("sure", "thing"),
        ("thank", "you"),
        ("thanks", "a", "lot"),
        ("much", "appreciated"),
        ("good", "luck"),
        ("good", "night"),
        ("have", "fun"),
        ("have", "a", "good", "one"),
        ("have", "a", "good", "day"),
        ("have", "a", "great", "day"),
    ]
)
_LONGEST_PHRASE = max(len(p) for p in ACKNOWLEDGEMENT_PHRASES)
#: At most this many words after a speaker label for an acknowledgement ("Thanks, John! Take
#: care, bye!" is 5); anything longer is searched.
_MAX_ACK_WORDS = 8
_ONLY_SYMBOLS = re.compile(r"^[\W_]*$", re.UNICODE)
_CASED_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
#: A leading speaker label, as chat replays send turns: 1-3 words then ':' and a space (or the
#: end), e.g. "Caroline: thanks!". Each word must start with a capital (checked in code).
_SPEAKER_LABEL = re.compile(r"^([^\W\d_][\w'’.-]*(?:[ \t]+[^\W\d_][\w'’.-]*){0,2})[ \t]*:(?:\s+|$)")


def strip_speaker(text: str) -> str:
    """``text`` without a leading speaker label ("Caroline: thanks!" -> "thanks!"): a short name
    of 1-3 capitalised words followed by ':'. Other text is returned unchanged."""
    match = _SPEAKER_LABEL.match(text)
    if match is None or not all(w[0].isupper() for w in match.group(1).split()):
        return text
    return text[match.end() :]


def _is_acknowledgement(text: str) -> bool:
    """True when ``text`` is only acknowledgements/farewells (single words or phrases), with at
    most one other word that reads as a name (capitalised, not the first word, not starting a
    sentence): "Thanks Nate! See you later!"."""
    text = unicodedata.normalize("NFKC", text)
    found = list(_CASED_WORD.finditer(text))
    tokens = [m.group().casefold() for m in found]
    if len(tokens) > _MAX_ACK_WORDS:
        return False
    other: list[int] = []
    i = 0
    while i < len(tokens):
        for size in range(min(_LONGEST_PHRASE, len(tokens) - i), 1, -1):
            if tuple(tokens[i : i + size]) in ACKNOWLEDGEMENT_PHRASES:
                i += size
                break
        else:
            if tokens[i] not in ACKNOWLEDGEMENTS:
                other.append(i)
            i += 1
    if not other:
        return True
    if len(other) != 1 or other[0] == 0:
        return False
    # The one other word must read as a name: capitalised, not "I"/"I'll", not a new sentence.
    name = found[other[0]]
    before = text[: name.start()].rstrip()
    return (
        name.group()[0].isupper()
        and tokens[other[0]] != "i"
        and not tokens[other[0]].startswith(("i'", "i’"))
        and not before.endswith((".", "!", ";"))
    )


def is_trivial(text: str, min_chars: int = 8) -> bool:
    """True for prompts that need no memory: shorter than ``min_chars``, a slash command, or a
    bare acknowledgement ("ok", "thanks!!", "ok 👍", "Nice, Mel!", "Bye! Take care.").

    A leading speaker label, as chat replays send turns ("Caroline: thanks!"), is set aside and
    only the rest is judged: "Mel: Bye! Take care." is trivial, "Note: buy milk" is not. Anything
    with a question mark or a word of content is searched."""
    stripped = text.strip()
    if len(stripped) < min_chars or stripped.startswith("/") or _ONLY_SYMBOLS.match(stripped):
        return True
    body = strip_speaker(stripped).strip()
    if _ONLY_SYMBOLS.match(body) or not words(body):
        return True
    if "?" in body:
        return False
    return _is_acknowledgement(body)
