"""memlane in CrewAI (crewai from PyPI, the ``crewai`` extra, run in ``.fwenvs/crewai`` by
tests/test_fw_venvs.py): a real ``Crew`` (and a standalone ``Agent``) with a tool, CrewAI's
``LLM`` on its native OpenAI provider against the fake OpenAI-compatible model
(tests/fw_support.py), memlane's ``before_llm_call`` hook editing the run's messages in place.

CrewAI's telemetry and tracing are switched off by their variables before it is imported, and
every host this process looks up and every socket it connects is checked to be loopback (no
phone home; the machine has no internet). With the telemetry variables unset, the check fails:
CrewAI 1.15 looks up telemetry.crewai.com during a kickoff. The crews run with CrewAI's own memory off (it needs an embedding provider).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

#: Where CrewAI keeps its own files (task outputs), removed when the run ends.
STORAGE = tempfile.mkdtemp(prefix="memlane-crewai-")
atexit.register(shutil.rmtree, STORAGE, ignore_errors=True)
os.environ.update(
    CREWAI_DISABLE_TELEMETRY="true",
    CREWAI_DISABLE_TRACKING="true",
    OTEL_SDK_DISABLED="true",
    CREWAI_TRACING_ENABLED="false",
    CREWAI_STORAGE_DIR=STORAGE,
)

#: Every host this process looked up and every address it connected a socket to (an audit
#: hook). With its telemetry on, CrewAI 1.15 looks up telemetry.crewai.com during a kickoff.
CONNECTED: list[Any] = []
LOOPBACK = ("127.0.0.1", "localhost")


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect" and isinstance(args[1], tuple):
        CONNECTED.append(args[1][0])
    elif event == "socket.getaddrinfo":
        CONNECTED.append(args[0])


sys.addaudithook(_audit)

with warnings.catch_warnings():
    # crewai.rag's module object refuses the attribute Python sets for its child module.
    warnings.simplefilter("ignore", ImportWarning)
    from crewai import LLM, Agent, Crew, Task
    from crewai.tools import tool

from fw_support import (  # noqa: E402
    BOBS,
    DEPLOY,
    OTHER,
    OTHER_PROJECT,
    PROJECT,
    TABS,
    TOOL,
    TURNS,
    FakeModel,
    check_bob,
    check_remember,
    check_secrets_through,
    check_turn,
    memlane_serve,
    memory_counts,
    open_engine,
    open_engine_as_is,
    run_scenario,
    tool_replies,
)
from memlane import MemoryEngine  # noqa: E402
from memlane.history import INJECTION_BLOCK_PREFIX  # noqa: E402
from memlane.integrations import connect  # noqa: E402
from memlane.integrations.crewai import MemlaneHooks  # noqa: E402
from version_support import assert_refused  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: CrewAI 1.15 reads its own deprecated fields (``function_calling_llm``,
#: ``allow_code_execution``), which warns; the project's filterwarnings makes a warning an error.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:crewai.*")


@pytest.fixture(autouse=True)
def _only_loopback() -> Iterator[None]:
    """No test connects anywhere but 127.0.0.1 (the fake model): CrewAI does not phone home."""
    before = len(CONNECTED)
    yield
    away = [host for host in CONNECTED[before:] if host not in LOOPBACK]
    assert not away, f"CrewAI reached outside the machine: {away}"


@tool(TOOL)
def lookup(topic: str) -> str:
    """Look a topic up in the team's notes."""
    return f"notes about {topic}"


def llm(model: FakeModel) -> LLM:
    return LLM(model="openai/fake", base_url=model.url, api_key="test", max_retries=0)


class Chat:
    """One conversation: a crew of one agent whose task is the user's message, kicked off once
    per user turn with the user and session in its ``inputs``; memlane's hooks registered for
    the agents built here and removed at :meth:`close`."""

    def __init__(
        self,
        model: FakeModel,
        engine: Any,
        user: str = "alice",
        inputs: dict[str, str] | None = None,
        **hooks: Any,
    ) -> None:
        self.hooks = MemlaneHooks(engine, project=PROJECT, **hooks).register()
        self.agent = Agent(
            role="assistant",
            goal="Answer the user's question.",
            backstory="You help a software team.",
            llm=llm(model),
            tools=[lookup, self.hooks.remember_tool()],
            memory=False,
        )
        task = Task(description="{question}", expected_output="An answer.", agent=self.agent)
        self.crew = Crew(agents=[self.agent], tasks=[task], memory=False)
        self.inputs = {"user_id": user, "session_id": f"{user}-chat"} | (inputs or {})

    def ask(self, text: str) -> Any:
        return self.crew.kickoff(inputs={"question": text, **self.inputs})

    def close(self) -> None:
        self.hooks.unregister()


@pytest.fixture
def chat(model: FakeModel, engine: MemoryEngine) -> Iterator[Chat]:
    chat = Chat(model, engine)
    yield chat
    chat.close()


def test_each_model_call_of_a_turn_holds_its_memories_once(model: FakeModel, chat: Chat) -> None:
    """Three kickoffs of one crew, each a tool call then the answer: the memory is in the first
    call of each turn; the tool loop's second call holds the same block once (the first call's
    in-place edit, not a second copy); a memory of turn 1 is back on turn 2 (the next kickoff
    rebuilt the messages, so CrewAI did not keep it)."""
    seen = run_scenario(model, chat.ask)
    for requests in seen:
        for body in requests:
            system = body["messages"][0]
            assert system["role"] == "system"
            assert INJECTION_BLOCK_PREFIX in system["content"] and DEPLOY in system["content"]
    # The edit is in the executor's own list (kept for the run), once.
    kept = "\n".join(str(m.get("content")) for m in chat.agent.agent_executor.messages)
    assert kept.count(DEPLOY) == 1


def test_the_async_kickoff_gets_the_same(model: FakeModel, engine: MemoryEngine) -> None:
    """``Crew.kickoff_async``: the hook runs in CrewAI's worker threads, the same turns."""
    chat = Chat(model, engine)
    try:
        with asyncio.Runner() as loop:
            run_scenario(
                model,
                lambda text: loop.run(
                    chat.crew.kickoff_async(inputs={"question": text, **chat.inputs})
                ),
            )
    finally:
        chat.close()


def test_a_standalone_agent_kickoff_gets_the_same(model: FakeModel, engine: MemoryEngine) -> None:
    """``Agent.kickoff`` (no crew): the session and owner are the hooks' own."""
    hooks = MemlaneHooks(engine, owner="alice", project=PROJECT, session="solo").register()
    try:
        agent = Agent(
            role="assistant",
            goal="Answer the user's question.",
            backstory="You help a software team.",
            llm=llm(model),
            tools=[lookup],
        )
        run_scenario(model, agent.kickoff)
    finally:
        hooks.unregister()


def test_a_conversation_passed_back_to_agent_kickoff_holds_each_memory_once(
    model: FakeModel, engine: MemoryEngine
) -> None:
    """``Agent.kickoff(out.messages + [next question])``: the history holds the earlier runs'
    system message with their memlane text; the new run's requests still hold each memory
    once (the earlier copy is removed, this run's text gives it back). Fails before: turn 2's
    requests held the deploy memory twice."""
    hooks = MemlaneHooks(engine, owner="alice", project=PROJECT, session="passed-back").register()
    history: list[Any] = []

    def ask(text: str) -> None:
        out = agent.kickoff([*history, {"role": "user", "content": text}])
        history[:] = out.messages

    try:
        agent = Agent(role="a", goal="g", backstory="b", llm=llm(model), tools=[lookup])
        seen = run_scenario(model, ask)
        assert len(seen[2][0]["messages"]) > 8  # the third run's requests hold the history
    finally:
        hooks.unregister()


def test_an_agent_without_a_system_prompt_gets_a_system_message(
    model: FakeModel, engine: MemoryEngine
) -> None:
    """``use_system_prompt=False``: the run's messages start with the user's; the hook puts the
    text in a system message of its own before it, once per run."""
    hooks = MemlaneHooks(engine, owner="alice", project=PROJECT, session="plain").register()
    try:
        agent = Agent(
            role="a", goal="g", backstory="b", llm=llm(model), tools=[lookup],
            use_system_prompt=False,
        )  # fmt: skip
        seen = run_scenario(model, agent.kickoff)
        for requests in seen:
            for body in requests:
                roles = [m["role"] for m in body["messages"]]
                assert roles[:2] == ["system", "user"] and roles.count("system") == 1, roles
                assert body["messages"][0]["content"].startswith(INJECTION_BLOCK_PREFIX)
    finally:
        hooks.unregister()


def test_owner_comes_from_the_kickoff_inputs(model: FakeModel, engine: MemoryEngine) -> None:
    bob = Chat(model, engine, user="bob")
    try:
        check_bob(model, bob.ask)
    finally:
        bob.close()


def test_project_comes_from_the_kickoff_inputs(model: FakeModel, engine: MemoryEngine) -> None:
    """The other project's memory for a kickoff naming that project, and never the first
    project's; Alice's global memory in both."""
    other = Chat(model, engine, inputs={"project": OTHER_PROJECT})
    try:
        model.take()
        other.ask("Does the billing service of acme/api deploy with tabs?")
        requests = model.take()
        assert len(requests) == 2
        for body in requests:
            counts = memory_counts(body, [DEPLOY, TABS, OTHER, BOBS])
            assert counts[OTHER] == 1 and counts[DEPLOY] == 0 and counts[BOBS] == 0, counts
    finally:
        other.close()


def test_a_crew_of_two_tasks_gives_each_task_its_turn(
    model: FakeModel, engine: MemoryEngine
) -> None:
    """Two tasks in one kickoff are two runs (two executors' message lists): each one's first
    call decides its block; the second task, in the same session, gets the first one's memory
    back (its messages do not hold it) and never twice."""
    hooks = MemlaneHooks(engine, project=PROJECT).register()
    try:
        agent = Agent(role="a", goal="g", backstory="b", llm=llm(model), tools=[lookup])
        crew = Crew(
            agents=[agent],
            tasks=[
                Task(description=TURNS[0], expected_output="An answer.", agent=agent),
                Task(description=TURNS[1], expected_output="An answer.", agent=agent),
            ],
        )
        model.take()
        crew.kickoff(inputs={"user_id": "alice", "session_id": "two-tasks"})
        requests = model.take()
        check_turn(requests[:2], [DEPLOY])
        check_turn(requests[2:], [DEPLOY, TABS])
    finally:
        hooks.unregister()


def test_the_hooks_over_a_memlane_serve_url(model: FakeModel, tmp_path: Path) -> None:
    """The same turns and writes through a real ``memlane serve`` (POST /v1/turn with the run's
    key, POST /v1/memories), run by the main environment's Python."""
    open_engine(tmp_path).close()  # the scenario's memories, in the store the server opens
    with memlane_serve(tmp_path) as url, closing(connect(url)) as client:
        chat = Chat(model, client)
        try:
            run_scenario(model, chat.ask)
            engine = open_engine_as_is(tmp_path)
            try:
                check_remember(model, engine, chat.ask, "crewai")
            finally:
                engine.close()
        finally:
            chat.close()


def test_remember_tool_goes_through_the_write_path(
    model: FakeModel, engine: MemoryEngine, chat: Chat
) -> None:
    check_remember(model, engine, chat.ask, "crewai")


def test_remember_redacts_secrets_and_drops_private_text(
    model: FakeModel, engine: MemoryEngine, chat: Chat
) -> None:
    token = "ghp_" + "a1b2c3d4e5" * 3 + "f6a7b8"
    text = f"The CI token is {token} <private>my diary entry 4412</private> for the kiwi cluster"
    model.take()
    with model.calling("remember", content=text):
        chat.ask("Remember the CI token")
    assert tool_replies(model.take())[0].startswith("Remembered (added")
    saved = [m.content for m in engine.list(owner="alice") if "kiwi" in m.content]
    assert len(saved) == 1
    assert token not in saved[0] and "diary" not in saved[0] and "4412" not in saved[0]


def test_a_memlane_error_leaves_the_call_without_memories(
    model: FakeModel, engine: MemoryEngine, caplog: pytest.LogCaptureFixture
) -> None:
    """CrewAI swallows a hook's exception: memlane logs it and the run goes on."""
    chat = Chat(model, "http://127.0.0.1:9/")  # nothing listens on port 9
    try:
        model.take()
        chat.ask(TURNS[0])
        requests = model.take()
        assert len(requests) == 2 and all(DEPLOY not in str(r) for r in requests)
        assert "no memories for this CrewAI model call" in caplog.text
    finally:
        chat.close()


@pytest.mark.parametrize("version", ["0.203.1", "2.0.0rc1"])
def test_an_unsupported_crewai_is_named_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    """CrewAI 0.x (below the range, docs/frameworks.md) or a pre-release of 2: importing the
    adapter raises UnsupportedFramework naming the version, the range and the extra."""
    assert_refused(
        monkeypatch,
        "memlane.integrations.crewai",
        dist="crewai",
        version=version,
        low="1.15",
        high="2",
        extra="crewai",
    )


def test_the_docs_example_runs(model: FakeModel, tmp_path: Path) -> None:
    """docs/frameworks.md's CrewAI block, run as tests/test_fw_docs.py runs the others (every
    model request holds the memory once)."""
    import test_fw_docs as docs

    (code,) = [code for title, code in docs.examples() if title == "CrewAI"]
    docs.run_example(code, model, tmp_path)


def test_the_pages_table_is_the_scripts_output(model: FakeModel) -> None:
    """docs/frameworks.md's CrewAI rows are what scripts/framework_turns.py prints for it."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import framework_turns
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    rows = framework_turns.rows("crewai", model)
    assert len(rows) == 6  # three turns, two model calls each
    page = (ROOT / "docs" / "frameworks.md").read_text().splitlines()
    assert rows == [line for line in page if line.startswith("| crewai |")]


@pytest.mark.parametrize("over", ["engine", "serve"])
def test_no_secret_or_private_text_reaches_the_disk(
    model: FakeModel, tmp_path: Path, over: str
) -> None:
    """A user's messages holding secrets and a ``<private>`` span through the CrewAI agent, the
    model passing one to the ``remember`` tool, on an engine in the agent's process or over a
    ``memlane serve``: the memory is stored redacted, the private text dropped, and no file
    under the home holds either, the store open or closed (fw_support.check_secrets_off_disk;
    tests/test_privacy_doors.py scans the other doors)."""
    check_secrets_through(model, tmp_path, over, f"crewai-{over}", lambda m: Chat(model, m))
