"""memlane in AutoGen 0.7 (autogen-agentchat + autogen-ext[openai] from PyPI, the ``autogen``
extra, in .fwenvs/autogen): a real ``AssistantAgent`` with a tool on autogen-ext's
``OpenAIChatCompletionClient(base_url=...)`` against the fake model of tests/fw_support.py, and
:class:`MemlaneMemory` in its ``memory=[...]``.

AutoGen keeps the memory's text in the agent's model context (``kept=True``): a memory shown on
turn 1 is still in every later request, so turn 2 adds only what is new, and no request holds a
memory twice."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("autogen_agentchat", reason="the autogen extra is not installed")

from autogen_agentchat.agents import AssistantAgent
from autogen_core import CancellationToken
from autogen_core.memory import MemoryContent, MemoryMimeType
from autogen_core.models import ModelFamily
from autogen_ext.models.openai import OpenAIChatCompletionClient

from fw_support import (
    BOBS,
    DEPLOY,
    MEMORIES,
    OTHER,
    PROJECT,
    TABS,
    TOOL,
    TURNS,
    FakeModel,
    check_bob,
    check_page_rows,
    check_remember,
    check_secrets_through,
    memlane_serve,
    memory_counts,
    open_engine,
    open_engine_as_is,
    request_text,
    run_docs_example,
    user_messages,
)
from memlane import MemoryEngine
from memlane.history import INJECTION_BLOCK_PREFIX
from memlane.integrations import connect
from memlane.integrations.autogen import MemlaneMemory
from version_support import assert_refused


async def lookup(topic: str) -> str:
    """Look a topic up in the team's notes."""
    return f"notes about {topic}"


lookup.__name__ = TOOL


class Chat:
    """One AutoGen conversation of ``owner``: each ``ask`` is one ``AssistantAgent.run`` (a user
    turn; the tool loop makes two model calls: the tool call, then the reflection on its result),
    on one event loop."""

    def __init__(
        self, model: FakeModel, memory: Any, owner: str = "alice", session: str = "chat"
    ) -> None:
        self.memory = MemlaneMemory(memory, session=session, owner=owner, project=PROJECT)
        self.client = OpenAIChatCompletionClient(
            model="fake",
            base_url=model.url,
            api_key="test",
            max_retries=0,
            model_info={
                "vision": False,
                "function_calling": True,
                "json_output": False,
                "family": ModelFamily.UNKNOWN,
                "structured_output": False,
                # as autogen-ext says of every OpenAI model: memory adds system messages
                "multiple_system_messages": True,
            },
        )
        self.agent = AssistantAgent(
            "assistant",
            model_client=self.client,
            tools=[lookup, self.memory.remember_tool()],
            memory=[self.memory],
            system_message="You are a helpful assistant.",
            reflect_on_tool_use=True,
        )
        self.loop = asyncio.Runner()

    def ask(self, text: str) -> Any:
        return self.loop.run(self.agent.run(task=text))

    def close(self) -> None:
        self.loop.run(self.memory.close())
        self.loop.run(self.client.close())
        self.loop.close()


@pytest.fixture
def chat(model: FakeModel, engine: MemoryEngine) -> Iterator[Chat]:
    chat = Chat(model, engine)
    yield chat
    chat.close()


def blocks(body: dict[str, Any]) -> list[str]:
    """The memlane blocks of one request (system messages), in order."""
    return [
        m["content"]
        for m in body.get("messages") or []
        if m.get("role") == "system" and str(m.get("content")).startswith(INJECTION_BLOCK_PREFIX)
    ]


def test_each_turns_block_stays_in_the_context_and_no_memory_is_there_twice(
    model: FakeModel, chat: Chat
) -> None:
    """Turn 1 shows DEPLOY; turn 2 adds TABS only (DEPLOY is still in the context from turn 1);
    turn 3 adds nothing. Every model call of a turn (the tool call, then the answer) holds the
    turn's block once, after the turn's user message, and each memory once."""
    model.take()
    added: list[str] = []
    for turn, (text, new) in enumerate(zip(TURNS, ([DEPLOY], [TABS], []), strict=True), 1):
        chat.ask(text)
        requests = model.take()
        assert len(requests) == 2, [request_text(r)[-300:] for r in requests]
        first = blocks(requests[0])
        if new:
            assert all(m in first[-1] for m in new), first
            added.append(first[-1])
        assert first == added, (turn, first)  # earlier turns' blocks kept, this one's once
        for body in requests:
            assert blocks(body) == added
            assert text in user_messages(body)[-1]
            counts = memory_counts(body, MEMORIES)
            shown = [DEPLOY] if turn == 1 else [DEPLOY, TABS]
            assert counts == {m: int(m in shown) for m in MEMORIES}, (turn, counts)
        # the block follows the turn's user message (update_context runs after it is added)
        roles = [(m["role"], str(m.get("content"))) for m in requests[0]["messages"]]
        if new:
            assert roles[-1] == ("system", added[-1]) and roles[-2] == ("user", text), roles[-2:]
    assert len(added) == 2 and DEPLOY not in added[1]


def test_update_context_reports_the_turns_block_to_autogen(model: FakeModel, chat: Chat) -> None:
    """The run's ``MemoryQueryEvent`` carries the block and the ids of its memories."""
    result = chat.ask(TURNS[0])
    events = [m for m in result.messages if type(m).__name__ == "MemoryQueryEvent"]
    assert len(events) == 1
    (shown,) = events[0].content
    assert DEPLOY in shown.content and TABS not in shown.content
    assert len(shown.metadata["ids"]) == 1 and len(shown.metadata["turn"]) == 32


def test_owner_and_project_come_from_the_memory(model: FakeModel, engine: MemoryEngine) -> None:
    chat = Chat(model, engine, owner="bob", session="bobs")
    try:
        check_bob(model, chat.ask)
    finally:
        chat.close()


def test_sessions_are_apart(model: FakeModel, engine: MemoryEngine, chat: Chat) -> None:
    """A second conversation of Alice's (another session) is shown DEPLOY on its own turn 1
    although the first conversation's context holds it."""
    chat.ask(TURNS[0])
    other = Chat(model, engine, session="other")
    try:
        model.take()
        other.ask(TURNS[0])
        requests = model.take()
        assert [memory_counts(r, MEMORIES)[DEPLOY] for r in requests] == [1, 1]
    finally:
        other.close()


def test_remember_tool_goes_through_the_write_path(
    model: FakeModel, engine: MemoryEngine, chat: Chat
) -> None:
    check_remember(model, engine, chat.ask, "autogen")


def test_add_goes_through_the_write_path(engine: MemoryEngine, chat: Chat) -> None:
    """``Memory.add``: a duplicate is not stored twice, a secret is redacted, ``<private>`` text
    dropped, metadata kept; a content that is not text is refused naming the field and fix."""
    secret = "The staging key is AKIAZ7Q3XK2M4N8P1R5T<private>, the PIN is 4411</private>"
    before = {m.id for m in engine.list(owner="alice", limit=100)}
    for text in ("Alice's editor is Helix", TABS, secret):
        content = MemoryContent(content=text, mime_type=MemoryMimeType.TEXT, metadata={"k": 1})
        chat.loop.run(chat.memory.add(content))
    added = [m for m in engine.list(owner="alice", limit=100) if m.id not in before]
    assert sorted((m.content, m.project, m.source, m.session) for m in added) == [
        ("Alice's editor is Helix", PROJECT, "autogen", "chat"),
        ("The staging key is [redacted:aws_access_key_id]", PROJECT, "autogen", "chat"),
    ]  # TABS was already there: not stored twice
    assert all(m.metadata.get("k") == 1 for m in added)
    assert all("Helix" not in m.content for m in engine.list(owner="bob", limit=100))
    image = MemoryContent(content=b"\x89PNG", mime_type=MemoryMimeType.BINARY)
    with pytest.raises(ValueError, match=r"mime_type 'application/octet-stream' is not text"):
        chat.loop.run(chat.memory.add(image))


def test_query_is_memlanes_hybrid_search_in_the_scope(engine: MemoryEngine, chat: Chat) -> None:
    found = chat.loop.run(chat.memory.query("billing deploy tabs"))
    texts = [c.content for c in found.results]
    assert set(texts) == {DEPLOY, TABS} and texts[0] == DEPLOY, texts
    assert OTHER not in texts and BOBS not in texts
    ids = {c.metadata["id"] for c in found.results}
    assert ids == {m.id for m in engine.list(owner="alice", project=PROJECT)}


@pytest.mark.parametrize("limit", [0, -1, 2.5, True])
def test_a_bad_search_limit_is_refused_naming_it(
    engine: MemoryEngine, chat: Chat, limit: Any
) -> None:
    with pytest.raises(ValueError, match=r"MemlaneMemory\(limit=.*at least 1"):
        MemlaneMemory(engine, session="s", limit=limit)
    with pytest.raises(ValueError, match=r"MemlaneMemory\.query\(limit=.*at least 1"):
        chat.loop.run(chat.memory.query("deploy", limit=limit))


def test_a_session_is_required() -> None:
    with pytest.raises(ValueError, match=r"MemlaneMemory needs session="):
        MemlaneMemory("http://127.0.0.1:9", session="")


def test_clear_forgets_the_scopes_memories_only(engine: MemoryEngine, chat: Chat) -> None:
    """``clear`` forgets the project's memories of Alice; her global ones, her other
    project's and Bob's stay."""
    chat.loop.run(chat.memory.clear())
    left = {m.content for m in engine.list(owner="alice", limit=100)}
    assert DEPLOY not in left and {TABS, OTHER} <= left
    assert [m.content for m in engine.list(owner="bob")] == [BOBS]


@pytest.mark.parametrize(
    ("dist", "version"),
    [("autogen-core", "0.4.2"), ("autogen-core", "0.8.0"), ("autogen-agentchat", "0.8.0")],
)
def test_an_autogen_outside_the_range_is_refused_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, dist: str, version: str
) -> None:
    """autogen-core 0.4.2 (before ``autogen_core.memory``, new in 0.4.3) or a future 0.8 of
    either package: importing the adapter raises UnsupportedFramework naming the package, the
    version, the range and the extra."""
    assert_refused(
        monkeypatch,
        "memlane.integrations.autogen",
        dist=dist,
        version=version,
        low="0.4.3",
        high="0.8",
        extra="autogen",
    )


def test_the_adapter_over_a_memlane_serve_url(model: FakeModel, tmp_path: Path) -> None:
    """The same turns, search and writes through a real ``memlane serve`` (POST /v1/turn,
    /v1/search, /v1/memories) instead of an engine in the agent's process."""
    open_engine(tmp_path).close()  # the scenario's memories, in the store the server opens
    with memlane_serve(tmp_path) as url, closing(connect(url)) as client:
        chat = Chat(model, client, session="over-http")
        try:
            model.take()
            chat.ask(TURNS[0])
            chat.ask(TURNS[1])
            turns = model.take()
            assert [memory_counts(r, MEMORIES) for r in turns] == [
                {DEPLOY: 1, TABS: 0, OTHER: 0, BOBS: 0}
            ] * 2 + [{DEPLOY: 1, TABS: 1, OTHER: 0, BOBS: 0}] * 2
            assert [len(blocks(r)) for r in turns] == [1, 1, 2, 2]
            found = chat.loop.run(chat.memory.query("billing deploy tabs"))
            assert {c.content for c in found.results} == {DEPLOY, TABS}
            engine = open_engine_as_is(tmp_path)
            try:
                check_remember(model, engine, chat.ask, "autogen")
            finally:
                engine.close()
        finally:
            chat.close()


def test_the_docs_example_runs(model: FakeModel, tmp_path: Path) -> None:
    """docs/frameworks.md's AutoGen block, run as tests/test_fw_docs.py runs the others."""
    run_docs_example("AutoGen", model, tmp_path)


def test_the_pages_table_is_the_scripts_output(model: FakeModel) -> None:
    """docs/frameworks.md's AutoGen rows are what scripts/framework_turns.py prints for it."""
    check_page_rows("autogen", model)


def test_a_run_without_a_new_message_adds_nothing_and_a_reset_context_gets_the_block_back(
    model: FakeModel, chat: Chat
) -> None:
    """``agent.run()`` with no task (a team invoking the agent again) is the same turn: its
    block is already in the context, not added twice. After ``on_reset`` (the model context
    emptied) the same first message is that turn again: its block is added back, once."""
    chat.ask(TURNS[0])
    model.take()
    chat.loop.run(chat.agent.run())
    again = model.take()
    assert again and all(memory_counts(r, MEMORIES)[DEPLOY] == 1 for r in again)
    assert all(len(blocks(r)) == 1 for r in again)
    chat.loop.run(chat.agent.on_reset(CancellationToken()))
    chat.ask(TURNS[0])
    after = model.take()
    assert len(after) == 2
    for body in after:
        assert memory_counts(body, MEMORIES)[DEPLOY] == 1 and len(blocks(body)) == 1
        assert user_messages(body) == [TURNS[0]]


@pytest.mark.parametrize("size", [2, 5, 6, 8, 10])
def test_a_buffered_context_never_holds_a_memory_twice(
    model: FakeModel, engine: MemoryEngine, size: int
) -> None:
    """``BufferedChatCompletionContext(buffer_size=N)`` drops old messages, memlane's blocks
    with them, and a shrunk count of user messages in view resets the session's window. Over the
    scenario's turns twice, whatever N: no request holds a memory twice (the memories of the
    blocks still in view are passed as ``known``: without it, N = 6 to 12 put DEPLOY in twice),
    and turn 1's first call holds DEPLOY (a block that fell out may not come back:
    docs/frameworks.md says when)."""
    from autogen_core.model_context import BufferedChatCompletionContext

    chat = Chat(model, engine, session=f"buffered-{size}")
    chat.agent._model_context = BufferedChatCompletionContext(buffer_size=size)
    try:
        model.take()
        for turn, text in enumerate(TURNS + TURNS, 1):
            chat.ask(text)
            requests = model.take()
            assert len(requests) == 2
            for call, body in enumerate(requests, 1):
                counts = memory_counts(body, MEMORIES)
                assert max(counts.values()) <= 1, (turn, call, counts)
                assert counts[OTHER] == counts[BOBS] == 0
                if turn == call == 1:
                    assert counts[DEPLOY] == 1, counts
    finally:
        chat.close()


@pytest.mark.parametrize("over", ["engine", "serve"])
def test_no_secret_or_private_text_reaches_the_disk(
    model: FakeModel, tmp_path: Path, over: str
) -> None:
    """A user's messages holding secrets and a ``<private>`` span through the AutoGen agent, the
    model passing one to the ``remember`` tool, on an engine in the agent's process or over a
    ``memlane serve``: the memory is stored redacted, the private text dropped, and no file
    under the home holds either, the store open or closed (fw_support.check_secrets_off_disk;
    tests/test_privacy_doors.py scans the other doors)."""
    check_secrets_through(model, tmp_path, over, f"autogen-{over}", lambda m: Chat(model, m))
