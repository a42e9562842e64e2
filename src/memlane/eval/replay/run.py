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

import json
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlane.bench import percentile
from memlane.config import Settings
from memlane.embeddings import Embedder
from memlane.engine import MemoryEngine, MemoryInput
from memlane.errors import InvalidArgument
from memlane.history import estimate_tokens, is_injection_block, with_injection
from memlane.injection.pipeline import build_query, format_block
from memlane.retrieval import search
from memlane.types import MemoryType

__all__ = [
    "CATEGORIES",
    "MODES",
    "Conversation",
    "Question",
    "Turn",
    "load_locomo",
    "normalise_evidence",
    "open_replay_engine",
    "replay",
    "replay_file",
    "select_conversations",
    "token_counter",
]

#: Question categories scored (5, adversarial, has no answer in the conversation).
CATEGORIES: Mapping[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
#: Search modes run on every question: the system, then the two single-leg baselines.
MODES = ("hybrid", "vector", "fts")
#: Results searched per question; recall is reported at 5 and 10.
QUESTION_LIMIT = 10
#: Previous turns of the session given to ``inject`` as ``recent``.
RECENT_TURNS = 2

_DIA_ID = re.compile(r"^D(\d+):(\d+)$")
_EVIDENCE_SPLIT = re.compile(r"[,;\s]+")
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_OBSERVATION_KEY = re.compile(r"^session_(\d+)_observation$")

#: ``progress(done, total, description)``: called as work advances (turns and questions).
Progress = Callable[[int, int, str], None]


# --------------------------------------------------------------------------- the data


def normalise_evidence(value: object) -> list[str]:
    """Dialogue ids cited by an evidence value, normalised, unique, in order.

    ``value`` is a dia id (``"D1:3"``), a string packing several (``"D8:6; D9:17"``,
    ``"D26:14, D26:34"``: split on ``[,; ]+``), or a list of those (nested lists allowed). Leading
    zeros are dropped (``"D30:05"`` -> ``"D30:5"``). Tokens that are not ``D<session>:<turn>``
    (``"D"``, ``"D:11:26"``) are skipped; whether an id resolves to a turn is the caller's check.
    """
    out: list[str] = []
    stack: list[object] = [value]
    while stack:
        item = stack.pop(0)
        if isinstance(item, list | tuple):
            stack[0:0] = list(item)
            continue
        if not isinstance(item, str):
            continue
        for token in _EVIDENCE_SPLIT.split(item.strip()):
            match = _DIA_ID.match(token)
            if match is None:
                continue
            dia_id = f"D{int(match[1])}:{int(match[2])}"
            if dia_id not in out:
                out.append(dia_id)
    return out


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a session: ``dia_id`` normalised; ``caption`` the image caption, if any."""

    speaker: str
    dia_id: str
    text: str
    caption: str | None = None

    def message(self) -> str:
        """What the turn says, as the agent would read it: ``"<speaker>: <text>"``, plus the
        caption of a shared image in brackets."""
        text = " ".join(self.text.split())
        if self.caption:
            text = f"{text} [shares a photo: {' '.join(self.caption.split())}]".strip()
        return f"{self.speaker}: {text}"


@dataclass(frozen=True, slots=True)
class Question:
    """One question of categories 1-4 with its evidence (normalised and resolving to a turn)."""

    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Observation:
    speaker: str
    text: str
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    """One LoCoMo conversation: sessions sorted by number, observations by session number."""

    sample_id: str
    sessions: tuple[tuple[int, tuple[Turn, ...]], ...]
    observations: Mapping[int, tuple[Observation, ...]]
    questions: tuple[Question, ...]
    #: Questions of categories 1-4 left out because none of their evidence resolves.
    unresolved_questions: int = 0

    @property
    def turns(self) -> int:
        return sum(len(turns) for _, turns in self.sessions)


def load_locomo(path: str | Path) -> list[Conversation]:
    """Read a LoCoMo-format JSON file (a list of conversations; see ``docs/replay.md``).

    Raises:
        InvalidArgument: the file is missing, not JSON, or not in LoCoMo format.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidArgument(f"no such file: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cannot read {p}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"{p} is not valid JSON: {exc}") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise InvalidArgument(f"{p}: expected a JSON list of LoCoMo conversations")
    return [_parse_conversation(item, n, p) for n, item in enumerate(data)]


def _parse_conversation(item: object, n: int, path: Path) -> Conversation:
    where = f"{path}: conversation {n}"
    if not isinstance(item, Mapping):
        raise InvalidArgument(f"{where}: expected an object, got {type(item).__name__}")
    conv = item.get("conversation")
    if not isinstance(conv, Mapping):
        raise InvalidArgument(f"{where}: missing 'conversation' object")
    sample_id = str(item.get("sample_id") or f"conv-{n}")
    where = f"{path}: {sample_id}"

    sessions: list[tuple[int, tuple[Turn, ...]]] = []
    for key, value in conv.items():
        match = _SESSION_KEY.match(str(key))
        if match is None or not isinstance(value, list):
            continue
        turns: list[Turn] = []
        for t in value:
            if not isinstance(t, Mapping) or not isinstance(t.get("text"), str):
                raise InvalidArgument(f"{where}: {key} has a turn without 'text'")
            ids = normalise_evidence(t.get("dia_id"))
            caption = t.get("blip_caption")
            turns.append(
                Turn(
                    speaker=str(t.get("speaker") or "someone"),
                    dia_id=ids[0] if ids else "",
                    text=t["text"],
                    caption=caption if isinstance(caption, str) and caption.strip() else None,
                )
            )
        sessions.append((int(match[1]), tuple(turns)))
    if not sessions:
        raise InvalidArgument(f"{where}: no 'session_<N>' lists in 'conversation'")
    sessions.sort(key=lambda s: s[0])
    turn_ids = frozenset(t.dia_id for _, turns in sessions for t in turns if t.dia_id)

    observations: dict[int, tuple[Observation, ...]] = {}
    raw_obs = item.get("observation") or {}
    if not isinstance(raw_obs, Mapping):
        raise InvalidArgument(f"{where}: 'observation' must be an object")
    for key, value in raw_obs.items():
        match = _OBSERVATION_KEY.match(str(key))
        if match is None or not isinstance(value, Mapping):
            continue
        facts: list[Observation] = []
        for speaker, entries in value.items():
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, list | tuple) and entry and isinstance(entry[0], str):
                    evidence = normalise_evidence(list(entry[1:]))
                    if entry[0].strip():
                        facts.append(Observation(str(speaker), entry[0].strip(), tuple(evidence)))
        observations[int(match[1])] = tuple(facts)

    questions: list[Question] = []
    unresolved = 0
    for qa in item.get("qa") or []:
        if not isinstance(qa, Mapping) or not isinstance(qa.get("question"), str):
            continue
        category = qa.get("category")
        if not isinstance(category, int) or category not in CATEGORIES:
            continue
        resolved = tuple(e for e in normalise_evidence(qa.get("evidence")) if e in turn_ids)
        if not resolved:
            unresolved += 1
            continue
        questions.append(Question(qa["question"], category, resolved))
    return Conversation(
        sample_id=sample_id,
        sessions=tuple(sessions),
        observations=observations,
        questions=tuple(questions),
        unresolved_questions=unresolved,
    )


def select_conversations(
    conversations: Sequence[Conversation], selection: str | Sequence[int | str] | None
) -> list[Conversation]:
    """The conversations named by ``selection``: indexes (``"0,2"``) or sample ids
    (``"conv-26"``), comma-separated or a list; ``None`` or empty = all.

    Raises:
        InvalidArgument: an index out of range or an unknown sample id.
    """
    if selection is None:
        return list(conversations)
    parts = (
        [s.strip() for s in selection.split(",") if s.strip()]
        if isinstance(selection, str)
        else [str(s).strip() for s in selection]
    )
    if not parts:
        return list(conversations)
    by_id = {c.sample_id: c for c in conversations}
    out: list[Conversation] = []
    for part in parts:
        if part in by_id:
            chosen = by_id[part]
        elif part.lstrip("-").isdigit():
            index = int(part)
            if not 0 <= index < len(conversations):
                raise InvalidArgument(
                    f"conversation index {index} out of range: the file has "
                    f"{len(conversations)} (0..{len(conversations) - 1})"
                )
            chosen = conversations[index]
        else:
            names = ", ".join(by_id)
            raise InvalidArgument(f"unknown conversation {part!r}; indexes or one of: {names}")
        if chosen not in out:
            out.append(chosen)
    return out


# --------------------------------------------------------------------------- tokens


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


# --------------------------------------------------------------------------- the replay


@dataclass(slots=True)
class _QuestionResult:
    category: int
    recall_5: float
    recall_10: float
    hit_10: bool


@dataclass(slots=True)
class _ConversationStats:
    sample_id: str
    sessions: int = 0
    offered: int = 0
    decisions: Counter[str] = field(default_factory=Counter)
    stored: int = 0
    turns: int = 0
    items: int = 0
    skipped_turns: int = 0
    skipped_reasons: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    search_latencies: list[float] = field(default_factory=list)
    repeated: int = 0
    max_blocks: int = 0
    tokens: int = 0
    tokens_naive: int = 0
    tokens_naive_searched: int = 0
    questions: dict[str, list[_QuestionResult]] = field(
        default_factory=lambda: {m: [] for m in MODES}
    )
    question_latencies: dict[str, list[float]] = field(
        default_factory=lambda: {m: [] for m in MODES}
    )
    unresolved_questions: int = 0
    seconds: float = 0.0


def replay(
    engine: MemoryEngine,
    conversations: Sequence[Conversation],
    *,
    progress: Progress | None = None,
    source: str | None = None,
) -> dict[str, Any]:
    """Replay ``conversations`` into ``engine`` (see the module docstring); returns the report.

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

    stats: list[_ConversationStats] = []
    for conv in conversations:
        stats.append(_replay_one(engine, conv, count_tokens, advance))
    backend = getattr(engine.embedder, "backend", None)
    report = _report(stats, engine.settings, tokenizer, None if backend is None else str(backend))
    report["seconds"] = round(time.perf_counter() - started, 3)
    return {
        "file": source,
        "conversations": [c.sample_id for c in conversations],
        **report,
    }


def _replay_one(
    engine: MemoryEngine,
    conv: Conversation,
    count_tokens: Callable[[str], int],
    advance: Callable[[int, str], None],
) -> _ConversationStats:
    started = time.perf_counter()
    owner = conv.sample_id
    cfg = engine.settings.injection_for(None)
    depth = cfg.context_window_depth
    max_keep = cfg.max_injected_blocks_in_history
    st = _ConversationStats(conv.sample_id, sessions=len(conv.sessions))
    st.unresolved_questions = conv.unresolved_questions
    written: set[int] = set()

    def write_observations(up_to: int | None) -> None:
        """Store the observations of every session <= ``up_to`` (all when None) not yet stored."""
        for number in sorted(conv.observations):
            if number in written or (up_to is not None and number > up_to):
                continue
            written.add(number)
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
            results = engine.add_many(items)
            st.offered += len(items)
            st.decisions.update(r.decision.value for r in results)

    for number, turns in conv.sessions:
        write_observations(number - 1)
        session = f"{owner}:{number}"
        history: list[dict[str, Any]] = []
        last_injected: dict[str, int] = {}
        messages = [t.message() for t in turns]
        for i, text in enumerate(messages):
            turn_no = i + 1  # every inject call is one turn of the session
            recent = messages[max(0, i - RECENT_TURNS) : i]
            injection = engine.inject(session, text, owner=owner, recent=recent)
            st.turns += 1
            st.latencies.append(injection.elapsed_ms)
            st.skipped_reasons.update(injection.skipped)
            searched = "trivial" not in injection.skipped and "disabled" not in injection.skipped
            if searched:
                st.search_latencies.append(injection.elapsed_ms)
            if injection.block is None:
                st.skipped_turns += 1
            else:
                st.tokens += count_tokens(injection.block)
            for item in injection.items:
                mid = item.memory.id
                seen = last_injected.get(mid)
                if seen is not None and turn_no - seen < depth:
                    st.repeated += 1
                last_injected[mid] = turn_no
            st.items += len(injection.items)

            # What injecting the top max_total results on every turn, no dedup, would cost.
            query = build_query(text, recent, cfg)
            naive = search(engine, query, owner=owner, limit=cfg.max_total, record_access=False)
            naive_block = format_block([], [h.memory for h in naive])
            naive_tokens = count_tokens(naive_block) if naive_block else 0
            st.tokens_naive += naive_tokens
            if searched:
                st.tokens_naive_searched += naive_tokens

            history.append({"role": "user", "content": text})
            history = with_injection(history, injection, max_keep)
            st.max_blocks = max(st.max_blocks, sum(1 for m in history if is_injection_block(m)))
            advance(1, f"{owner} session {number}")
    write_observations(None)
    st.stored = engine.count(owner)

    for question in conv.questions:
        wanted = set(question.evidence)
        for mode in MODES:
            t0 = time.perf_counter()
            hits = engine.search(question.text, owner=owner, limit=QUESTION_LIMIT, mode=mode)
            st.question_latencies[mode].append((time.perf_counter() - t0) * 1000.0)
            covered_5: set[str] = set()
            covered_10: set[str] = set()
            for rank, hit in enumerate(hits, start=1):
                cited = wanted.intersection(normalise_evidence(hit.memory.metadata.get("evidence")))
                covered_10 |= cited
                if rank <= 5:
                    covered_5 |= cited
            st.questions[mode].append(
                _QuestionResult(
                    question.category,
                    len(covered_5) / len(wanted),
                    len(covered_10) / len(wanted),
                    bool(covered_10),
                )
            )
        advance(1, f"{owner} questions")
    st.seconds = time.perf_counter() - started
    return st


# --------------------------------------------------------------------------- the report


def _latency(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50), 3),
        "p95": round(percentile(values, 95), 3),
        "max": round(max(values, default=0.0), 3),
    }


def _mean(values: Iterable[float]) -> float:
    vals = list(values)
    return round(sum(vals) / len(vals), 4) if vals else 0.0


def _scores(results: Sequence[_QuestionResult]) -> dict[str, Any]:
    return {
        "questions": len(results),
        "recall_at_5": _mean(r.recall_5 for r in results),
        "recall_at_10": _mean(r.recall_10 for r in results),
        "hit_at_10": _mean(1.0 if r.hit_10 else 0.0 for r in results),
    }


def _retrieval(stats: Sequence[_ConversationStats]) -> dict[str, Any]:
    def block(mode: str) -> dict[str, Any]:
        results = [r for s in stats for r in s.questions[mode]]
        out = _scores(results)
        out["by_category"] = {
            str(cat): {"name": name, **_scores([r for r in results if r.category == cat])}
            for cat, name in CATEGORIES.items()
            if any(r.category == cat for r in results)
        }
        out["latency_ms"] = _latency([x for s in stats for x in s.question_latencies[mode]])
        return out

    main = block("hybrid")
    main["unresolved_questions"] = sum(s.unresolved_questions for s in stats)
    main["baselines"] = {mode: block(mode) for mode in MODES if mode != "hybrid"}
    return main


def _sections(stats: Sequence[_ConversationStats]) -> dict[str, Any]:
    decisions: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    for s in stats:
        decisions.update(s.decisions)
        skipped.update(s.skipped_reasons)
    tokens = sum(s.tokens for s in stats)
    naive = sum(s.tokens_naive for s in stats)
    return {
        "memories": {
            "offered": sum(s.offered for s in stats),
            "stored": sum(s.stored for s in stats),
            "decisions": dict(decisions.most_common()),
        },
        "injection": {
            "turns": sum(s.turns for s in stats),
            "items": sum(s.items for s in stats),
            "skipped_turns": sum(s.skipped_turns for s in stats),
            "skipped": dict(skipped.most_common()),
            "latency_ms": _latency([x for s in stats for x in s.latencies]),
            "latency_ms_searched": _latency([x for s in stats for x in s.search_latencies]),
            "repeated_within_window": sum(s.repeated for s in stats),
            "max_blocks_in_history": max((s.max_blocks for s in stats), default=0),
            "tokens": tokens,
            "tokens_naive": naive,
            "tokens_naive_searched_turns": sum(s.tokens_naive_searched for s in stats),
            "tokens_ratio": round(tokens / naive, 4) if naive else 0.0,
        },
        "retrieval": _retrieval(stats),
    }


def _report(
    stats: Sequence[_ConversationStats], settings: Settings, tokenizer: str, backend: str | None
) -> dict[str, Any]:
    cfg = settings.injection_for(None)
    report = _sections(stats)
    report["injection"]["tokenizer"] = tokenizer
    report["injection"]["context_window_depth"] = cfg.context_window_depth
    report["injection"]["max_injected_blocks_in_history"] = cfg.max_injected_blocks_in_history
    report["settings"] = {
        "embedding": {
            "provider": settings.embedding.provider,
            "backend": backend,
            "model": settings.embedding.model
            if settings.embedding.provider == "local"
            else f"hash-{settings.embedding.dimension}",
        },
        "retrieval": settings.retrieval.model_dump(),
        "injection": cfg.model_dump(mode="json"),
    }
    per: list[dict[str, Any]] = []
    for s in stats:
        one = _sections([s])
        per.append(
            {
                "sample_id": s.sample_id,
                "sessions": s.sessions,
                **one,
                "seconds": round(s.seconds, 3),
            }
        )
    report["per_conversation"] = per
    return report


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
) -> dict[str, Any]:
    """Load ``path``, pick ``conversations`` (see :func:`select_conversations`), replay them into
    a fresh store (see :func:`open_replay_engine`) and return the report.

    Raises:
        InvalidArgument: bad file, bad selection, or a ``home`` whose store is not fresh.
    """
    chosen = select_conversations(load_locomo(path), conversations)
    owners = [c.sample_id for c in chosen]
    with open_replay_engine(home, settings=settings, embedder=embedder, owners=owners) as engine:
        return replay(engine, chosen, progress=progress, source=str(path))
