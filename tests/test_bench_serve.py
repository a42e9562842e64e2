"""`memlane bench serve` on a small store: the real server under 1 and 4 clients, the same calls
in-process, no error and no acknowledged write lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlane.cli import app


def test_bench_serve_reports_levels_and_loses_no_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "serve",
            "--memories",
            "60",
            "--calls",
            "30",
            "--clients",
            "1,4",
            "--warmup",
            "4",
            "--home",
            str(tmp_path / "bench"),
            "--workers",
            "2",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [lv["clients"] for lv in report["levels"]] == [1, 4]
    # the server's two workers did the work: their CPU time and memory are reported
    assert report["workers"] == 2
    assert all(lv["server_cpu_ms_per_call"] > 0 for lv in report["levels"])
    # 4 keep-alive clients are spread over both workers: each did a part of the level's work
    shares = report["levels"][1]["worker_cpu_shares"]
    assert len(shares) == 2 and min(shares) > 0.1, shares
    rss = report["server_rss_mib"]
    assert rss["parent"] > 0 and len(rss["workers"]) == 2 and min(rss["workers"]) > 0
    assert all(lv["errors"] == 0 for lv in report["levels"])
    assert all(lv["all"]["calls"] == 30 for lv in report["levels"])
    assert report["in_process"]["all"]["calls"] == 30
    assert report["acknowledged_writes"] > 0 and report["lost_writes"] == 0
    assert report["inject_p95_gap_ms_at_1_client"] is not None


def test_bench_serve_refuses_bad_clients() -> None:
    result = CliRunner().invoke(app, ["bench", "serve", "--clients", "1,x"])
    assert result.exit_code == 2 and "--clients" in result.output


def test_bench_hooks_without_claude_code_stops_before_timing(tmp_path: Path) -> None:
    """--claude-turns with no Claude Code to run: a clear error at once, not after the minutes
    of hook timing before the claude part (the bench used to end in "internal error:
    RuntimeError" and print nothing of what it had timed)."""
    missing = tmp_path / "no-such-claude"
    args = ["bench", "hooks", "--memories", "60", "--claude-turns", "2", "--claude", str(missing)]
    result = CliRunner().invoke(app, [*args, "--home", str(tmp_path / "bench")])
    assert result.exit_code == 3, result.output  # InvalidArgument's exit code
    assert "--claude-turns needs Claude Code" in result.output
    assert str(missing) in result.output and "--claude-turns 0" in result.output
    assert not (tmp_path / "bench").exists()  # nothing was built or timed


def test_bench_hooks_times_fresh_hook_processes_and_mcp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mcp", reason="needs the mcp extra")
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    args = ["bench", "hooks", "--memories", "60", "--prompts", "4", "--claude-turns", "0", "--json"]
    result = CliRunner().invoke(app, [*args, "--home", str(tmp_path / "bench")])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    for key in ("hook_with_server", "hook_without_server"):
        path = report[key]
        assert path["runs"] == 4 and path["failures"] == 0, path
        assert 0 < path["p50_ms"] <= path["p95_ms"] <= path["max_ms"]
    assert report["mcp"]["errors"] == 0 and report["mcp"]["calls_per_tool"] == 4
    assert report["mcp"]["recall"]["p95_ms"] > 0
    # every client's prompt hook (its event, payload shape, --client) against the server
    clients = report["per_client"]
    assert set(clients) == {"claude-code", "gemini", "codex", "qwen", "copilot", "opencode"}
    assert all(r["runs"] == 4 and r["failures"] == 0 for r in clients.values()), clients
    # no server configured: the first call starts the daemon, the next ones use it once up
    alone = report["no_server_configured"]
    assert alone["first_failures"] == 0 and alone["first_ms"] > 0
    assert alone["later"]["runs"] == 3 and alone["later"]["failures"] == 0
    assert alone["daemon"] == "up"
    assert report["claude_turn"] is None and report["goals"]["claude_added_met"] is None
    assert {"server_p95_met", "cold_p95_met", "first_met", "later_p95_met"} <= set(report["goals"])
