"""memlane as a LangGraph ``BaseStore``: :class:`MemlaneStore` (``create_agent(..., store=...)``,
``graph.compile(store=...)``, what LangMem's tools and managers read and write).

Namespaces map onto memlane's scope (docs/frameworks.md): after the store's ``prefix`` labels
(LangMem's ``("memories", "{user_id}")`` is ``MemlaneStore(memory, prefix=("memories",))``), the
first label is the **owner**, the second (optional) the **project**, the third (optional) the
**agent**; a deeper namespace is refused (``InvalidNamespaceError``). LangGraph forbids a
period in a label, so a project identity (``github.com/acme/app``) gets a label through
``projects={"app": "github.com/acme/app"}``; a label not in it is the project's name as it is. An item's ``value`` is
kept whole in the memory's metadata (``langgraph_value``) with its ``key`` (``langgraph_key``);
the memory's text is ``value["content"]`` (LangMem's ``{"content": {"content": ...}}`` too), else
the value as JSON.

- ``put`` of a new key goes through the write path (deduplicated, secrets redacted,
  ``<private>`` dropped); of an existing key, the memory's text is updated (its history keeps the
  old text); ``put(..., None)`` / ``delete`` forgets it. What each write did is in
  :attr:`MemlaneStore.writes` (``{"key", "decision", "memory_id"}``) and logged at INFO: a put the
  write path found a duplicate of is that memory (``get`` of the key answers it).
- ``search`` with a ``query`` is memlane's hybrid search (``score``: its fused score); without,
  the scope's memories, newest first. ``filter`` keeps the items whose value has those values.
- ``list_namespaces`` lists the namespaces this store has used (memlane has no namespace table).

A key is found by reading the scope's memories (up to :data:`SCAN_LIMIT`, newest first): meant
for the per-user memories LangMem writes, not for a store of millions of items per owner.

Supported: langgraph >=1.0,<2.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from memlane.integrations._base import Memlane, Scope, connect, require

VERSION = require("langgraph", "1.0", "2", "langchain")

from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

__all__ = ["MemlaneStore"]

log = logging.getLogger(__name__)

#: How many of a scope's memories a key lookup reads (newest first).
SCAN_LIMIT = 2000
KEY, VALUE = "langgraph_key", "langgraph_value"


def _content(value: Mapping[str, Any]) -> str:
    content = value.get("content")
    if isinstance(content, Mapping) and isinstance(content.get("content"), str):
        return str(content["content"])
    if isinstance(content, str):
        return content
    return json.dumps(value, sort_keys=True, default=str)


class MemlaneStore(BaseStore):  # type: ignore[misc]
    """A LangGraph store on memlane (see the module's docstring for the namespace mapping).

    Args:
        memory: a :class:`~memlane.MemoryEngine`, a ``memlane serve`` URL or a client.
        prefix: leading namespace labels that are not scope (e.g. ``("memories",)``).
        projects: namespace label -> memlane project (LangGraph labels hold no period).
        token: ``memlane serve``'s bearer token (with a URL).
    """

    def __init__(
        self,
        memory: Any,
        *,
        prefix: tuple[str, ...] = (),
        projects: Mapping[str, str] | None = None,
        token: str | None = None,
    ):
        self.memory: Memlane = connect(memory, token=token)
        self.prefix = tuple(prefix)
        self.projects = dict(projects or {})
        #: What each write did, in order: ``{"key", "decision", "memory_id"}``.
        self.writes: list[dict[str, Any]] = []
        self._namespaces: set[tuple[str, ...]] = set()
        self._held: dict[tuple[tuple[str, ...], str], str] = {}  # deduplicated puts

    # ------------------------------------------------------------------ mapping
    def scope(self, namespace: tuple[str, ...]) -> Scope:
        """The memlane scope of ``namespace``.

        Raises:
            InvalidNamespaceError: it lacks the prefix or an owner, or is deeper than
                prefix + owner / project / agent.
        """
        n = len(self.prefix)
        rest = tuple(namespace[n:])
        if tuple(namespace[:n]) != self.prefix or not 1 <= len(rest) <= 3 or not all(rest):
            raise InvalidNamespaceError(
                f"namespace {namespace!r}: memlane maps {self.prefix!r} + (owner, [project, "
                "[agent]]); give the owner, at most a project and an agent after the prefix"
            )
        padded = (*rest, None, None)
        project = self.projects.get(padded[1], padded[1]) if padded[1] else None
        return Scope(owner=padded[0], project=project, agent=padded[2])

    def _item(
        self, namespace: tuple[str, ...], memory: Mapping[str, Any], score: Any = None
    ) -> Any:
        meta = memory.get("metadata") or {}
        value = meta.get(VALUE) or {"content": memory["content"]}
        key = str(meta.get(KEY) or memory["id"])
        created = datetime.fromisoformat(memory["created_at"])
        updated = datetime.fromisoformat(memory.get("updated_at") or memory["created_at"])
        if score is None:
            return Item(
                value=dict(value), key=key, namespace=namespace, created_at=created,
                updated_at=updated,
            )  # fmt: skip
        return SearchItem(namespace, key, dict(value), created, updated, score=score)

    def _find(self, namespace: tuple[str, ...], key: str) -> dict[str, Any] | None:
        scope = self.scope(namespace)
        held = self._held.get((namespace, key))
        for memory in self.memory.memories(scope=scope, limit=SCAN_LIMIT):
            meta = memory.get("metadata") or {}
            if meta.get(KEY) == key or memory["id"] in (key, held):
                return memory
        return None

    # ------------------------------------------------------------------ operations
    def _get(self, op: GetOp) -> Any:
        found = self._find(op.namespace, op.key)
        self._namespaces.add(tuple(op.namespace))
        return None if found is None else self._item(op.namespace, found)

    def _put(self, op: PutOp) -> None:
        scope = self.scope(op.namespace)
        self._namespaces.add(tuple(op.namespace))
        found = self._find(op.namespace, op.key)
        if op.value is None:
            if found is not None:
                self.memory.forget(found["id"], scope=scope)
                self._note(op.key, "forgotten", found["id"])
            return
        value = dict(op.value)
        if found is not None:
            if found["content"] != _content(value):
                self.memory.update(found["id"], _content(value), scope=scope)
            self._note(op.key, "updated", found["id"])
            return
        done = self.memory.add(
            _content(value), scope=scope, metadata={KEY: op.key, VALUE: value}, source="langgraph"
        )
        if done.get("duplicate"):
            self._held[(tuple(op.namespace), op.key)] = done["memory"]["id"]
        self._note(op.key, str(done["decision"]), done["memory"]["id"])

    def _note(self, key: str, decision: str, memory_id: str) -> None:
        self.writes.append({"key": key, "decision": decision, "memory_id": memory_id})
        log.info("memlane store: put %r -> %s (memory %s)", key, decision, memory_id)

    def _search(self, op: SearchOp) -> list[Any]:
        namespace = tuple(op.namespace_prefix)
        scope = self.scope(namespace)
        self._namespaces.add(namespace)
        wanted = op.offset + op.limit
        if op.query:
            rows = [
                (h["memory"], h["score"])
                for h in self.memory.search(op.query, scope=scope, limit=max(wanted, 1))
            ]
        else:
            rows = [(m, 0.0) for m in self.memory.memories(scope=scope, limit=wanted)]
        items = [self._item(namespace, m, score) for m, score in rows]
        if op.filter:
            items = [i for i in items if all(i.value.get(k) == v for k, v in op.filter.items())]
        return items[op.offset : wanted]

    def _list(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        names = sorted(self._namespaces)
        for cond in op.match_conditions or ():
            path = tuple(cond.path)
            if cond.match_type == "prefix":
                names = [n for n in names if _matches(n[: len(path)], path)]
            else:
                names = [n for n in names if _matches(n[-len(path) :], path)]
        if op.max_depth is not None:
            names = sorted({n[: op.max_depth] for n in names})
        return names[op.offset : op.offset + op.limit]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list(op))
            else:
                raise TypeError(f"memlane store: unknown operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        import asyncio

        return await asyncio.to_thread(self.batch, list(ops))


def _matches(have: tuple[str, ...], want: tuple[str, ...]) -> bool:
    return len(have) == len(want) and all(w in ("*", h) for h, w in zip(have, want, strict=True))
