"""The ``memlane`` command line, as a user meets it: exit codes, messages, JSON that parses, and a
store that bad input leaves unchanged.

Every test runs in a fresh temporary home with the fast deterministic ``hash`` embedder (never the
real model here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from memlane.cli import app
from memlane.errors import ConfigError
from memlane.types import Decision

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DUPLICATE_DECISIONS = {d.value for d in Decision if d.duplicate}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    monkeypatch.delenv("MEMLANE_HOME", raising=False)
    path = tmp_path / "home"
    path.mkdir()
    return path


class Cli:
    """Runs ``memlane`` in-process against one home."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.runner = CliRunner()

    def __call__(self, *args: str, code: int | None = 0, stdin: str | None = None) -> Any:
        result = self.runner.invoke(app, [*args, "--home", str(self.home)], input=stdin)
        if code is not None:
            assert result.exit_code == code, (
                f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
                f"\n{result.exception!r}"
            )
        return result

    def json(self, *args: str, code: int = 0) -> Any:
        return json.loads(self(*args, "--json", code=code).stdout)

    def contents(self, owner: str = "default") -> set[str]:
        return {m["content"] for m in self.json("list", "--owner", owner, "--limit", "1000")}


@pytest.fixture
def cli(home: Path) -> Cli:
    return Cli(home)


def flat(text: str) -> str:
    """Terminal output with its line wrapping undone."""
    return " ".join(text.split())


# ------------------------------------------------------------------------------ help


def _leaf_commands() -> list[list[str]]:
    root = typer.main.get_command(app)
    found: list[list[str]] = [[]]

    def walk(cmd: Any, path: list[str]) -> None:
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            found.append([*path, name])
            walk(sub, [*path, name])

    walk(root, [])
    return found


MY_COMMANDS = [
    ["add"],
    ["import"],
    ["list"],
    ["get"],
    ["update"],
    ["forget"],
    ["history"],
    ["dedup-log"],
    ["search"],
    ["inject"],
    ["session", "reset"],
    ["session", "show"],
    ["dedup", "pairs"],
]


def test_every_command_has_help() -> None:
    runner = CliRunner()
    commands = _leaf_commands()
    for path in MY_COMMANDS:
        assert path in commands, f"memlane {' '.join(path)} is not registered"
    for path in commands:
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage" in result.stdout
        if path in MY_COMMANDS:
            assert "Example:" in result.stdout, path
            assert "--home" in result.stdout, path


def test_python_dash_m_is_the_same_cli(home: Path) -> None:
    env = {**os.environ, "MEMLANE_EMBEDDING__PROVIDER": "hash"}
    proc = subprocess.run(
        [sys.executable, "-m", "memlane", "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Usage" in proc.stdout
    for name in ("add", "import", "search", "inject", "session", "dedup"):
        assert name in proc.stdout


# ------------------------------------------------------------------------------ add


def test_add_twice_is_hash_exact(cli: Cli) -> None:
    first = cli.json("add", "Alice prefers dark mode", "--type", "preference", "--owner", "alice")
    assert first["decision"] == "added"
    assert first["duplicate"] is False
    assert first["memory"]["type"] == "preference"
    second = cli.json("add", "alice prefers  DARK mode", "--type", "preference", "--owner", "alice")
    assert second["decision"] == "hash_exact"
    assert second["duplicate"] is True
    assert second["matched_id"] == first["memory"]["id"]
    assert second["similarity"] == 1.0
    assert second["memory"]["confirmations"] == 1
    assert cli.contents("alice") == {"Alice prefers dark mode"}


def test_add_prints_decision_and_ids(cli: Cli) -> None:
    first = flat(cli("add", "Bob waters the plants on Mondays.", "--owner", "bob").stdout)
    memory_id = cli.json("list", "--owner", "bob")[0]["id"]
    assert "decision added (stored as a memory of its own)" in first
    assert f"memory {memory_id} matched - similarity -" in first
    assert first.endswith("content Bob waters the plants on Mondays.")
    second = flat(cli("add", "Bob waters the plants on Mondays.", "--owner", "bob").stdout)
    assert "decision hash_exact (not stored again: the existing memory absorbed it)" in second
    assert f"matched {memory_id} similarity 1.0000" in second


def test_add_all_options(cli: Cli) -> None:
    result = cli.json(
        "add",
        "The deploy freeze starts Friday.",
        "--type",
        "event",
        "--owner",
        "team",
        "--agent",
        "ops-bot",
        "--session",
        "s-9",
        "--importance",
        "0.25",
        "--source",
        "chat",
    )
    memory = result["memory"]
    assert (memory["type"], memory["owner"], memory["agent"]) == ("event", "team", "ops-bot")
    assert (memory["session"], memory["source"], memory["importance"]) == ("s-9", "chat", 0.25)


@pytest.mark.parametrize(
    ("text", "extra", "message"),
    [
        ("", [], "empty"),
        ("   \n\t ", [], "empty"),
        ("[Context from memory]\n[fact] Alice works at Acme.", [], "injected"),
        ("Tabs are better than spaces.", ["--type", "opinion"], "valid types: identity"),
        ("Alice is 34.", ["--importance", "1.5"], "importance"),
    ],
)
def test_add_refuses_bad_input_and_stores_nothing(
    cli: Cli, text: str, extra: list[str], message: str
) -> None:
    result = cli("add", text, *extra, code=3)
    assert "error:" in result.stderr
    assert message in flat(result.stderr)
    assert result.stdout == ""
    assert cli.json("list") == []
    assert cli.json("dedup-log") == []


def test_error_text_with_brackets_is_printed_verbatim(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMLANE_DEDUP__MAX_CHARS", "20")
    result = cli("add", "This memory is far longer than twenty characters.", code=3)
    assert "[dedup] max_chars" in flat(result.stderr)


# ------------------------------------------------------------------------------ import

BAD_LINES = {2: "not valid JSON", 3: "content", 5: "empty", 6: "opinion", 7: "injected"}
GOOD_BAD_FILE = {
    ("alice", "Alice keeps her running shoes by the front door."),
    ("bob", "Bob waters the office plants on Mondays."),
    ("bob", "Bob is saving up for a new road bike."),
}


def test_import_reports_bad_lines_and_imports_the_rest(cli: Cli) -> None:
    result = cli("import", str(EXAMPLES / "memories_bad.jsonl"), code=1)
    err = flat(result.stderr)
    for line, reason in BAD_LINES.items():
        assert f"line {line}:" in err
        assert reason in err.split(f"line {line}:")[1].split("error:")[0]
    for line in (1, 4, 8):
        assert f"line {line}:" not in err
    assert f"{len(BAD_LINES)} bad line(s) not imported" in err
    report = flat(result.stdout)
    assert "imported 3 of 8 lines" in report and "added 3" in report
    assert "3 new memories stored, 0 duplicates not stored again" in report
    stored = {(o, c) for o in ("alice", "bob") for c in cli.contents(o)}
    assert stored == GOOD_BAD_FILE  # the bad lines left nothing behind
    assert "Tabs are better than spaces." not in cli.contents("alice")


def test_import_json_summary(cli: Cli) -> None:
    data = cli.json("import", str(EXAMPLES / "memories_bad.jsonl"), code=1)
    assert data["imported"] == 3
    assert data["decisions"] == {"added": 3}
    assert [e["line"] for e in data["errors"]] == sorted(BAD_LINES)
    assert all(e["error"] for e in data["errors"])
    again = cli.json("import", str(EXAMPLES / "memories_bad.jsonl"), code=1)
    assert again["decisions"] == {"hash_exact": 3}  # a re-import stores nothing twice
    assert {(o, c) for o in ("alice", "bob") for c in cli.contents(o)} == GOOD_BAD_FILE


def test_import_examples_all_good(cli: Cli) -> None:
    path = EXAMPLES / "memories.jsonl"
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    data = cli.json("import", str(path))
    assert data["errors"] == []
    assert data["imported"] == len(lines)
    assert sum(data["decisions"].values()) == len(lines)
    assert data["decisions"].get("hash_exact", 0) >= 1  # the file has exact repeats
    assert set(data["decisions"]) <= {d.value for d in Decision}


def test_import_default_owner_chunks_and_blank_lines(cli: Cli, tmp_path: Path) -> None:
    lines = [
        json.dumps({"content": f"Project {n} ships in week {n} of the plan."}) for n in range(600)
    ]
    lines[299] = '{"content": "unterminated'
    lines.insert(10, "")  # blank lines are skipped, not errors
    path = tmp_path / "many.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = cli.json("import", str(path), "--owner", "proj", code=1)
    assert data["imported"] == 599
    assert data["errors"] == [{"line": 301, "error": data["errors"][0]["error"]}]
    assert "JSON" in data["errors"][0]["error"]
    assert len(cli.json("list", "--owner", "proj", "--limit", "1000")) == 599
    assert cli.json("list") == []  # nothing landed under the default owner


def test_import_from_stdin_and_objects_only(cli: Cli) -> None:
    text = '{"content": "Carol likes jazz."}\n["Carol", "likes", "rock"]\n42\n'
    result = cli("import", "-", "--owner", "carol", "--json", stdin=text, code=1)
    data = json.loads(result.stdout)
    assert data["imported"] == 1
    assert [e["line"] for e in data["errors"]] == [2, 3]
    assert "object" in data["errors"][0]["error"]
    assert cli.contents("carol") == {"Carol likes jazz."}


def test_import_missing_file(cli: Cli, tmp_path: Path) -> None:
    result = cli("import", str(tmp_path / "nope.jsonl"), code=1)
    assert "error:" in result.stderr and "nope.jsonl" in flat(result.stderr)


# ------------------------------------------------------------------------------ reads


def test_list_get_update_history_forget(cli: Cli) -> None:
    added = cli.json("add", "Alice works at Acme.", "--owner", "alice")["memory"]
    memory_id = added["id"]
    cli("add", "Alice works at Acme as a data engineer.", "--owner", "alice")
    cli("add", "Alice has a cat.", "--owner", "alice", "--type", "fact")

    listed = cli.json("list", "--owner", "alice")
    assert memory_id in {m["id"] for m in listed}
    assert cli.json("list", "--owner", "alice", "--type", "identity") == []
    assert len(cli.json("list", "--owner", "alice", "--limit", "1")) == 1

    updated = cli.json("update", memory_id, "Alice works at Initech.", "--owner", "alice")
    assert updated["id"] == memory_id and updated["content"] == "Alice works at Initech."
    history = cli.json("history", memory_id, "--owner", "alice")
    assert [v["content"] for v in history] == ["Alice works at Acme."]

    got = cli.json("get", memory_id, "--owner", "alice")
    assert got["content"] == "Alice works at Initech."
    assert [v["content"] for v in got["history"]] == ["Alice works at Acme."]
    assert isinstance(got["associations"], list)
    human = cli("get", memory_id, "--owner", "alice").stdout
    assert "Alice works at Initech." in human and "Alice works at Acme." in human

    forgotten = cli.json("forget", memory_id, "--owner", "alice")
    assert forgotten["status"] == "forgotten"
    assert memory_id not in {m["id"] for m in cli.json("list", "--owner", "alice")}
    missing = cli("get", memory_id, "--owner", "alice", code=4)
    assert "was forgotten on" in flat(missing.stderr)  # and how to restore it (test_newcomer)
    assert f"memlane restore {memory_id}" in flat(missing.stderr)
    assert (
        cli.json("get", memory_id, "--include-inactive", "--owner", "alice")["status"]
        == "forgotten"
    )


def test_reads_and_writes_for_humans(cli: Cli) -> None:
    memory_id = cli.json("add", "Alice works at Acme.", "--owner", "alice")["memory"]["id"]
    listed = flat(cli("list", "--owner", "alice").stdout)
    assert "1 memories of alice" in listed
    assert "fact Alice works at Acme." in listed and memory_id in listed
    assert flat(cli("list", "--owner", "bob").stdout) == "no memories for owner 'bob'"
    assert "never changed" in cli("history", memory_id, "--owner", "alice").stdout

    updated = flat(cli("update", memory_id, "Alice works at Initech.", "--owner", "alice").stdout)
    assert updated == f"updated {memory_id} Alice works at Initech."
    history = flat(cli("history", memory_id, "--owner", "alice").stdout)
    assert history.startswith("current: Alice works at Initech.")
    assert "previous text" in history and "Alice works at Acme." in history
    got = flat(cli("get", memory_id, "--owner", "alice").stdout)
    for line in (
        f"id {memory_id}",
        "content Alice works at Initech.",
        "type fact",
        "status active",
        "owner alice",
        "agent -",
        "metadata {}",
    ):
        assert line in got

    forgotten = flat(cli("forget", memory_id, "--owner", "alice").stdout)
    assert forgotten == f"forgotten {memory_id} Alice works at Initech."
    assert "status forgotten" in flat(
        cli("get", memory_id, "--include-inactive", "--owner", "alice").stdout
    )


def test_get_shows_associations(cli: Cli) -> None:
    first = cli.json("add", "Alice works at Acme.", "--owner", "alice")
    # The same words with the roles swapped: never merged, stored and linked.
    second = cli.json("add", "Acme works at Alice.", "--owner", "alice")
    assert second["decision"] == "guard_keep"
    got = cli.json("get", second["memory"]["id"], "--owner", "alice")
    targets = {a["target_id"] for a in got["associations"]}
    assert first["memory"]["id"] in targets
    assert "related_to" in cli("get", second["memory"]["id"], "--owner", "alice").stdout


@pytest.mark.parametrize("command", ["get", "forget", "history"])
def test_unknown_id_is_a_clear_error(cli: Cli, command: str) -> None:
    result = cli(command, "no-such-id", code=4)
    assert "error:" in result.stderr and "no-such-id" in result.stderr


@pytest.mark.parametrize(
    "args", [["get"], ["history"], ["forget"], ["update", "Bob works at Initech."]]
)
def test_by_id_commands_stay_in_the_owner_scope(cli: Cli, args: list[str]) -> None:
    memory_id = cli.json("add", "Alice works at Acme.", "--owner", "alice")["memory"]["id"]
    other = cli(args[0], memory_id, *args[1:], "--owner", "bob", code=4)
    # the same error as for an id that does not exist: nothing tells bob the id is taken
    missing = cli(args[0], "no-such-id", *args[1:], "--owner", "bob", code=4)
    assert other.stderr.replace(memory_id, "ID") == missing.stderr.replace("no-such-id", "ID")
    kept = cli.json("get", memory_id, "--owner", "alice")
    assert (kept["content"], kept["status"]) == ("Alice works at Acme.", "active")


def test_update_refuses_bad_text(cli: Cli) -> None:
    memory_id = cli.json("add", "Dave lives in Oslo.")["memory"]["id"]
    cli("update", memory_id, "", code=3)
    cli("update", memory_id, "[Context from memory]\n[fact] x", code=3)
    assert cli.json("get", memory_id)["content"] == "Dave lives in Oslo."
    assert cli.json("history", memory_id) == []


def test_list_unknown_type_is_an_error(cli: Cli) -> None:
    result = cli("list", "--type", "opinion", code=3)
    assert "valid types" in flat(result.stderr)


def test_dedup_log(cli: Cli) -> None:
    cli("add", "Erin runs on Sundays.", "--owner", "erin")
    cli("add", "Erin runs on Sundays.", "--owner", "erin")
    rows = cli.json("dedup-log", "--owner", "erin")
    assert [r["decision"] for r in rows] == ["hash_exact"]
    assert rows[0]["new_text"] == "Erin runs on Sundays."
    assert cli.json("dedup-log", "--owner", "someone-else") == []
    assert cli.json("dedup-log", "--decision", "added") == []
    assert "hash_exact" in cli("dedup-log", "--owner", "erin").stdout
    assert cli.json("dedup-log") == []  # the default owner's log: erin's rows are not shown
    bad = cli("dedup-log", "--decision", "merged", code=3)
    assert "hash_exact" in flat(bad.stderr)  # lists the valid decisions


# ------------------------------------------------------------------------------ search


def _seed(cli: Cli) -> None:
    cli("import", str(EXAMPLES / "memories.jsonl"))


FTS_SYNTAX_QUERIES = ['"NEAR(" OR AND *', "Alice's editor: vim* -emacs", 'col:"x" ^ NOT (']


@pytest.mark.parametrize("mode", ["hybrid", "vector", "fts"])
def test_search_treats_fts_operators_as_text(cli: Cli, mode: str) -> None:
    _seed(cli)
    for query in FTS_SYNTAX_QUERIES:
        hits = cli.json("search", query, "--owner", "alice", "--mode", mode)
        assert isinstance(hits, list)
        for hit in hits:
            assert set(hit) == {"memory", "score", "similarity", "ranks"}
            assert hit["memory"]["owner"] == "alice"
    editor = cli.json("search", "Alice's editor: vim* -emacs", "--owner", "alice", "--mode", mode)
    assert any("Vim" in h["memory"]["content"] for h in editor)


def test_search_json_and_filters(cli: Cli) -> None:
    _seed(cli)
    hits = cli.json("search", "Alice favourite editor", "--owner", "alice", "--limit", "3")
    assert 1 <= len(hits) <= 3
    assert "Vim" in hits[0]["memory"]["content"]
    assert set(hits[0]["ranks"]) <= {"vector", "fts", "graph", "neighbour"}
    typed = cli.json(
        "search", "Alice", "--owner", "alice", "--type", "identity", "--type", "preference"
    )
    assert typed and {h["memory"]["type"] for h in typed} <= {"identity", "preference"}
    assert cli.json("search", "Alice favourite editor", "--owner", "nobody") == []
    assert "Vim" in cli("search", "Alice favourite editor", "--owner", "alice").stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["Alice", "--mode", "magic"], "hybrid, vector, fts"),
        (["   "], "empty"),
        (["Alice", "--type", "opinion"], "valid types"),
    ],
)
def test_search_bad_arguments(cli: Cli, args: list[str], message: str) -> None:
    result = cli("search", *args, code=3)
    assert message in flat(result.stderr)


# ------------------------------------------------------------------------------ inject


def test_inject_json_and_no_repeat(cli: Cli) -> None:
    _seed(cli)
    text = "Which editor should Alice install on the new laptop?"
    first = cli.json("inject", text, "--session", "chat-1", "--owner", "alice")
    assert set(first) == {"session", "turn", "block", "items", "skipped", "elapsed_ms"}
    assert first["session"] == "chat-1" and first["turn"] == 1
    assert first["items"], first
    assert first["block"].startswith("[Context from memory]")
    for item in first["items"]:
        assert set(item) == {"memory", "source", "score"}
        assert item["source"] in {"pinned", "contextual"}
        # a changed value shows its earlier one before the final full stop ("... (since ...)")
        assert item["memory"]["content"].rstrip(".") in first["block"]
    second = cli.json("inject", text, "--session", "chat-1", "--owner", "alice")
    assert second["turn"] == 2
    seen = {i["memory"]["id"] for i in first["items"]}
    assert not seen & {i["memory"]["id"] for i in second["items"]}  # never repeated
    other = cli.json("inject", text, "--session", "chat-2", "--owner", "alice")
    assert other["turn"] == 1 and other["items"]


def test_inject_prints_the_block_or_says_why_not(cli: Cli) -> None:
    _seed(cli)
    result = cli(
        "inject",
        "Which editor should Alice install?",
        "--session",
        "s",
        "--owner",
        "alice",
        "--recent",
        "We talked about her new laptop.",
        "--recent",
        "She codes in Python.",
    )
    assert result.stdout.startswith("[Context from memory]")
    assert "turn 1 · " in result.stderr
    trivial = cli("inject", "ok", "--session", "s", "--owner", "alice")
    assert trivial.stdout == ""
    assert "nothing injected: the prompt is trivial" in flat(trivial.stderr)
    assert "turn 2 · 0 injected · not searched: the message needs no memory" in flat(trivial.stderr)
    empty = cli("inject", "What is the capital of Peru?", "--session", "s", "--owner", "nobody")
    assert empty.stdout == "" and "nothing injected" in flat(empty.stderr)


def test_inject_needs_a_session_and_text(cli: Cli) -> None:
    assert cli("inject", "hello there friend", code=2).exit_code == 2  # --session is required
    result = cli("inject", "some text", "--session", "  ", code=3)
    assert "session" in flat(result.stderr)


def test_injected_block_is_never_stored(cli: Cli) -> None:
    _seed(cli)
    block = cli.json("inject", "Alice editor preferences", "--session", "s", "--owner", "alice")
    assert block["block"]
    before = cli.contents("alice")
    result = cli("add", block["block"], "--owner", "alice", code=3)
    assert "injected" in flat(result.stderr)
    assert cli.contents("alice") == before


# ------------------------------------------------------------------------------ sessions


def test_session_reset_unknown_reason(cli: Cli) -> None:
    result = cli("session", "reset", "chat-1", "--reason", "reboot", code=3)
    err = flat(result.stderr)
    assert "error:" in err and "reboot" in err
    for reason in ("compact", "clear", "resume"):
        assert reason in err
    assert cli.json("session", "show", "chat-1")["last_reset_reason"] is None


def test_session_reset_and_show(cli: Cli) -> None:
    _seed(cli)
    text = "Which editor should Alice install on the new laptop?"
    first = cli.json("inject", text, "--session", "c", "--owner", "alice")
    ids = {i["memory"]["id"] for i in first["items"]}
    assert ids

    shown = cli.json("session", "show", "c", "--owner", "alice")
    assert shown["turn"] == 1
    # The session also records each older value the block showed in an update note
    # ("... (since ...; before: 34, ...)"): the model has seen it, so it is not injected again.
    folded = set(shown["injected"]) - ids
    assert ids <= set(shown["injected"]) and set(shown["injected"].values()) == {1}
    assert len(folded) == first["block"].count("; before: ")
    assert shown["last_reset_at"] is None
    assert shown["events"][0]["turn"] == 1
    assert set(shown["events"][0]["memory_ids"]) == ids | folded
    human = cli("session", "show", "c", "--owner", "alice").stdout
    assert "turn" in human and next(iter(ids)) in human

    reset = cli.json("session", "reset", "c", "--reason", "compact", "--owner", "alice")
    assert reset["last_reset_reason"] == "compact" and reset["injected"] == {}
    cleared = cli("session", "reset", "c", "--reason", "clear", "--owner", "alice")
    assert "clear" in cleared.stdout
    again = cli.json("inject", text, "--session", "c", "--owner", "alice")
    assert {i["memory"]["id"] for i in again["items"]} & ids  # may be injected again
    after = cli.json("session", "show", "c", "--owner", "alice")
    assert after["last_reset_reason"] == "clear"
    assert len(after["events"]) == 2


def test_session_show_unknown_session_is_empty(cli: Cli) -> None:
    shown = cli.json("session", "show", "never-used")
    assert shown["turn"] == 0 and shown["injected"] == {} and shown["events"] == []
    assert "not been injected" in flat(cli("session", "show", "never-used").stdout)


# ------------------------------------------------------------------------------ dedup pairs


def _pairs_rows(path: Path) -> list[list[str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.split("\t") for line in lines[1:] if line.strip()]


def test_dedup_pairs_examples(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "decisions.jsonl"
    result = cli("dedup", "pairs", str(EXAMPLES / "pairs.tsv"), "--out", str(out))
    rows = _pairs_rows(EXAMPLES / "pairs.tsv")
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == len(rows)
    assert [line["id"] for line in lines] == [row[0] for row in rows]
    valid = {d.value for d in Decision}
    for line in lines:
        assert set(line) == {"id", "similarity", "decision", "duplicate"}
        assert line["decision"] in valid
        assert line["duplicate"] is (line["decision"] in DUPLICATE_DECISIONS)
        assert isinstance(line["similarity"], float)
        assert -1.0 <= line["similarity"] <= 1.0 + 1e-6
    err = flat(result.stderr)
    assert f"{len(rows)} pairs" in err and "precision" in err and "recall" in err
    assert cli.json("list") == []  # the user's store is never touched
    assert cli.json("dedup-log") == []


def test_dedup_pairs_json_summary_and_limit(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "d.jsonl"
    summary = cli.json("dedup", "pairs", str(EXAMPLES / "pairs.tsv"), "--out", str(out), "-n", "5")
    assert summary["rows"] == 5
    assert len(out.read_text(encoding="utf-8").splitlines()) == 5
    assert sum(summary["decisions"].values()) == 5
    assert summary["labels"] == "label"
    assert summary["metrics"]["labelled"] == 5


def test_dedup_pairs_decisions_follow_the_write_path(cli: Cli, tmp_path: Path) -> None:
    tsv = tmp_path / "p.tsv"
    tsv.write_text(
        "id\tsentence1\tsentence2\tscore\n"
        "a\tAlice works at Acme.\talice works at ACME.\t5.0\n"
        "b\tMaria sold the car to Daniel.\tDaniel sold the car to Maria.\t1.0\n"
        'c\tThe "quoted" text stays.\tCompletely unrelated sentence about whales.\t0.0\n'
        "d\t\tempty first sentence\t0.0\n",
        encoding="utf-8",
    )
    out = tmp_path / "p.jsonl"
    result = cli("dedup", "pairs", str(tsv), "--out", str(out))
    lines = {d["id"]: d for d in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    assert lines["a"] == {"id": "a", "similarity": 1.0, "decision": "hash_exact", "duplicate": True}
    assert lines["b"]["duplicate"] is False  # swapped roles are never merged
    assert lines["c"]["decision"] == "added" and isinstance(lines["c"]["similarity"], float)
    assert lines["d"]["decision"] == "invalid" and lines["d"]["duplicate"] is False
    err = flat(result.stderr)
    assert "row 4" in err and "score >= 4.0" in err


def test_dedup_pairs_missing_columns(cli: Cli, tmp_path: Path) -> None:
    tsv = tmp_path / "bad.tsv"
    tsv.write_text("pair\ttext_a\tsentence2\nx\ty\tz\n", encoding="utf-8")
    result = cli("dedup", "pairs", str(tsv), "--out", str(tmp_path / "o.jsonl"), code=3)
    err = flat(result.stderr)
    assert "error:" in err
    assert "id, sentence1" in err  # the missing columns
    assert "pair, text_a, sentence2" in err  # the columns found
    assert not (tmp_path / "o.jsonl").exists()


def test_dedup_pairs_row_numbers_without_id_column(cli: Cli, tmp_path: Path) -> None:
    tsv = tmp_path / "sts.tsv"
    tsv.write_text(
        "genre\tscore\tsentence1\tsentence2\nnews\t4.5\tA man is dancing.\tA man dances.\n",
        encoding="utf-8",
    )
    out = tmp_path / "o.jsonl"
    cli("dedup", "pairs", str(tsv), "--out", str(out), code=3)
    cli("dedup", "pairs", str(tsv), "--out", str(out), "--id-column", "#")
    assert json.loads(out.read_text(encoding="utf-8"))["id"] == "1"


@pytest.mark.parametrize(
    "args",
    [
        ["postgres", "status"],
        ["migrate", "--from", "sqlite:memlane.db", "--to", "postgresql://me@localhost/memlane"],
    ],
    ids=["postgres-status", "migrate"],
)
def test_postgres_commands_without_the_extra_name_the_fix(
    home: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    # The extra's modules made unimportable, as on an install without memlane[postgres]: both
    # commands answer the store's own ConfigError (memlane.store.postgres_extra), fix included.
    monkeypatch.setitem(sys.modules, "memlane.store.postgres", None)
    monkeypatch.chdir(home)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == ConfigError.exit_code, (result.output, result.exception)
    err = flat(result.stderr)
    assert "needs the postgres extra" in err and "pip install 'memlane[postgres]'" in err
