"""Request and response bodies of the HTTP API (pydantic; the OpenAPI schema at ``/docs``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from memlane.config import InjectionSettings
from memlane.types import (
    Association,
    DedupLogEntry,
    Injection,
    Memory,
    MemoryVersion,
    SearchHit,
    SessionState,
    WriteResult,
)


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MemoryOut(BaseModel):
    id: str
    content: str
    type: str
    importance: float
    owner: str
    agent: str | None
    session: str | None
    source: str | None
    created_at: datetime
    updated_at: datetime
    last_accessed_at: datetime | None
    access_count: int
    confirmations: int
    content_hash: str
    status: str
    metadata: dict[str, Any]

    @classmethod
    def of(cls, m: Memory) -> MemoryOut:
        return cls.model_validate(m.to_dict())


class MemoryIn(_In):
    content: str = Field(description="The text to remember.")
    type: str = "fact"
    agent: str | None = None
    session: str | None = None
    importance: float | None = None
    source: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class AddRequest(_In):
    """One memory (``memory``) or a batch (``memories``), for ``owner``."""

    owner: str | None = None
    memory: MemoryIn | None = None
    memories: list[MemoryIn] | None = Field(default=None, max_length=1000)


class WriteOut(BaseModel):
    decision: str
    duplicate: bool
    similarity: float | None
    matched_id: str | None
    reasoning: str | None
    memory: MemoryOut

    @classmethod
    def of(cls, r: WriteResult) -> WriteOut:
        return cls(
            decision=r.decision.value,
            duplicate=r.duplicate,
            similarity=r.similarity,
            matched_id=r.matched_id,
            reasoning=r.reasoning,
            memory=MemoryOut.of(r.memory),
        )


class AddResponse(BaseModel):
    results: list[WriteOut]


class MemoryPage(BaseModel):
    items: list[MemoryOut]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page.")


class PatchRequest(_In):
    content: str


class VersionOut(BaseModel):
    memory_id: str
    version: int
    content: str
    content_hash: str
    reason: str
    replaced_at: datetime

    @classmethod
    def of(cls, v: MemoryVersion) -> VersionOut:
        return cls.model_validate(v.to_dict())


class AssociationOut(BaseModel):
    source_id: str
    target_id: str
    relation: str
    weight: float
    created_at: datetime

    @classmethod
    def of(cls, a: Association) -> AssociationOut:
        return cls.model_validate(a.to_dict())


class SearchRequest(_In):
    query: str
    owner: str | None = None
    agent: str | None = None
    limit: int = Field(default=10, ge=1, le=200)
    types: list[str] | None = None
    mode: Literal["hybrid", "vector", "fts"] = "hybrid"


class HitOut(BaseModel):
    memory: MemoryOut
    score: float
    similarity: float
    ranks: dict[str, int] = Field(description="1-based rank in each leg that found it.")

    @classmethod
    def of(cls, h: SearchHit) -> HitOut:
        return cls(
            memory=MemoryOut.of(h.memory),
            score=h.score,
            similarity=h.similarity,
            ranks=dict(h.ranks),
        )


class SearchResponse(BaseModel):
    hits: list[HitOut]


class InjectRequest(_In):
    session: str
    text: str
    owner: str | None = None
    agent: str | None = None
    recent: list[str] | None = Field(default=None, max_length=50)


class InjectedOut(BaseModel):
    memory: MemoryOut
    source: str
    score: float


class InjectResponse(BaseModel):
    session: str
    turn: int
    block: str | None
    items: list[InjectedOut]
    skipped: dict[str, int] = Field(description="Candidates left out, by reason.")
    elapsed_ms: float

    @classmethod
    def of(cls, i: Injection) -> InjectResponse:
        items = [
            InjectedOut(memory=MemoryOut.of(x.memory), source=x.source, score=x.score)
            for x in i.items
        ]
        return cls(
            session=i.session,
            turn=i.turn,
            block=i.block,
            items=items,
            skipped=dict(i.skipped),
            elapsed_ms=i.elapsed_ms,
        )


class SessionOut(BaseModel):
    owner: str
    session: str
    turn: int
    injected: dict[str, int] = Field(description="memory id -> turn it was injected in")
    last_reset_at: datetime | None
    last_reset_reason: str | None
    updated_at: datetime | None

    @classmethod
    def of(cls, s: SessionState) -> SessionOut:
        return cls.model_validate(s.to_dict())


class ResetRequest(_In):
    reason: Literal["compact", "clear", "resume"]
    owner: str | None = None


class DedupLogOut(BaseModel):
    id: int
    owner: str
    new_text: str
    existing_id: str | None
    existing_text: str | None
    similarity: float | None
    decision: str
    reasoning: str | None
    review_status: str
    created_at: datetime

    @classmethod
    def of(cls, e: DedupLogEntry) -> DedupLogOut:
        return cls.model_validate(e.to_dict())


class DedupLogPage(BaseModel):
    items: list[DedupLogOut]
    next_cursor: str | None


class StatsOut(BaseModel):
    memories_by_owner: dict[str, int]
    memories_by_type: dict[str, int]
    memories_by_status: dict[str, int]
    store_bytes: int
    model: str
    uptime_s: float


class HealthOut(BaseModel):
    status: Literal["ready", "starting"]
    model: str
    config_error: str | None = Field(description="Why memlane.toml was not reloaded, if so.")


#: The body of a settings PUT: any subset of the ``[injection]`` keys (checked like the file).
InjectionPatch: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "InjectionPatch",
    __config__=ConfigDict(extra="forbid"),
    **{
        name: (Any, Field(default=None, description=field.description))
        for name, field in InjectionSettings.model_fields.items()
    },
)


class InjectionOut(BaseModel):
    agent: str | None = Field(description="None for the global defaults.")
    overridden: bool = Field(description="The agent has an override ([agents.<name>.injection]).")
    overrides: dict[str, Any] = Field(description="The keys the override sets.")
    settings: InjectionSettings


class Problem(BaseModel):
    """RFC 9457 problem details (``application/problem+json``)."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    errors: list[dict[str, Any]] | None = None
