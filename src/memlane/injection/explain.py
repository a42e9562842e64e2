"""Why a message would get the memories it gets: the cut's verdict on every candidate of the
search an injection runs for it, without injecting (the sessions page's explain view).

:func:`candidates` runs the turn's query (:func:`~memlane.injection.pipeline.build_query`) through
the same search (limit ``search_limit``, ``search_candidates`` per leg, no access counted) and the
same cut (:func:`~memlane.injection.cut.cut`) as :meth:`Injector.inject`, and returns each
candidate's :class:`~memlane.injection.cut.Verdict` (its legs' ranks, cosine, BM25 score, kept or
cut, and the rule in words). Nothing is recorded: no turn is counted, no memory marked as shown.
The session's own steps after the cut (the no-repeat window, in-block duplicates, the budget) are
not run; the sessions page marks the candidates its window holds.
"""

from __future__ import annotations

from collections.abc import Sequence

from memlane.errors import InvalidArgument
from memlane.injection.cut import Verdict, cut, explaining
from memlane.injection.pipeline import Injector, build_query
from memlane.retrieval import LegScores


def candidates(
    injector: Injector,
    text: str,
    *,
    owner: str,
    agent: str | None = None,
    project: str | None = None,
    recent: Sequence[str] | None = None,
) -> list[Verdict]:
    """The verdicts of the candidates an injection of ``text`` for ``owner`` (``agent``'s
    settings, ``project``'s memories and the global ones) would weigh, in search order.

    Raises:
        InvalidArgument: ``text`` is empty or not a string.
        StoreError: the store failed.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument("text is empty: pass the message whose injection to explain")
    cfg = injector.settings_for(agent)
    evidence = LegScores()
    with explaining() as verdicts:
        hits = injector.retriever.search(
            build_query(text, recent, cfg),
            owner=owner,
            agent=agent,
            limit=cfg.search_limit,
            record_access=False,
            project=project,
            evidence=evidence,
            depth=cfg.search_candidates,
        )
        cut(hits, evidence, cfg)
    return verdicts
