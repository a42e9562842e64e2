"""Embedders: the :class:`Embedder` protocol, the local default model and a deterministic one."""

from memlane.embeddings.base import Embedder, embed_texts
from memlane.embeddings.hashing import HashEmbedder
from memlane.embeddings.local import LocalEmbedder

__all__ = ["Embedder", "HashEmbedder", "LocalEmbedder", "embed_texts", "make_embedder"]


def make_embedder(provider: str, *, model: str = "", dimension: int = 384) -> Embedder:
    """Build the embedder named by ``[embedding] provider`` (``local`` or ``hash``)."""
    if provider == "hash":
        return HashEmbedder(dimension=dimension)
    return LocalEmbedder()
