"""memlane in Strands Agents (strands-agents[openai] from PyPI, the ``strands`` extra, run in
``.fwenvs/strands`` by tests/test_fw_venvs.py): a real ``Agent`` with a tool and Strands'
``OpenAIModel`` against the fake OpenAI-compatible model (tests/fw_support.py), memlane's
``MemlaneStore`` as the agent's memory store and its injector as a plugin."""

from __future__ import annotations

import asyncio
import json
import os
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OTEL_SDK_DISABLED", "true")  # no telemetry export (no network here)

from strands import Agent, tool
from strands.agent.conversation_manager import SlidingWindowConversationManager
from strands.memory import InvocationTrigger
from strands.models.openai import OpenAIModel

from fw_support import (
    BOBS,
    DEPLOY,
    OTHER,
    PROJECT,
    TABS,
    TOOL,
    FakeModel,
    check_bob,
    check_page_rows,
    check_remember,
    check_secrets_through,
    check_turn,
    memlane_serve,
    memory_counts,
    open_engine,
    open_engine_as_is,
    request_text,
    run_docs_example,
    run_scenario,
    seed,
)
from llm_server import Reply, Script, serve
from memlane import MemoryEngine
from memlane.config import LLMSettings
from memlane.errors import ConfigError
from memlane.integrations import connect
from memlane.integrations.strands import MemlaneStore
from memlane.llm import make_llm
from version_support import assert_refused


@tool(name=TOOL)
def lookup(topic: str) -> str:
    """Look a topic up in the team's notes.

    Args:
        topic: what to look up.
    """
    return f"notes about {topic}"


class Chat:
    """One conversation: a Strands agent whose history is its own ``agent.messages`` (the
    injected text is never in it), with memlane's store and injector."""

    def __init__(
        self, model: FakeModel, engine: MemoryEngine, user: str = "alice", **store: Any
    ) -> None:
        self.store = MemlaneStore(engine, project=PROJECT, **store)
        self.agent = Agent(
            model=OpenAIModel(
                client_args={"base_url": model.url, "api_key": "test", "max_retries": 0},
                model_id="fake",
            ),
            system_prompt="You are a helpful assistant.",
            tools=[lookup],
            memory_manager=self.store.manager(search_tool_config=False),
            plugins=[self.store.injector()],
            state={"user_id": user, "session_id": f"{user}-chat"},
            callback_handler=None,
        )

    def ask(self, text: str) -> Any:
        return self.agent(text)

    def close(self) -> None:
        pass


@pytest.fixture
def chat(model: FakeModel, engine: MemoryEngine) -> Chat:
    return Chat(model, engine)


def test_each_model_call_of_a_turn_holds_its_memories_once(model: FakeModel, chat: Chat) -> None:
    seen = run_scenario(model, chat.ask)
    # The tool loop's second call holds the block in the message after the tool result, and the
    # turn's first user message no longer holds it (Strands folded it for that call only).
    second = seen[0][1]["messages"]
    assert [m["role"] for m in second[-2:]] == ["tool", "user"]
    assert DEPLOY in request_text({"messages": second[-1:]})
    # Strands keeps none of the injected text in the agent's history.
    assert DEPLOY not in json.dumps(chat.agent.messages)


def test_owner_comes_from_the_agent_state(model: FakeModel, engine: MemoryEngine) -> None:
    check_bob(model, Chat(model, engine, user="bob").ask)


def test_a_new_conversation_is_a_new_session(model: FakeModel, engine: MemoryEngine) -> None:
    """Two agents of Alice's with different sessions each get the memory on their first turn;
    without a ``session_id`` in the state, the agent's own ``session_id`` is the session."""
    for store in ({}, {"session": "other"}):
        chat = Chat(model, engine, **store)
        chat.agent.state.delete("session_id")
        model.take()
        chat.ask("Where do we deploy the billing service?")
        check_turn(model.take(), [DEPLOY])


def test_remember_tool_goes_through_the_write_path(
    model: FakeModel, engine: MemoryEngine, chat: Chat
) -> None:
    check_remember(model, engine, chat.ask, "strands")


def test_add_memory_tool_and_search(model: FakeModel, engine: MemoryEngine) -> None:
    """Strands' own ``add_memory`` tool writes through ``MemlaneStore.add`` (the write path: the
    second copy is a duplicate, not a new memory); ``search`` is memlane's search in the
    store's scope (Alice's project, never Bob's memory)."""
    chat = Chat(model, engine, owner="alice")
    chat.agent = Agent(
        model=chat.agent.model,
        tools=[lookup],
        memory_manager=chat.store.manager(add_tool_config=True),
        callback_handler=None,
    )
    fact = "Alice's CI runs on GitHub Actions"
    with model.calling("add_memory", entries=[fact, fact]):
        chat.ask("Remember that CI runs on GitHub Actions")
    assert [m.content for m in engine.list(owner="alice")].count(fact) == 1
    manager = chat.agent.memory_manager
    hits = asyncio.run(manager.search("does the billing service use tabs or spaces?"))
    contents = [h.content for h in hits]
    assert TABS in contents and hits[0].store_name == "memlane"
    assert OTHER not in contents and BOBS not in contents


def test_add_messages_learns_through_the_configured_llm(model: FakeModel, tmp_path: Path) -> None:
    """Strands' extraction (after every invocation here) hands the messages to ``add_messages``
    (the store has it, so no extractor): memlane's
    ``learn`` with the configured LLM (a fake OpenAI-compatible one) writes what it extracts in
    the store's scope and session; the injected text is not in what is learned."""
    learned = {"content": "Alice ships the billing service on Fridays", "type": "fact"}
    script = Script("openai", steps=[Reply(json.dumps({"memories": [learned]}))])
    with serve(script) as url:
        llm = make_llm(LLMSettings(provider="openai", model="m", base_url=url, max_retries=0))
        engine = open_engine_as_is(tmp_path, llm=llm)
        try:
            seed(engine)
            extraction = {"trigger": InvocationTrigger()}
            chat = Chat(model, engine, owner="alice", session="learned", extraction=extraction)
            chat.ask("Where do we deploy the billing service?")  # the agent awaits extraction
            saved = [m for m in engine.list(owner="alice") if m.content == learned["content"]]
            assert [(m.project, m.session) for m in saved] == [(PROJECT, "learned")]
        finally:
            engine.close()
    transcript = json.dumps(script.requests[0]["json"])
    assert "Where do we deploy" in transcript and DEPLOY not in transcript


def test_add_messages_without_an_llm_says_how_to_configure_one(engine: MemoryEngine) -> None:
    store = MemlaneStore(engine, owner="alice")
    message = {"role": "user", "content": [{"text": "I ship on Fridays"}]}
    with pytest.raises(ConfigError, match=r"llm\.provider.*learning from conversations needs"):
        asyncio.run(store.add_messages([message]))


def test_no_request_holds_a_memory_twice_with_strands_own_search_tool(
    model: FakeModel, engine: MemoryEngine
) -> None:
    """The manager's ``search_memory`` tool (on by default) answers with memlane's search; the
    injected block still holds each memory once in every request (a manager with Strands' own
    injection on would add a second, searched copy to the first call)."""
    chat = Chat(model, engine, owner="alice")
    chat.agent = Agent(
        model=chat.agent.model,
        tools=[lookup],
        memory_manager=chat.store.manager(),
        plugins=[chat.store.injector()],
        state={"user_id": "alice", "session_id": "s"},
        callback_handler=None,
    )
    model.take()
    chat.ask("Where do we deploy the billing service?")
    for body in model.take():
        assert memory_counts(body, [DEPLOY])[DEPLOY] == 1


@pytest.mark.parametrize("version", ["1.53.0", "2.0.0"])
def test_an_unsupported_strands_is_named_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    """An installed strands-agents outside the range (1.53 has no ``Agent.session_id``; a
    future 2.0) fails the import with the version, the range and the extra."""
    assert_refused(
        monkeypatch,
        "memlane.integrations.strands",
        dist="strands-agents",
        version=version,
        low="1.54",
        high="2",
        extra="strands",
    )


def test_the_docs_example_runs(model: FakeModel, tmp_path: Path) -> None:
    """docs/frameworks.md's Strands block, run as tests/test_fw_docs.py runs the others (every
    model request holds the memory once)."""
    run_docs_example("Strands Agents", model, tmp_path)


def test_the_pages_table_is_the_scripts_output(model: FakeModel) -> None:
    """docs/frameworks.md's Strands rows are what scripts/framework_turns.py prints for it."""
    check_page_rows("strands", model)


def test_the_store_over_a_memlane_serve_url(model: FakeModel, tmp_path: Path) -> None:
    """The same turns, search and writes through a real ``memlane serve`` (POST /v1/turn,
    /v1/search, /v1/memories) instead of an engine in the agent's process."""
    open_engine(tmp_path).close()  # the scenario's memories, in the store the server opens
    with memlane_serve(tmp_path) as url, closing(connect(url)) as client:
        chat = Chat(model, client)
        run_scenario(model, chat.ask)
        scoped = MemlaneStore(client, owner="alice", project=PROJECT)
        hits = asyncio.run(scoped.search("does the billing service use tabs or spaces?"))
        assert TABS in [h.content for h in hits] and BOBS not in [h.content for h in hits]
        engine = open_engine_as_is(tmp_path)
        try:
            check_remember(model, engine, chat.ask, "strands")
        finally:
            engine.close()


def test_a_sliding_window_is_not_a_shrunk_history(model: FakeModel, chat: Chat) -> None:
    """Strands' default conversation manager trims old messages (a window of 4 here: one turn
    left after each run); the turns go on as in the untrimmed scenario: every call of a turn
    holds its block once, and turn 3 still holds the memories of turns 1 and 2 (the turn model
    did not read the trimmed history as a reset)."""
    chat.agent.conversation_manager = SlidingWindowConversationManager(window_size=4)
    run_scenario(model, chat.ask)
    assert len(chat.agent.messages) == 4
    assert chat.agent.conversation_manager.removed_message_count == 8


def test_a_cleared_history_starts_the_session_over(model: FakeModel, chat: Chat) -> None:
    """``agent.messages.clear()`` (or a conversation manager that drops turns): the next turn's
    position is below the recorded ones, the turn model resets the session, and the memory is
    shown again from the first call of that turn, once."""
    chat.ask("Where do we deploy the billing service?")
    chat.ask("For the billing service deploy, tabs or spaces in the Python code?")
    chat.agent.messages.clear()
    model.take()
    chat.ask("Where is the billing service deploy target again?")  # a new ask at position 1
    requests = model.take()
    check_turn(requests, [DEPLOY])
    assert TABS not in request_text(requests[0])  # the reset dropped turn 2's block
    assert chat.agent.messages[0]["content"][0]["text"].startswith("Where is the billing")


@pytest.mark.parametrize("over", ["engine", "serve"])
def test_no_secret_or_private_text_reaches_the_disk(
    model: FakeModel, tmp_path: Path, over: str
) -> None:
    """A user's messages holding secrets and a ``<private>`` span through the Strands agent, the
    model passing one to the ``remember`` tool, on an engine in the agent's process or over a
    ``memlane serve``: the memory is stored redacted, the private text dropped, and no file
    under the home holds either, the store open or closed (fw_support.check_secrets_off_disk;
    tests/test_privacy_doors.py scans the other doors)."""
    check_secrets_through(model, tmp_path, over, f"strands-{over}", lambda m: Chat(model, m))
