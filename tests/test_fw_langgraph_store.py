"""memlane as a LangGraph ``BaseStore`` (langgraph from PyPI, the ``langchain`` extra): the
store's own ``put`` / ``get`` / ``search`` / ``delete`` / ``list_namespaces`` (which call
:meth:`MemlaneStore.batch`) on a real engine; namespaces map to owner / project / agent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph", reason="the langchain extra is not installed")

from langgraph.store.base import InvalidNamespaceError

from fw_support import BOBS, DEPLOY, OTHER, PROJECT, TABS, open_engine
from memlane import MemoryEngine
from memlane.integrations.langgraph_store import MemlaneStore

#: LangMem's namespace shape: ("memories", user id, ...).
ALICE = ("memories", "alice", "app")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    engine = open_engine(tmp_path)
    yield engine
    engine.close()


@pytest.fixture
def store(engine: MemoryEngine) -> MemlaneStore:
    return MemlaneStore(engine, prefix=("memories",), projects={"app": PROJECT})


def test_put_goes_through_the_write_path_and_says_what_it_did(
    store: MemlaneStore, engine: MemoryEngine
) -> None:
    value = {"kind": "Memory", "content": {"content": "Alice's laptop runs Fedora"}}
    store.put(ALICE, "k1", value)
    item = store.get(ALICE, "k1")
    assert item is not None and item.value == value and item.key == "k1"
    saved = [m for m in engine.list(owner="alice") if m.content == "Alice's laptop runs Fedora"]
    assert [(m.project, m.source) for m in saved] == [(PROJECT, "langgraph")]
    # The same key again: the memory's text changes, its history keeps the old one.
    store.put(ALICE, "k1", {"content": {"content": "Alice's laptop runs Arch"}})
    assert [h.content for h in engine.history(saved[0].id, owner="alice")][:1] == [
        "Alice's laptop runs Fedora"
    ]
    assert engine.get(saved[0].id, owner="alice").content == "Alice's laptop runs Arch"
    # A new key whose text Alice's global memory already holds is that memory.
    store.put(ALICE, "k2", {"content": TABS})
    assert store.get(ALICE, "k2").value == {"content": TABS}
    assert [w["decision"] for w in store.writes] == ["added", "updated", "hash_exact"]
    assert len([m for m in engine.list(owner="alice") if m.content == TABS]) == 1
    store.delete(ALICE, "k1")
    assert store.get(ALICE, "k1") is None
    assert store.writes[-1]["decision"] == "forgotten"


def test_search_is_memlanes_hybrid_search_within_the_namespace(store: MemlaneStore) -> None:
    hits = store.search(ALICE, query="where do we deploy the billing service")
    contents = [h.value["content"] for h in hits]
    assert contents[0] == DEPLOY and hits[0].score is not None
    assert OTHER not in contents and BOBS not in contents  # another project, another owner
    bobs = [h.value["content"] for h in store.search(("memories", "bob"), query="billing")]
    assert bobs == [BOBS]
    # Without a query: the scope's memories, newest first; a filter on the value.
    listed = [h.value["content"] for h in store.search(("memories", "alice"))]
    assert set(listed) == {DEPLOY, TABS, OTHER}
    assert store.search(("memories", "alice"), filter={"content": TABS})[0].value["content"] == TABS


def test_namespaces_outside_the_mapping_are_refused(store: MemlaneStore) -> None:
    with pytest.raises(InvalidNamespaceError, match="owner"):
        store.put(("alice",), "k", {"content": "x"})  # no prefix
    with pytest.raises(InvalidNamespaceError):
        store.get(("memories", "alice", "app", "agent", "deeper"), "k")


def test_list_namespaces_lists_those_used(store: MemlaneStore) -> None:
    store.put(ALICE, "k", {"content": "Alice's laptop runs Fedora"})
    store.search(("memories", "bob"), query="billing")
    assert store.list_namespaces(prefix=("memories",)) == [
        ALICE,
        ("memories", "bob"),
    ]
    assert store.list_namespaces(prefix=("memories", "bob")) == [("memories", "bob")]
