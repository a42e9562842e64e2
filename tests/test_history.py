"""Tests for memlane.history: injected blocks in message lists, transcripts, compaction."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from memlane.errors import InvalidArgument
from memlane.history import (
    INJECTION_BLOCK_PREFIX,
    SUMMARY_PREFIX,
    Compactor,
    estimate_tokens,
    is_injection_block,
    is_injection_text,
    message_text,
    prune_injection_blocks,
    render_transcript,
    with_injection,
)
from memlane.types import Injection


def block(n: int) -> str:
    return f"{INJECTION_BLOCK_PREFIX}\n[Relevant to this message]\n[fact] memory {n}"


def inj(n: int, *, text: str | None = "use") -> Injection:
    return Injection(
        session="s",
        turn=n,
        block=block(n) if text is not None else None,
        items=(),
        skipped={},
        elapsed_ms=0.0,
    )


def blocks_in(messages: list[Any]) -> list[str]:
    return [message_text(m) for m in messages if is_injection_block(m)]


def sys(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def asst(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def history_with_blocks(n_blocks: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [sys("You are helpful.")]
    for i in range(n_blocks):
        msgs += [sys(block(i)), user(f"question {i}"), asst(f"answer {i}")]
    return msgs


# --------------------------------------------------------------------------- reading


def test_prefix_constant() -> None:
    assert INJECTION_BLOCK_PREFIX == "[Context from memory]"
    assert is_injection_text(block(1)) and is_injection_text(" \n" + block(1))
    assert not is_injection_text("Note: " + block(1)) and not is_injection_text("")


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"role": "system", "content": block(1)}, True),
        ({"role": "user", "content": "  \n" + block(1)}, True),
        ({"role": "system", "content": [{"type": "text", "text": block(1)}]}, True),
        ({"role": "system", "content": "Note: " + block(1)}, False),
        ({"role": "system", "content": "[Context from mem"}, False),
        ({"role": "system"}, False),
        ({"role": "assistant", "content": None}, False),
        ({"role": "system", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}, False),
        ("[Context from memory] not a dict", False),
        (None, False),
        (42, False),
    ],
)
def test_is_injection_block(message: object, expected: bool) -> None:
    assert is_injection_block(message) is expected


def test_message_text_parts() -> None:
    msg = {
        "role": "user",
        "content": [
            {"type": "text", "text": "hello"},
            {"type": "image_url", "image_url": {"url": "http://x"}},
            {"type": "text", "text": "world"},
        ],
    }
    assert message_text(msg) == "hello\nworld"
    assert message_text({"role": "user", "content": 3}) == ""


# --------------------------------------------------------------------------- pruning


@pytest.mark.parametrize("max_keep", [1, 2, 3, 5])
def test_prune_keeps_newest_max_keep_minus_one_in_order(max_keep: int) -> None:
    msgs = history_with_blocks(6)
    before = copy.deepcopy(msgs)
    out = prune_injection_blocks(msgs, max_keep)
    assert msgs == before  # input not mutated
    assert out is not msgs
    kept = blocks_in(out)
    assert kept == [block(i) for i in range(6 - (max_keep - 1), 6)]
    # every non-block message kept, same objects, same order
    assert [m for m in out if not is_injection_block(m)] == [
        m for m in msgs if not is_injection_block(m)
    ]
    assert all(any(o is m for m in msgs) for o in out)


def test_prune_zero_keeps_none_and_fewer_blocks_untouched() -> None:
    msgs = history_with_blocks(3)
    assert blocks_in(prune_injection_blocks(msgs, 0)) == []
    assert blocks_in(prune_injection_blocks(msgs, 1)) == []
    assert prune_injection_blocks(msgs, 10) == msgs
    assert prune_injection_blocks([], 3) == []


def test_prune_list_of_parts_blocks() -> None:
    msgs = [
        {"role": "system", "content": [{"type": "text", "text": block(1)}]},
        user("a"),
        {"role": "system", "content": [{"type": "text", "text": block(2)}]},
        user("b"),
    ]
    out = prune_injection_blocks(msgs, 2)
    assert out == msgs[1:]


@pytest.mark.parametrize("bad", [-1, -5, 1.5, "3", True, None])
def test_prune_rejects_bad_max_keep(bad: Any) -> None:
    with pytest.raises(InvalidArgument, match="max_keep"):
        prune_injection_blocks(history_with_blocks(1), bad)


# --------------------------------------------------------------------------- with_injection


def test_with_injection_inserts_right_before_last_user() -> None:
    msgs = [sys("sys"), user("first"), asst("reply"), user("second"), asst("partial")]
    before = copy.deepcopy(msgs)
    out = with_injection(msgs, inj(1), 3)
    assert msgs == before
    assert out[3] == {"role": "system", "content": block(1)}
    assert out[4] is msgs[3]
    assert len(out) == len(msgs) + 1
    assert [m for m in out if not is_injection_block(m)] == msgs


def test_with_injection_appends_without_user_and_accepts_str_and_role() -> None:
    msgs = [sys("sys"), asst("hello")]
    out = with_injection(msgs, block(7), 3, role="user")
    assert out[-1] == {"role": "user", "content": block(7)}
    assert with_injection([], block(1), 3) == [{"role": "system", "content": block(1)}]


def test_with_injection_none_block_only_prunes() -> None:
    msgs = history_with_blocks(5)
    out = with_injection(msgs, inj(9, text=None), 3)
    # nothing inserted: the newest max_keep blocks stay (no room needed)
    assert blocks_in(out) == [block(2), block(3), block(4)]
    assert blocks_in(with_injection(msgs, None, 0)) == []
    assert with_injection(msgs, None, 10) == msgs


def test_with_injection_rejects_unprefixed_block_and_bad_args() -> None:
    with pytest.raises(InvalidArgument, match="Context from memory"):
        with_injection([user("x")], "some text", 3)
    with pytest.raises(InvalidArgument, match="max_keep"):
        with_injection([user("x")], block(1), -1)
    with pytest.raises(InvalidArgument, match="role"):
        with_injection([user("x")], block(1), 3, role="")


@pytest.mark.parametrize("max_keep", [0, 1, 2, 3, 5])
def test_twenty_turns_stay_bounded(max_keep: int) -> None:
    history: list[Any] = [sys("You are helpful.")]
    for turn in range(1, 21):
        history.append(user(f"question {turn}"))
        # some turns inject nothing
        injection = inj(turn) if turn % 4 else inj(turn, text=None)
        history = with_injection(history, injection, max_keep)
        n = len(blocks_in(history))
        assert n <= max(max_keep, 1)
        if injection.block is not None:
            # this turn's block sits right before this turn's user message
            i = history.index(next(m for m in history if m.get("content") == injection.block))
            assert history[i + 1]["content"] == f"question {turn}"
        else:
            assert n <= max_keep
        history.append(asst(f"answer {turn}"))
    # every user/assistant message survived, in order
    talk = [m["content"] for m in history if m["role"] in ("user", "assistant")]
    assert talk == [x for t in range(1, 21) for x in (f"question {t}", f"answer {t}")]
    # the surviving blocks are the newest ones, in order
    kept = blocks_in(history)
    injected_turns = [t for t in range(1, 21) if t % 4]
    assert kept == [block(t) for t in injected_turns[len(injected_turns) - len(kept) :]]


def test_ephemeral_keeps_nothing_from_previous_turns() -> None:
    history: list[Any] = [user("q1")]
    history = with_injection(history, inj(1), 0)
    assert blocks_in(history) == [block(1)]  # sent on this call
    history += [asst("a1"), user("q2")]
    history = with_injection(history, inj(2), 0)
    assert blocks_in(history) == [block(2)]
    history += [asst("a2"), user("q3")]
    history = with_injection(history, None, 0)
    assert blocks_in(history) == []


# --------------------------------------------------------------------------- transcript


def test_render_transcript_skips_blocks_and_empty() -> None:
    msgs = [
        sys("You are helpful."),
        sys(block(1)),
        {"role": "user", "content": [{"type": "text", "text": block(2)}]},
        user("Where do I live?"),
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
        {"role": "tool", "content": "   "},
        {"role": "assistant", "content": [{"type": "text", "text": "In Lisbon."}]},
        "garbage",
        {"content": "no role"},
    ]
    out = render_transcript(msgs)
    assert INJECTION_BLOCK_PREFIX not in out
    assert "memory 1" not in out and "memory 2" not in out
    assert out.splitlines() == [
        "system: You are helpful.",
        "user: Where do I live?",
        "assistant: In Lisbon.",
        "unknown: no role",
    ]
    assert render_transcript([]) == ""


# --------------------------------------------------------------------------- compaction


def one_token(text: str) -> int:
    """Each message costs exactly 1 token when non-empty (usage = messages / context)."""
    return 1 if text else 0


def convo(n: int) -> list[dict[str, Any]]:
    """One system prompt + n-1 alternating user/assistant messages (n messages, n tokens)."""
    msgs: list[dict[str, Any]] = [sys("instructions")]
    for i in range(1, n):
        msgs.append(user(f"u{i}") if i % 2 else asst(f"a{i}"))
    return msgs


class Summariser:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, transcript: str) -> str:
        self.calls.append(transcript)
        return "the gist"


def test_estimate_tokens() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert Compactor(100).tokens([user("a" * 40), user("b" * 8)]) == 12


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (79, "none"),
        (80, "summarise_30"),
        (81, "summarise_30"),
        (84, "summarise_30"),
        (85, "summarise_50"),
        (86, "summarise_50"),
        (94, "summarise_50"),
        (95, "truncate"),
        (96, "truncate"),
    ],
)
def test_needed_action_thresholds(n: int, expected: str) -> None:
    c = Compactor(100, count_tokens=one_token, summarise=Summariser())
    assert c.usage(convo(n)) == pytest.approx(n / 100)
    assert c.needed_action(convo(n)) == expected


@pytest.mark.parametrize(
    ("n", "expected"),
    [(79, "none"), (81, "truncate"), (86, "truncate"), (96, "truncate")],
)
def test_needed_action_without_summariser(n: int, expected: str) -> None:
    assert Compactor(100, count_tokens=one_token).needed_action(convo(n)) == expected


def test_compact_none_below_threshold() -> None:
    calls: list[int] = []
    summarise = Summariser()
    c = Compactor(100, count_tokens=one_token, summarise=summarise)
    msgs = convo(79)
    res = c.compact(msgs, on_reset=lambda: calls.append(1))
    assert res.action == "none"
    assert res.messages == msgs and res.messages is not msgs
    assert res.tokens_before == res.tokens_after == 79
    assert calls == [] and summarise.calls == []


@pytest.mark.parametrize(
    ("n", "action", "share"), [(81, "summarise_30", 0.3), (86, "summarise_50", 0.5)]
)
def test_compact_summarises_oldest_share(n: int, action: str, share: float) -> None:
    summarise = Summariser()
    calls: list[int] = []
    c = Compactor(100, count_tokens=one_token, summarise=summarise)
    msgs = convo(n)
    msgs.insert(3, sys(block(1)))  # an injection block among the oldest messages
    before = copy.deepcopy(msgs)
    res = c.compact(msgs, on_reset=lambda: calls.append(1))
    assert msgs == before
    assert res.action == action
    assert calls == [1]
    body = msgs[1:]
    cut = int(len(body) * share)
    # system prompt kept, then the summary, then the newest messages untouched
    assert res.messages[0] is msgs[0]
    assert res.messages[1] == {"role": "system", "content": f"{SUMMARY_PREFIX}\nthe gist"}
    assert res.messages[2:] == body[cut:]
    # the summariser saw the oldest messages, never the injection block
    assert len(summarise.calls) == 1
    assert INJECTION_BLOCK_PREFIX not in summarise.calls[0]
    assert summarise.calls[0].splitlines()[0] == "user: u1"
    assert len(summarise.calls[0].splitlines()) == cut - 1  # the block is not in the transcript
    assert res.tokens_before == n + 1
    assert res.tokens_after == c.tokens(res.messages) < res.tokens_before


def test_compact_emergency_truncates_without_llm() -> None:
    summarise = Summariser()
    calls: list[int] = []
    c = Compactor(100, count_tokens=one_token, summarise=summarise)
    msgs = [sys("rules"), sys("more rules"), *convo(95)[1:]]  # 96 tokens
    res = c.compact(msgs, on_reset=lambda: calls.append(1))
    assert res.action == "truncate"
    assert summarise.calls == []
    assert calls == [1]
    assert res.messages[:2] == msgs[:2]  # leading system messages always kept
    assert res.messages[2:] == msgs[-(len(res.messages) - 2) :]  # a suffix: the newest
    assert res.tokens_after < 0.80 * 100
    assert res.tokens_after == 79  # dropped only as many as needed


def test_compact_truncates_without_summariser() -> None:
    calls: list[int] = []
    c = Compactor(100, count_tokens=one_token)
    res = c.compact(convo(82), on_reset=lambda: calls.append(1))
    assert res.action == "truncate"
    assert res.tokens_after == 79
    assert calls == [1]
    assert res.messages[-1] == convo(82)[-1]


@pytest.mark.parametrize(("n", "summarise"), [(86, True), (96, True), (86, False)])
def test_compact_counts_each_message_once(n: int, summarise: bool) -> None:
    """``count_tokens`` may be a real tokenizer: each message is counted once, and a new summary
    once more; ``tokens_after`` still matches a fresh count of the result."""
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return one_token(text)

    c = Compactor(100, count_tokens=count, summarise=Summariser() if summarise else None)
    msgs = convo(n)
    res = c.compact(msgs)
    summaries = [m for m in res.messages if message_text(m).startswith(SUMMARY_PREFIX)]
    assert res.action != "none" and len(summaries) == (res.action != "truncate")
    assert len(counted) == len(msgs) + len(summaries)
    assert res.tokens_after == Compactor(100, count_tokens=one_token).tokens(res.messages)


def test_compact_keeps_newest_message_even_if_huge() -> None:
    c = Compactor(100)
    msgs = [sys("rules"), user("old"), user("x" * 4000)]
    res = c.compact(msgs)
    assert res.action == "truncate"
    assert res.messages == [msgs[0], msgs[2]]
    # nothing left to drop: unchanged, no reset
    calls: list[int] = []
    again = c.compact(res.messages, on_reset=lambda: calls.append(1))
    assert again.action == "none" and again.messages == res.messages and calls == []


def test_compact_does_not_orphan_tool_results() -> None:
    c = Compactor(10, count_tokens=one_token)
    msgs = [
        sys("rules"),
        user("u1"),
        {"role": "assistant", "content": "calling", "tool_calls": [{"id": "t"}]},
        {"role": "tool", "content": "result 1"},
        {"role": "tool", "content": "result 2"},
        asst("done"),
        user("u2"),
        asst("a2"),
        user("u3"),
        asst("a3"),
    ]
    res = c.compact(msgs)  # 10/10 -> truncate to < 8: naive cut would start at a tool message
    assert res.action == "truncate"
    assert res.messages[1]["role"] != "tool"
    assert res.messages[0] is msgs[0]


def test_earlier_summary_is_folded_not_piled_up() -> None:
    summarise = Summariser()
    c = Compactor(100, count_tokens=one_token, summarise=summarise)
    first = c.compact(convo(81)).messages
    grown = first + [user(f"more {i}") if i % 2 else asst(f"more {i}") for i in range(30)]
    second = c.compact(grown)
    assert second.action != "none"
    summaries = [m for m in second.messages if message_text(m).startswith(SUMMARY_PREFIX)]
    assert len(summaries) == 1
    assert SUMMARY_PREFIX in summarise.calls[-1]  # the old summary went into the new one


def test_compact_list_of_parts_content() -> None:
    summarise = Summariser()
    c = Compactor(100, summarise=summarise)  # default estimate: ~4 chars a token
    msgs: list[Any] = [sys("rules")]
    for i in range(10):
        msgs.append({"role": "user", "content": [{"type": "text", "text": f"{i}" * 32}]})
    assert c.tokens(msgs) == 2 + 10 * 8  # 82 -> summarise_30
    res = c.compact(msgs)
    assert res.action == "summarise_30"
    assert summarise.calls[0].splitlines() == [f"user: {i}" + f"{i}" * 31 for i in range(3)]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"context_tokens": 0},
        {"context_tokens": -5},
        {"context_tokens": True},
        {"context_tokens": 100, "summarise_at": 0.0},
        {"context_tokens": 100, "summarise_at": 0.9},
        {"context_tokens": 100, "deep_summarise_at": 0.96},
        {"context_tokens": 100, "emergency_at": 1.5},
        {"context_tokens": 100, "summarise_at": float("nan")},
        {"context_tokens": 100, "summarise_at": "0.8"},
    ],
)
def test_compactor_validation(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        Compactor(**kwargs)


def test_compactor_defaults_from_design() -> None:
    c = Compactor(1000)
    assert (c.summarise_at, c.deep_summarise_at, c.emergency_at) == (0.80, 0.85, 0.95)
    Compactor(1000, summarise_at=0.5, deep_summarise_at=0.6, emergency_at=1.0)  # valid
