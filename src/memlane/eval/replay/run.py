"""Replay a LoCoMo-format file through memlane: the write path, per-turn injection, then retrieval.

For each conversation (its own owner, the ``sample_id``), sessions are replayed in order of their
number (the ``session_<N>`` lists, never the date keys):

1. at the start of session N, the observations of the sessions before it that are not stored yet
   (normally session N-1) go through the write path (:meth:`MemoryEngine.add_many`, type
   ``observation``, session ``<sample_id>:<M>``, metadata ``{"evidence": [dia ids], "speaker"}``),
   as if a extractor had just written them;
2. every turn of session N is injected (:meth:`MemoryEngine.inject`, session ``<sample_id>:<N>``,
   text ``"<speaker>: <text>"``, ``recent`` = the two previous turns of the session) and kept in
   a history (one chat per session) whose blocks are bounded by
   :func:`memlane.history.with_injection`;
3. after the last session its observations are stored too, and every question of categories 1-4
   is searched (limit 10) in ``hybrid``, ``vector`` and ``fts`` mode and scored by evidence
   recall (``../shared/data/README.md``): ``|question evidence covered by the evidence of the top
   k memories| / |question evidence|``, averaged over the questions whose evidence resolves to a
   turn of the conversation (ids that do not resolve are skipped).

The report (:func:`replay`) is a JSON-ready dict; see ``docs/replay.md`` for every key. The checks
on injection are computed here from what the replay observes, not read back from the engine:
``repeated_within_window`` counts items injected again within ``context_window_depth`` turns of the
same session, ``max_blocks_in_history`` counts :func:`~memlane.history.is_injection_block` over
the kept history after each turn.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memlane.config import Settings
from memlane.embeddings import Embedder
from memlane.engine import MemoryEngine, MemoryInput
from memlane.errors import InvalidArgument
from memlane.eval.replay.beam import BeamChat, BeamQuestion, is_beam, load_beam
from memlane.eval.replay.firstturn import score_first_turns
from memlane.eval.replay.locomo import (
    Conversation,
    Question,
    load_locomo,
    normalise_evidence,
    select_conversations,
)
from memlane.eval.replay.report import (
    MODES,
    ConversationStats,
    QuestionResult,
    build_report,
)
from memlane.history import estimate_tokens, is_injection_block, with_injection
from memlane.injection import format_block

# Not on the engine's public API yet: the query injection builds from a turn, and a search that
# does not count as an access (engine.search would touch the memories and so change the replay's
# own later results). The naive-tokens baseline needs both.
from memlane.injection.pipeline import build_query
from memlane.retrieval import Recipe
from memlane.types import MemoryType

#: Results searched per question; recall is reported at 5 and 10.
QUESTION_LIMIT = 10
#: Previous turns of the session given to ``inject`` as ``recent``.
RECENT_TURNS = 2

#: ``progress(done, total, description)``: called as work advances (turns and questions).
Progress = Callable[[int, int, str], None]


def token_counter() -> tuple[str, Callable[[str], int]]:
    """``(name, count)``: cl100k_base through ``bpe-openai`` (the ``eval`` extra, offline), else
    the 4-characters-a-token estimate (named so in the report)."""
    try:
        import bpe_openai

        encoding = bpe_openai.get_encoding("cl100k_base")
    except Exception:
        return "estimate (4 characters a token; install memlane[eval] for cl100k_base)", (
            estimate_tokens
        )

    def count(text: str) -> int:
        return len(encoding.encode(text))

    return "cl100k_base", count


def replay(
    engine: MemoryEngine,
    conversations: Sequence[Conversation | BeamChat],
    *,
    progress: Progress | None = None,
    source: str | None = None,
    learn: bool = False,
    recipes: Sequence[Recipe] = (),
) -> dict[str, Any]:
    """Replay ``conversations`` into ``engine`` (see the module docstring); returns the report.

    ``recipes``: retrieval recipes (:class:`memlane.retrieval.Recipe`) whose question scores are
    reported beside the modes' (``retrieval.baselines.<name>``).

    ``learn``: instead of the dataset's prepared observations, the engine's LLM learns memories
    from each session's raw dialogue (:meth:`MemoryEngine.learn`, one call per session, at the
    same points); each learned memory cites every turn of its session as evidence (the model
    names no turn), so recall is measured at the session's grain. A failed call is counted
    (``learn_failures``) and the session skipped.

    The engine's store should hold no memories of these conversations' owners (the sample ids):
    :func:`replay_file` opens a fresh one.
    """
    started = time.perf_counter()
    tokenizer, count_tokens = token_counter()
    # Load the model before the first turn: latencies are of a warm engine, not of a cold start.
    engine.embed(["warm-up"])
    engine.embed(["warm-up", "batch"])
    total = sum(c.turns + len(c.questions) for c in conversations)
    done = 0

    def advance(n: int, description: str) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total, description)

    beam = any(isinstance(c, BeamChat) for c in conversations)
    if beam and learn:
        raise InvalidArgument("--learn reads LoCoMo dialogue; BEAM chats are stored as messages")
    stats: list[ConversationStats] = []
    for conv in conversations:
        if isinstance(conv, BeamChat):
            stats.append(_replay_beam_one(engine, conv, count_tokens, advance, recipes))
        else:
            stats.append(_replay_one(engine, conv, count_tokens, advance, learn, recipes))
    report = build_report(stats, engine.settings, tokenizer, engine.model_backend)
    report["seconds"] = round(time.perf_counter() - started, 3)
    out = {
        "file": source,
        "conversations": [c.sample_id for c in conversations],
        "format": "beam" if beam else "locomo",
        "memories_from": "messages" if beam else "dialogue (LLM)" if learn else "observations",
        **report,
    }
    if learn:
        out["llm"] = engine.llm_stats()
        out["learn_failures"] = sum(s.decisions.get("learn_failed", 0) for s in stats)
    return out


def _replay_one(
    engine: MemoryEngine,
    conv: Conversation,
    count_tokens: Callable[[str], int],
    advance: Callable[[int, str], None],
    learn: bool = False,
    recipes: Sequence[Recipe] = (),
) -> ConversationStats:
    started = time.perf_counter()
    owner = conv.sample_id
    st = ConversationStats(conv.sample_id, sessions=len(conv.sessions))
    st.unresolved_questions = conv.unresolved_questions
    written: set[int] = set()

    def write_observations(up_to: int | None) -> None:
        """Store the observations of every session <= ``up_to`` (all when None) not yet stored."""
        for number in sorted(dict(conv.sessions) if learn else conv.observations):
            if number in written or (up_to is not None and number > up_to):
                continue
            written.add(number)
            if learn:
                _learn_session(engine, conv, number, st)
                continue
            items = [
                MemoryInput(
                    content=o.text,
                    type=MemoryType.OBSERVATION,
                    owner=owner,
                    session=f"{owner}:{number}",
                    source="locomo-observation",
                    metadata={"evidence": list(o.evidence), "speaker": o.speaker},
                )
                for o in conv.observations[number]
            ]
            if not items:
                continue
            _store(engine, st, items)

    for number, turns in conv.sessions:
        write_observations(number - 1)
        chat = _Chat(engine, st, f"{owner}:{number}", owner, count_tokens)
        messages = [t.message() for t in turns]
        for i, text in enumerate(messages):
            chat.inject(text, messages[max(0, i - RECENT_TURNS) : i])
            advance(1, f"{owner} session {number}")
    write_observations(None)
    st.stored = engine.count(owner)

    _score_questions(engine, st, owner, conv.questions, advance, recipes)
    score_first_turns(engine, owner, conv.questions, _evidence, st.first_turn)
    st.seconds = time.perf_counter() - started
    return st


def _learn_session(
    engine: MemoryEngine, conv: Conversation, number: int, st: ConversationStats
) -> None:
    """The LLM learns from session ``number``'s dialogue (``--learn``); every turn its evidence."""
    from memlane.errors import LLMError

    turns = next((t for n, t in conv.sessions if n == number), None)
    if not turns:
        return
    messages = [{"role": "user", "content": t.message()} for t in turns]
    evidence = {"evidence": [t.dia_id for t in turns], "learned_from": "dialogue"}
    owner = conv.sample_id
    try:
        results = engine.learn(
            messages, owner=owner, session=f"{owner}:{number}", metadata=evidence
        )
    except LLMError:
        st.decisions["learn_failed"] += 1
        return
    st.offered += len(results)
    st.decisions.update(r.decision.value for r in results)


class _Chat:
    """One session as a chat: injects each user turn, keeps the history its blocks go into and
    tallies what the replay checks (repeats, blocks in history, tokens against naive top-k)."""

    def __init__(
        self,
        engine: MemoryEngine,
        st: ConversationStats,
        session: str,
        owner: str,
        count_tokens: Callable[[str], int],
    ) -> None:
        self.engine, self.st, self.session, self.owner = engine, st, session, owner
        self.count_tokens = count_tokens
        self.cfg = engine.settings.injection_for(None)
        self.history: list[dict[str, Any]] = []
        self.last_injected: dict[str, int] = {}
        self.turn = 0

    def inject(self, text: str, recent: list[str]) -> None:
        """One user turn: inject, then record what the replay checks."""
        engine, st, cfg = self.engine, self.st, self.cfg
        self.turn += 1  # every inject call is one turn of the session
        injection = engine.inject(self.session, text, owner=self.owner, recent=recent)
        st.turns += 1
        st.latencies.append(injection.elapsed_ms)
        st.skipped_reasons.update(injection.skipped)
        searched = "trivial" not in injection.skipped and "disabled" not in injection.skipped
        if searched:
            st.search_latencies.append(injection.elapsed_ms)
        if injection.block is None:
            st.skipped_turns += 1
        else:
            st.tokens += self.count_tokens(injection.block)
        for item in injection.items:
            mid = item.memory.id
            seen = self.last_injected.get(mid)
            if seen is not None and self.turn - seen < cfg.context_window_depth:
                st.repeated += 1
            self.last_injected[mid] = self.turn
        st.items += len(injection.items)

        # What injecting the top max_total results on every turn, no dedup, would cost.
        query = build_query(text, recent, cfg)
        naive = engine.search(query, owner=self.owner, limit=cfg.max_total, record_access=False)
        naive_block = format_block([], [h.memory for h in naive])
        naive_tokens = self.count_tokens(naive_block) if naive_block else 0
        st.tokens_naive += naive_tokens
        if searched:
            st.tokens_naive_searched += naive_tokens

        self.history.append({"role": "user", "content": text})
        self.history = with_injection(self.history, injection, cfg.max_injected_blocks_in_history)
        blocks = sum(1 for m in self.history if is_injection_block(m))
        st.max_blocks = max(st.max_blocks, blocks)


def _score_questions(
    engine: MemoryEngine,
    st: ConversationStats,
    owner: str,
    questions: Sequence[Question | BeamQuestion],
    advance: Callable[[int, str], None],
    recipes: Sequence[Recipe] = (),
) -> None:
    """Search every question in each mode, and with each of ``recipes`` (side by side, under
    its name), and score evidence recall at 5 and 10 (a memory's ``metadata["evidence"]``: the
    ids it cites)."""
    runs: list[tuple[str, str | Recipe]] = [(m, m) for m in MODES]
    runs += [(r.name, r) for r in recipes if r.name not in MODES]
    for question in questions:
        wanted = set(question.evidence)
        for mode, how in runs:
            t0 = time.perf_counter()
            hits = engine.search(
                question.text, owner=owner, limit=QUESTION_LIMIT, mode=how, record_access=False
            )
            st.question_latencies.setdefault(mode, []).append((time.perf_counter() - t0) * 1000.0)
            covered_5: set[str] = set()
            covered_10: set[str] = set()
            for rank, hit in enumerate(hits, start=1):
                cited = wanted.intersection(_evidence(hit.memory.metadata.get("evidence")))
                covered_10 |= cited
                if rank <= 5:
                    covered_5 |= cited
            st.questions.setdefault(mode, []).append(
                QuestionResult(
                    question.category,
                    len(covered_5) / len(wanted),
                    len(covered_10) / len(wanted),
                    bool(covered_10),
                )
            )
        advance(1, f"{owner} questions")


def _evidence(value: object) -> list[str]:
    """The ids a memory cites: LoCoMo dia ids (normalised), or BEAM message ids (strings)."""
    if isinstance(value, list) and value and all(isinstance(v, str) and v.isdigit() for v in value):
        return list(value)
    return normalise_evidence(value)


def _replay_beam_one(
    engine: MemoryEngine,
    chat: BeamChat,
    count_tokens: Callable[[str], int],
    advance: Callable[[int, str], None],
    recipes: Sequence[Recipe] = (),
) -> ConversationStats:
    """One BEAM chat (docs/replay.md, "BEAM"): each batch is a session; every user message is
    injected as the user wrote it (``recent``: the two messages before it), then stored with the replies that follow
    it, before the next user message (one ``add_many`` per exchange, in order), each message a
    memory ``"<role>: <text>"`` citing its own id (a message over the write path's ``max_chars``
    in consecutive parts, :meth:`~memlane.eval.replay.beam.Message.memory_texts`); then the
    questions are scored."""
    started = time.perf_counter()
    owner = chat.sample_id
    st = ConversationStats(owner, sessions=len(chat.batches))
    st.unresolved_questions = chat.unresolved_questions
    max_chars = engine.settings.dedup.max_chars
    for number, messages in chat.batches:
        session = f"{owner}:{number}"
        tracker = _Chat(engine, st, session, owner, count_tokens)
        pending: list[MemoryInput] = []
        for i, message in enumerate(messages):
            if message.role == "user":
                _store(engine, st, pending)
                recent = [m.text for m in messages[max(0, i - RECENT_TURNS) : i]]
                tracker.inject(message.text, recent)
                advance(1, f"{owner} batch {number}")
            pending.extend(
                MemoryInput(
                    content=text,
                    type=MemoryType.OBSERVATION,
                    owner=owner,
                    session=session,
                    source="beam-message",
                    metadata={"evidence": [str(message.id)], "role": message.role},
                )
                for text in message.memory_texts(max_chars)
            )
        _store(engine, st, pending)
    st.stored = engine.count(owner)
    _score_questions(engine, st, owner, chat.questions, advance, recipes)
    score_first_turns(engine, owner, chat.questions, _evidence, st.first_turn)
    st.seconds = time.perf_counter() - started
    return st


def _store(engine: MemoryEngine, st: ConversationStats, pending: list[MemoryInput]) -> None:
    """Offer ``pending`` to the write path (timed per memory) and empty it."""
    if not pending:
        return
    t0 = time.perf_counter()
    results = engine.add_many(pending)
    st.store_ms.append((time.perf_counter() - t0) * 1000.0 / len(pending))
    st.offered += len(pending)
    st.decisions.update(r.decision.value for r in results)
    pending.clear()


# --------------------------------------------------------------------------- opening a store


@contextmanager
def open_replay_engine(
    home: str | Path | None = None,
    *,
    settings: Settings | None = None,
    embedder: Embedder | None = None,
    owners: Sequence[str] = (),
) -> Iterator[MemoryEngine]:
    """An engine on a fresh store for a replay.

    ``home`` given: that folder is the replay's memlane home (its ``memlane.toml`` and
    ``MEMLANE_*`` settings; the store is kept there); it must hold no memories of ``owners``.
    ``home`` omitted: the settings of the user's home (``$MEMLANE_HOME`` or ``~/.memlane``) with
    the store in a temporary folder, deleted afterwards.

    Raises:
        InvalidArgument: the store of ``home`` already holds memories of one of ``owners``.
    """
    tmp: tempfile.TemporaryDirectory[str] | None = None
    if home is None:
        base = settings or Settings.load()
        tmp = tempfile.TemporaryDirectory(prefix="memlane-replay-")
        db = Path(tmp.name) / "memlane.db"
        settings = base.model_copy(
            update={"home": tmp.name, "store": base.store.model_copy(update={"path": str(db)})}
        )
    else:
        Path(home).expanduser().mkdir(parents=True, exist_ok=True)
        settings = settings or Settings.load(home)
    try:
        engine = MemoryEngine.open(settings=settings, embedder=embedder)
        try:
            busy = [o for o in owners if engine.count(o)]
            if busy:
                raise InvalidArgument(
                    f"the store {settings.db_path} already holds memories of {', '.join(busy)}: "
                    "a replay needs a fresh store (give an empty --home folder, or none for a "
                    "temporary one)"
                )
            yield engine
        finally:
            engine.close()
    finally:
        if tmp is not None:
            tmp.cleanup()


def replay_file(
    path: str | Path,
    *,
    conversations: str | Sequence[int | str] | None = None,
    home: str | Path | None = None,
    settings: Settings | None = None,
    embedder: Embedder | None = None,
    progress: Progress | None = None,
    recipes: Sequence[Recipe] = (),
) -> dict[str, Any]:
    """Load ``path`` (a LoCoMo file, or BEAM chats: :func:`load_conversations`), pick
    ``conversations`` (see :func:`select_conversations`), replay them into a fresh store (see
    :func:`open_replay_engine`) and return the report.

    Raises:
        InvalidArgument: bad file, bad selection, or a ``home`` whose store is not fresh.
    """
    chosen = select_conversations(load_conversations(path), conversations)
    owners = [c.sample_id for c in chosen]
    with open_replay_engine(home, settings=settings, embedder=embedder, owners=owners) as engine:
        return replay(engine, chosen, progress=progress, source=str(path), recipes=recipes)


def load_conversations(path: str | Path) -> list[Any]:
    """The conversations of ``path``, its format recognised from the files: a folder holding
    BEAM chats (``chat.json`` and ``probing_questions/``, or sub-folders that do) gives
    :class:`BeamChat`s; anything else is read as a LoCoMo JSON file (:func:`load_locomo`).

    Raises:
        InvalidArgument: neither format (the message says what each needs).
    """
    if is_beam(path):
        return load_beam(path)
    if Path(path).is_dir():
        return load_beam(path)  # a folder that holds no chat: its error names what is needed
    return load_locomo(path)
