"""``memlane bench hooks``, the parts a user without any setup meets: the memory daemon and
a real Claude Code turn.

- **No server configured at all** (no ``[hooks] url``, no ``memlane serve``, autostart on):
  the first ``memlane hook UserPromptSubmit`` answers in-process and starts the memory daemon
  (:mod:`memlane.hooks.daemon`); the calls after it use the daemon once it answers. Timed:
  the first call, and each of the next calls (fresh processes, back to back, as a busy user
  would type).
- **A Claude Code turn with memlane's hooks against without**: the real ``claude -p PROMPT``
  (Claude Code from npm, ``make clients``) against the fake Anthropic server of
  :mod:`memlane.eval.fake_models` on 127.0.0.1, run alternately with and without the hooks
  installed (two HOMEs, the same memlane home; the daemon already up), wall time from spawn
  to exit (a whole run: ``SessionStart`` and ``UserPromptSubmit``); then the same prompts as
  turns of one running ``claude -p --input-format stream-json`` session each (only
  ``UserPromptSubmit``: what every turn of an interactive session pays), from writing the
  prompt to its result. The added latency is the difference of the medians.

Goals (issue 22): with no server configured, first call <= 1.5 s and later calls p95 <= 100
ms; a Claude Code turn adds <= 150 ms at the median.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memlane.eval.bench.store import OWNER

#: Goals of issue 22, in milliseconds.
GOAL_FIRST_MS = 1500.0
GOAL_LATER_P95_MS = 100.0
GOAL_CLAUDE_ADDED_MS = 150.0
#: Where ``make clients`` installs Claude Code (the repository's ignored ``.clients/``).
CLIENTS_BIN = Path(".clients") / "node_modules" / ".bin"


def hook_command() -> list[str]:
    """How the bench starts ``memlane``, as ``memlane hooks install`` writes it for a client:
    the ``memlane`` script of this installation (beside this Python), else ``python -m
    memlane`` (which also imports :mod:`runpy`, ~3 ms more a call)."""
    script = Path(sys.executable).with_name("memlane")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "memlane"]


def compile_bytecode() -> bool:
    """Write the bytecode of memlane's modules (``__pycache__``), as installing a wheel does,
    so that no hook call compiles them: an editable install run with
    ``PYTHONDONTWRITEBYTECODE=1`` never writes it and would compile the hook's modules in
    every call (~10-15 ms measured). Returns whether every module compiled."""
    import compileall

    import memlane

    return bool(compileall.compile_dir(Path(memlane.__file__).parent, quiet=1))


def time_daemon(
    home: Path,
    prompts: Sequence[tuple[str, str]],
    time_hooks: Callable[..., dict[str, Any]],
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """The first hook call with no server at all (it starts the daemon), then the others
    (``time_hooks``: :func:`memlane.eval.bench.hooks.time_hooks`, here with no ``url``).
    ``later_in_process``: how many later calls still answered in-process (the daemon was not
    up yet). The daemon is stopped before returning."""
    from memlane.hooks.daemon import read_record, stop

    log = home / "logs" / "hooks.log"
    try:
        first = time_hooks(home, prompts[:1], None)
        before = log.read_text().count(" in-process ") if log.exists() else 0
        later = time_hooks(home, prompts[1:], None, progress)
        after = log.read_text().count(" in-process ") if log.exists() else 0
        end = time.monotonic() + 120  # a bound, not a timing: did the daemon come up at all?
        while (record_why := read_record(home))[0] is None and time.monotonic() < end:
            time.sleep(0.2)
        record, why = record_why
    finally:
        stop(home, timeout_s=60)
    return {
        "first_ms": first["first_ms"],
        "first_failures": first["failures"],
        "later": later,
        "later_in_process": after - before,
        "daemon": "up" if record is not None else f"not up: {why}",
    }


def find_claude(given: str | None = None) -> Path | None:
    """Claude Code's executable: ``given``, else ``.clients/`` of the current folder (``make
    clients``), else ``claude`` on PATH; ``None`` when there is none."""
    if given:
        return Path(given)
    local = CLIENTS_BIN / "claude"
    if local.exists():
        return local.resolve()
    found = shutil.which("claude")
    return Path(found) if found else None


def _claude_home(root: Path, name: str, env: dict[str, str], memlane_home: Path | None) -> Path:
    """A HOME for Claude Code; with ``memlane_home``, memlane's hooks installed in it."""
    home = root / name
    home.mkdir()
    if memlane_home is not None:
        command = shlex.join(hook_command())  # what `memlane hooks install` writes
        subprocess.run(
            [sys.executable, "-m", "memlane", "hooks", "install", "--client", "claude-code",
             "--scope", "user", "--home", str(memlane_home), "--command", command],
            env={**env, "HOME": str(home)}, check=True, capture_output=True, timeout=300,
        )  # fmt: skip
    return home


def time_claude_turns(
    memlane_home: Path,
    claude: Path,
    prompts: Sequence[str],
    env: dict[str, str],
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """One ``claude -p PROMPT`` per prompt without the hooks and one with them, alternately
    (a fresh session each), against the fake Anthropic server; the medians and their
    difference. ``env``: the environment without ``[hooks]`` overrides. Raises
    ``RuntimeError`` when a turn fails (its stderr in the message)."""
    from memlane.eval import fake_models
    from memlane.hooks.daemon import read_record, stop

    fake = fake_models.start("anthropic")
    root = Path(tempfile.mkdtemp(prefix="memlane-bench-claude-"))
    base = {
        **env,
        "MEMLANE_HOME": str(memlane_home),
        "MEMLANE_HOOKS__OWNER": OWNER,
        "ANTHROPIC_BASE_URL": fake.url,
        "ANTHROPIC_API_KEY": "sk-bench",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    homes = {
        "without": _claude_home(root, "without", base, None),
        "with": _claude_home(root, "with", base, memlane_home),
    }
    work = root / "repo"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    samples: dict[str, list[float]] = {"without": [], "with": []}

    def turn(which: str, prompt: str) -> float:
        t0 = time.perf_counter()
        done = subprocess.run(
            [str(claude), "-p", prompt, "--output-format", "json"],
            cwd=work, env={**base, "HOME": str(homes[which])}, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(
                f"claude -p ({which} hooks): {done.returncode}: {done.stderr[-800:]}"
            )
        return (time.perf_counter() - t0) * 1000

    sessions: dict[str, subprocess.Popen[str]] = {}
    in_session: dict[str, list[float]] = {"without": [], "with": []}

    def session_turn(which: str, prompt: str) -> float:
        """One prompt to the running ``claude -p --input-format stream-json`` session of
        ``which``: from writing it to the turn's ``result`` event."""
        proc = sessions[which]
        assert proc.stdin is not None and proc.stdout is not None
        line = {"type": "user", "message": {"role": "user", "content": prompt}}
        t0 = time.perf_counter()
        proc.stdin.write(json.dumps(line) + "\n")
        proc.stdin.flush()
        for raw in proc.stdout:
            if raw.startswith("{") and json.loads(raw).get("type") == "result":
                return (time.perf_counter() - t0) * 1000
        raise RuntimeError(f"claude -p session ({which} hooks) ended: {proc.wait()}")

    try:
        turn("with", "warm up")  # starts the memory daemon: not timed
        end = time.monotonic() + 300  # a bound, not a timing: the daemon loads its model
        while read_record(memlane_home)[0] is None and time.monotonic() < end:
            time.sleep(0.2)
        turn("without", "warm up")
        for i, prompt in enumerate(prompts):
            order = ("without", "with") if i % 2 == 0 else ("with", "without")
            for which in order:
                samples[which].append(turn(which, prompt))
            if progress is not None:
                progress(i + 1)
        # the same prompts as turns of one running session each (no session start per turn)
        for which in ("without", "with"):
            sessions[which] = subprocess.Popen(
                [str(claude), "-p", "--input-format", "stream-json", "--output-format",
                 "stream-json", "--verbose"],
                cwd=work, env={**base, "HOME": str(homes[which])}, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            session_turn(which, "warm up")
        for i, prompt in enumerate(prompts):
            order = ("without", "with") if i % 2 == 0 else ("with", "without")
            for which in order:
                in_session[which].append(session_turn(which, f"{prompt} (again)"))
    finally:
        for proc in sessions.values():
            proc.kill()
            proc.wait()
        stop(memlane_home, timeout_s=60)
        fake.close()
        shutil.rmtree(root, ignore_errors=True)
    without = statistics.median(samples["without"])
    with_hooks = statistics.median(samples["with"])
    session_without = statistics.median(in_session["without"])
    session_with = statistics.median(in_session["with"])
    injected = sum(
        "[Context from memory]" in json.dumps(r.body.get("messages", []))
        for r in fake.model_requests()
    )
    return {
        "turns": len(prompts),
        "without_median_ms": round(without, 1),
        "with_median_ms": round(with_hooks, 1),
        "added_median_ms": round(with_hooks - without, 1),
        "session_without_median_ms": round(session_without, 1),
        "session_with_median_ms": round(session_with, 1),
        "session_added_median_ms": round(session_with - session_without, 1),
        "requests_with_a_block": injected,
    }


def goals(daemon: dict[str, Any] | None, claude: dict[str, Any] | None) -> dict[str, Any]:
    """The issue's goals against ``daemon`` (:func:`time_daemon`) and ``claude``
    (:func:`time_claude_turns`); a part not run has ``None`` for met."""
    return {
        "first_ms": GOAL_FIRST_MS,
        "first_met": None if daemon is None else daemon["first_ms"] <= GOAL_FIRST_MS,
        "later_p95_ms": GOAL_LATER_P95_MS,
        "later_p95_met": None if daemon is None else daemon["later"]["p95_ms"] <= GOAL_LATER_P95_MS,
        "claude_added_ms": GOAL_CLAUDE_ADDED_MS,
        "claude_added_met": None
        if claude is None
        else claude["added_median_ms"] <= GOAL_CLAUDE_ADDED_MS,
        "session_added_met": None
        if claude is None
        else claude["session_added_median_ms"] <= GOAL_CLAUDE_ADDED_MS,
    }
