"""``memlane --help`` tells the truth: every exit code a command's help states is the one that
command exits with (each documented error is run), the help prints brackets as written, flags
look like flags, usage lines name arguments plainly; plus ``--version``, a closed stdout, a
``--home`` that does not exist, and ``memlane serve`` on a busy port.

Runs in-process with the ``hash`` embedder (no model), in a temporary home.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from memlane.cli import app

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DOCUMENTED = re.compile(r"\(exit code (\d+)")

#: Each documented error of each command: (arguments that cause it, the exit code). ``{home}``
#: is a home holding one memory, ``{missing}`` a home that does not exist, ``{busy}`` a port
#: another socket listens on, ``{examples}`` the examples folder, ``{transcript}`` a chat.
CASES: dict[str, list[tuple[list[str], int]]] = {
    "add": [
        (["add", "", "--home", "{home}"], 3),
        (["add", "x", "-t", "nope", "--home", "{home}"], 3),
    ],
    "import": [
        (["import", "{examples}/memories_bad.jsonl", "--home", "{home}"], 1),
        (["import", "{examples}/no-such-file.jsonl", "--home", "{home}"], 1),
    ],
    "list": [
        (["list", "--type", "nope", "--home", "{home}"], 3),
        (["list", "--home", "{missing}"], 4),
    ],
    "get": [(["get", "no-such-id", "--home", "{home}"], 4)],
    "history": [(["history", "no-such-id", "--home", "{home}"], 4)],
    "update": [
        (["update", "no-such-id", "new text", "--home", "{home}"], 4),
        (["update", "{memory}", "", "--home", "{home}"], 3),
    ],
    "forget": [(["forget", "no-such-id", "--home", "{home}"], 4)],
    "restore": [
        (["restore", "no-such-id", "--home", "{home}"], 4),
        (["restore", "{memory}", "--home", "{home}"], 4),
    ],
    "dedup-log": [(["dedup-log", "--home", "{missing}"], 4)],
    "search": [
        (["search", "", "--home", "{home}"], 3),
        (["search", "x", "--home", "{missing}"], 4),
    ],
    "inject": [
        (["inject", "x", "--session", "", "--home", "{home}"], 3),
        (["inject", "x", "--session", "s", "--home", "{missing}"], 4),
    ],
    "session reset": [(["session", "reset", "s", "--reason", "nope", "--home", "{home}"], 3)],
    "session show": [(["session", "show", "s", "--home", "{missing}"], 4)],
    "learn": [
        (["learn", "{transcript}", "--home", "{home}"], 5),
        (["learn", "no-such-transcript.json", "--home", "{home}"], 3),
    ],
    "janitor": [(["janitor", "--dry-run", "--home", "{missing}"], 4)],
    "review confirm": [(["review", "confirm", "999999", "--home", "{home}"], 4)],
    "review reverse": [(["review", "reverse", "999999", "--home", "{home}"], 4)],
    "replay": [(["replay", "no-such-file.json"], 3)],
    "serve": [(["serve", "--port", "{busy}", "--home", "{home}"], 5)],
}


def leaf_commands() -> list[tuple[str, Any]]:
    """Every runnable command, by its space-separated path (``session reset``); Any: Typer's
    own (vendored) Click classes."""
    root = typer.main.get_command(app)
    found: list[tuple[str, Any]] = []

    def walk(group: Any, path: list[str]) -> None:
        if hasattr(group, "commands"):
            for name, cmd in group.commands.items():
                walk(cmd, [*path, name])
            if not getattr(group, "invoke_without_command", False):
                return
        if path:
            found.append((" ".join(path), group))

    walk(root, [])
    return found


def help_text(path: str) -> str:
    result = CliRunner().invoke(app, [*path.split(), "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    monkeypatch.delenv("MEMLANE_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "home"
    transcript = tmp_path / "chat.json"
    transcript.write_text('[{"role": "user", "content": "I moved to Lyon last week."}]')
    added = CliRunner().invoke(app, ["add", "Alice works at Acme", "--home", str(home), "--json"])
    assert added.exit_code == 0, added.output
    memory = re.search(r'"id": "([^"]+)"', added.stdout)
    assert memory
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield {
            "home": str(home),
            "missing": str(tmp_path / "missing"),
            "busy": str(busy.getsockname()[1]),
            "examples": str(EXAMPLES),
            "memory": memory.group(1),
            "transcript": str(transcript),
        }


def test_every_stated_exit_code_has_a_case_and_every_case_is_stated() -> None:
    commands = dict(leaf_commands())
    assert {"add", "session reset", "review confirm", "serve"} <= set(commands)
    for path in commands:
        stated = {int(c) for c in DOCUMENTED.findall(" ".join(help_text(path).split()))}
        cased = {code for _, code in CASES.get(path, [])}
        assert stated == cased, f"`memlane {path} --help` states exit codes {stated}, cases {cased}"


@pytest.mark.parametrize(
    ("path", "args", "code"), [(p, a, c) for p, cases in CASES.items() for a, c in cases]
)
def test_documented_error_exits_with_the_stated_code(
    env: dict[str, str], path: str, args: list[str], code: int
) -> None:
    stated = {int(c) for c in DOCUMENTED.findall(" ".join(help_text(path).split()))}
    assert code in stated
    result = CliRunner().invoke(app, [a.format(**env) for a in args])
    assert result.exit_code == code, result.output
    assert "error: " in result.stderr, result.output
    assert not Path(env["missing"]).exists(), "an error on a missing home created it"


def test_help_prints_brackets_and_whole_sentences() -> None:
    learn = " ".join(help_text("learn").split())
    assert "([llm] in memlane.toml)" in learn
    assert "[Context from memory]" in learn
    serve = " ".join(help_text("serve").split())
    assert "[server] host" in serve and "[server] token" in serve
    listing = help_text("")
    commands = listing.split("Store and read:")[1].split("Exit codes:")[0]
    assert "..." not in commands, "a command's line in the list was cut mid-sentence"
    assert "Store one memory through the write path (no duplicates) and print the" in " ".join(
        commands.split()
    )


def test_flags_look_like_flags_and_usage_names_arguments() -> None:
    root = help_text("")
    assert re.search(r"-v, --verbose\s+Log to stderr", root), root
    assert re.search(r"--debug\s+On an error", root), root
    assert "--version" in root
    for path, _ in leaf_commands():
        text = help_text(path)
        assert "<bool>" not in text, f"`memlane {path} --help` shows a flag as taking a value"
        usage = text.splitlines()[0]
        assert "{" not in usage, usage
    assert help_text("get").startswith("Usage: memlane get [OPTIONS] ID")
    assert help_text("session reset").startswith("Usage: memlane session reset [OPTIONS] SESSION")


def test_version() -> None:
    from importlib.metadata import version

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"memlane {version('memlane')}\n"


def test_a_closed_stdout_is_not_an_error() -> None:
    """``memlane import --help | head``: the reader goes away first; no traceback, exit 0."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlane", "import", "--help"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before memlane writes: its first write gets EPIPE
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 0, stderr
    assert "Error" not in stderr and "internal error" not in stderr, stderr


def test_reads_on_a_missing_home_create_nothing_and_writes_say_once(
    env: dict[str, str], tmp_path: Path
) -> None:
    missing = Path(env["missing"])
    for args in (["list"], ["search", "x"], ["dedup-log"], ["session", "show", "s"]):
        result = CliRunner().invoke(app, [*args, "--home", str(missing)])
        assert result.exit_code == 4
        assert f"no memlane home at {missing}" in result.stderr
        assert "--home" in result.stderr
        assert not missing.exists()
    first = CliRunner().invoke(app, ["add", "Bob likes tea", "--home", str(missing)])
    assert first.exit_code == 0, first.output
    assert first.stderr.count("created a new memlane store") == 1
    assert str(missing / "memlane.db") in first.stderr
    again = CliRunner().invoke(app, ["add", "Carol likes coffee", "--home", str(missing)])
    assert "created" not in again.stderr


def test_serve_names_the_process_on_a_busy_port(env: dict[str, str]) -> None:
    port = int(env["busy"])
    result: Any = CliRunner().invoke(app, ["serve", "--port", str(port), "--home", env["home"]])
    assert result.exit_code == 5
    message = result.stderr
    assert f"error: port {port} on 127.0.0.1 is already in use by " in message, message
    assert "invalid setting" not in message, message
    assert "loading the embedding model" not in message  # checked before the model loads
    # the socket is this test's own: the message names this process and how to move on
    import os

    assert f"pid {os.getpid()}" in message, message
    assert f"--port {port + 1}" in message
