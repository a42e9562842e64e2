"""Every table of the CLI reads whole in an 80-column terminal (issue 38): no header or value
cut to "inje…", the figures of a row under their own headers. Each command that prints a table
runs for real (hash embedder, temporary homes, the real server for ``bench serve``, a scripted
model for ``learn`` and ``llm check``); each table it printed is rendered at 80 columns (rich ``Console(width=80)``)
and checked for rich's ellipsis and for lines over 80 columns.

Not covered here: ``llm bench`` (a two-column table of figures, words that wrap), ``bench hooks``
(fresh processes, MCP and the daemon: minutes), ``bench backends`` (PostgreSQL), ``bench embed``
(tests/test_bench_embed.py renders it at 80 columns), ``hooks migrate``, and the replay's
per-conversation table (several conversations).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from memlane.cli import app
from memlane.cli.app import err, out

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 80
ELLIPSIS = "…"


@pytest.fixture(autouse=True)
def _hash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    monkeypatch.delenv("MEMLANE_HOME", raising=False)


def run(*args: str) -> list[str]:
    """Run ``memlane *args`` and return each table it printed (on stdout or stderr), rendered
    as an 80-column terminal shows it."""
    tables: list[Table] = []
    with pytest.MonkeyPatch.context() as patch:
        for console in (out, err):
            printer = console.print

            def keep(*objects: Any, _print: Any = printer, **kwargs: Any) -> None:
                tables.extend(o for o in objects if isinstance(o, Table))
                _print(*objects, **kwargs)

            patch.setattr(console, "print", keep)
        result = CliRunner().invoke(app, list(args), terminal_width=WIDTH)
    assert result.exit_code == 0, result.output
    rendered = []
    for t in tables:
        screen = Console(width=WIDTH, record=True, color_system=None, file=io.StringIO())
        screen.print(t)
        rendered.append(screen.export_text())
    return rendered


def whole(tables: list[str], *headers: str) -> None:
    """Each table: nothing cut short ("inje…"), no line over 80 columns (a wider table wraps
    in the terminal), and each of ``headers`` on one line of some table."""
    assert tables, "the command printed no table"
    for text in tables:
        lines = text.splitlines()
        bad = [ln for ln in lines if ELLIPSIS in ln or len(ln) > WIDTH]
        assert not bad, "cut short or over 80 columns:\n" + "\n".join([*lines[:4], "...", *bad])
    for header in headers:
        assert any(header in text for text in tables), f"{header!r} not whole in:\n{tables}"


@pytest.fixture
def home(tmp_path: Path) -> str:
    """A home with alice's example memories (duplicates, related pairs, history)."""
    path = str(tmp_path / "home")
    CliRunner().invoke(app, ["import", str(ROOT / "examples" / "memories.jsonl"), "--home", path])
    return path


def test_memory_tables(home: str) -> None:
    whole(run("list", "--owner", "alice", "--home", home), "memory (id below)", "created")
    listed = CliRunner().invoke(app, ["list", "--owner", "alice", "--home", home, "--json"])
    first = json.loads(listed.stdout)[0]["id"]
    update = ["update", first, "Alice's editor is Neovim now", "--owner", "alice", "--home", home]
    assert CliRunner().invoke(app, update).exit_code == 0
    whole(run("get", first, "--owner", "alice", "--home", home), "previous text", "reason")
    whole(run("history", first, "--owner", "alice", "--home", home), "previous text")
    whole(
        run("search", "which editor does alice use", "--owner", "alice", "--home", home),
        "memory (id below)",
        "score",
    )
    whole(run("dedup-log", "--owner", "alice", "--home", home), "offered text / existing memory")
    whole(run("review", "--owner", "alice", "--home", home), "offered text", "kept memory")
    ask = ["inject", "which editor does alice use", "--session", "s", "--owner", "alice"]
    assert CliRunner().invoke(app, [*ask, "--home", home]).exit_code == 0
    whole(run("session", "show", "s", "--owner", "alice", "--home", home))
    whole(run("janitor", "--dry-run", "--home", home))
    whole(run("import", str(ROOT / "examples" / "memories.jsonl"), "--home", home), "decision")


def test_evaluation_tables(tmp_path: Path) -> None:
    whole(
        run("dedup", "pairs", str(ROOT / "examples" / "pairs.tsv"), "--out", str(tmp_path / "p")),
        "decision",
        "duplicate",
    )
    whole(
        run("replay", str(ROOT / "examples" / "locomo_sample.json"), "--out", str(tmp_path / "r")),
        "recall@10",
        "turns with a block",
    )


def test_bench_tables(tmp_path: Path) -> None:
    def small(name: str) -> tuple[str, ...]:
        return ("bench", name, "--memories", "60", "--home", str(tmp_path / name))

    whole(run(*small("add"), "--singles", "5", "--batch", "32"))
    whole(run(*small("search"), "--queries", "10"))
    again = CliRunner().invoke(app, [*small("search"), "--queries", "10"])
    assert again.exit_code == 0, again.output
    said = " ".join(again.stderr.split())  # the cache reused: not "(0.1 s to build)"
    assert re.search(r"store reused from the cache: .* \(built by an earlier run in ", said), said
    whole(run(*small("inject"), "--queries", "10", "--warmup", "2"))
    whole(run(*small("janitor")))
    whole(
        run(*small("serve"), "--calls", "10", "--clients", "1,4", "--warmup", "2"),
        "inject p95 ms",
        "calls/s",
        "server CPU ms/call",
        "4 clients",
    )


def test_learn_table(tmp_path: Path) -> None:
    """``memlane learn`` with a scripted model (tests/llm_server.py, the real openai SDK)."""
    pytest.importorskip("openai")
    from llm_server import Reply, Script, serve

    script = Script("openai")
    learned = [
        {"content": "The user moved to Berlin last month and works at a bakery.", "type": "event"},
        {"content": "The user is vegetarian.", "type": "preference"},
    ]
    script.steps = [Reply(json.dumps({"memories": learned}))]
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "I moved to Berlin, I'm vegan."}]))
    with serve(script) as url:
        (tmp_path / "memlane.toml").write_text(
            f'[llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "{url}"\n', encoding="utf-8"
        )
        whole(run("learn", str(chat), "--home", str(tmp_path)), "memory (id below)")


def test_llm_check_table(tmp_path: Path) -> None:
    """``memlane llm check`` against a scripted model (answers of tests/test_llm_check.py)."""
    pytest.importorskip("openai")
    from llm_server import Reply, Script, serve
    from test_llm_check import LEARN, MERGE, VERIFY

    script = Script("openai", steps=[Reply(VERIFY), Reply(MERGE), Reply(LEARN)])
    with serve(script) as url:
        (tmp_path / "memlane.toml").write_text(
            f'[llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "{url}"\nmax_retries = 0\n',
            encoding="utf-8",
        )
        whole(run("llm", "check", "--home", str(tmp_path)), "tokens in/out", "answer or error")
