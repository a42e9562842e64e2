"""Request and response bodies of the HTTP API (pydantic; the OpenAPI schema at ``/docs``).

Responses that are one of memlane's values (:class:`~memlane.types.Memory`,
:class:`~memlane.types.SearchHit`, :class:`~memlane.types.Injection`, ...) use the frozen
dataclass itself as the schema: pydantic validates and serialises stdlib dataclasses, so a field
added to a value reaches the API without a second declaration here."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from memlane.config import InjectionSettings
from memlane.types import DedupLogEntry, Memory, SearchHit, WriteResult


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
    memory: Memory

    @classmethod
    def of(cls, r: WriteResult) -> WriteOut:
        return cls(
            decision=r.decision.value,
            duplicate=r.duplicate,
            similarity=r.similarity,
            matched_id=r.matched_id,
            reasoning=r.reasoning,
            memory=r.memory,
        )


class AddResponse(BaseModel):
    results: list[WriteOut]


class MemoryPage(BaseModel):
    items: list[Memory]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page.")


class PatchRequest(_In):
    content: str


class SearchRequest(_In):
    query: str
    owner: str | None = None
    agent: str | None = None
    limit: int = Field(default=10, ge=1, le=200)
    types: list[str] | None = None
    mode: Literal["hybrid", "vector", "fts"] = "hybrid"
    include_inactive: bool = Field(
        default=False, description="Also expired (superseded) memories, e.g. what was true before."
    )


class SearchResponse(BaseModel):
    hits: list[SearchHit]


class InjectRequest(_In):
    session: str
    text: str
    owner: str | None = None
    agent: str | None = None
    recent: list[str] | None = Field(default=None, max_length=50)
    max_chars: int | None = Field(
        default=None, ge=1, description="Longest block allowed, in characters (none: no limit)."
    )
    pinned_only: bool = Field(
        default=False,
        description="Only the pinned memories, for a session's start (text is not used).",
    )


class ResetRequest(_In):
    reason: Literal["compact", "clear", "resume"]
    owner: str | None = None


class DedupLogPage(BaseModel):
    items: list[DedupLogEntry]
    next_cursor: str | None


class StatsOut(BaseModel):
    memories_by_owner: dict[str, int]
    memories_by_type: dict[str, int]
    memories_by_status: dict[str, int]
    store_bytes: int
    model: str
    uptime_s: float
    #: The LLM's counters since start: provider, model, calls, failures, tokens in/out, latency.
    llm: dict[str, Any] = Field(default_factory=dict)


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
