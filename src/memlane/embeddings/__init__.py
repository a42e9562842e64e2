"""Embedders: the :class:`Embedder` protocol, the local default model and a deterministic one."""

from memlane.embeddings.base import MODEL_NAME, Embedder, embed_texts
from memlane.embeddings.hashing import HashEmbedder
from memlane.embeddings.local import LocalEmbedder
from memlane.errors import ConfigError

__all__ = ["Embedder", "HashEmbedder", "LocalEmbedder", "embed_texts", "make_embedder"]


def make_embedder(provider: str, *, model: str = "", dimension: int = 384) -> Embedder:
    """Build the embedder named by ``[embedding] provider``: ``local`` (``model``, when given,
    must be the one it ships) or ``hash`` (``dimension`` long vectors).

    Raises:
        ConfigError: another provider, or another local model (nothing else would be loaded).
    """
    if provider == "hash":
        return HashEmbedder(dimension=dimension)
    if provider != "local":
        raise ConfigError("embedding.provider", provider, "one of 'local', 'hash'")
    if model and model != MODEL_NAME:
        raise ConfigError("embedding.model", model, f"the local provider ships only {MODEL_NAME!r}")
    return LocalEmbedder()
