"""The canonical form behind the content hash (memlane._text.canonical, ARCHITECTURE.md "Write
path" step 2): what may differ between two texts of one memory, and what may not."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memlane._text import HASH_VERSION, canonical, content_hash

#: Plain words (letters only) and words whose symbols belong to a name or a number.
PLAIN = st.from_regex(r"[a-z]{1,8}", fullmatch=True)
NAMED = st.sampled_from(
    ["c++", "c#", "3.5", "v1.2", "node.js", "1,000", "5%", "$5", "f(x)", "alice's", "3-5", "-5"]
)
WORDS = st.lists(st.one_of(PLAIN, NAMED), min_size=1, max_size=8)

LEADING = ["", '"', "'", "(", "[", "“", "‘", "«", "¿"]
TRAILING = ["", ".", ",", ";", ":", "!", "?", "...", "?!", '"', "'", ")", "]", "”", "’", "»", ".)"]
SPACES = [" ", "  ", "\t", "\n", " \r\n ", "\u3000", "\u00a0"]
CASES = [str.lower, str.upper, str.title, str.capitalize]


@st.composite
def noisy(draw: st.DrawFn, words: list[str]) -> str:
    """``words`` joined with random whitespace, each in a random case and wrapped in random
    sentence punctuation; the whole text padded."""
    out = []
    for word in words:
        case = draw(st.sampled_from(CASES))
        out.append(draw(st.sampled_from(LEADING)) + case(word) + draw(st.sampled_from(TRAILING)))
        out.append(draw(st.sampled_from(SPACES)))
    return draw(st.sampled_from(SPACES)) + "".join(out)


def full_width(text: str) -> str:
    """ASCII letters and digits as their full-width compatibility forms (NFKC undoes it)."""
    return re.sub(r"[A-Za-z0-9]", lambda m: chr(ord(m.group()) + 0xFEE0), text)


# --- what never changes the hash ---------------------------------------------------------------


@given(WORDS, st.data())
def test_edge_punctuation_case_and_whitespace_never_change_the_hash(
    words: list[str], data: st.DataObject
) -> None:
    text = " ".join(words)
    variant = data.draw(noisy(words))
    assert canonical(variant) == canonical(text) == text
    assert content_hash(variant) == content_hash(text)


@given(WORDS)
def test_compatibility_forms_and_curly_quotes_never_change_the_hash(words: list[str]) -> None:
    text = " ".join(words)
    curly = " ".join(f"“{w.replace(chr(39), '’')}”" for w in words)
    assert content_hash(full_width(text)) == content_hash(text)
    assert content_hash(curly) == content_hash(text)


@given(PLAIN, PLAIN, PLAIN, PLAIN)
def test_a_hyphenated_compound_is_the_joined_word(a: str, b: str, before: str, after: str) -> None:
    joined = f"{before} {a}{b} {after}"
    assert content_hash(f"{before} {a}-{b} {after}") == content_hash(joined)
    assert content_hash(f"{before} {a}\u2010{b} {after}") == content_hash(joined)  # Unicode hyphen


@pytest.mark.parametrize(
    ("variant", "text"),
    [
        ("Bob founded a start-up.", "bob founded a startup"),
        ("Alice’s “favourite” editor is Vim!", "alice's favourite editor is vim"),
        ("(Alice) prefers [dark mode].", "alice prefers dark mode"),
        ("Ａｌｉｃｅ ｌｉｋｅｓ ｔｅａ。", "alice likes tea"),
        ("ﬁne STRASSE", "fine straße"),  # ligature (NFKC) and ß (casefold)
        ("e-mail, e\u00admail and e\u200bmail", "email email and email"),  # soft hyphen, ZWSP
        ('She said: "use C++."', "she said use c++"),
        ("I read f(x) (see above).", "i read f(x) see above"),
        ("I read (f(x) and ((g(y))).", "i read f(x) and g(y)"),  # unmatched or enclosing only
        ("Version v1.2!", "version v1.2"),
        ("Python 3.5.", "python 3.5"),
        ("Bob uses Node.js.", "bob uses node.js"),
    ],
)
def test_same_memory(variant: str, text: str) -> None:
    assert content_hash(variant) == content_hash(text)


# --- what always changes it ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Alice knows C++", "Alice knows C"),
        ("Alice knows C#", "Alice knows C"),
        ("Alice knows C++", "Alice knows C#"),
        ("It runs on Python 3.5", "It runs on Python 35"),
        ("The API is at v1.2", "The API is at v12"),
        ("Bob uses node.js", "Bob uses nodejs"),
        ("It takes 3-5 days", "It takes 35 days"),
        ("It is .5 mm", "It is 5 mm"),
        ("The rate is 5%", "The rate is 5"),
        ("The low was -5", "The low was 5"),
        ("It costs 1,000", "It costs 1 000"),
        ("Alice likes tea", "Alice likes tea and coffee"),
        ("Alice gave Bob a ring", "Bob gave Alice a ring"),
        ("?!", "..."),  # only punctuation: kept, so two such texts are not one memory
    ],
)
def test_different_memories(a: str, b: str) -> None:
    assert content_hash(a) != content_hash(b)


@given(st.integers(0, 999), st.integers(0, 999), st.sampled_from(["", "v", "version "]))
def test_a_decimal_point_is_never_dropped(major: int, minor: int, prefix: str) -> None:
    dotted, run_together = f"{prefix}{major}.{minor}", f"{prefix}{major}{minor}"
    assert content_hash(f"It needs {dotted}.") != content_hash(f"It needs {run_together}.")
    assert canonical(f"It needs {dotted}.").endswith(dotted)


@given(PLAIN, st.sampled_from(["++", "+", "#"]))
def test_a_name_keeps_its_symbols(word: str, symbol: str) -> None:
    assert content_hash(f"I use {word}{symbol}.") != content_hash(f"I use {word}.")
    assert content_hash(f"I use {word}{symbol}.") == content_hash(f"i USE {word.upper()}{symbol}")


def test_a_spaced_compound_is_not_joined_by_the_hash() -> None:
    # That needs a dictionary: the guard and the write path handle it (test_duplicate_class.py).
    assert content_hash("Bob founded a start up") != content_hash("Bob founded a startup")


# --- format --------------------------------------------------------------------------------------


def test_hash_format_carries_the_version() -> None:
    assert isinstance(HASH_VERSION, int) and HASH_VERSION == 2
    digest = content_hash("Alice likes tea")
    assert re.fullmatch(r"v2:[0-9a-f]{64}", digest)


def test_docstring_examples_hold() -> None:
    assert canonical('  "Start-up" founders,  TALK.') == "startup founders talk"
    assert canonical("I use C++.") == "i use c++"
    assert canonical("I use C.") == "i use c"
    assert canonical("Python 3.5!") == "python 3.5"
