"""Micro-batching of query embeddings: concurrent callers (the server's threads, each serving
one request) share one model call.

Opportunistic, with no waiting window: a caller that finds the model idle runs at once with
whatever is queued (alone, when nothing else is); callers that arrive while it runs queue up, and
the first of them to wake runs the next batch with every text queued by then. A lone caller pays
nothing; under load the batches grow by themselves. Why it pays: one query through the int8
MiniLM costs ~2.6 ms on this machine's two cores, a text of a batch ~1.8 ms (docs/server.md), and
a batch occupies the cores once instead of each caller fighting for them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

from memlane.embeddings.base import Vector

#: Most texts one batch takes (longer queues are served batch after batch).
MAX_BATCH = 32


class _Slot:
    __slots__ = ("done", "error", "text", "vector")

    def __init__(self, text: str) -> None:
        self.text = text
        self.vector: Vector | None = None
        self.error: BaseException | None = None
        self.done = False


class QueryBatcher:
    """Embeds query texts through ``run`` (texts -> ``(n, dimension)`` vectors), batching the
    callers that arrive together. Thread-safe; ``run`` is called by one thread at a time."""

    def __init__(self, run: Callable[[Sequence[str]], Vector], max_batch: int = MAX_BATCH) -> None:
        self._run = run
        self._max = max(1, int(max_batch))
        self._cond = threading.Condition()
        self._queue: list[_Slot] = []
        self._running = False
        #: Batches run and texts embedded (a benchmark's view of how well batching works).
        self.batches = 0
        self.texts = 0

    def embed(self, text: str) -> Vector:
        """``text``'s ``(dimension,)`` embedding. Raises what ``run`` raised for its batch."""
        slot = _Slot(text)
        with self._cond:
            self._queue.append(slot)
            while True:
                if slot.done:
                    return self._result(slot)
                if not self._running:
                    break
                self._cond.wait()
            self._running = True
            batch, self._queue = self._queue[: self._max], self._queue[self._max :]
        try:
            vectors = np.asarray(self._run([s.text for s in batch]), dtype=np.float32)
            for s, v in zip(batch, vectors, strict=True):
                s.vector = v
        except BaseException as exc:
            for s in batch:
                s.error = exc
        with self._cond:
            for s in batch:
                s.done = True
            self.batches += 1
            self.texts += len(batch)
            self._running = False
            self._cond.notify_all()
        if slot.done:
            return self._result(slot)
        return self.embed_queued(slot)

    def embed_queued(self, slot: _Slot) -> Vector:
        """Wait for (or run) the batch of a slot already queued."""
        with self._cond:
            while not slot.done:
                if not self._running:
                    self._queue.remove(slot)
                    break
                self._cond.wait()
            else:
                return self._result(slot)
        return self.embed(slot.text)

    @staticmethod
    def _result(slot: _Slot) -> Vector:
        if slot.error is not None:
            raise slot.error
        assert slot.vector is not None
        return slot.vector
