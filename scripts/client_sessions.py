"""For each real client (Claude Code 2.1.197, Gemini CLI 0.61.0: ``make clients``), the
requests of a 12-turn session with a compaction in the middle, as the fake model server
received them: the turn, the memories in the request (with copies) and memlane blocks.

    .venv/bin/python scripts/client_sessions.py [--turns 12]

Claude Code: ``claude -p`` with ``--input-format stream-json`` (one process for the first
half), ``/compact``, then the second half resumed. Gemini CLI: ``gemini -p`` per turn
(``--resume latest``), ``/compress`` in the middle. memlane's hooks are installed as a user
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=12, help="Turns per session (default 12).")
    parser.add_argument("--client", choices=["claude-code", "gemini", "both"], default="both")
    args = parser.parse_args()
    for client, run in (("claude-code", claude), ("gemini", gemini)):
        if args.client not in {client, "both"}:
            continue
        with tempfile.TemporaryDirectory(prefix=f"memlane-{client}-") as root:
            lab = cs.make_lab(Path(root))
            try:
                print(run(lab, args.turns), flush=True)
                print(flush=True)
            finally:
                lab.close()
    print("requests: those that carry the conversation; memories: copies of each memory's text")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
