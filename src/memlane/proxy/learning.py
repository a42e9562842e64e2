"""``[proxy] learn`` (opt-in): the conversations passing through the proxy feed
:meth:`memlane.MemoryEngine.learn` with the configured ``[llm]``, on one background thread, never
delaying a request. Each request's conversation, as the client sent it (memlane's blocks never
reach the model: :func:`memlane.learn.conversation_text` drops them), is learned from; the
session's learn cursor reads only the messages not learned before, so an exchange is learned
when the conversation's next request brings the model's answer back (the last exchange of a
conversation is not learned). A failure is logged, never raised."""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from memlane.engine import MemoryEngine
from memlane.proxy.memory import AGENT, OWNER, PROJECT, Added
from memlane.proxy.styles import Style

log = logging.getLogger("memlane.proxy")


class Learning:
    """One background thread learning from the proxy's conversations (see the module
    docstring); :meth:`close` waits for the work queued."""

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memlane-proxy-learn")

    def submit(self, style: Style, raw: bytes, headers: dict[str, str], added: Added) -> None:
        """Queue the request's conversation (``raw``: its body as the client sent it)."""
        self.pool.submit(self._learn, style, raw, headers, added)

    def _learn(self, style: Style, raw: bytes, headers: dict[str, str], added: Added) -> None:
        try:
            messages = transcript(style, json.loads(raw))
            if not messages:
                return
            results = self.engine.learn(
                messages,
                owner=headers.get(OWNER),
                agent=headers.get(AGENT),
                project=headers.get(PROJECT),
                session=added.session,
            )
            log.info("proxy learn session=%s: %d memories offered", added.session, len(results))
        except Exception as exc:  # learning is a background extra: never raised
            log.warning("proxy learn session=%s failed (%s)", added.session, type(exc).__name__)

    def close(self) -> None:
        self.pool.shutdown(wait=True)


def transcript(style: Style, body: Any) -> list[dict[str, str]]:
    """The conversation of a request as ``{"role", "content"}`` texts (tool calls and results
    left out)."""
    if not isinstance(body, dict):
        return []
    items = body.get(style.field)
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    out: list[dict[str, str]] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or item.get("role") not in ("user", "assistant"):
            continue
        content = item.get("content")
        if isinstance(content, list):
            content = "\n".join(
                str(p.get("text", ""))
                for p in content
                if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text")
            )
        if isinstance(content, str) and content.strip():
            out.append({"role": str(item["role"]), "content": content})
    return out
