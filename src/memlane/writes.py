"""The engine's writes: offering memories to the write path (one, a batch, or learned from a
conversation by the LLM), checking one without writing it, changing one (update, forget, restore,
purge) and restoring exported ones. A base of :class:`memlane.engine.MemoryEngine`, which supplies
the store, the write path, the embeddings, the settings, the LLM, the owner rule
(:meth:`~memlane.engine.MemoryEngine.owner_of`) and :meth:`~memlane.engine.MemoryEngine.get`.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memlane.dedup.write import MemoryInput, check_scope
from memlane.engine_parts import EngineParts
from memlane.errors import ConfigError
from memlane.llm import Learner
from memlane.privacy import clean_name
from memlane.scope import resolve_owner
from memlane.store.base import NewMemory
from memlane.types import Memory, MemoryType, MemoryVersion, WriteResult

if TYPE_CHECKING:
    pass


class Writes(EngineParts):
    """:meth:`add`, :meth:`add_many`, :meth:`learn`, :meth:`validate`, :meth:`update`,
    :meth:`forget`, :meth:`purge`, :meth:`restore`, :meth:`restore_memories` (see the module
    docstring)."""

    # ------------------------------------------------------------------ write path
    def add(
        self,
        content: str,
        *,
        type: MemoryType | str = MemoryType.FACT,
        owner: str | None = None,
        agent: str | None = None,
        session: str | None = None,
        importance: float | None = None,
        source: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        project: str | None = None,
    ) -> WriteResult:
        """Offer one memory to the write path (validate, hash, embed, dedup; one transaction):
        global to the owner, or of ``project`` (deduplicated against what a turn in it sees:
        its memories and the global ones).

        Raises:
            InvalidMemory: empty, too long, an injected block, unknown type, bad importance.
            EmbeddingError: the model failed (nothing written).
            StoreError: the store failed (nothing written).
        """
        item = MemoryInput(
            content, type, owner, agent, session, importance, source, metadata or {}, project
        )
        return self.add_many([item])[0]

    def add_many(
        self, items: Iterable[MemoryInput | Mapping[str, Any]]
    ) -> builtins.list[WriteResult]:
        """Offer a batch (see :meth:`memlane.dedup.write.WritePath.add_many`): deduplicated
        against the store and within itself, written in one transaction. An item without an
        owner gets :meth:`owner_of`'s."""
        return self.writer.add_many([self._owned(i) for i in items])

    def _owned(self, item: MemoryInput | Mapping[str, Any]) -> MemoryInput:
        """``item`` as a :class:`MemoryInput` with the owner rule's owner when it names none."""
        one = item if isinstance(item, MemoryInput) else MemoryInput.from_dict(item)
        if one.owner is not None:
            return one
        return dataclasses.replace(one, owner=resolve_owner(None, self.settings.scope.owner))

    def learn(
        self,
        messages: Sequence[Any],
        *,
        owner: str | None = None,
        agent: str | None = None,
        session: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        project: str | None = None,
    ) -> builtins.list[WriteResult]:
        """Extract memories from a conversation with the configured LLM and offer them to the
        write path as one batch. Injected ``[Context from memory]`` blocks never reach the model.
        With a ``session``, only the messages after those learned from before are read (the
        same growing history can be passed every turn). ``metadata`` goes on every memory.

        Raises:
            ConfigError: no LLM configured (``[llm] provider``).
            LLMError: the model failed or answered malformed JSON (nothing written).
        """
        from memlane.history import is_injection_block
        from memlane.learn import conversation_text, to_inputs

        owner = self.owner_of(owner, agent)
        check_scope("session", session)
        session = None if session is None else clean_name(session)  # as stored (issue #33)
        if not isinstance(self.llm, Learner):
            raise ConfigError(
                "llm.provider",
                self.settings.llm.provider,
                "learning from conversations needs an LLM: set [llm] provider to openai or "
                "anthropic (and model) in memlane.toml or MEMLANE_LLM__PROVIDER",
            )
        talk = [m for m in messages if not is_injection_block(m)]
        start = self.store.learned_messages(owner, session) if session else 0
        if start > len(talk):  # a shorter history (compacted, or another conversation): all
            start = 0
        transcript = conversation_text(talk[start:])
        results: builtins.list[WriteResult] = []
        if transcript.strip():
            extracted = self.llm.extract_memories(transcript)
            items = to_inputs(
                extracted, owner=owner, agent=agent, session=session, metadata=metadata
            )
            if project is not None:  # of the project the conversation was held in
                items = [dataclasses.replace(i, project=project) for i in items]
            results = self.writer.add_many(items) if items else []
        if session:  # only after the memories are written: a failure re-reads these messages
            self.store.set_learned_messages(owner, session, len(talk))
        return results

    def validate(self, item: MemoryInput) -> NewMemory:
        """Check one offered memory without writing it; returns it as the write path would store
        it (text cleaned of secrets and ``<private>`` spans, the type's default importance, the
        owner rule's owner). Raises :class:`InvalidMemory`."""
        return self.writer.validate(self._owned(item))

    # ------------------------------------------------------------------ other writes
    def update(
        self, memory_id: str, content: str, *, owner: str | None = None, agent: str | None = None
    ) -> Memory:
        """Give a memory of the scope new text (same id; the old text is kept in its history).

        Raises:
            NotFound: no active memory with that id in the scope.
            InvalidMemory: the new text is invalid (see :meth:`add`).
        """
        return self.writer.update(self.get(memory_id, owner=owner, agent=agent), content)

    def forget(
        self, memory_id: str, *, owner: str | None = None, agent: str | None = None
    ) -> Memory:
        """Mark a memory of the scope forgotten (kept on disk with its history; never searched
        or injected).

        Raises:
            NotFound: no active memory with that id in the scope.
        """
        return self.writer.forget(self.get(memory_id, owner=owner, agent=agent))

    def purge(
        self, memory_id: str | None, *, owner: str | None = None, agent: str | None = None
    ) -> int:
        """Delete a memory of the scope (any status) and every row holding its text, or with
        ``memory_id`` None everything of ``owner`` (docs/security.md). Returns the memories
        deleted. Raises :class:`NotFound` (no memory with that id in the scope)."""
        owner = self.owner_of(owner, agent)
        if memory_id is None:
            return self.store.purge(owner)
        memory = self.get(memory_id, owner=owner, agent=agent, include_inactive=True)
        return self.store.purge(owner, [memory.id])

    def restore(self, memory_id: str, *, owner: str | None = None) -> Memory:
        """Undo :meth:`forget` (:meth:`WritePath.restore`). Raises :class:`NotFound`."""
        return self.writer.restore(self.get(memory_id, owner=owner, include_inactive=True))

    def restore_memories(self, items: Sequence[tuple[Memory, Sequence[MemoryVersion]]]) -> int:
        """Insert memories exactly as exported (same id, status, timestamps, counters), each with
        its previous texts, oldest first (``memlane import``, :mod:`memlane.transfer`): every
        text embedded with this engine's model (one batch), then all of them in one transaction.
        The caller checks them first (:meth:`validate`) and leaves out ids already stored
        (:meth:`get_many`). Returns how many were inserted.

        Raises:
            EmbeddingError: the model failed (nothing written).
            StoreError: the store failed, e.g. an id already stored (nothing written).
        """
        if not items:
            return 0
        vectors = self.embeddings.embed([m.content for m, _ in items])
        with self.store.transaction():
            for (memory, history), vector in zip(items, vectors, strict=True):
                self.store.restore(memory, history, vector)
        return len(items)
