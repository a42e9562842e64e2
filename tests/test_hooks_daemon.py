"""Hooks bound to their store, and the memory daemon: ``memlane serve`` records who it is in its
home; a hook uses only the server of its own home (never whatever answers on the configured
port) and says why it goes in-process; with no server the hook starts the daemon (detached,
loopback, its own token, one per home, idle shutdown) and later calls use it. Also: the
deadline covers reading stdin, no option makes a hook exit 2, and a ``SessionStart`` with
nothing to print opens nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conftest import Backend
from hook_support import OWNER, TEST_TIMEOUT_S, claude_payload, run_hook
from memlane.hooks.daemon import pid_alive, read_record, record_path, start_daemon
from server_support import run_server

OURS = "The deploy script lives in tools/ship.sh and needs the VPN"
THEIRS = "The deploy script of the other team is a GitHub Action"
ASK = "where is the deploy script?"


def env_of(backend: Backend, **hooks: str) -> dict[str, str]:
    """The hook's environment with no ``[hooks] url``: it must find its server itself (the
    tests' deadline, :data:`hook_support.TEST_TIMEOUT_S`, unless ``timeout_s`` is given)."""
    env = backend.child_env()
    for key, value in {"owner": OWNER, "timeout_s": TEST_TIMEOUT_S, **hooks}.items():
        env[f"MEMLANE_HOOKS__{key.upper()}"] = value
    return env


def log_of(backend: Backend) -> str:
    path = backend.home / "logs" / "hooks.log"
    return path.read_text() if path.exists() else ""


def wait_for(check: object, seconds: float = 90) -> bool:
    """Poll ``check()`` until true or ``seconds`` pass (a bounded wait, not a timing test)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


@pytest.fixture
def daemons(store_backend: Backend) -> Iterator[list[Path]]:
    """Homes whose daemon is stopped at teardown."""
    homes: list[Path] = [store_backend.home]
    yield homes
    for home in homes:
        record, _ = read_record(home)
        if record is not None:
            os.kill(int(record["pid"]), signal.SIGTERM)
            wait_for(lambda r=record: not pid_alive(int(r["pid"])), 30)


def test_a_server_of_another_home_is_not_used(
    store_backend: Backend, tmp_path: Path, daemons: list[Path]
) -> None:
    ours = store_backend.engine()
    ours.add(OURS, owner=OWNER)
    ours.close()
    (tmp_path / "other-home").mkdir()
    other = store_backend.sibling(tmp_path / "other-home")
    theirs = other.engine()
    theirs.add(THEIRS, owner=OWNER)
    theirs.close()
    with run_server(other) as served:  # on a port our [server] port names
        port = served.url.rsplit(":", 1)[1]
        env = env_of(store_backend, autostart="false")
        env["MEMLANE_SERVER__PORT"] = port
        done = run_hook(env, "UserPromptSubmit", claude_payload(
            "UserPromptSubmit", "s1", tmp_path, prompt=ASK))  # fmt: skip
        assert done.returncode == 0
        context = done.context() or ""
        assert "tools/ship.sh" in context and "GitHub Action" not in context
        assert "in-process (no memlane server serves this home" in log_of(store_backend)
        other.close_all()


def test_the_server_of_its_home_is_used(store_backend: Backend, tmp_path: Path) -> None:
    engine = store_backend.engine()
    engine.add(OURS, owner=OWNER)
    with run_server(store_backend) as served:
        record, why = read_record(store_backend.home)
        assert record is not None, why
        assert (record["url"], record["pid"]) == (served.url, served.proc.pid)
        assert record["store_id"] and record["daemon"] is False
        assert (record_path(store_backend.home).stat().st_mode & 0o777) == 0o600
        env = env_of(store_backend, autostart="false")
        done = run_hook(env, "UserPromptSubmit", claude_payload(
            "UserPromptSubmit", "s2", tmp_path, prompt=ASK))  # fmt: skip
        assert "tools/ship.sh" in (done.context() or "")
        assert "in-process" not in log_of(store_backend)
        served.proc.send_signal(signal.SIGTERM)
        served.proc.wait(timeout=60)
    assert not record_path(store_backend.home).exists()  # removed when it stopped


def test_the_hook_starts_the_daemon_and_then_uses_it(
    store_backend: Backend, tmp_path: Path, daemons: list[Path]
) -> None:
    engine = store_backend.engine()
    engine.add(OURS, owner=OWNER)
    env = env_of(store_backend)
    first = run_hook(env, "UserPromptSubmit", claude_payload(
        "UserPromptSubmit", "s3", tmp_path, prompt=ASK))  # fmt: skip
    assert "tools/ship.sh" in (first.context() or "")  # answered in-process meanwhile
    assert "started the memory daemon" in log_of(store_backend)
    assert wait_for(lambda: read_record(store_backend.home)[0] is not None)
    record, _ = read_record(store_backend.home)
    assert record is not None and record["daemon"] is True and record["token"]
    assert record["url"].startswith("http://127.0.0.1:")
    # owner-only: the daemon refuses a caller without its token
    assert httpx.get(record["url"] + "/v1/memories", timeout=10).status_code == 401
    lines = log_of(store_backend).count("in-process")
    again = run_hook(env, "UserPromptSubmit", claude_payload(
        "UserPromptSubmit", "s4", tmp_path, prompt=ASK))  # fmt: skip
    assert "tools/ship.sh" in (again.context() or "")
    assert log_of(store_backend).count("in-process") == lines  # the daemon answered
    # one per home: a second start finds the lock taken
    assert start_daemon(store_backend.home, 60) is None


def test_the_daemon_stops_when_idle(store_backend: Backend, daemons: list[Path]) -> None:
    store_backend.engine().close()
    env = store_backend.child_env()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlane", "serve", "--daemon", "--idle-shutdown", "1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert wait_for(lambda: read_record(store_backend.home)[0] is not None)
    assert proc.wait(timeout=120) == 0
    assert not record_path(store_backend.home).exists()


def test_session_start_with_nothing_to_print_opens_nothing(
    store_backend: Backend, tmp_path: Path
) -> None:
    env = env_of(store_backend)  # ambient awareness off (the default), autostart on
    done = run_hook(env, "SessionStart", claude_payload(
        "SessionStart", "s5", tmp_path, source="startup"))  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "")
    assert "in-process" not in log_of(store_backend)  # no engine opened, no daemon started
    assert not (store_backend.home / "run").exists()


def spawn_hook(env: dict[str, str], sent: bytes) -> bytes:
    """``memlane hook UserPromptSubmit`` given ``sent`` on a stdin pipe that stays open (a
    client that never closes its end); checks that it exits 0 and returns what it printed.
    The 120 s bound only catches a hook that hangs."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlane", "hook", "UserPromptSubmit"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(sent)
        proc.stdin.flush()  # and not closed
        assert proc.wait(timeout=120) == 0
        return proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stdin.close()


def test_the_deadline_covers_reading_stdin(store_backend: Backend, tmp_path: Path) -> None:
    """A client that sends the payload but keeps the pipe open does not hold the hook."""
    store_backend.engine().add(OURS, owner=OWNER)
    env = env_of(store_backend, autostart="false", timeout_s="30")
    payload = claude_payload("UserPromptSubmit", "s6", tmp_path, prompt=ASK)
    assert "tools/ship.sh" in spawn_hook(env, json.dumps(payload).encode()).decode()


def test_a_stuck_stdin_meets_the_deadline(store_backend: Backend, tmp_path: Path) -> None:
    """The deadline works: a client that sends half its payload and never the rest (the pipe
    kept open) gets an exit 0 with nothing printed, and the log says why. Without the deadline
    the hook would wait for ever (the 120 s bound below only catches that hang)."""
    env = env_of(store_backend, autostart="false", timeout_s="1")
    payload = json.dumps(claude_payload("UserPromptSubmit", "s7", tmp_path, prompt=ASK))
    assert spawn_hook(env, payload[: len(payload) // 2].encode()) == b""  # half an object
    assert "deadline of 1 s ([hooks] timeout_s) passed; nothing printed" in log_of(store_backend)


@pytest.mark.parametrize("args", [["-v", "hook", "UserPromptSubmit", "--frob"],
                                  ["hook", "X", "--frob", "--home"]])  # fmt: skip
def test_no_option_makes_a_hook_exit_2(store_backend: Backend, args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memlane", *args],
        input=b"{}",
        capture_output=True,
        env=env_of(store_backend),
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (0, b"")
