"""The injection pipeline: what to put before one model turn, and what the session has seen.

Steps (the design's eight):

1. trivial prompts (short, slash commands, bare acknowledgements) are skipped with no search;
2. the query is the user text, enriched with the recent exchanges when given and the text is a
   follow-up with few content words of its own (``enrich_below_words``);
3. pinned types first when ``ambient_enabled`` (``pinned_types``/``pinned_limit``/``pinned_sort``),
   then the contextual hybrid search, whose weak single-leg hits are cut
   (:mod:`memlane.injection.cut`, ``skipped["weak_match"]``);
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
process and a server see the same session. The turn's writes (its turn number, what it injected,
its event row) commit together in one transaction, after the search: two processes injecting
turns of one session at once are serialised there, so neither repeats what the other showed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from memlane.config import InjectionSettings
from memlane.embeddings.cache import Embeddings
from memlane.errors import InvalidArgument
from memlane.history import INJECTION_BLOCK_PREFIX, is_injection_text
from memlane.injection.agree import NearPairs
from memlane.injection.cut import WEAK, cut
from memlane.injection.sessions import check_session, injected_within
from memlane.injection.trivial import is_trivial
from memlane.retrieval import LegScores, Retriever, query_terms
from memlane.store.base import MemoryStore, PinnedQuery, TurnQuery, TurnStart
from memlane.types import InjectedItem, Injection, Memory, PinnedSort

log = logging.getLogger("memlane.injection")

PINNED_HEADER = "[Pinned context]"
CONTEXTUAL_HEADER = "[Relevant to this message]"


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


def format_block(
    pinned: Sequence[Memory],
    contextual: Sequence[Memory],
    notes: Mapping[str, str] | None = None,
) -> str | None:
    """The injection block text, or ``None`` when both lists are empty. ``notes``: memory id ->
    what its line adds (an update's earlier value and dates,
    :func:`memlane.injection.agree.update_note`)."""
    if not pinned and not contextual:
        return None
    notes = notes or {}
    lines = [INJECTION_BLOCK_PREFIX]
    for header, memories in ((PINNED_HEADER, pinned), (CONTEXTUAL_HEADER, contextual)):
        if memories:
            lines.append(header)
            lines.extend(_line(m, notes.get(m.id)) for m in memories)
    return "\n".join(lines)


def _check_max_chars(max_chars: object) -> None:
    if max_chars is not None and (
        isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1
    ):
        raise InvalidArgument(f"max_chars must be a positive integer, got {max_chars!r}")


def _line(memory: Memory, note: str | None = None) -> str:
    """One memory's line in the block: ``[type] content`` with its whitespace folded; with a
    ``note``: ``[fact] Priya is 35 years old (since 2026-11-25; before: 34, as of ...).``"""
    text = " ".join(memory.content.split())
    if note:
        bare = text.rstrip(".")
        text = f"{bare} {note}{'.' if bare != text else ''}"
    return f"[{memory.type.value}] {text}"


class Injector:
    """The per-turn injection pipeline; takes the store, the retriever and the per-agent
    ``[injection]`` settings (``settings_for(agent)``)."""

    def __init__(
        self,
        store: MemoryStore,
        retriever: Retriever,
        settings_for: Callable[[str | None], InjectionSettings],
    ) -> None:
        self.store = store
        self.retriever = retriever
        self.settings_for = settings_for

    def inject(
        self,
        session: str,
        text: str,
        *,
        owner: str = "default",
        agent: str | None = None,
        recent: Sequence[str] | None = None,
        max_chars: int | None = None,
        known: Sequence[str] = (),
        project: str | None = None,
    ) -> Injection:
        """Decide what to inject before this turn of ``session`` (see module docstring).
        With ``project``: that project's memories and the owner's global ones
        (:mod:`memlane.scope`); ``None``: every project's.

        ``known``: ids of memories the conversation already holds although the session did not
        learn them (a coding assistant's MCP ``remember`` call of this session: the memory's
        text is in the tool call); left out as the session's own memories are
        (``skipped["same_session"]``).

        ``max_chars``: the longest ``block`` allowed, in characters (a client's limit, such as
        Claude Code's ~10,000 for hook output): items that would push the block past it are
        left out (``skipped["budget"]``), lowest-ranked first since items are taken in rank
        order; only the items in the block are recorded as injected. ``None``: no limit.

        Raises:
            InvalidArgument: empty session id, empty text or not a string, or ``recent`` not a
                list of str. Nothing is recorded for the session then.
            StoreError: the store failed; nothing was recorded (the turn was not counted).
        """
        _check_max_chars(max_chars)
        result = self._inject(session, text, owner, agent, recent, max_chars, known, project)
        self._log(result)
        return result

    def inject_pinned(
        self,
        session: str,
        *,
        owner: str = "default",
        agent: str | None = None,
        max_chars: int | None = None,
        project: str | None = None,
    ) -> Injection:
        """Only the pinned memories (step 3's ambient awareness), for the start of a session
        (a coding assistant's ``SessionStart``: no user text yet), of ``project`` and global
        ones when given. With ambient awareness off
        (``ambient_enabled``, ``pinned_types``) nothing is searched, counted or recorded
        (``skipped["ambient_off"]``); otherwise the pinned memories not shown within the window
        are injected as one turn, and recorded, exactly like :meth:`inject`'s.

        Raises:
            InvalidArgument: empty session id, or a bad ``max_chars``.
            StoreError: the store failed; nothing was recorded.
        """
        started = time.perf_counter()
        check_session(session)
        _check_max_chars(max_chars)
        cfg = self.settings_for(agent)
        store = self.store
        skipped: Counter[str] = Counter()
        turn = _Turn(owner, session, started, skipped)
        if not (cfg.enabled and cfg.ambient_enabled and cfg.pinned_types and cfg.pinned_limit):
            skipped["ambient_off"] += 1
            return self._finish(turn, store.session(owner, session).turn, _Chosen(), None, False)
        sort = PinnedSort(cfg.pinned_sort)
        query = PinnedQuery(cfg.pinned_types, cfg.pinned_limit, sort, project)
        pool = [(m, m.importance) for m in store.turn_context(owner, session, agent, query).pinned]
        with store.transaction():
            start = store.start_turn(
                owner, session, cfg.context_window_depth, [m.id for m, _ in pool]
            )
            state = start.state
            window = set(injected_within(state, state.turn, cfg.context_window_depth))
            chosen = self._select(owner, cfg, pool, [], window, start, skipped, max_chars)
            result = self._finish(turn, state.turn, chosen, None, True)
        self._log(result)
        return result

    def _inject(
        self,
        session: str,
        text: str,
        owner: str,
        agent: str | None,
        recent: Sequence[str] | None,
        max_chars: int | None = None,
        known: Sequence[str] = (),
        project: str | None = None,
    ) -> Injection:
        started = time.perf_counter()
        check_session(session)
        if isinstance(known, str) or not all(isinstance(k, str) for k in known):
            raise InvalidArgument("known must be a list of memory ids (strings)")
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
        cfg = self.settings_for(agent)
        store = self.store
        skipped: Counter[str] = Counter()
        turn = _Turn(owner, session, started, skipped)

        if not cfg.enabled:
            skipped["disabled"] += 1
            return self._finish(turn, store.session(owner, session).turn, _Chosen(), None, False)

        if is_trivial(text, cfg.min_chars):
            skipped["trivial"] += 1
            with store.transaction():
                number = store.start_turn(owner, session, cfg.context_window_depth, []).state.turn
                return self._finish(turn, number, _Chosen(), text, True)

        # How many more search hits to take so that `search_limit` remain after step 4 (an
        # estimate from the state before the search; step 4 uses the state at selection time).
        # One round trip: the session's state and memories, and the pinned memories, with the
        # search's first (its caches caught up): the search step the retriever goes on with.
        pinned_query = None
        if cfg.ambient_enabled and cfg.pinned_types:
            sort = PinnedSort(cfg.pinned_sort)
            pinned_query = PinnedQuery(cfg.pinned_types, cfg.pinned_limit, sort, project)
        query = build_query(text, recent, cfg)
        with _embedding_ahead(self.retriever.embeddings, query):
            step = store.search_step(owner, agent, TurnQuery(session, pinned_query))
        context = step.context
        assert context is not None  # asked with a turn
        same_session = context.same_session | set(known)
        pinned_pool = [(m, m.importance) for m in context.pinned]
        evidence = LegScores()
        hits = self.retriever.search(
            query,
            owner=owner,
            agent=agent,
            limit=min(cfg.search_limit + len(same_session), 1000),
            record_access=False,
            step=step,
            project=project,
            evidence=evidence,
            depth=cfg.search_candidates + len(same_session),  # docs/replay.md
        )
        hits, weak = cut(hits, evidence, cfg)  # the legs' own evidence (injection/cut.py)
        if weak:
            skipped[WEAK] += weak
        contextual_pool = [(h.memory, h.score) for h in hits]

        # Steps 4-6 and the record: one write transaction on a fresh read of the session (the
        # search above, the slow part, stays outside it).
        candidates = [m.id for m, _ in pinned_pool + contextual_pool]
        with store.transaction():
            start = store.start_turn(owner, session, cfg.context_window_depth, candidates)
            if known:  # held by the conversation: left out as the session's own memories
                start = dataclasses.replace(start, same_session=start.same_session | set(known))
            state = start.state
            window = set(injected_within(state, state.turn, cfg.context_window_depth))
            chosen = self._select(
                owner, cfg, pinned_pool, contextual_pool, window, start, skipped, max_chars
            )
            return self._finish(turn, state.turn, chosen, query, True)

    def _select(
        self,
        owner: str,
        cfg: InjectionSettings,
        pinned_pool: list[tuple[Memory, float]],
        contextual_pool: list[tuple[Memory, float]],
        window: set[str],
        start: TurnStart,
        skipped: Counter[str],
        max_chars: int | None = None,
    ) -> _Chosen:
        """Steps 4-6: what of the pools is injected, counting what is left out in ``skipped``;
        with ``max_chars`` the block :func:`format_block` makes of them is at most that long.

        Step 5's semantic buffer asks the write path's guard about every pair above
        ``semantic_threshold`` (:func:`memlane.injection.agree.relate`): only ``same`` pairs
        are duplicates; of an ``update`` pair (a changed value, a negation) the newer is shown
        with the older's value and date (``notes``) and the older is never shown alone
        (``skipped["superseded"]`` when the newer was shown within the window or was learned
        in this session); ``distinct`` pairs (swapped roles...) are both injectable.
        ``start``: the turn's state (:meth:`~memlane.store.base.MemoryStore.start_turn`): the
        session's memories and the embeddings of the window's memories and the candidates."""
        same_session, vectors = start.same_session, start.vectors
        near = NearPairs(self.store, owner, cfg.semantic_threshold, vectors, window)
        near.add_pool([m for m, _ in pinned_pool + contextual_pool])
        chosen = _Chosen()
        chosen_hashes: set[str] = set()
        budget_chars = cfg.max_tokens * 4 if cfg.max_tokens else None
        used_chars = 0
        block_chars = len(INJECTION_BLOCK_PREFIX)  # the length format_block's text will have
        total = 0
        seen_contextual = 0
        for source, pool in (("pinned", pinned_pool), ("contextual", contextual_pool)):
            section = chosen.pinned if source == "pinned" else chosen.contextual
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
                if memory.id in chosen.ids or memory.content_hash in chosen_hashes:
                    skipped["duplicate_in_batch"] += 1
                    continue
                verdict = near.judge(memory, same_session, chosen.ids)
                if verdict.skip is not None:
                    skipped[verdict.skip] += 1
                    continue
                shown = verdict.show or memory
                if shown.id in chosen.ids:
                    skipped["duplicate_in_batch"] += 1
                    continue
                if total >= cfg.max_total:
                    skipped["budget"] += 1
                    continue
                cost = len(shown.content) + len(shown.type.value) + 3 + len(verdict.note or "")
                if budget_chars is not None and used_chars + cost > budget_chars:
                    skipped["budget"] += 1
                    continue
                line = 1 + len(_line(shown, verdict.note))  # "\n" + the line
                if not section:  # "\n" + the section's header
                    line += 1 + len(PINNED_HEADER if source == "pinned" else CONTEXTUAL_HEADER)
                if max_chars is not None and block_chars + line > max_chars:
                    skipped["budget"] += 1
                    continue
                block_chars += line
                section.append((shown, score))
                chosen.ids.add(shown.id)
                chosen_hashes.add(shown.content_hash)
                near.shown(shown.id)
                if verdict.note is not None and verdict.folded is not None:
                    chosen.notes[shown.id] = verdict.note
                    chosen.folded.append(verdict.folded.id)
                    chosen.ids.add(verdict.folded.id)
                    near.shown(verdict.folded.id)
                used_chars += cost
                total += 1
        return chosen

    def _finish(
        self,
        turn: _Turn,
        number: int,
        chosen: _Chosen,
        query: str | None,
        record: bool,
    ) -> Injection:
        items = tuple(
            [InjectedItem(m, "pinned", round(s, 6)) for m, s in chosen.pinned]
            + [InjectedItem(m, "contextual", round(s, 6)) for m, s in chosen.contextual]
        )
        block = format_block(
            [m for m, _ in chosen.pinned], [m for m, _ in chosen.contextual], chosen.notes
        )
        # an update's older memory is in the block too (its note): the window knows it was shown
        ids = [item.memory.id for item in items] + chosen.folded
        skipped = dict(turn.skipped)
        elapsed = (time.perf_counter() - turn.started) * 1000.0
        if record:
            self.store.finish_turn(
                turn.owner,
                turn.session,
                number,
                ids,
                {"skipped": skipped, "elapsed_ms": elapsed, "query": query},
            )
        elapsed = (time.perf_counter() - turn.started) * 1000.0  # with the record's writes
        return Injection(
            session=turn.session,
            turn=number,
            block=block,
            items=items,
            skipped=skipped,
            elapsed_ms=round(elapsed, 3),
        )

    @staticmethod
    def _log(result: Injection) -> None:
        """One INFO line per turn (DEBUG: one per item). Called after the turn's transaction has
        committed: a log handler that blocks (a full stderr pipe nobody reads) must never hold
        the store's write lock."""
        for item in result.items:
            log.debug(
                "inject session=%s turn=%d id=%s type=%s source=%s score=%.5f",
                result.session,
                result.turn,
                item.memory.id,
                item.memory.type.value,
                item.source,
                item.score,
            )
        log.info(
            "inject session=%s turn=%d injected=%d pinned=%d skipped=%s elapsed_ms=%.1f",
            result.session,
            result.turn,
            len(result.items),
            sum(item.source == "pinned" for item in result.items),
            dict(result.skipped),
            result.elapsed_ms,
        )


#: Threads that embed a turn's query while its first store trip runs (one per concurrent turn
#: in the common case; a turn that finds them all busy embeds the query itself, as before).
_AHEAD = ThreadPoolExecutor(max_workers=4, thread_name_prefix="memlane-embed-ahead")


@contextmanager
def _embedding_ahead(embeddings: Embeddings, query: str) -> Iterator[None]:
    """Embed ``query`` on another thread while the body runs (the turn's first store trip: on
    PostgreSQL a round trip to the server, on SQLite reads that release the GIL, as the model
    does), then wait for it; the vector lands in ``embeddings``' query cache, where the
    search's own :meth:`~memlane.embeddings.cache.Embeddings.embed_query` finds it. Nothing is
    done ahead without that cache (``cache_size = 0``). A model error is the search's to raise
    (it embeds again); a job that never started is withdrawn and the search embeds inline."""
    if not embeddings.cache_size:
        yield
        return
    job = _AHEAD.submit(embeddings.embed_query, query)
    try:
        yield
    finally:
        if not job.cancel():
            with contextlib.suppress(Exception):
                job.result()


class _Turn:
    """What one :meth:`Injector.inject` call carries from step to step."""

    __slots__ = ("owner", "session", "skipped", "started")

    def __init__(self, owner: str, session: str, started: float, skipped: Counter[str]) -> None:
        self.owner = owner
        self.session = session
        self.started = started
        self.skipped = skipped


class _Chosen:
    """What :meth:`Injector._select` picked: the two sections as ``(memory, score)``, the
    notes of update pairs (shown id -> note), the older memories those notes stand for
    (``folded``), and every id in the block (``ids``)."""

    __slots__ = ("contextual", "folded", "ids", "notes", "pinned")

    def __init__(self) -> None:
        self.pinned: list[tuple[Memory, float]] = []
        self.contextual: list[tuple[Memory, float]] = []
        self.notes: dict[str, str] = {}
        self.folded: list[str] = []
        self.ids: set[str] = set()
