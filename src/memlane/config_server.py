"""The ``[server]`` section of :class:`memlane.config.Settings` (``memlane serve``,
docs/server.md), with the rules that keep its tokens from granting more than meant (issue #33,
docs/security.md "Tokens and owner names"): kept apart from :mod:`memlane.config`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
)

from memlane.scope import ScopeError, check_owner


class ServerSettings(BaseModel):
    """``[server]``: ``memlane serve`` (see docs/server.md).

    ``owner_tokens`` may not grant more than each line says: an owner name that is empty, over
    :data:`memlane.scope.MAX_OWNER_CHARS` characters or holds a control or zero-width character,
    two names that are one owner once normalised (NFC), one token for two owners (the last one
    won: one owner's token read another's memories), and an owner token equal to ``token``
    (that owner's token would be the server's, able to change the settings) are configuration
    errors; the server keeps its last good settings and shows the error (docs/server.md).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=1, le=65535)
    #: Bearer token of every route but ``/health`` ("" or blank = none: loopback only).
    token: Annotated[str, StringConstraints(strip_whitespace=True)] = ""
    #: Tokens bound to one owner: ``{owner = "token"}``; such a token sees only that owner.
    owner_tokens: dict[
        str, Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    ] = Field(default_factory=dict)
    #: Largest request body accepted, in bytes.
    max_body_bytes: int = Field(default=1_000_000, ge=1024)
    #: Origins allowed by CORS (none by default: CORS off); also allowed to change things.
    cors_origins: tuple[str, ...] = ()
    #: Host names clients use besides the loopback names and ``host`` (the Host header of any
    #: other name is refused with 421, against DNS rebinding); ``["*"]``: any name.
    allowed_hosts: tuple[str, ...] = ()

    @field_validator("owner_tokens", mode="after")
    @classmethod
    def _tokens_grant_what_they_say(
        cls, value: dict[str, str], info: ValidationInfo
    ) -> dict[str, str]:
        """The owner names normalised (:func:`memlane.scope.check_owner`); raises ValueError
        (a :class:`~memlane.errors.ConfigError` naming ``server.owner_tokens``, the tokens
        never echoed) for the grants the class docstring lists."""
        server_token = info.data.get("token", "")
        owners: dict[str, str] = {}  # normalised name -> token
        written: dict[str, str] = {}  # normalised name -> the name as written
        by_token: dict[str, str] = {}  # token -> normalised name
        for name, token in value.items():
            try:
                owner = check_owner(name, what=f"the owner name {name[:40]!r}")
            except ScopeError as exc:
                raise ValueError(str(exc)) from None
            if owner in owners:
                raise ValueError(
                    f"{written[owner]!r} and {name!r} are one owner once normalised (Unicode "
                    "NFC, spaces around dropped): keep one of them"
                )
            if token in by_token:
                raise ValueError(
                    f"{by_token[token]!r} and {owner!r} share one token: a token is bound to "
                    "one owner; give each owner its own (e.g. `openssl rand -hex 32`)"
                )
            if server_token and token == server_token:
                raise ValueError(
                    f"the token of {owner!r} is the server's token ([server] token): it would "
                    "give that owner every owner's memories and the settings; give the owner "
                    "a token of its own"
                )
            owners[owner], written[owner], by_token[token] = token, name, owner
        return owners
