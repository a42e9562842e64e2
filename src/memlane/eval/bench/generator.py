"""A seeded generator of synthetic but realistic memories, and of queries about them, for
``memlane bench add|search|inject`` (the runs are in :mod:`memlane.eval.bench.runs`).

The generator writes the kind of memories an assistant keeps about its user's world: people and
their jobs, relations, preferences and habits; projects with deadlines, budgets, stacks and
outages; trips, birthdays and other events; places; numbers and dates; goals, to-dos, decisions and
observations. About 40 templates with one to three phrasings each, filled from word lists of a few
hundred names, cities, companies, tools, foods and so on, so full-text search and the vectors see a
varied vocabulary (common words such as names and cities recur across thousands of memories, as in
a real store). A fraction of the stream is *near-repeats* of earlier memories so the write path's
deduplication does real work: exact repeats (``hash_exact``), the same text with other punctuation
(``auto_reject``), the same fact with a detail added (``replaced``), another phrasing of the same
fact (gray zone) and a changed number (``guard_keep``).

Queries come in two kinds: *hits* are questions about a stored fact, phrased differently from it
(``"Where does Maria Lopez work these days?"`` for ``"Maria Lopez works at Northwind Analytics as
a data engineer."``), and *misses* are questions on topics no memory is about.

Everything is a pure function of the seed: the same seed always gives the same texts, in the same
order, and the first ``n`` memories of a longer stream are the ``n`` memories of a shorter one.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memlane.eval.bench import words
from memlane.eval.bench.templates import TEMPLATES, Template
from memlane.eval.bench.words import (
    CHAT_OPENERS,
    CODE_ADJ,
    CODE_NOUN,
    COMPANY_A,
    COMPANY_B,
    CUISINES,
    DOMAINS,
    FIRST_NAMES,
    HIT_PREFIXES,
    LAST_NAMES,
    MISS_FORMS,
    MISS_TAILS,
    MISS_TOPICS,
    MONTHS,
)

#: Bumped whenever the generator's output changes (it is part of the cache key of built stores).
GENERATOR_VERSION = 1

#: Slots drawn from a pool (slot -> name of the pool): a list of :mod:`memlane.eval.bench.words`,
#: or the generator's own ``people``, ``companies`` and ``projects``.
_CHOICES: dict[str, str] = {
    "person": "people",
    "first2": "FIRST_NAMES",
    "company": "companies",
    "role": "ROLES",
    "team": "TEAMS",
    "code": "projects",
    "tool": "TOOLS",
    "component": "COMPONENTS",
    "cause": "OUTAGE_CAUSES",
    "drink": "DRINKS",
    "allergen": "ALLERGENS",
    "hobby": "HOBBIES",
    "genre": "GENRES",
    "editor": "EDITORS",
    "theme": "THEMES",
    "pet": "PETS",
    "pet_name": "PET_NAMES",
    "language": "LANGUAGES",
    "nationality": "NATIONALITIES",
    "city": "CITIES",
    "country": "COUNTRIES",
    "landmark": "LANDMARKS",
    "street": "STREET_NAMES",
    "restaurant": "RESTAURANTS",
    "place": "PLACES",
    "event_kind": "EVENT_KINDS",
    "document": "DOCUMENTS",
    "feeling": "FEELINGS",
    "month": "MONTHS",
    "weekday": "WEEKDAYS",
    "season": "SEASONS",
    "colour": "COLOURS",
    "car": "CARS",
}
#: Second slot of a pair (never equal to the first): slot -> (first slot, pool).
_PAIRED: dict[str, tuple[str, str]] = {
    "person2": ("person", "people"),
    "company2": ("company", "companies"),
    "tool2": ("tool", "TOOLS"),
    "drink2": ("drink", "DRINKS"),
    "language2": ("language", "LANGUAGES"),
    "city2": ("city", "CITIES"),
}
_NUMBERS: dict[str, Callable[[random.Random], str]] = {
    "day": lambda r: str(r.randint(1, 28)),
    "year": lambda r: str(r.randint(2009, 2025)),
    "future_year": lambda r: str(r.randint(2026, 2030)),
    "date": lambda r: f"{r.choice(MONTHS)} {r.randint(1, 28)}, {r.randint(2023, 2027)}",
    "n": lambda r: str(r.randint(2, 12)),
    "small": lambda r: str(r.randint(2, 6)),
    "hour": lambda r: str(r.randint(7, 11)),
    "minutes": lambda r: str(r.randint(10, 59)),
    "km": lambda r: str(r.randint(10, 80)),
    "number": lambda r: str(r.randint(12, 4800)),
    "room": lambda r: f"{r.randint(1, 9)}.{r.randint(1, 40):02d}",
    "amount": lambda r: f"{r.randint(20, 950) * 1000:,}",
    "rent": lambda r: f"{r.randint(45, 320) * 10:,}",
    "salary": lambda r: f"{r.randint(35, 180) * 1000:,}",
}
#: The order slots are drawn in (a pair's first slot before its second, person before email).
_SLOT_ORDER: tuple[str, ...] = (
    *_CHOICES,
    *_PAIRED,
    "cuisine",
    "dish",
    "email",
    *_NUMBERS,
)


def _template_fields(template: Template) -> tuple[str, ...]:
    names: set[str] = set()
    for text in (*template.texts, *template.questions, *template.details):
        names.update(f for _, f, _, _ in string.Formatter().parse(text) if f)
    unknown = names - set(_SLOT_ORDER)
    if unknown:  # pragma: no cover - a typo in a template
        raise ValueError(f"template {template.name!r}: unknown slots {sorted(unknown)}")
    if "email" in names:
        names.add("person")
    return tuple(f for f in _SLOT_ORDER if f in names)


_FIELDS: dict[str, tuple[str, ...]] = {t.name: _template_fields(t) for t in TEMPLATES}

_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class SyntheticMemory:
    """One generated memory: its text and type, the question it answers, and how it came about
    (``kind``: ``new`` or a near-repeat ``repeat``/``punctuation``/``extend``/``reword``/
    ``number``; ``base`` is the stream index of the memory it repeats, else its own index)."""

    content: str
    type: str
    question: str
    kind: str
    base: int


@dataclass(slots=True)
class _Fact:
    template: Template
    slots: dict[str, str]
    phrasing: int


class Generator:
    """Seeded stream of :class:`SyntheticMemory` and of queries about it.

    ``near_repeats`` is the fraction of the stream that repeats an earlier memory (see the module
    docstring); the rest are new facts.
    """

    def __init__(self, seed: int = 0, *, near_repeats: float = 0.1, people: int = 3000) -> None:
        self.seed = seed
        self.near_repeats = near_repeats
        rng = random.Random(f"memlane-bench:{seed}:people")
        # A fixed cast of people: each recurs across many memories, as in a real store.
        seen: set[str] = set()
        self.people: list[str] = []
        while len(self.people) < people:
            name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
            if name not in seen:
                seen.add(name)
                self.people.append(name)
        self.projects = [f"{a} {n}" for a in CODE_ADJ for n in CODE_NOUN]
        rng.shuffle(self.projects)
        self.projects = self.projects[:600]
        self.companies = [f"{a} {b}" for a in COMPANY_A for b in COMPANY_B]
        rng.shuffle(self.companies)
        self.companies = self.companies[:400]
        self._facts: list[_Fact] = []
        self._fact_index: list[int] = []  # stream index of each entry of _facts
        self._stream: list[SyntheticMemory] = []
        self._rng = random.Random(f"memlane-bench:{seed}:stream")

    # ------------------------------------------------------------------------- memories
    def memories(self, n: int, start: int = 0) -> list[SyntheticMemory]:
        """Memories ``start .. start+n-1`` of the stream (always the same for a seed)."""
        while len(self._stream) < start + n:
            self._stream.append(self._next(len(self._stream)))
        return self._stream[start : start + n]

    def _next(self, index: int) -> SyntheticMemory:
        rng = self._rng
        if self._facts and rng.random() < self.near_repeats:
            return self._near_repeat(index, rng)
        template = TEMPLATES[rng.randrange(len(TEMPLATES))]
        slots = self._fill(rng, _FIELDS[template.name])
        phrasing = rng.randrange(len(template.texts))
        self._facts.append(_Fact(template, slots, phrasing))
        text = template.texts[phrasing].format(**slots)
        question = rng.choice(template.questions).format(**slots)
        self._fact_index.append(index)
        return SyntheticMemory(text, template.type, question, "new", index)

    def _near_repeat(self, index: int, rng: random.Random) -> SyntheticMemory:
        k = rng.randrange(len(self._facts))
        fact = self._facts[k]
        base = self._fact_index[k]
        template = fact.template
        text = template.texts[fact.phrasing].format(**fact.slots)
        question = rng.choice(template.questions).format(**fact.slots)
        roll = rng.random()
        if roll < 0.25:
            kind = "repeat"  # the exact text again (another session said it again)
        elif roll < 0.45:
            kind = "punctuation"  # same words, other punctuation: another hash, same meaning
            text = text.rstrip(".") + rng.choice(["", "!", " !", "...", " :)"])
        elif roll < 0.70 and template.details:
            kind = "extend"
            detail = rng.choice(template.details).format(**fact.slots)
            text = text.rstrip(".") + detail + "."
        elif roll < 0.85 and len(template.texts) > 1:
            kind = "reword"
            other = [i for i in range(len(template.texts)) if i != fact.phrasing]
            text = template.texts[rng.choice(other)].format(**fact.slots)
        else:
            kind = "number"
            numbers = _NUMBER.findall(text)
            if numbers:
                old = rng.choice(numbers)
                new = str(int(old) + rng.randint(1, 9))
                text = text.replace(old, new, 1)
            else:
                kind = "repeat"
        return SyntheticMemory(text, template.type, question, kind, base)

    def _fill(self, rng: random.Random, fields: Sequence[str]) -> dict[str, str]:
        """Draw a value for each of ``fields`` (in :data:`_SLOT_ORDER`, so pairs stay distinct
        and ``email`` follows ``person``)."""
        out: dict[str, str] = {}
        for name in fields:
            if name in out:
                continue
            if name in _PAIRED:
                first, pool_name = _PAIRED[name]
                pool = self._pool(pool_name)
                value = rng.choice(pool)
                while value == out.get(first):
                    value = rng.choice(pool)
                out[name] = value
            elif name in ("cuisine", "dish"):
                out["cuisine"], out["dish"] = rng.choice(CUISINES)
            elif name == "email":
                first, last = out["person"].split(" ", 1)
                out[name] = (
                    f"{first.lower()}.{last.lower()}{rng.randint(1, 99)}@{rng.choice(DOMAINS)}"
                )
            elif name in _CHOICES:
                out[name] = rng.choice(self._pool(_CHOICES[name]))
            else:
                out[name] = _NUMBERS[name](rng)
        return out

    def _pool(self, name: str) -> Sequence[str]:
        if name == "people":
            return self.people
        if name == "companies":
            return self.companies
        if name == "projects":
            return self.projects
        pool: Sequence[str] = getattr(words, name)
        return pool

    # ------------------------------------------------------------------------- queries
    def queries(
        self, n: int, stored: int, *, hit_ratio: float = 0.7, salt: str = "queries"
    ) -> list[BenchQuery]:
        """``n`` distinct queries about the first ``stored`` memories: about ``hit_ratio`` of them
        questions about a stored fact, the rest on unrelated topics. ``salt`` draws another set."""
        memories = self.memories(stored)
        rng = random.Random(f"memlane-bench:{self.seed}:{salt}")
        out: list[BenchQuery] = []
        seen: set[str] = set()
        attempts = 0
        while len(out) < n:
            attempts += 1
            if attempts > n * 50:
                raise RuntimeError("could not draw enough distinct queries")
            if rng.random() < hit_ratio:
                mem = memories[rng.randrange(len(memories))]
                text = _join(rng.choice(HIT_PREFIXES), mem.question)
                query = BenchQuery(text, hit=True, target=mem.content)
            else:
                form = rng.choice(MISS_FORMS).format(t=rng.choice(MISS_TOPICS))
                query = BenchQuery(form + rng.choice(MISS_TAILS), hit=False, target=None)
            if query.text in seen:
                continue
            seen.add(query.text)
            out.append(query)
        return out

    def conversation(
        self, turns: int, stored: int, *, sessions: int = 8, salt: str = "inject"
    ) -> list[Turn]:
        """``turns`` user messages spread round-robin over ``sessions`` sessions, each with the
        session's two previous messages as ``recent``."""
        rng = random.Random(f"memlane-bench:{self.seed}:{salt}:chat")
        queries = self.queries(turns, stored, salt=salt)
        history: dict[int, list[str]] = {}
        out: list[Turn] = []
        for i, q in enumerate(queries):
            s = i % sessions
            past = history.setdefault(s, [])
            text = _join(rng.choice(CHAT_OPENERS), q.text)
            out.append(Turn(s, text, tuple(past[-2:]), q.hit))
            past.append(text)
        return out


def _join(prefix: str, text: str) -> str:
    """``prefix + text``, with the text's first letter lower-cased after a comma or a word."""
    if prefix and not prefix.rstrip().endswith((".", "!", "?", ":")) and text[1:2].islower():
        text = text[:1].lower() + text[1:]
    return prefix + text


@dataclass(frozen=True, slots=True)
class BenchQuery:
    text: str
    hit: bool
    #: The stored text the question is about (hits only).
    target: str | None


@dataclass(frozen=True, slots=True)
class Turn:
    session: int
    text: str
    recent: tuple[str, ...]
    hit: bool
