"""Micro-batched query embeddings (memlane.embeddings.batcher): every caller gets its own
text's vector, concurrent callers share model calls, and a failing call fails its callers only."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

from memlane.embeddings.batcher import QueryBatcher
from memlane.embeddings.hashing import HashEmbedder
from memlane.errors import EmbeddingError

EMB = HashEmbedder(64)


def _slow(calls: list[int]) -> QueryBatcher:
    def run(texts: Sequence[str]) -> np.ndarray:
        calls.append(len(texts))
        time.sleep(0.05)  # a model call: long enough for the other callers to queue up
        if any("boom" in t for t in texts):
            raise EmbeddingError("the model failed")
        return EMB.embed_batch(list(texts))

    return QueryBatcher(run)


def test_concurrent_queries_share_model_calls_and_get_their_own_vectors() -> None:
    calls: list[int] = []
    batcher = _slow(calls)
    texts = [f"question number {i} about topic {i * 7}" for i in range(16)]
    out: dict[str, np.ndarray] = {}
    start = threading.Barrier(len(texts))

    def ask(text: str) -> None:
        start.wait()
        out[text] = batcher.embed(text)

    threads = [threading.Thread(target=ask, args=(t,)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for text in texts:
        np.testing.assert_allclose(out[text], EMB.embed_batch([text])[0], rtol=1e-6)
    assert sum(calls) == len(texts)
    assert len(calls) < len(texts)  # batched: fewer model calls than callers


def test_a_lone_caller_is_one_call_and_an_error_reaches_only_its_batch() -> None:
    calls: list[int] = []
    batcher = _slow(calls)
    np.testing.assert_allclose(batcher.embed("alone"), EMB.embed_batch(["alone"])[0], rtol=1e-6)
    assert calls == [1]
    with pytest.raises(EmbeddingError, match="model failed"):
        batcher.embed("boom")
    np.testing.assert_allclose(batcher.embed("after"), EMB.embed_batch(["after"])[0], rtol=1e-6)
