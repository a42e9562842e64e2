"""Request and response bodies of the HTTP API (pydantic; the OpenAPI schema at ``/docs``).

Responses that are one of memlane's values (:class:`~memlane.types.Memory`,
:class:`~memlane.types.SearchHit`, :class:`~memlane.types.Injection`, ...) use the frozen
dataclass itself as the schema: pydantic validates and serialises stdlib dataclasses, so a field
added to a value reaches the API without a second declaration here."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    create_model,
    model_validator,
)

from memlane.config import InjectionSettings
from memlane.dedup.limits import CONTENT_PATTERN, not_text_at
from memlane.scope import MAX_OWNER_CHARS, MAX_PROJECT_CHARS, owner_pattern
from memlane.types import (
    DedupLogEntry,
    Memory,
    MemoryType,
    SearchHit,
    SessionState,
    WriteResult,
)

#: An owner, agent or session name: some text that is not only blanks (what the engine takes).
Name = Annotated[str, Field(min_length=1, pattern=r"\S")]
#: The schema of an owner name: what :func:`memlane.scope.check_owner` accepts (no control or
#: zero-width character, at most MAX_OWNER_CHARS), so a client (and schemathesis) knows a
#: name the server refuses with 422 before sending it. The check itself is check_owner's, on
#: every door; pydantic only checks the shape.
OWNER_SCHEMA: dict[str, Any] = {"pattern": owner_pattern(), "maxLength": MAX_OWNER_CHARS}
OwnerName = Annotated[str, Field(min_length=1, pattern=r"\S", json_schema_extra=OWNER_SCHEMA)]
#: A project's identity (:mod:`memlane.scope`: ``github.com/acme/app``, ``commit:<sha>``,
#: ``path:/folder``), at most :data:`memlane.scope.MAX_PROJECT_CHARS` characters.
Project = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_PROJECT_CHARS,
        pattern=r"\S",
        description="A project's identity (github.com/acme/app, commit:<sha>, path:/folder). "
        "Writes: the memory belongs to it (none: global to the owner); reads: its memories and "
        "the owner's global ones (none: every project's).",
    ),
]
#: Text to search or remember: not only blanks.
Text = Annotated[str, Field(min_length=1, pattern=r"\S")]
#: A memory's text: not only blanks, no control character but tab and line breaks (the write
#: path's :func:`memlane.dedup.limits.check_controls`, stated in the schema).
Content = Annotated[
    str, Field(min_length=1, pattern=r"\S", json_schema_extra={"pattern": CONTENT_PATTERN})
]


def _integral(value: Any) -> Any:
    """JSON's ``5.0`` is the integer 5 (JSON Schema says so too); ``5.5`` stays a float."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def json_int(**bounds: int) -> Any:
    """An integer as JSON has it (``5`` or ``5.0``, never ``true``, ``"5"`` or ``5.5``) within
    ``bounds`` (``ge``, ``le``); the bounds inside, so the JSON schema shows them."""
    return Annotated[int, Field(strict=True, **bounds), BeforeValidator(_integral)]  # type: ignore[call-overload]


def printable(text: str) -> str:
    """``text`` with lone surrogates written as ``\\udXXX`` (safe to put in a message)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class FieldError(ValueError):
    """A body's value that is not text, raised inside a model validator: ``field`` is where (a
    dotted path, ``body`` for the whole body), ``problem`` what is wrong and the fix (the error
    handler shows ``field: problem``, not pydantic's "Value error, " under ``body``)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")
        self.field = field
        self.problem = problem


class _In(BaseModel):
    """A request body: unknown keys refused, and no string anywhere in it (keys included) may
    hold a lone UTF-16 surrogate or NUL (422 naming where; no store can keep them)."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _only_text(cls, data: Any) -> Any:
        stack: list[tuple[str, Any]] = [("", data)]
        while stack:  # iterative: a deeply nested body must not exhaust the recursion limit
            where, value = stack.pop()
            if isinstance(value, str):
                at = not_text_at(value)
                if at >= 0:
                    what = "NUL" if value[at] == "\x00" else "a lone UTF-16 surrogate"
                    raise FieldError(
                        where or "body",
                        f"holds {what} at character {at}: send valid UTF-8 text without NUL",
                    )
            elif isinstance(value, dict):
                for key, item in value.items():
                    name = printable(str(key))
                    stack.append((f"{where}.{name}" if where else name, item))
                    stack.append((f"a key of {where or 'the body'}", key))
            elif isinstance(value, list):
                stack.extend((f"{where}[{n}]", item) for n, item in enumerate(value))
        return data


class MemoryIn(_In):
    content: Content = Field(description="The text to remember.")
    type: MemoryType = MemoryType.FACT
    agent: Name | None = None
    session: Name | None = None
    importance: Annotated[float, Field(ge=0, le=1, strict=True)] | None = None
    source: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class AddOne(_In):
    """One memory for ``owner`` (in ``project``, when given)."""

    owner: OwnerName | None = None
    project: Project | None = None
    memory: MemoryIn


class AddBatch(_In):
    """A batch of memories for ``owner`` (in ``project``, when given; one transaction)."""

    owner: OwnerName | None = None
    project: Project | None = None
    memories: list[MemoryIn] = Field(min_length=1, max_length=1000)


def _add_kind(data: Any) -> str:
    """Which body ``POST /v1/memories`` got: one memory, or a batch (``memories``)."""
    return "batch" if isinstance(data, dict) and "memories" in data else "one"


#: ``POST /v1/memories``: one memory (``memory``) or a batch (``memories``), not both.
AddRequest = Annotated[
    Annotated[AddOne, Tag("one")] | Annotated[AddBatch, Tag("batch")],
    Discriminator(_add_kind),
]


class WriteOut(BaseModel):
    decision: str
    duplicate: bool
    similarity: float | None
    matched_id: str | None
    reasoning: str | None
    memory: Memory

    @classmethod
    def of(cls, r: WriteResult) -> WriteOut:
        """From :meth:`WriteResult.to_dict` (the one serialisation of a write's outcome)."""
        return cls.model_validate({**r.to_dict(), "memory": r.memory})


class AddResponse(BaseModel):
    results: list[WriteOut]


class MemoryPage(BaseModel):
    items: list[Memory]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page.")


class PatchRequest(_In):
    content: Content


class SearchRequest(_In):
    query: Text
    owner: OwnerName | None = None
    agent: Name | None = None
    project: Project | None = None
    limit: json_int(ge=1, le=200) = 10  # type: ignore[valid-type]
    types: list[MemoryType] | None = None
    mode: Literal["hybrid", "vector", "fts"] = "hybrid"
    include_inactive: bool = Field(
        default=False,
        strict=True,
        description="Also expired (superseded) memories, e.g. what was true before.",
    )


class SearchResponse(BaseModel):
    hits: list[SearchHit]


class InjectRequest(_In):
    """One turn's injection (``text``: the user's message), or with ``pinned_only`` the pinned
    memories for a session's start (no ``text``: there is no message yet). A body without
    ``text`` and without ``pinned_only: true`` is refused (422 naming both)."""

    # The schema says so too: text is required unless pinned_only is true.
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": ["text"], "properties": {"text": {"type": "string"}}},
                {"required": ["pinned_only"], "properties": {"pinned_only": {"const": True}}},
            ]
        }
    )

    session: Name
    text: Text | None = Field(
        default=None,
        description="The user's message for this turn (required unless pinned_only is true).",
    )
    owner: OwnerName | None = None
    agent: Name | None = None
    project: Project | None = None
    recent: list[str] | None = Field(default=None, max_length=50)
    max_chars: json_int(ge=1, le=100_000_000) | None = Field(  # type: ignore[valid-type]
        default=None, description="Longest block allowed, in characters (none: no limit)."
    )
    pinned_only: bool = Field(
        default=False,
        strict=True,
        description="Only the pinned memories, for a session's start (text is not used).",
    )
    known: list[Name] = Field(
        default_factory=list,
        max_length=1000,
        description="Ids of memories the conversation already holds (written through MCP "
        "remember in this session, say): left out as the session's own memories are.",
    )

    @model_validator(mode="after")
    def _text_unless_pinned(self) -> InjectRequest:
        if self.text is None and not self.pinned_only:
            raise ValueError(
                "text is required: give the user's message for this turn, or pinned_only: "
                "true for the pinned memories at a session's start"
            )
        return self


class TurnRequest(_In):
    """One model call's memory under the turn model (:meth:`memlane.MemoryEngine.turn`):
    ``message`` is the user message that started the turn; ``kept`` whether the door's block
    stays in the history its client sends next turn; ``position`` the user turns the
    conversation holds, this one included; ``key`` the door's own turn id."""

    session: Name
    message: Text
    kept: bool = Field(strict=True)
    position: json_int(ge=1, le=1_000_000_000) | None = None  # type: ignore[valid-type]
    owner: OwnerName | None = None
    agent: Name | None = None
    project: Project | None = None
    recent: list[str] | None = Field(default=None, max_length=50)
    max_chars: json_int(ge=1, le=100_000_000) | None = Field(  # type: ignore[valid-type]
        default=None, description="Longest block allowed, in characters (none: no limit)."
    )
    known: list[Name] = Field(default_factory=list, max_length=1000)
    key: Name | None = Field(default=None, max_length=1000)


class SyncRequest(_In):
    """The memlane blocks of one request of the client to its model (``text``): the
    session's tracking follows them (:meth:`memlane.injection.Sessions.sync`)."""

    text: str = Field(max_length=1_000_000)
    owner: OwnerName | None = None
    agent: Name | None = None


class SyncOut(BaseModel):
    """What a sync found: the session's state after it, the memories shown within the window
    that are ``gone`` from the request (compressed away), ``block``: those memories as an
    injection block to add to that request (``None`` when none is gone), and those ``kept``
    (recorded as shown at the current turn)."""

    state: SessionState
    gone: list[str]
    kept: list[str]
    block: str | None = None


class ResetRequest(_In):
    reason: Literal["compact", "clear", "resume"]
    owner: OwnerName | None = None


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
    model: str | None = Field(
        default=None, description="The embedding model (only for the server's token)."
    )
    config_error: str | None = Field(
        description="Why memlane.toml was not reloaded, if so (without the server's token only "
        "that it was not: the message may quote a value of the file)."
    )


def _patch_field(field: Any) -> Any:
    """A settings PUT's type for one ``[injection]`` field: the field's own type and bounds, or
    null; booleans and numbers strict (``true`` is not 1, ``"yes"`` not true), integers at most
    2**53 (exact in JSON and TOML)."""
    ann = field.annotation
    if ann is int:
        bounds = {k: getattr(m, k) for m in field.metadata for k in ("ge", "le") if hasattr(m, k)}
        bounds.setdefault("le", 2**53)  # exact in JSON and TOML
        ann = json_int(**bounds)
    elif ann in (bool, float):
        ann = Annotated[ann, *field.metadata, Field(strict=True)]
    return ann | None


#: The body of a settings PUT: any subset of the ``[injection]`` keys (typed as the file is;
#: the whole file is then checked as a load would).
InjectionPatch: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "InjectionPatch",
    __config__=ConfigDict(extra="forbid"),
    **{
        name: (_patch_field(field), Field(default=None, description=field.description))
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
