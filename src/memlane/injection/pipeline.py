"""The injection pipeline: what to put before one model turn, and what the session has seen.

Steps (the design's eight):

1. trivial prompts (short, slash commands, bare acknowledgements) are skipped with no search;
2. the query is the user text, enriched with the recent exchanges when given and the text is a
   follow-up with few content words of its own (``enrich_below_words``);
3. pinned types first when ``ambient_enabled`` (``pinned_types``/``pinned_limit``/``pinned_sort``),
   then the contextual hybrid search;
4. memories learned in this session after its last reset are excluded (feedback-loop guard);
5. dedup against the session: ids injected within ``context_window_depth`` turns, the same id or
   content hash twice in this batch, cosine above ``semantic_threshold`` to a memory injected
   within the window (or already chosen for this block);
6. budget: pinned first, then contextual, at most ``max_total`` items (and ``max_tokens``);
   only what is injected is recorded as injected;
7. one block: ``INJECTION_BLOCK_PREFIX``, then ``[Pinned context]`` and ``[Relevant to this
   message]`` (each only when non-empty), one ``[type] content`` line per memory;
8. a debug log line per item, an info summary, and an injection-event row. No LLM call.

The session state (turn counter, injected ids with their turn) lives in the store, so a hook
process and a server see the same session.
"""

from __future__ import annotations

import logging
import re
import time
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from memlane._text import words
from memlane.config import InjectionSettings
from memlane.errors import InvalidArgument
from memlane.history import INJECTION_BLOCK_PREFIX, is_injection_text
from memlane.retrieval import query_terms, search
from memlane.types import InjectedItem, Injection, Memory, SessionState

if TYPE_CHECKING:
    from memlane.engine import MemoryEngine

log = logging.getLogger("memlane.injection")

PINNED_HEADER = "[Pinned context]"
CONTEXTUAL_HEADER = "[Relevant to this message]"

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


def build_query(text: str, recent: Sequence[str] | None, cfg: InjectionSettings) -> str:
    """The search query: the user text, enriched with the recent exchanges (newest first, each
    clipped to ``cfg.recent_chars``) when the text itself has fewer than
    ``cfg.enrich_below_words`` content words — a follow-up such as "why that?" carries no signal
    of its own, while a full sentence does, and every added character costs query-embedding time
    (measured on the LoCoMo replay: p50 37 ms with the two previous turns, 13 ms without).
    Injected blocks among ``recent`` are left out (they would search for what was injected)."""
    parts = [text.strip()]
    if len(query_terms(text)) >= cfg.enrich_below_words or cfg.recent_chars <= 0:
        return parts[0]
    for previous in reversed(list(recent or [])):
        # an injected block passed back in with the history is memory, not conversation
        if previous.strip() and not is_injection_text(previous):
            parts.append(previous.strip()[: cfg.recent_chars])
    return "\n".join(parts)


def check_session(session: object) -> None:
    """Raise :class:`InvalidArgument` unless ``session`` is a non-empty string."""
    if not isinstance(session, str) or not session.strip():
        raise InvalidArgument(f"session must be a non-empty string, got {session!r}")


def injected_within(state: SessionState, turn: int, depth: int) -> dict[str, int]:
    """The memories of ``state.injected`` shown within the ``depth`` turns up to ``turn`` (the
    window of step 5), with the turn each was injected."""
    return {mid: t for mid, t in state.injected.items() if turn - t < depth}


def format_block(pinned: Sequence[Memory], contextual: Sequence[Memory]) -> str | None:
    """The injection block text, or ``None`` when both lists are empty."""
    if not pinned and not contextual:
        return None
    lines = [INJECTION_BLOCK_PREFIX]
    for header, memories in ((PINNED_HEADER, pinned), (CONTEXTUAL_HEADER, contextual)):
        if memories:
            lines.append(header)
            lines.extend(f"[{m.type.value}] {' '.join(m.content.split())}" for m in memories)
    return "\n".join(lines)


def inject(
    engine: MemoryEngine,
    session: str,
    text: str,
    *,
    owner: str = "default",
    agent: str | None = None,
    recent: Sequence[str] | None = None,
) -> Injection:
    """Decide what to inject before this turn of ``session`` (see module docstring).

    Raises:
        InvalidArgument: empty session id, empty text or not a string, or ``recent`` not a list
            of str. Nothing is recorded for the session then.
    """
    started = time.perf_counter()
    check_session(session)
    if not isinstance(text, str):
        raise InvalidArgument(f"text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise InvalidArgument(
            "text is empty: pass the user's message for this turn (nothing was recorded)"
        )
    if recent is not None and (
        isinstance(recent, str) or not all(isinstance(r, str) for r in recent)
    ):
        raise InvalidArgument("recent must be a list of strings (the previous exchanges)")
    cfg = engine.settings.injection_for(agent)
    store = engine.store
    skipped: Counter[str] = Counter()

    if not cfg.enabled:
        skipped["disabled"] += 1
        state = store.session(owner, session)
        return _finish(engine, owner, session, state.turn, [], [], skipped, started, None, False)

    state = store.begin_turn(owner, session, cfg.context_window_depth)
    turn = state.turn
    if is_trivial(text, cfg.min_chars):
        skipped["trivial"] += 1
        return _finish(engine, owner, session, turn, [], [], skipped, started, text, True)

    # How many more search hits to take so that `search_limit` remain after step 4 (an estimate
    # from the state at the start of the turn; step 4 itself uses the state at selection time).
    same_session = store.session_memory_ids(owner, session, state.last_reset_at)

    pinned_pool: list[tuple[Memory, float]] = []
    if cfg.ambient_enabled and cfg.pinned_types:
        pinned_pool = [
            (m, m.importance)
            for m in store.pinned(owner, agent, cfg.pinned_types, cfg.pinned_limit, cfg.pinned_sort)
        ]
    query = build_query(text, recent, cfg)
    hits = search(
        engine,
        query,
        owner=owner,
        agent=agent,
        limit=min(cfg.search_limit + len(same_session), 1000),
        record_access=False,
    )
    contextual_pool = [(h.memory, h.score) for h in hits]

    # Steps 4-6 and the record run in one write transaction on a fresh read of the session: two
    # processes injecting turns of one session at the same moment are serialised here, so the
    # second sees what the first injected (the search above, the slow part, stays outside).
    with store.transaction():
        state = store.session(owner, session)
        window = set(injected_within(state, turn, cfg.context_window_depth))
        same_session = store.session_memory_ids(owner, session, state.last_reset_at)
        pinned, contextual = _select(
            engine, owner, cfg, pinned_pool, contextual_pool, window, same_session, skipped
        )
        return _finish(
            engine, owner, session, turn, pinned, contextual, skipped, started, query, True
        )


def _select(
    engine: MemoryEngine,
    owner: str,
    cfg: InjectionSettings,
    pinned_pool: list[tuple[Memory, float]],
    contextual_pool: list[tuple[Memory, float]],
    window: set[str],
    same_session: set[str],
    skipped: Counter[str],
) -> tuple[list[tuple[Memory, float]], list[tuple[Memory, float]]]:
    """Steps 4-6: what of the pools is injected (pinned, contextual), counting what is left out
    in ``skipped``."""
    store = engine.store
    # Step 5: dedup. Vectors of the window and the candidates, for the semantic buffer: one row
    # a memory shown within the window or chosen for this block.
    candidate_ids = [m.id for m, _ in pinned_pool + contextual_pool]
    vectors = store.embeddings(owner, list(dict.fromkeys([*window, *candidate_ids])))
    shown = [vectors[mid] for mid in window if mid in vectors]
    buffer = np.stack(shown) if shown else None
    chosen_ids: set[str] = set()
    chosen_hashes: set[str] = set()
    chosen: dict[str, list[tuple[Memory, float]]] = {"pinned": [], "contextual": []}
    budget_chars = cfg.max_tokens * 4 if cfg.max_tokens else None
    used_chars = 0
    total = 0
    seen_contextual = 0
    for source, pool in (("pinned", pinned_pool), ("contextual", contextual_pool)):
        for memory, score in pool:
            if source == "contextual" and seen_contextual >= cfg.search_limit:
                break
            if memory.id in same_session:
                skipped["same_session"] += 1
                continue
            if source == "contextual":
                seen_contextual += 1
            if memory.id in window:
                skipped["already_injected"] += 1
                continue
            if memory.id in chosen_ids or memory.content_hash in chosen_hashes:
                skipped["duplicate_in_batch"] += 1
                continue
            vec = vectors.get(memory.id)
            if (
                vec is not None
                and buffer is not None
                and float(np.max(buffer @ vec)) > cfg.semantic_threshold
            ):
                skipped["semantic_duplicate"] += 1
                continue
            if total >= cfg.max_total:
                skipped["budget"] += 1
                continue
            cost = len(memory.content) + len(memory.type.value) + 3
            if budget_chars is not None and used_chars + cost > budget_chars:
                skipped["budget"] += 1
                continue
            chosen[source].append((memory, score))
            chosen_ids.add(memory.id)
            chosen_hashes.add(memory.content_hash)
            if vec is not None:
                buffer = vec[np.newaxis] if buffer is None else np.vstack((buffer, vec))
            used_chars += cost
            total += 1
    return chosen["pinned"], chosen["contextual"]


def _finish(
    engine: MemoryEngine,
    owner: str,
    session: str,
    turn: int,
    pinned: list[tuple[Memory, float]],
    contextual: list[tuple[Memory, float]],
    skipped: Counter[str],
    started: float,
    query: str | None,
    record: bool,
) -> Injection:
    items = tuple(
        [InjectedItem(m, "pinned", round(s, 6)) for m, s in pinned]
        + [InjectedItem(m, "contextual", round(s, 6)) for m, s in contextual]
    )
    block = format_block([m for m, _ in pinned], [m for m, _ in contextual])
    ids = [item.memory.id for item in items]
    elapsed = (time.perf_counter() - started) * 1000.0
    if record:
        engine.store.record_injection(
            owner,
            session,
            turn,
            ids,
            {"skipped": dict(skipped), "elapsed_ms": elapsed, "query": query},
        )
        if ids:
            engine.store.record_access(ids)
    for item in items:
        log.debug(
            "inject session=%s turn=%d id=%s type=%s source=%s score=%.5f",
            session,
            turn,
            item.memory.id,
            item.memory.type.value,
            item.source,
            item.score,
        )
    elapsed = (time.perf_counter() - started) * 1000.0
    log.info(
        "inject session=%s turn=%d injected=%d pinned=%d skipped=%s elapsed_ms=%.1f",
        session,
        turn,
        len(items),
        len(pinned),
        dict(skipped),
        elapsed,
    )
    return Injection(
        session=session,
        turn=turn,
        block=block,
        items=items,
        skipped=dict(skipped),
        elapsed_ms=round(elapsed, 3),
    )
