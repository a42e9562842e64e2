"""For each real client (Claude Code 2.1.197, Gemini CLI 0.61.0, Codex CLI 0.171.0, Qwen Code
0.24.4, Copilot CLI 1.0.102, OpenCode 1.18.33: ``make clients``), the requests of a 12-turn
session with a compaction in the middle, as the fake model server received them: the turn, the
memories in the request (with copies) and memlane blocks.

    .venv/bin/python scripts/client_sessions.py [--turns 12]

Claude Code: ``claude -p`` with ``--input-format stream-json`` (one process for the first
half), ``/compact``, then the second half resumed. Gemini CLI: ``gemini -p`` per turn
(``--resume latest``), ``/compress`` in the middle. Codex: ``codex exec [resume --last]``, its
own compaction in the middle (the answer before it reports a full window). Qwen Code: ``qwen
[--continue]``, ``/compress`` in the middle. Copilot CLI (``copilot -p [--continue]``):
``/compact`` in the middle. OpenCode (``opencode run [--continue]``): its own compaction in the
middle (a reply reporting more tokens than the model's context).
memlane's hooks are installed as a user
would (``memlane hooks install``) in a temporary HOME and memlane home; two memories are
added with ``memlane add`` (no owner).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import client_support as cs
from memlane.eval.fake_openai import SUMMARY

MEMORIES = {
    "DB": "The staging database is PostgreSQL 16 with pgvector, listening on port 5433",
    "CI": "CI runs on GitHub Actions; the deploy job needs the STAGING_TOKEN secret",
}
ASKS = [
    "Which database does staging use?",
    "Which port does the staging database listen on?",
    "How does the deploy job authenticate in CI?",
    "Is pgvector installed on the staging database?",
    "Which CI system do we use?",
    "Remind me which database version staging runs",
]


def prompts(turns: int) -> list[str]:
    return [ASKS[n % len(ASKS)] for n in range(turns)]


def add_memories(lab: cs.Lab) -> tuple[dict[str, str], dict[str, str]]:
    """``(id -> content, id -> short name)`` of the memories added."""
    contents, names = {}, {}
    for name, text in MEMORIES.items():
        memory = json.loads(lab.memlane("add", text, "--json"))["memory"]
        contents[memory["id"]] = memory["content"]
        names[memory["id"]] = name
    return contents, names


def claude(lab: cs.Lab, turns: int) -> str:
    repo = cs.make_repo(lab.root / "claude-repo", "git@github.com:acme/shop.git")
    contents, names = add_memories(lab)
    asks = prompts(turns)
    half = len(asks) // 2
    session = cs.claude_session(lab, repo, asks[:half])
    cs.claude_once(lab, repo, "/compact", session)
    cs.claude_session(lab, repo, asks[half:], session)
    title = f"Claude Code {cs.CLAUDE_CODE}: {half} turns, /compact, {len(asks) - half} turns"
    return cs.table(title, cs.rows(lab.anthropic, contents), names)


def gemini(lab: cs.Lab, turns: int) -> str:
    repo = cs.make_repo(lab.root / "gemini-repo", "git@github.com:acme/shop.git")
    contents, names = add_memories(lab)
    asks = prompts(turns)
    half = len(asks) // 2
    steps = [*asks[:half], "/compress", *asks[half:]]
    for n, ask in enumerate(steps):
        cs.gemini_once(lab, repo, ask, resume=n > 0)
    title = (
        f"Gemini CLI {cs.GEMINI_CLI}: {half} turns, /compress (request {half + 1} is its "
        f"own turn), {len(asks) - half} turns"
    )
    return cs.table(title, cs.rows(lab.google, contents), names)


def _client_rows(lab: cs.ClientLab, contents: dict[str, str], skip: str = "") -> list[cs.Row]:
    """The lab's rows, the requests whose last message holds ``skip`` (a compaction's own
    summary request) marked as summaries."""
    found = cs.rows(lab.fake, contents)
    for row, request in zip(found, lab.fake.model_requests(), strict=True):
        last = (request.body.get("input") or request.body.get("messages") or [{}])[-1]
        row.summary = bool(skip) and skip in cs.request_text({"messages": [last]})
    return found


def codex(lab: cs.ClientLab, turns: int) -> str:
    repo = cs.make_repo(lab.root / "codex-repo", "git@github.com:acme/shop.git")
    cs.codex_config(lab, model_auto_compact_token_limit=5000)
    lab.install("codex")
    contents, names = add_memories(lab)
    asks = prompts(turns)
    half = len(asks) // 2
    for n, ask in enumerate(asks):
        if n == half - 1:  # this answer reports a full window: Codex compacts before the next
            lab.fake.big_usage_next = 10_000
        cs.codex_exec(lab, repo, ask, resume=n > 0)
    title = f"Codex CLI {cs.CODEX_CLI}: {half} turns, Codex's compaction, {len(asks) - half} turns"
    return cs.table(title, _client_rows(lab, contents, "CONTEXT CHECKPOINT COMPACTION"), names)


def qwen(lab: cs.ClientLab, turns: int) -> str:
    repo = cs.make_repo(lab.root / "qwen-repo", "git@github.com:acme/shop.git")
    cs.qwen_settings(lab, {"memory": {"enableManagedAutoMemory": False,
                                      "enableManagedAutoDream": False}})  # fmt: skip
    lab.install("qwen")
    contents, names = add_memories(lab)
    asks = prompts(turns)
    half = len(asks) // 2
    for n, ask in enumerate([*asks[:half], "/compress", *asks[half:]]):
        cs.qwen_once(lab, repo, ask, resume=n > 0)
    title = f"Qwen Code {cs.QWEN_CODE}: {half} turns, /compress, {len(asks) - half} turns"
    return cs.table(title, _client_rows(lab, contents, "<state_snapshot>"), names)


def copilot(lab: cs.ClientLab, turns: int) -> str:
    repo = cs.make_repo(lab.root / "copilot-repo", "git@github.com:acme/shop.git")
    lab.install("copilot")
    contents, names = add_memories(lab)
    asks = prompts(turns)
    half = len(asks) // 2
    for n, ask in enumerate(asks):
        if n == half:  # the slash command in prompt mode: preCompact, then the summary
            cs.copilot_once(lab, repo, "/compact", resume=True)
        cs.copilot_once(lab, repo, ask, resume=n > 0)
    title = f"Copilot CLI {cs.COPILOT_CLI}: {half} turns, /compact, {len(asks) - half} turns"
    return cs.table(title, cs.rows(lab.fake, contents), names)  # its summary request marked


def opencode(lab: cs.ClientLab, turns: int) -> str:
    repo = cs.make_repo(lab.root / "opencode-repo", "git@github.com:acme/shop.git")
    cs.opencode_config(lab, limit={"context": 20000, "output": 1000})
    lab.install("opencode")
    contents, names = add_memories(lab)
    asks = prompts(turns)
    half = len(asks) // 2
    for n, ask in enumerate(asks):
        if n == half - 1:  # this reply overflows the context: OpenCode compacts after it
            lab.fake.big_usage_next = 50_000
        cs.opencode_run(lab, repo, ask, resume=n > 0)
    requests = lab.fake.model_requests()
    titled = {n for n, r in enumerate(requests, 1) if "Generate a title" in str(r.body)[:4000]}
    found = [r for r in cs.rows(lab.fake, contents) if r.n not in titled]
    summarised = [n for n, r in enumerate(requests, 1) if SUMMARY in cs.request_text(r.body)]
    for row in found:  # the compaction's own request: the one before the summary appears
        row.summary = bool(summarised) and row.n == summarised[0] - 1
    title = (
        f"OpenCode {cs.OPENCODE}: {half} turns, its compaction (a reply over the model's "
        f"context), {len(asks) - half} turns; its title requests left out"
    )
    return cs.table(title, found, names)


NEW_CLIENTS = {"codex": (codex, "responses"), "qwen": (qwen, "chat"),
               "copilot": (copilot, "chat"), "opencode": (opencode, "chat")}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=12, help="Turns per session (default 12).")
    parser.add_argument(
        "--client", choices=["claude-code", "gemini", *NEW_CLIENTS, "both", "all"], default="all"
    )
    args = parser.parse_args()
    for client, run in (("claude-code", claude), ("gemini", gemini)):
        if args.client not in {client, "both", "all"}:
            continue
        with tempfile.TemporaryDirectory(prefix=f"memlane-{client}-") as root:
            lab = cs.make_lab(Path(root))
            try:
                print(run(lab, args.turns), flush=True)
                print(flush=True)
            finally:
                lab.close()
    for client, (run_new, kind) in NEW_CLIENTS.items():
        if args.client not in {client, "all"}:
            continue
        with tempfile.TemporaryDirectory(prefix=f"memlane-{client}-") as root:
            new_lab = cs.make_client_lab(Path(root), kind)
            try:
                print(run_new(new_lab, args.turns), flush=True)
                print(flush=True)
            finally:
                new_lab.close()
    print("requests: those that carry the conversation; memories: copies of each memory's text")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
