"""memlane in Google ADK 2.x (google-adk[openai] from PyPI, the ``adk`` extra, in .fwenvs/adk): a
real ``Runner`` with an ``InMemorySessionService`` and an ``LlmAgent`` on ADK's own
OpenAI-compatible model (``OpenAILlm(base_url=...)``) against the fake model of
tests/fw_support.py; :class:`MemlaneMemoryService` as the runner's memory service and its
injection tool in the agent's tools."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk", reason="the adk extra is not installed")

from google.adk.agents import LlmAgent
from google.adk.integrations.openai import OpenAILlm
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types
from openai import AsyncOpenAI

from fw_support import (
    DEPLOY,
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
    open_engine,
    open_engine_as_is,
    run_docs_example,
    run_scenario,
    seed,
)
from llm_server import Reply, Script, serve
from memlane import MemoryEngine
from memlane.config import LLMSettings
from memlane.integrations import connect
from memlane.integrations.adk import MemlaneMemoryService
from memlane.llm import make_llm
from version_support import assert_refused

APP = "memlane-test"


def lookup(topic: str) -> str:
    """Look a topic up in the team's notes."""
    return f"notes about {topic}"


lookup.__name__ = TOOL


class Chat:
    """One ADK session of ``user``: each ``ask`` is one ``Runner.run_async`` invocation (a user
    turn; the tool loop makes two LLM steps), on one event loop."""

    def __init__(
        self, model: FakeModel, memory: Any, user: str = "alice", session: str = "chat"
    ) -> None:
        self.service = MemlaneMemoryService(memory, project=PROJECT)
        self.client = AsyncOpenAI(base_url=model.url, api_key="test", max_retries=0)
        self.agent = LlmAgent(
            name="assistant",
            model=OpenAILlm(model="fake", client=self.client),
            instruction="You are a helpful assistant.",
            tools=[lookup, self.service.tool(), self.service.remember_tool()],
        )
        self.sessions = InMemorySessionService()
        self.runner = Runner(
            app_name=APP,
            agent=self.agent,
            session_service=self.sessions,
            memory_service=self.service,
            auto_create_session=True,
        )
        self.user, self.session = user, session
        self.loop = asyncio.Runner()

    async def _ask(self, text: str) -> list[Any]:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        return [
            event
            async for event in self.runner.run_async(
                user_id=self.user, session_id=self.session, new_message=message
            )
        ]

    def ask(self, text: str) -> list[Any]:
        return self.loop.run(self._ask(text))

    def stored(self) -> Any:
        return self.loop.run(
            self.sessions.get_session(app_name=APP, user_id=self.user, session_id=self.session)
        )

    def close(self) -> None:
        self.loop.run(self.runner.close())
        self.loop.run(self.client.close())
        self.loop.close()


@pytest.fixture
def chat(model: FakeModel, engine: MemoryEngine) -> Iterator[Chat]:
    chat = Chat(model, engine)
    yield chat
    chat.close()


def test_each_model_call_of_a_turn_holds_its_memories_once(model: FakeModel, chat: Chat) -> None:
    seen = run_scenario(model, chat.ask)
    # ADK keeps none of it: the session's events hold no memory (the text is per step).
    events = json.dumps([e.model_dump(mode="json") for e in chat.stored().events])
    assert DEPLOY not in events and TABS not in events
    # ... and the tool's declaration never reached the model (it is not callable).
    offered = {t["function"]["name"] for t in seen[0][0].get("tools") or []}
    assert offered == {TOOL, "remember"}, offered


def test_owner_comes_from_the_adk_user_id(model: FakeModel, engine: MemoryEngine) -> None:
    chat = Chat(model, engine, user="bob")
    try:
        check_bob(model, chat.ask)
    finally:
        chat.close()


def test_remember_tool_goes_through_the_write_path(
    model: FakeModel, engine: MemoryEngine, chat: Chat
) -> None:
    check_remember(model, engine, chat.ask, "adk")


def test_the_adapter_over_a_memlane_serve_url(model: FakeModel, tmp_path: Path) -> None:
    """The same turns and writes through a real ``memlane serve`` (POST /v1/turn, /v1/search,
    /v1/memories) instead of an engine in the agent's process."""
    open_engine(tmp_path).close()  # the scenario's memories, in the store the server opens
    with memlane_serve(tmp_path) as url, closing(connect(url)) as client:
        chat = Chat(model, client, session="over-http")
        try:
            run_scenario(model, chat.ask)
            found = chat.loop.run(
                chat.service.search_memory(app_name=APP, user_id="alice", query="deploy tabs")
            )
            assert {m.content.parts[0].text for m in found.memories} == {DEPLOY, TABS}
            engine = open_engine_as_is(tmp_path)
            try:
                check_remember(model, engine, chat.ask, "adk")
            finally:
                engine.close()
        finally:
            chat.close()


def test_search_memory_is_memlanes_hybrid_search_in_the_users_scope(
    engine: MemoryEngine, chat: Chat
) -> None:
    """What ADK's ``load_memory`` / ``preload_memory`` read: Alice's memories of the project and
    her global ones, never the other project's nor Bob's."""
    found = chat.loop.run(
        chat.service.search_memory(app_name=APP, user_id="alice", query="billing deploy tabs")
    )
    texts = [m.content.parts[0].text for m in found.memories]
    assert set(texts) == {DEPLOY, TABS}, texts
    assert texts[0] == DEPLOY  # the best hit first
    ids = {m.id for m in found.memories}
    assert ids == {m.id for m in engine.list(owner="alice", project=PROJECT)}
    bobs = chat.loop.run(
        chat.service.search_memory(
            app_name=APP, user_id="bob", query="where does the billing service deploy?"
        )
    )
    assert [m.content.parts[0].text for m in bobs.memories] == [
        "Bob deploys the billing service to Heroku and prefers spaces"
    ]


@pytest.mark.parametrize("limit", [0, -1, 2.5, True])
def test_a_bad_search_limit_is_refused_naming_it(engine: MemoryEngine, limit: Any) -> None:
    with pytest.raises(ValueError, match=r"limit is how many search hits .* at least 1"):
        MemlaneMemoryService(engine, limit=limit)


def test_add_memory_goes_through_the_write_path(engine: MemoryEngine, chat: Chat) -> None:
    """``add_memory``'s entries are offered to the write path in the user's scope: a duplicate
    is not stored twice, a secret is redacted, ``<private>`` text dropped."""
    from google.adk.memory.memory_entry import MemoryEntry

    secret = "The staging key is AKIAZ7Q3XK2M4N8P1R5T<private>, the PIN is 4411</private>"
    entries = [
        MemoryEntry(content=types.Content(parts=[types.Part(text=t)]))
        for t in ("Alice's editor is Helix", TABS, secret)
    ]
    before = {m.id for m in engine.list(owner="alice", limit=100)}
    chat.loop.run(chat.service.add_memory(app_name=APP, user_id="alice", memories=entries))
    added = [m for m in engine.list(owner="alice", limit=100) if m.id not in before]
    assert sorted((m.content, m.project, m.source) for m in added) == [
        ("Alice's editor is Helix", PROJECT, "adk"),
        ("The staging key is [redacted:aws_access_key_id]", PROJECT, "adk"),
    ]  # TABS was already there: not stored twice
    assert all("Helix" not in m.content for m in engine.list(owner="bob", limit=100))


def test_add_session_to_memory_gives_the_session_to_memlanes_learn(
    model: FakeModel, tmp_path: Path
) -> None:
    """The session's user and model texts go to the configured LLM (a fake OpenAI-compatible
    one, tests/llm_server.py); its memories go through the write path in the user's scope and
    the session; the memlane text the model got is not in what is learned."""
    learned = {"content": "Alice wants deploy notes in the changelog", "type": "preference"}
    script = Script("openai", steps=[Reply(json.dumps({"memories": [learned]}))])
    with serve(script) as url:
        llm = make_llm(LLMSettings(provider="openai", model="m", base_url=url, max_retries=0))
        engine = open_engine_as_is(tmp_path, llm=llm)
        chat = Chat(model, engine, session="learned")
        try:
            seed(engine)
            chat.ask("Where do we deploy the billing service?")
            chat.loop.run(chat.service.add_session_to_memory(chat.stored()))
            saved = [m for m in engine.list(owner="alice") if m.content == learned["content"]]
            assert [(m.project, m.session) for m in saved] == [(PROJECT, "learned")]
        finally:
            chat.close()
            engine.close()
    transcript = json.dumps(script.requests[0]["json"])
    assert "Where do we deploy the billing service?" in transcript and DEPLOY not in transcript


def test_add_events_to_memory_learns_only_the_events_given(
    model: FakeModel, tmp_path: Path
) -> None:
    """ADK's delta form (``ctx.add_events_to_memory(events=...)``): only those events' texts go
    to the configured LLM, the memories through the write path in the user's scope."""
    learned = {"content": "Alice wants tabs in the billing service code", "type": "preference"}
    script = Script("openai", steps=[Reply(json.dumps({"memories": [learned]}))])
    with serve(script) as url:
        llm = make_llm(LLMSettings(provider="openai", model="m", base_url=url, max_retries=0))
        engine = open_engine_as_is(tmp_path, llm=llm)
        chat = Chat(model, engine, session="delta")
        try:
            chat.ask(TURNS[0])
            chat.ask(TURNS[1])
            events = chat.stored().events
            last = [
                i for i, e in enumerate(events) if e.author == "user" and e.content.parts[0].text
            ]
            delta = events[last[-1] :]  # the latest turn
            chat.loop.run(
                chat.service.add_events_to_memory(
                    app_name=APP, user_id="alice", events=delta, session_id="delta"
                )
            )
            saved = [m for m in engine.list(owner="alice") if m.content == learned["content"]]
            assert [m.project for m in saved] == [PROJECT]
        finally:
            chat.close()
            engine.close()
    transcript = json.dumps(script.requests[0]["json"])
    assert TURNS[1] in transcript and TURNS[0] not in transcript and DEPLOY not in transcript


def test_add_session_to_memory_without_an_llm_says_how_to_configure_one(
    model: FakeModel, chat: Chat
) -> None:
    chat.ask("Where do we deploy the billing service?")
    with pytest.raises(Exception, match=r"llm\.provider.*set \[llm\] provider"):
        chat.loop.run(chat.service.add_session_to_memory(chat.stored()))


@pytest.mark.parametrize("version", ["1.18.0", "3.0.0rc1"])
def test_an_adk_outside_the_range_is_refused_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    """ADK 1.x (``ToolContext`` before 2.0's ``Context``) or a pre-release of 3: importing the
    adapter raises UnsupportedFramework naming the version, the range and the extra."""
    assert_refused(
        monkeypatch,
        "memlane.integrations.adk",
        dist="google-adk",
        version=version,
        low="2.0",
        high="3",
        extra="adk",
    )


def test_the_docs_example_runs(model: FakeModel, tmp_path: Path) -> None:
    """docs/frameworks.md's Google ADK block, run as tests/test_fw_docs.py runs the others."""
    run_docs_example("Google ADK", model, tmp_path)


def test_the_pages_table_is_the_scripts_output(model: FakeModel) -> None:
    """docs/frameworks.md's ADK rows are what scripts/framework_turns.py prints for ADK."""
    check_page_rows("adk", model)


def test_an_adk_in_the_range_without_the_seam_is_refused_naming_the_extra() -> None:
    """A google-adk 2.x whose ``google.adk.agents.context`` is gone: the import names it."""
    code = (
        "import sys; sys.modules['google.adk.agents.context'] = None\n"
        "from memlane.integrations.adk import MemlaneMemoryService\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "memlane.integrations._base.UnsupportedFramework: google-adk 2.13.0 lacks a name "
        "memlane's adapter uses (import of google.adk.agents.context halted"
    ), last
    assert last.endswith("it needs google-adk >=2.0,<3: pip install 'memlane[adk]'"), last


@pytest.mark.parametrize("over", ["engine", "serve"])
def test_no_secret_or_private_text_reaches_the_disk(
    model: FakeModel, tmp_path: Path, over: str
) -> None:
    """A user's messages holding secrets and a ``<private>`` span through the Google ADK agent, the
    model passing one to the ``remember`` tool, on an engine in the agent's process or over a
    ``memlane serve``: the memory is stored redacted, the private text dropped, and no file
    under the home holds either, the store open or closed (fw_support.check_secrets_off_disk;
    tests/test_privacy_doors.py scans the other doors)."""
    check_secrets_through(model, tmp_path, over, f"adk-{over}", lambda m: Chat(model, m))
