"""``/v1/dedup-log/...`` review routes (unreviewed rows, confirm, reverse, the LLM's review) and
``POST /v1/learn`` (memories learned from a conversation by the configured LLM).

Errors as everywhere: an unknown row is 404, a row with nothing to restore 422, a reverse that
finds its text already held by a live memory 409 (nothing written; the CLI exits 1), no LLM
configured 422 naming ``llm.provider``, a failed model call 502 (problem+json).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query
from pydantic import Field

from memlane.dedup.review import ReviewOutcome
from memlane.server.auth import caller, scope
from memlane.server.models import Name, WriteOut, _In
from memlane.server.state import Principal, ServerState
from memlane.types import DedupLogEntry

Caller = Annotated[Principal, Depends(caller)]
Owner = Annotated[
    str | None,
    Query(
        min_length=1,
        pattern=r"\S",
        description="Owner scope (default: [scope] owner, else default).",
    ),
]
Limit = Annotated[int, Query(ge=1, le=1000)]
#: The 409 of a reverse (OpenAPI).
CONFLICT = "A live memory already holds the text to restore: nothing written (detail names it)."
#: A dedup log row's id: a positive 64-bit integer (larger ones no store can hold: 422, not 500).
EntryId = Annotated[int, Path(ge=1, le=2**63 - 1, description="The dedup log row's id.")]


class LearnRequest(_In):
    """A conversation (OpenAI-style messages) to learn memories from, for ``owner``."""

    messages: list[dict[str, Any]] = Field(max_length=10_000)
    owner: Name | None = None
    agent: Name | None = None
    session: Name | None = Field(
        default=None, description="With a session, only messages not learned before are read."
    )


def router(state: ServerState) -> APIRouter:
    api = APIRouter()

    @api.get("/dedup-log/unreviewed", response_model=list[DedupLogEntry], tags=["review"])
    def unreviewed(who: Caller, owner: Owner = None, limit: Limit = 100) -> list[DedupLogEntry]:
        """Unreviewed decisions, oldest first (hash_exact ones are confirmed automatically)."""
        return state.engine.review_pending(owner=scope(who, owner), limit=limit)

    @api.post("/dedup-log/{entry_id}/confirm", response_model=ReviewOutcome, tags=["review"])
    def confirm(entry_id: EntryId, who: Caller, owner: Owner = None) -> ReviewOutcome:
        """The decision stands."""
        return state.engine.review(entry_id, "confirm", owner=scope(who, owner))

    @api.post(
        "/dedup-log/{entry_id}/reverse",
        response_model=ReviewOutcome,
        tags=["review"],
        responses={409: {"description": CONFLICT}},
    )
    def reverse(entry_id: EntryId, who: Caller, owner: Owner = None) -> ReviewOutcome:
        """Restore the offered text as a memory (``reversed``). When a live memory already
        holds it, nothing is written and the answer is a 409 whose ``detail`` names that memory
        (as ``memlane review reverse`` exits 1): a client must be able to tell."""
        outcome = state.engine.review(entry_id, "reverse", owner=scope(who, owner))
        if outcome.action == "conflict":
            raise HTTPException(409, f"entry {entry_id} not reversed: {outcome.message}")
        return outcome

    @api.post("/dedup-log/review-llm", response_model=list[ReviewOutcome], tags=["review"])
    def review_llm(who: Caller, owner: Owner = None, limit: Limit = 100) -> list[ReviewOutcome]:
        """The configured LLM reviews the rejections made without one (confirm or reverse)."""
        return state.engine.review_with_llm(owner=scope(who, owner), limit=limit)

    @api.post("/learn", response_model=list[WriteOut], tags=["memories"])
    def learn(body: LearnRequest, who: Caller) -> list[WriteOut]:
        """Memories the configured LLM extracts from ``messages`` (injected context blocks
        removed first), offered to the write path as one batch; each result says its decision."""
        results = state.engine.learn(
            body.messages, owner=scope(who, body.owner), agent=body.agent, session=body.session
        )
        return [WriteOut.of(r) for r in results]

    return api
