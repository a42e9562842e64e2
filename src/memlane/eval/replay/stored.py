"""Scoring the questions again on a store a replay already wrote (``memlane replay --score-only``).

Replaying LoCoMo dev or BEAM embeds every memory (minutes to an hour on a busy machine); what a
change to search or injection moves is only the question scores. With ``--home DIR --score-only``
the replay skips the write path and the per-turn injection, and scores the questions (retrieval
recall in each mode, and the first-turn injection blocks of
:mod:`~memlane.eval.replay.firstturn`) on the memories ``DIR`` holds. The report has the same keys;
its ``memories`` and ``injection`` sections are empty but for ``memories.stored``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from memlane.engine import MemoryEngine
from memlane.errors import InvalidArgument
from memlane.eval.replay.beam import BeamChat
from memlane.eval.replay.firstturn import score_first_turns
from memlane.eval.replay.locomo import Conversation
from memlane.eval.replay.report import ConversationStats, build_report
from memlane.eval.replay.run import Progress, _evidence, _score_questions, token_counter
from memlane.retrieval import Recipe


def score_stored(
    engine: MemoryEngine,
    conversations: Sequence[Conversation | BeamChat],
    *,
    progress: Progress | None = None,
    source: str | None = None,
    recipes: Sequence[Recipe] = (),
) -> dict[str, Any]:
    """Score the questions of ``conversations`` on the memories ``engine`` holds (each
    conversation's owner: its sample id); returns the replay's report.

    Raises:
        InvalidArgument: the store holds no memory of one of the conversations (replay it
            first: ``memlane replay FILE --home DIR``).
    """
    started = time.perf_counter()
    empty = [c.sample_id for c in conversations if not engine.count(c.sample_id)]
    if empty:
        raise InvalidArgument(
            f"the store holds no memories of {', '.join(empty)}: --score-only scores a store a "
            "replay wrote (run memlane replay FILE --home DIR first, without --score-only)"
        )
    engine.embed(["warm-up"])
    total = sum(len(c.questions) for c in conversations)
    done = 0

    def advance(n: int, description: str) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total, description)

    stats: list[ConversationStats] = []
    for conv in conversations:
        t0 = time.perf_counter()
        owner = conv.sample_id
        st = ConversationStats(owner)
        st.unresolved_questions = conv.unresolved_questions
        st.stored = engine.count(owner)
        _score_questions(engine, st, owner, conv.questions, advance, recipes)
        score_first_turns(engine, owner, conv.questions, _evidence, st.first_turn)
        st.seconds = time.perf_counter() - t0
        stats.append(st)
    tokenizer, _ = token_counter()
    report = build_report(stats, engine.settings, tokenizer, engine.model_backend)
    report["seconds"] = round(time.perf_counter() - started, 3)
    beam = any(isinstance(c, BeamChat) for c in conversations)
    return {
        "file": source,
        "conversations": [c.sample_id for c in conversations],
        "format": "beam" if beam else "locomo",
        "score_only": True,
        **report,
    }
