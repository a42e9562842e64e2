"""The ``[scope]`` and ``[hooks]`` sections of :class:`memlane.config.Settings`: whose memories a
call acts on, and the hooks of the coding assistants (docs/integrations.md). Kept apart from
:mod:`memlane.config`, which holds the store, model, write-path and retrieval sections.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memlane.scope import ScopeError, check_owner


def _owner_name(value: str) -> str:
    """``""`` (none set) or a normalised owner name (:func:`memlane.scope.check_owner`).
    Raises ValueError."""
    if not value.strip():
        return ""
    try:
        return check_owner(value)
    except ScopeError as exc:
        raise ValueError(str(exc)) from None


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class ScopeSettings(_Section):
    """``[scope]``: whose memories a call acts on when it names no owner
    (:func:`memlane.scope.resolve_owner`: the call's owner > this > ``"default"``). Every door
    follows it: the library, the CLI, the HTTP API, the pages, MCP and the hooks."""

    #: The owner of calls that name none ("" = ``"default"``).
    owner: str = ""

    _owner = field_validator("owner")(_owner_name)


class HooksSettings(_Section):
    """``[hooks]``: ``memlane hook`` for Claude Code and Gemini CLI (docs/integrations.md).

    The hook reads this section itself (``memlane.hooks.config``, no pydantic on its fast
    path); this class documents it and lets :meth:`Settings.load` accept and check it.
    """

    #: Owner of the hooks' and MCP's memories ("" = ``[scope] owner``, else ``"default"``: the
    #: scope rule, :func:`memlane.scope.resolve_owner`).
    owner: str = ""
    _owner = field_validator("owner")(_owner_name)
    #: Agent scope ("" = the client's name: ``claude-code`` or ``gemini``).
    agent: str = ""
    #: Inject the memories of the session's project and the owner's global ones (off: every
    #: memory of the owner): the project is the identity of the git repository holding the
    #: session's ``cwd`` (its remote URL, else its root commit, else its path:
    #: :func:`memlane.scope.project_identity`), the same for every assistant run in it.
    per_project: bool = True
    #: URL of a ``memlane serve`` to use ("" = the server that serves this home's store, as
    #: it recorded itself in ``<home>/run/server.json``; never whatever answers on a port).
    url: str = ""
    #: The hook's own deadline in seconds, below the client's hook timeout (10 s as installed):
    #: past it the hook exits 0 with no output.
    timeout_s: float = Field(default=8.0, gt=0, le=600)
    #: Seconds to wait for the server's TCP connection before using the engine in-process.
    connect_timeout_s: float = Field(default=0.3, gt=0, le=30)
    #: Longest injected block in characters: Claude Code passes about 10,000 characters whole.
    max_chars: int = Field(default=9_000, ge=100, le=100_000)
    #: Previous messages read from the transcript to enrich short follow-up prompts.
    recent_messages: int = Field(default=2, ge=0, le=20)
    #: Use the engine in this process when no server answers (off: no server, no injection).
    fallback: bool = True
    #: Claude Code's ``Stop``: learn from the session's new messages with the ``[llm]`` model,
    #: in a background ``memlane learn`` process (off by default: it calls the LLM every turn).
    learn: bool = False
    #: Bearer token the hooks send (an owner-bound ``[server] owner_tokens`` one, say); "" =
    #: the recorded server's, or ``[server] token`` for ``url``.
    token: str = ""
    #: When no server serves this home, start the memory daemon in the background (``memlane
    #: serve --daemon``: loopback, random token, one per home) and answer in-process meanwhile.
    autostart: bool = True
    #: The daemon stops after this many seconds without a request (0: never).
    idle_shutdown_s: float = Field(default=1800.0, ge=0, le=30 * 86400)
