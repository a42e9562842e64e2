"""``memlane llm check``: one request of each kind (verify, merge, learn) to the configured
server, and what came of it — the form the server took, tokens, latency, the model's answer or
the one-line error. What a user runs first after setting ``[llm]``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from memlane.errors import LLMError
from memlane.llm.providers import ChatLLM

#: The three requests: a gray-zone pair, a cluster of look-alikes, a short conversation.
VERIFY_PAIR = ("Alice prefers dark mode in her editor", "Alice prefers a dark theme in her editor")
MERGE_TEXTS = (
    "Bob lives in Paris",
    "Bob lives in Paris, France, near the Louvre",
    "Carol drinks green tea every morning",
)
LEARN_TRANSCRIPT = (
    "user: I moved to Berlin last month, and I am vegetarian.\n"
    "assistant: Noted: you live in Berlin now and eat vegetarian food."
)


@dataclass(frozen=True, slots=True)
class CallCheck:
    """One kind of call: whether the model's answer was used (``ok``), the form it was asked in,
    its tokens and seconds, the answer in short, or the error (one line)."""

    kind: str
    ok: bool
    form: str
    tokens_in: int
    tokens_out: int
    latency_s: float
    answer: str | None = None
    error: str | None = None


def _answer(llm: ChatLLM, kind: str) -> str:
    if kind == "verify":
        v = llm.verify_duplicate(*VERIFY_PAIR)
        return f"{v.action}" + (f": {v.merged_text}" if v.merged_text else "")
    if kind == "merge":
        m = llm.merge_memories(list(MERGE_TEXTS))
        named = ", ".join(str(i + 1) for i in m.members)
        return f"{m.action} [{named}]" + (f": {m.merged_text}" if m.merged_text else "")
    learned = llm.extract_memories(LEARN_TRANSCRIPT)
    return f"{len(learned)} memories: " + " | ".join(m.content for m in learned)


def check(llm: ChatLLM) -> dict[str, Any]:
    """Send one verify, one merge and one learn request through ``llm``; never raises for the
    model's or the server's failures (they are the result). Returns ``{"provider", "model",
    "endpoint", "form", "form_changes": [line...], "calls": [CallCheck as dict...], "ok"}``
    (``ok``: every call's answer was used)."""
    calls: list[CallCheck] = []
    janitor_kind = {"verify": "verify", "merge": "janitor", "learn": "learn"}
    for kind in ("verify", "merge", "learn"):
        before = llm.stats.as_dict()["by_kind"].get(janitor_kind[kind], {})
        form = llm.form
        start = time.perf_counter()
        answer = error = None
        try:
            answer = _answer(llm, kind)
        except LLMError as exc:
            error = str(exc)
        after = llm.stats.as_dict()["by_kind"].get(janitor_kind[kind], {})
        calls.append(
            CallCheck(
                kind=kind,
                ok=error is None,
                form=llm.form if error is None else form,
                tokens_in=after.get("tokens_in", 0) - before.get("tokens_in", 0),
                tokens_out=after.get("tokens_out", 0) - before.get("tokens_out", 0),
                latency_s=round(time.perf_counter() - start, 3),
                answer=answer,
                error=error,
            )
        )
    return {
        "provider": llm.provider,
        "model": llm.model,
        "endpoint": llm.endpoint,
        "form": llm.form,
        "form_changes": [c.line() for c in llm.form_changes()],
        "calls": [asdict(c) for c in calls],
        "ok": all(c.ok for c in calls),
    }
