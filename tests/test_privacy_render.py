"""Memory text is shown as written in the CLI's tables, never read as rich markup (issue #33):
``memlane learn``'s table lost ``[redacted:password]`` (rich took it for a style tag)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from llm_server import Reply, Script, serve
from memlane import HashEmbedder, MemoryEngine, Settings
from memlane.cli import app
from memlane.store.records import NewDedupLog
from memlane.types import Decision, ReviewStatus

MARKUP = "the vault password is hunter22 and [bold]this[/bold] stays [dim]as written[/dim]"


def test_learn_shows_a_redacted_memory_as_written(tmp_path: Path) -> None:
    script = Script("openai")
    script.steps = [Reply(json.dumps({"memories": [{"content": MARKUP, "type": "fact"}]}))]
    transcript = tmp_path / "chat.json"
    transcript.write_text(json.dumps([{"role": "user", "content": "remember the vault"}]))
    with serve(script) as url:
        env = {
            "MEMLANE_EMBEDDING__PROVIDER": "hash",
            "MEMLANE_LLM__PROVIDER": "openai",
            "MEMLANE_LLM__MODEL": "m",
            "MEMLANE_LLM__BASE_URL": url,
        }
        done = CliRunner().invoke(
            app, ["learn", str(transcript), "--home", str(tmp_path / "home")], env=env
        )
    assert done.exit_code == 0, done.output
    flat = " ".join(done.stdout.split())
    assert "[redacted:password]" in flat and "hunter22" not in flat, flat
    assert "[bold]this[/bold]" in flat and "[dim]as written[/dim]" in flat, flat


def test_review_shows_the_texts_as_written(tmp_path: Path) -> None:
    home = tmp_path / "home"
    settings = Settings.load(home, embedding={"provider": "hash"})
    with MemoryEngine.open(home, settings, embedder=HashEmbedder()) as engine:
        kept = engine.add("the [red]vault[/red] opens at nine", owner="alice")
        with engine.store.transaction():
            engine.store.log_dedup(
                NewDedupLog(
                    owner="alice",
                    new_text="the [red]vault[/red] opens at 9 [redacted:password]",
                    existing_id=kept.memory.id,
                    existing_text=kept.memory.content,
                    similarity=0.9,
                    decision=Decision.GRAY_KEEP,
                    reasoning=None,
                    review_status=ReviewStatus.UNREVIEWED,
                )
            )
    done = CliRunner().invoke(
        app,
        ["review", "--owner", "alice", "--home", str(home)],
        env={"MEMLANE_EMBEDDING__PROVIDER": "hash", "COLUMNS": "200"},
    )
    assert done.exit_code == 0, done.output
    flat = " ".join(done.stdout.split())
    assert "[redacted:password]" in flat and "[red]vault[/red]" in flat, flat
