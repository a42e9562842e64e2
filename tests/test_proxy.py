"""The memory proxy (docs/proxy.md, issue #36) driven by the official ``openai`` and ``anthropic``
SDKs, sync and async, streaming and not, against a fake upstream on 127.0.0.1: what the upstream
received (memory in place, never twice, the prefix byte-identical turn after turn) and what the
client got back."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest

from memlane import MemoryEngine
from memlane.eval.bench.proxy_upstream import Upstream
from proxy_support import (
    ANTHROPIC_KEY,
    OPENAI_KEY,
    assert_prefix_kept,
    facts_in,
    fake_upstream,
    proxy_for,
)
from test_turn import FACTS, QUESTIONS


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[Upstream, str]]:
    with fake_upstream() as pair:
        yield pair


@pytest.fixture
def fake(upstream: tuple[Upstream, str]) -> Upstream:
    upstream[0].reset()
    return upstream[0]


@pytest.fixture
def proxy(engine: MemoryEngine, upstream: tuple[Upstream, str]) -> Iterator[str]:
    for fact in FACTS:
        engine.add(fact)
    with proxy_for(engine, upstream[1]) as (url, _):
        yield url


def openai_client(proxy: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy + "/openai/v1", api_key=OPENAI_KEY, max_retries=0)


def anthropic_client(proxy: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy + "/anthropic", api_key=ANTHROPIC_KEY, max_retries=0)


# --- one conversation per API: the client keeps its own history, without memlane's blocks ---


def ask_chat(proxy: str, history: list[Any], stream: bool) -> str:
    with openai_client(proxy) as client:
        if not stream:
            return (
                client.chat.completions.create(model="m", messages=history)
                .choices[0]
                .message.content
                or ""
            )
        chunks = client.chat.completions.create(model="m", messages=history, stream=True)
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def ask_responses(proxy: str, history: list[Any], stream: bool) -> str:
    with openai_client(proxy) as client:
        if not stream:
            return client.responses.create(model="m", input=history, store=False).output_text
        events = client.responses.create(model="m", input=history, store=False, stream=True)
        return "".join(e.delta for e in events if e.type == "response.output_text.delta")


def ask_messages(proxy: str, history: list[Any], stream: bool) -> str:
    with anthropic_client(proxy) as client:
        if not stream:
            reply = client.messages.create(model="c", max_tokens=64, messages=history)
            return "".join(b.text for b in reply.content if b.type == "text")
        with client.messages.stream(model="c", max_tokens=64, messages=history) as events:
            return "".join(events.text_stream)


APIS: dict[str, tuple[Callable[[str, list[Any], bool], str], str]] = {
    "chat": (ask_chat, "messages"),
    "responses": (ask_responses, "input"),
    "messages": (ask_messages, "messages"),
}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("api", list(APIS))
def test_six_turns_keep_the_prefix_byte_identical_and_never_a_memory_twice(
    proxy: str, fake: Upstream, api: str, stream: bool
) -> None:
    ask, field = APIS[api]
    history: list[Any] = []
    for n, question in enumerate(QUESTIONS, start=1):
        history.append({"role": "user", "content": question})
        reply = ask(proxy, history, stream)
        assert reply.startswith("part0" if stream else "reply"), reply  # the upstream's answer
        history.append({"role": "assistant", "content": reply})
        sent = fake.seen[-1]
        assert len(fake.seen) == n
        assert sent.headers.get("authorization", sent.headers.get("x-api-key", "")).endswith(
            OPENAI_KEY if api != "messages" else ANTHROPIC_KEY
        )
        shown = facts_in(sent)
        assert len(shown) == len(set(shown)), f"turn {n}: a memory twice: {shown}"
        if n > 1:  # the cacheable prefix: the whole previous request up to the new turn
            assert_prefix_kept(fake.seen[-2], sent, field)
    assert any("peanuts" in f for f in facts_in(fake.seen[0]))
    # every memory shown once, each put back in its own turn on every later request
    assert sorted(facts_in(fake.seen[-1])) == sorted(f"[fact] {f}" for f in FACTS)
    # the client's history never held a block: only the upstream's requests did
    assert all("[Context from memory]" not in json.dumps(m) for m in history)


def test_a_tool_result_continuation_gets_the_same_block(
    proxy: str, fake: Upstream, engine: MemoryEngine
) -> None:
    history: list[Any] = [{"role": "user", "content": QUESTIONS[0]}]
    ask_chat(proxy, history, False)
    first = fake.seen[-1]
    turns = engine.session(_session(engine)).turn
    call = {"id": "call_1", "type": "function", "function": {"name": "menu", "arguments": "{}"}}
    history += [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "satay: peanuts, chicken"},
    ]
    ask_chat(proxy, history, False)
    second = fake.seen[-1]
    assert second.json()["messages"][0] == first.json()["messages"][0]  # the same block
    assert_prefix_kept(first, second, "messages")
    assert facts_in(second) == facts_in(first)
    assert engine.session(_session(engine)).turn == turns  # no new decision


def test_anthropic_tool_results_are_not_user_turns(proxy: str, fake: Upstream) -> None:
    history: list[Any] = [{"role": "user", "content": QUESTIONS[0]}]
    ask_messages(proxy, history, False)
    first = fake.seen[-1]
    history += [
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "menu", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "satay: peanuts"}]},
    ]  # fmt: skip
    ask_messages(proxy, history, False)
    second = fake.seen[-1]
    assert_prefix_kept(first, second, "messages")
    assert second.json()["messages"][2] == history[2]  # the tool result untouched
    assert facts_in(second) == facts_in(first)


def test_client_side_compaction_resets(proxy: str, fake: Upstream) -> None:
    history: list[Any] = []
    for question in QUESTIONS[:3]:
        history.append({"role": "user", "content": question})
        history.append({"role": "assistant", "content": ask_chat(proxy, history, False)})
    # the client summarised its history: one summary turn, then the new question
    compacted = [
        {"role": "user", "content": "Summary: we talked about Alice, billing and Bob."},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": QUESTIONS[0]},
    ]
    ask_chat(proxy, compacted, False)
    shown = facts_in(fake.seen[-1])
    # the history no longer holds the peanuts memory: shown again, once
    assert shown == ["[fact] Alice is allergic to peanuts and carries an epipen"] or (
        shown.count("[fact] Alice is allergic to peanuts and carries an epipen") == 1
    )
    assert fake.seen[-1].json()["messages"][0]["content"] == compacted[0]["content"]


def test_a_request_holding_memlane_blocks_passes_unchanged(proxy: str, fake: Upstream) -> None:
    hooked = "[Context from memory]\n[Relevant to this message]\n[fact] Alice is allergic"
    history = [{"role": "user", "content": f"{QUESTIONS[0]}\n\n{hooked}"}]
    ask_chat(proxy, history, False)
    assert fake.seen[-1].json()["messages"] == history  # nothing more added


def test_async_clients_stream_and_not(proxy: str, fake: Upstream) -> None:
    async def run() -> list[str]:
        oa = openai.AsyncOpenAI(base_url=proxy + "/openai/v1", api_key=OPENAI_KEY, max_retries=0)
        an = anthropic.AsyncAnthropic(
            base_url=proxy + "/anthropic", api_key=ANTHROPIC_KEY, max_retries=0
        )
        user = [{"role": "user", "content": QUESTIONS[2]}]
        out = [
            (await oa.chat.completions.create(model="m", messages=user)).choices[0].message.content
            or ""
        ]  # type: ignore[arg-type]
        stream = await oa.chat.completions.create(model="m", messages=user, stream=True)  # type: ignore[arg-type]
        out.append("".join([c.choices[0].delta.content or "" async for c in stream if c.choices]))
        resp = await oa.responses.create(model="m", input=QUESTIONS[3])
        out.append(resp.output_text)
        msg = await an.messages.create(model="c", max_tokens=9, messages=user)  # type: ignore[arg-type]
        out.append("".join(b.text for b in msg.content if b.type == "text"))
        async with an.messages.stream(model="c", max_tokens=9, messages=user) as events:  # type: ignore[arg-type]
            out.append("".join([t async for t in events.text_stream]))
        await oa.close()
        await an.close()
        return out

    replies = asyncio.run(run())
    assert replies[0].startswith("reply") and replies[1] == "part0 part1 part2 "
    assert replies[2].startswith("reply") and replies[3].startswith("reply")
    assert replies[4] == "part0 part1 part2 "
    assert any("green tea" in f for f in facts_in(fake.seen[0]))
    assert any("marathon" in f for f in facts_in(fake.seen[2]))


def test_responses_chains_follow_the_session(proxy: str, fake: Upstream) -> None:
    with openai_client(proxy) as client:
        first = client.responses.create(model="m", input=QUESTIONS[0])
        assert any("peanuts" in f for f in facts_in(fake.seen[-1]))
        second = client.responses.create(
            model="m", input=QUESTIONS[2], previous_response_id=first.id
        )
        sent = fake.seen[-1].json()
        assert sent["previous_response_id"] == first.id
        assert facts_in(fake.seen[-1]) == ["[fact] Bob drinks green tea every afternoon"]
        # a tool output continuing the chain: the upstream holds the turn's block already
        output = [{"type": "function_call_output", "call_id": "c1", "output": "42"}]
        third = client.responses.create(model="m", input=output, previous_response_id=second.id)  # type: ignore[arg-type]
        assert fake.seen[-1].json()["input"] == output
        # the chain is one session: the peanuts memory is in the upstream's history already
        fourth = client.responses.create(
            model="m", input=QUESTIONS[5], previous_response_id=third.id
        )
        assert facts_in(fake.seen[-1]) == []
        # streamed answers give their id too: the chain goes on through them
        events = client.responses.create(
            model="m", input=QUESTIONS[3], previous_response_id=fourth.id, stream=True
        )
        streamed = next(e for e in events if e.type == "response.completed").response.id
        assert facts_in(fake.seen[-1]) == ["[fact] Carol runs a marathon in Berlin every September"]
        client.responses.create(
            model="m", input=QUESTIONS[5] + " Again?", previous_response_id=streamed
        )
        assert facts_in(fake.seen[-1]) == []


def test_models_and_count_tokens_pass_through(proxy: str, fake: Upstream) -> None:
    with openai_client(proxy) as models:
        assert [m.id for m in models.models.list()] == ["fake-model"]
    with anthropic_client(proxy) as client:
        user = [{"role": "user", "content": QUESTIONS[0]}]
        counted = client.messages.count_tokens(model="c", messages=user)  # type: ignore[arg-type]
        assert counted.input_tokens > 0
        assert fake.seen[-1].path == "/v1/messages/count_tokens"
        assert facts_in(fake.seen[-1]) == []  # passed through as the client sent it
        assert [s.path for s in fake.seen] == ["/v1/models", "/v1/messages/count_tokens"]


def _session(engine: MemoryEngine) -> str:
    """The proxy's session of the only conversation so far (the fingerprint)."""
    rows = engine.store.sessions(engine.owner_of(None))
    assert len(rows) == 1
    return str(rows[0]["session"])
