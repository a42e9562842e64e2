"""``[proxy]`` of memlane.toml: the named upstreams the proxy may forward to (never a URL from the
request: the proxy is not an open relay), its address, token and limits (docs/proxy.md)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

#: An upstream's name: the first segment of the proxy's paths (``/openai/v1/chat/completions``).
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


class Upstream(BaseModel):
    """One upstream: ``url`` is the base URL its clients would use (OpenAI style with its
    ``/v1``, e.g. ``https://api.openai.com/v1``; Anthropic style without, e.g.
    ``https://api.anthropic.com``, as the SDKs' own ``base_url``); ``api``: ``openai`` or
    ``anthropic``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^https?://[^\s?#]+$")]
    api: Literal["openai", "anthropic"]

    @field_validator("url")
    @classmethod
    def _no_slash(cls, url: str) -> str:
        return url.rstrip("/")


class ProxySettings(BaseModel):
    """``[proxy]``: see docs/proxy.md."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    host: str = "127.0.0.1"
    port: int = Field(default=8788, ge=1, le=65535)
    #: memlane's own token, in the ``X-Memlane-Token`` header (the client's ``Authorization`` /
    #: ``x-api-key`` go to the upstream); required to listen on a non-loopback address.
    token: Annotated[str, StringConstraints(strip_whitespace=True)] = ""
    #: Named upstreams, ``[proxy.upstreams.NAME]`` with ``url`` and ``api``.
    upstreams: dict[str, Upstream] = Field(default_factory=dict)
    #: Largest request body forwarded, in bytes (a request with images is a few MB).
    max_body_bytes: int = Field(default=32_000_000, ge=1024)
    #: Seconds to wait for the upstream to connect / for each read (a model may think long).
    connect_timeout_s: float = Field(default=10.0, gt=0)
    read_timeout_s: float = Field(default=600.0, gt=0)
    #: Inject memory (``false``: a plain pass-through, for comparisons).
    inject: bool = True
    #: After a turn completes, feed the exchange to ``memlane learn`` in the background with the
    #: configured ``[llm]`` (opt-in; docs/proxy.md "Learning").
    learn: bool = False

    @field_validator("upstreams")
    @classmethod
    def _names(cls, upstreams: dict[str, Upstream]) -> dict[str, Upstream]:
        for name in upstreams:
            if not NAME.match(name):
                raise ValueError(
                    f"upstream name {name!r}: use lowercase letters, digits, '-' or '_' "
                    "(it is the first segment of the proxy's paths)"
                )
        return upstreams
