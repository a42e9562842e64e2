"""The injection's cut: which search hits hold enough evidence to enter the block.

A block is read by the model on every turn, so a memory in it that the turn does not need is
noise the model pays for. The hybrid search fuses its legs by rank (:mod:`memlane.retrieval`),
and a rank says nothing about how strong a leg's evidence was: a word that stands in nearly every
memory of an owner (her name) puts nearly every memory on the full-text list, each with a rank.
So the cut weighs each hit by the legs' own scores (:class:`memlane.retrieval.LegScores`):

- a hit **both ranked legs** found (vector and full text) is kept when one of them holds it
  strongly: its cosine within ``cut_both_cosine_gap`` of the query's best cosine, or its BM25
  score at least ``cut_both_bm25_relative`` times the query's best (both looser than the bars
  below: two legs agreeing is evidence of its own);
- a hit **only the full-text leg** found is kept when its BM25 score is at least
  ``cut_bm25_relative`` times the query's best BM25 score and at least ``cut_bm25_floor``. BM25
  weighs each matched term by its IDF over the owner's memories, so a hit carried by a word most
  of them share scores near nothing: ``cut_bm25_floor`` (0.69 = ln 2) is the score of one match,
  at average length, of a word that half of the owner's memories hold;
- a hit **only the vector leg** found (or only the neighbour or graph leg: it is judged by its
  own cosine) is kept when its cosine is within ``cut_cosine_gap`` of the query's best cosine.
  The gap is a distance on the model's cosine scale, so it is calibrated per embedding model
  (:mod:`memlane.embeddings.profiles`);
- a **long** hit (more than ``[retrieval] long_words`` words: a chat's long assistant answers)
  that one of the rules above keeps must also be the query's best cosine, or hold at least
  ``cut_long_bm25_relative`` times the query's best BM25. Its vector reads only the model's
  first window, which is near any question of the chat, and its many words match any question
  (BEAM 100K chats 1-10: 1.9 % of the long candidates cite the question's evidence, 11 % of the
  short ones). A store without long memories is cut exactly as before;
- a short hit that a rule above cuts is kept when the memory right after it in its session is a
  long candidate (``[injection] cut_answered``): in a chat stored message by message that is
  the message the long answer answers, and the answer's being found is evidence for it (the
  answer's vector reads only its start, which takes up the message). The block then holds the
  user's words instead of the long answer (:func:`memlane.retrieval_long.answered`).

A focused question has one or two strong hits and the rest fall away; a broad one has many hits
near the best, and they stay: the cut adapts to the query. ``cut = false`` turns it off (the
block is then the top ``search_limit`` hits, as before). Chosen on LoCoMo dev and BEAM 100K chats
1-10 (docs/replay.md, "Injection precision").

:func:`explaining` collects every candidate's :class:`Verdict` (its legs' ranks and scores and the
rule that kept or cut it, in words) for ``memlane inject --explain``. The hot path decides with
:func:`decide` (comparisons only) and puts a decision in words (:func:`reason`) only while such a
collector is open.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from memlane.config import InjectionSettings
from memlane.retrieval import LegScores
from memlane.types import Memory, SearchHit

#: ``skipped`` key of a hit the cut left out.
WEAK = "weak_match"


@dataclass(frozen=True, slots=True)
class Verdict:
    """One candidate of a turn: its memory, its rank in each leg that found it (``vector``,
    ``fts``, ``neighbour``, ``graph``), its cosine to the query, its BM25 score (``None``: the
    full-text leg did not find it), whether the cut kept it, and why (``rule``, in words)."""

    memory: Memory
    ranks: Mapping[str, int]
    cosine: float
    bm25: float | None
    kept: bool
    rule: str


def decide(
    ranks: Mapping[str, int],
    cosine: float,
    bm25: float | None,
    evidence: LegScores,
    cfg: InjectionSettings,
    long: bool = False,
    answered: bool = False,
) -> tuple[bool, str]:
    """Whether a hit with these ``ranks`` (leg -> rank), ``cosine`` and ``bm25`` (``long``: more
    than ``long_words`` words; ``answered``: a long candidate comes right after it in its
    session) enters the block of a query whose legs scored ``evidence``, and which rule
    decided: ``"off"`` (the cut is off), ``"both"`` (both ranked legs found it), ``"fts"`` (only
    full text), ``"vector"`` (only the vector, neighbour or graph leg), ``"long"`` (one of those
    kept a long hit, and the long hit's bar cut it), ``"answered"`` (one of those cut it, and
    its long answer let it in). Only comparisons: this runs for every candidate of every turn;
    :func:`reason` puts a decision in words when someone reads it."""
    if not cfg.cut:
        return True, "off"
    kept, rule = _decide(ranks, cosine, bm25, evidence, cfg)
    if kept and long and not _long_strong(cosine, bm25, evidence, cfg):
        return False, "long"
    if not kept and answered and cfg.cut_answered:
        return True, "answered"
    return kept, rule


def _long_strong(
    cosine: float, bm25: float | None, evidence: LegScores, cfg: InjectionSettings
) -> bool:
    return cosine >= evidence.best_cosine or (bm25 or 0.0) >= (
        cfg.cut_long_bm25_relative * evidence.top_bm25
    )


def _decide(
    ranks: Mapping[str, int],
    cosine: float,
    bm25: float | None,
    evidence: LegScores,
    cfg: InjectionSettings,
) -> tuple[bool, str]:
    if "vector" in ranks and "fts" in ranks:
        strong = (
            evidence.best_cosine - cosine <= cfg.cut_both_cosine_gap
            or (bm25 or 0.0) >= cfg.cut_both_bm25_relative * evidence.top_bm25
        )
        return strong, "both"
    if "fts" in ranks:
        need = max(cfg.cut_bm25_relative * evidence.top_bm25, cfg.cut_bm25_floor)
        return (bm25 or 0.0) >= need, "fts"
    return evidence.best_cosine - cosine <= cfg.cut_cosine_gap, "vector"


def reason(
    kept: bool,
    rule: str,
    ranks: Mapping[str, int],
    cosine: float,
    bm25: float | None,
    evidence: LegScores,
    cfg: InjectionSettings,
    long: bool = False,
) -> str:
    """The words for :func:`decide`'s ``(kept, rule)`` on this hit (``memlane inject
    --explain``, the sessions page)."""
    best_cos, top = evidence.best_cosine, evidence.top_bm25
    if rule == "off":
        return "kept: the cut is off (cut = false)"
    if rule == "answered":
        first = _reason(False, _decide(ranks, cosine, bm25, evidence, cfg)[1], ranks, cosine,
                        bm25, evidence, cfg)  # fmt: skip
        return (
            "kept: the long memory right after it in its session (its answer) was found too; "
            f"without that, {first}"
        )
    if rule == "long":
        first = reason(True, _decide(ranks, cosine, bm25, evidence, cfg)[1], ranks, cosine, bm25,
                       evidence, cfg)  # fmt: skip
        return (
            f"cut: it is long (over long_words words) and neither the best cosine ({best_cos:.3f}; "
            f"its {cosine:.3f}) nor BM25 {cfg.cut_long_bm25_relative:g} x the best ({top:.2f}; "
            f"its {bm25 or 0.0:.2f}); without that, {first}"
        )
    words = _reason(kept, rule, ranks, cosine, bm25, evidence, cfg)
    if kept and long:
        words += f"; long, and the best cosine or BM25 >= {cfg.cut_long_bm25_relative:g} x the best"
    return words


def _reason(
    kept: bool,
    rule: str,
    ranks: Mapping[str, int],
    cosine: float,
    bm25: float | None,
    evidence: LegScores,
    cfg: InjectionSettings,
) -> str:
    best_cos, top = evidence.best_cosine, evidence.top_bm25
    if rule == "both":
        found = (
            f"both legs found it (vector #{ranks['vector']}, cosine {cosine:.3f}, "
            f"{best_cos - cosine:.3f} below the best {best_cos:.3f}; full-text #{ranks['fts']}, "
            f"BM25 {bm25 or 0.0:.2f} of the best {top:.2f})"
        )
        both_gap, both_rel = cfg.cut_both_cosine_gap, cfg.cut_both_bm25_relative
        if kept:
            return f"kept: {found}; one of them within {both_gap:g} / {both_rel:g} x"
        return (
            f"cut: {found}; neither within {both_gap:g} of the best cosine nor "
            f"{both_rel:g} x the best BM25"
        )
    if rule == "fts":
        score = bm25 or 0.0
        need = max(cfg.cut_bm25_relative * top, cfg.cut_bm25_floor)
        if kept:
            return (
                f"kept: only full-text found it (#{ranks['fts']}); BM25 {score:.2f} >= {need:.2f} "
                f"({cfg.cut_bm25_relative:g} x the best {top:.2f}, at least "
                f"{cfg.cut_bm25_floor:g})"
            )
        common = " (its matched words are common in this owner's memories)" * (
            score < cfg.cut_bm25_floor
        )
        return (
            f"cut: only full-text found it (#{ranks['fts']}) and its BM25 {score:.2f} is below "
            f"{need:.2f} ({cfg.cut_bm25_relative:g} x the best {top:.2f}, at least "
            f"{cfg.cut_bm25_floor:g}){common}"
        )
    leg = "the vector leg" if "vector" in ranks else f"the {'/'.join(ranks) or 'no'} leg"
    where = f" (#{ranks['vector']})" if "vector" in ranks else ""
    gap = best_cos - cosine
    if kept:
        return (
            f"kept: only {leg} found it{where}; cosine {cosine:.3f} is within "
            f"{cfg.cut_cosine_gap:g} of the best ({best_cos:.3f})"
        )
    return (
        f"cut: only {leg} found it{where} and its cosine {cosine:.3f} is {gap:.3f} below the "
        f"best ({best_cos:.3f}; at most {cfg.cut_cosine_gap:g} allowed)"
    )


def judge(
    ranks: Mapping[str, int],
    cosine: float,
    bm25: float | None,
    evidence: LegScores,
    cfg: InjectionSettings,
    long: bool = False,
    answered: bool = False,
) -> tuple[bool, str]:
    """Whether a hit with these ``ranks`` (leg -> rank), ``cosine`` and ``bm25`` (``long``,
    ``answered``: as for :func:`decide`) enters the block of a query whose legs scored
    ``evidence``; and the rule, in words (:func:`decide` then :func:`reason`)."""
    kept, rule = decide(ranks, cosine, bm25, evidence, cfg, long, answered)
    return kept, reason(kept, rule, ranks, cosine, bm25, evidence, cfg, long)


def cut(
    hits: Sequence[SearchHit], evidence: LegScores, cfg: InjectionSettings
) -> tuple[list[SearchHit], int]:
    """The ``hits`` that enter the block (in their order) and how many were cut; each verdict
    goes to the collector of :func:`explaining` when one is open."""
    kept: list[SearchHit] = []
    notes = _COLLECT.get()
    for hit in hits:
        bm25 = evidence.bm25.get(hit.memory.id)
        long, answered = hit.memory.id in evidence.long, hit.memory.id in evidence.answered
        ok, rule = decide(hit.ranks, hit.similarity, bm25, evidence, cfg, long, answered)
        if ok:
            kept.append(hit)
        if notes is not None:  # words only for a reader (inject --explain, the sessions page)
            words = reason(ok, rule, hit.ranks, hit.similarity, bm25, evidence, cfg, long)
            notes.append(Verdict(hit.memory, dict(hit.ranks), hit.similarity, bm25, ok, words))
    return kept, len(hits) - len(kept)


_COLLECT: ContextVar[list[Verdict] | None] = ContextVar("memlane_inject_explain", default=None)


@contextmanager
def explaining() -> Iterator[list[Verdict]]:
    """Collect the :class:`Verdict` of every contextual candidate of the injections made inside
    the ``with`` block (this thread / task only), in search order::

        with explaining() as verdicts:
            engine.inject(session, text, owner="alice")
    """
    notes: list[Verdict] = []
    token = _COLLECT.set(notes)
    try:
        yield notes
    finally:
        _COLLECT.reset(token)
