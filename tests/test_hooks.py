"""``memlane hook``: a fresh process per call with payloads shaped like Claude Code's and Gemini
CLI's, as the clients run it. Exact stdout, exit code 0 every time, the session's tracking in the
store as expected; with a real ``memlane serve`` and without (engine in-process)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import Backend
from hook_support import (
    OWNER,
    PATHS,
    claude_payload,
    gemini_payload,
    hook_env,
    hook_paths,
    run_hook,
)
from memlane import InvalidArgument, MemoryEngine
from memlane.config import HooksSettings
from memlane.history import INJECTION_BLOCK_PREFIX
from memlane.hooks import transcript
from memlane.hooks.config import DEFAULTS, HookConfig, load_config
from memlane.hooks.run import output
from server_support import Served, run_server

DB = "The project database is PostgreSQL 16 on the staging host"
CAT = "Alice's cat is called Miso and sleeps on the keyboard"
ASK = "Which database version does the project run?"


def block(*lines: str) -> str:
    return "\n".join([INJECTION_BLOCK_PREFIX, "[Relevant to this message]", *lines])


@pytest.fixture
def seeded(store_backend: Backend) -> MemoryEngine:
    engine = store_backend.engine()
    engine.add(DB, owner=OWNER, agent="claude-code")
    engine.add(CAT, owner=OWNER, type="preference")
    return engine


@pytest.fixture(params=PATHS)
def env(
    request: pytest.FixtureRequest, store_backend: Backend, seeded: MemoryEngine
) -> Iterator[dict[str, str]]:
    """The hook's environment: no server (engine in-process), or a real ``memlane serve``."""
    with hook_paths(request.param, store_backend) as made:
        yield made


def injected(engine: MemoryEngine, session: str) -> dict[str, int]:
    return dict(engine.session(session, owner=OWNER, agent="claude-code").injected)


def test_prompt_injects_exact_json_then_not_again(
    env: dict[str, str], seeded: MemoryEngine, tmp_path: Path
) -> None:
    payload = claude_payload("UserPromptSubmit", "s1", tmp_path, prompt=ASK)
    first = run_hook(env, "UserPromptSubmit", payload)
    assert first.returncode == 0, first.stderr
    expected = {
        "hookSpecificOutput": {
            "hookEventName": "UserPromptSubmit",
            "additionalContext": block(f"[fact] {DB}"),
        }
    }
    assert first.stdout == json.dumps(expected, ensure_ascii=False) + "\n"
    db_id = seeded.search(DB, owner=OWNER)[0].memory.id
    assert injected(seeded, "s1") == {db_id: 1}
    # the same prompt again right after (Claude Code sends no turn id): the same turn, a
    # retry: nothing printed (its block is in the history) and nothing recorded
    again = run_hook(env, "UserPromptSubmit", payload)
    assert (again.returncode, again.stdout) == (0, "")
    assert seeded.session("s1", owner=OWNER).turn == 1
    # another prompt: a new turn, the memory still in the history, so not printed again
    other = claude_payload("UserPromptSubmit", "s1", tmp_path, prompt=f"{ASK} And its port?")
    assert (run_hook(env, "UserPromptSubmit", other).stdout, injected(seeded, "s1")) == (
        "",
        {db_id: 1},
    )
    assert seeded.session("s1", owner=OWNER).turn == 2


@pytest.mark.parametrize(("source", "reset"), [("clear", True), ("compact", True)])
def test_session_start_clear_and_compact_reset(
    env: dict[str, str], seeded: MemoryEngine, tmp_path: Path, source: str, reset: bool
) -> None:
    prompt = claude_payload("UserPromptSubmit", "s2", tmp_path, prompt=ASK)
    assert run_hook(env, "UserPromptSubmit", prompt).context() == block(f"[fact] {DB}")
    start = claude_payload("SessionStart", "s2", tmp_path, source=source, model="claude-x")
    done = run_hook(env, "SessionStart", start)
    assert (done.returncode, done.stdout) == (0, "")
    state = seeded.session("s2", owner=OWNER)
    assert state.last_reset_reason == source and dict(state.injected) == {}
    assert run_hook(env, "UserPromptSubmit", prompt).context() == block(f"[fact] {DB}")


@pytest.mark.parametrize("source", ["resume", "startup", "fork"])
def test_session_start_resume_startup_fork_keep_tracking(
    env: dict[str, str], seeded: MemoryEngine, tmp_path: Path, source: str
) -> None:
    prompt = claude_payload("UserPromptSubmit", "s3", tmp_path, prompt=ASK)
    assert run_hook(env, "UserPromptSubmit", prompt).context() is not None
    done = run_hook(
        env, "SessionStart", claude_payload("SessionStart", "s3", tmp_path, source=source)
    )
    assert (done.returncode, done.stdout) == (0, "")
    assert seeded.session("s3", owner=OWNER).last_reset_reason is None
    assert run_hook(env, "UserPromptSubmit", prompt).stdout == ""  # still tracked


@pytest.mark.parametrize("trigger", ["manual", "auto"])
def test_pre_compact_resets(
    env: dict[str, str], seeded: MemoryEngine, tmp_path: Path, trigger: str
) -> None:
    prompt = claude_payload("UserPromptSubmit", "s4", tmp_path, prompt=ASK)
    run_hook(env, "UserPromptSubmit", prompt)
    payload = claude_payload("PreCompact", "s4", tmp_path, trigger=trigger, custom_instructions="")
    done = run_hook(env, "PreCompact", payload)
    assert (done.returncode, done.stdout) == (0, "")
    assert seeded.session("s4", owner=OWNER).last_reset_reason == "compact"
    assert run_hook(env, "UserPromptSubmit", prompt).context() == block(f"[fact] {DB}")


@pytest.mark.parametrize(
    ("event", "fields"),
    [
        ("SessionEnd", {"reason": "prompt_input_exit"}),
        ("Stop", {"stop_hook_active": False, "last_assistant_message": "done"}),
        ("Notification", {"message": "waiting"}),
    ],
)
def test_other_events_print_nothing_and_change_nothing(
    seeded: MemoryEngine, store_backend: Backend, tmp_path: Path, event: str, fields: dict[str, str]
) -> None:
    done = run_hook(hook_env(store_backend), event, claude_payload(event, "s5", tmp_path, **fields))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert seeded.session("s5", owner=OWNER).turn == 0


@pytest.mark.parametrize(
    "raw",
    ['{"session_id": "s6", "prompt": "Which data', "", "[1, 2]", "null", "\xff\xfe"],
    ids=["truncated", "empty", "array", "null", "not-utf8"],
)
def test_broken_input_exits_zero_silently_with_a_log_line(store_backend: Backend, raw: str) -> None:
    done = run_hook(hook_env(store_backend), "UserPromptSubmit", raw)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    log = (store_backend.home / "logs" / "hooks.log").read_text()
    assert "ERROR UserPromptSubmit: ValueError: stdin is" in log


def test_empty_prompt_slash_command_and_missing_session(
    seeded: MemoryEngine, store_backend: Backend, tmp_path: Path
) -> None:
    env = hook_env(store_backend)
    for prompt in ["", "   ", "/compact", "/clear"]:
        done = run_hook(
            env,
            "UserPromptSubmit",
            claude_payload("UserPromptSubmit", "s7", tmp_path, prompt=prompt),
        )
        assert (done.returncode, done.stdout) == (0, "")
    assert seeded.session("s7", owner=OWNER).injected == {}
    no_session = {"prompt": ASK, "hook_event_name": "UserPromptSubmit"}
    done = run_hook(env, "UserPromptSubmit", no_session)
    assert (done.returncode, done.stdout) == (0, "")
    assert "no session_id" in (store_backend.home / "logs" / "hooks.log").read_text()


def test_transcript_enriches_a_follow_up_and_bad_lines_are_skipped(
    seeded: MemoryEngine, store_backend: Backend, tmp_path: Path
) -> None:
    lines = [
        {"type": "summary", "summary": "setup"},
        {"type": "user", "message": {"role": "user", "content": "Set up the PostgreSQL database"}},
        "not json at all",
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "The staging host runs the database."},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}},
                ],
            },
        },
        {"type": "user", "message": {"role": "user", "content": block("[fact] injected")}},
    ]
    path = tmp_path / "s8.jsonl"
    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
    path.write_text(text + '\n{"type": "user", "message": {"role": "us')  # half-written
    env = hook_env(store_backend)
    follow_up = claude_payload("UserPromptSubmit", "s8", tmp_path, prompt="why that version?")
    assert run_hook(env, "UserPromptSubmit", follow_up).context() == block(f"[fact] {DB}")
    assert transcript.recent_messages(str(path), 5) == [
        "user: Set up the PostgreSQL database",
        "assistant: The staging host runs the database.",
    ]
    missing = claude_payload("UserPromptSubmit", "s9", tmp_path / "gone", prompt=ASK)
    assert run_hook(env, "UserPromptSubmit", missing).context() == block(f"[fact] {DB}")


def test_block_stays_under_max_chars_and_only_printed_ids_are_recorded(
    store_backend: Backend, tmp_path: Path
) -> None:
    engine = store_backend.engine()
    for i in range(30):
        engine.add(f"Database note {i}: " + f"replica {i} lag detail " * 60, owner=OWNER)
    env = hook_env(store_backend, max_chars=5000)
    done = run_hook(
        env,
        "UserPromptSubmit",
        claude_payload("UserPromptSubmit", "s10", tmp_path, prompt="database replica lag notes"),
    )
    context = done.context()
    assert context is not None and len(context) <= 5000
    shown = {line.removeprefix("[fact] ") for line in context.splitlines()[2:]}
    recorded = dict(engine.session("s10", owner=OWNER, agent="claude-code").injected)
    assert {engine.get(mid, owner=OWNER).content for mid in recorded} == shown
    assert 1 <= len(shown) < 30
    assert engine.session("s10", owner=OWNER).turn == 1


def test_no_server_and_no_fallback_logs_and_prints_nothing(
    seeded: MemoryEngine, store_backend: Backend, tmp_path: Path
) -> None:
    env = hook_env(store_backend, fallback="false")
    done = run_hook(
        env, "UserPromptSubmit", claude_payload("UserPromptSubmit", "s11", tmp_path, prompt=ASK)
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    log = (store_backend.home / "logs" / "hooks.log").read_text()
    assert "no server at http://127.0.0.1:9" in log and "fallback is off" in log
    assert seeded.session("s11", owner=OWNER).turn == 0


def test_a_server_that_never_answers_hits_the_deadline(
    seeded: MemoryEngine, store_backend: Backend, tmp_path: Path
) -> None:
    with socket.socket() as listener:  # accepts connections (backlog), never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        env = hook_env(store_backend, url=url, timeout_s=0.5)
        done = run_hook(
            env, "UserPromptSubmit", claude_payload("UserPromptSubmit", "s12", tmp_path, prompt=ASK)
        )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    # Which fires first under load, the hook's own deadline or the socket timeout derived from
    # it, is a race; either way the line names the session and the timeout.
    log = (store_backend.home / "logs" / "hooks.log").read_text()
    assert "session=s12" in log
    assert "deadline of 0.5 s ([hooks] timeout_s) passed" in log or "timed out" in log


def test_invalid_settings_log_and_exit_zero(store_backend: Backend, tmp_path: Path) -> None:
    env = hook_env(store_backend, max_chars="lots")
    done = run_hook(
        env, "UserPromptSubmit", claude_payload("UserPromptSubmit", "s13", tmp_path, prompt=ASK)
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert "hooks.max_chars = 'lots'" in (store_backend.home / "logs" / "hooks.log").read_text()


def test_gemini_before_agent_pre_compress_and_clear(
    seeded: MemoryEngine, store_backend: Backend, tmp_path: Path
) -> None:
    seeded.add("The staging database runs PostgreSQL with pgvector", owner=OWNER, agent="gemini")
    env = hook_env(store_backend)
    prompt = gemini_payload("BeforeAgent", "g1", tmp_path, prompt=ASK)
    done = run_hook(env, "BeforeAgent", prompt)
    printed = json.loads(done.stdout)["hookSpecificOutput"]
    assert printed["hookEventName"] == "BeforeAgent"
    assert (
        "[fact] The staging database runs PostgreSQL with pgvector" in printed["additionalContext"]
    )
    assert DB not in printed["additionalContext"]  # claude-code's own memory: another agent
    # PreCompress fires on every turn in Gemini CLI 0.61, compression or not: no reset
    run_hook(env, "PreCompress", gemini_payload("PreCompress", "g1", tmp_path, trigger="auto"))
    assert seeded.session("g1", owner=OWNER).last_reset_reason is None
    start = gemini_payload("SessionStart", "g1", tmp_path, source="clear")
    assert run_hook(env, "SessionStart", start, "--client", "gemini").stdout == ""
    assert seeded.session("g1", owner=OWNER).last_reset_reason == "clear"


def test_per_project_scope_from_the_git_root(store_backend: Backend, tmp_path: Path) -> None:
    repo = tmp_path / "shop"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    cfg = load_config(store_backend.home)
    owner, agent, project = HookConfig(home=cfg.home, owner=OWNER).scope(
        "claude-code", str(repo / "src")
    )
    assert (owner, agent) == (OWNER, "claude-code")  # the project is a scope of its own
    assert project == f"path:{repo.resolve()}"  # no commit yet
    engine = store_backend.engine()
    engine.add("The shop checkout uses Stripe webhooks", owner=OWNER, project=project)
    engine.add("The blog checkout uses PayPal buttons", owner=OWNER, project="path:/blog")
    env = hook_env(store_backend)
    payload = claude_payload(
        "UserPromptSubmit", "p1", repo / "src", prompt="how does checkout work?"
    )
    assert run_hook(env, "UserPromptSubmit", payload).context() == block(
        "[fact] The shop checkout uses Stripe webhooks"
    )
    # off: every memory of the owner, as before projects
    env = hook_env(store_backend, per_project="false")
    payload = claude_payload(
        "UserPromptSubmit", "p2", repo / "src", prompt="how does checkout work?"
    )
    context = run_hook(env, "UserPromptSubmit", payload).context()
    assert context is not None and "PayPal" in context and "Stripe" in context


def test_default_owner_is_the_scope_rules(store_backend: Backend) -> None:
    """No ``[hooks] owner``: the owner of every other door (``[scope] owner``, else
    ``default``), never the OS user."""
    owner, agent, project = load_config(store_backend.home).scope("gemini", None)
    assert (owner, agent, project) == ("default", "gemini", None)


def test_light_reader_agrees_with_the_settings_class() -> None:
    """The hook's own reader (no pydantic) has the keys and defaults of ``[hooks]``."""
    cfg = HookConfig(home=Path("/x"))
    for name, field in HooksSettings.model_fields.items():
        assert getattr(cfg, name) == field.default, name
    assert set(HooksSettings.model_fields) == set(DEFAULTS)
    assert transcript.INJECTION_PREFIX == INJECTION_BLOCK_PREFIX


def test_output_is_the_exact_shape_claude_code_accepts() -> None:
    assert output("UserPromptSubmit", "x\ny") == (
        '{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "x\\ny"}}'
    )


def test_the_hook_talks_to_the_server_without_importing_anything_heavy(
    seeded: MemoryEngine, store_backend: Backend, tmp_path: Path
) -> None:
    """With ``memlane serve`` up, the hook process never loads Typer, the engine, numpy or
    pydantic (checked in the hook's own process) and the server did the injection."""
    with run_server(store_backend) as served:
        env = hook_env(store_backend, url=served.url)
        code = (
            "import sys, json, os\n"
            "os._exit = sys.exit  # the hook ends with os._exit: let this script go on\n"
            "sys.argv = ['memlane', 'hook', 'UserPromptSubmit']\n"
            "from memlane._entry import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
        )
        payload = claude_payload("UserPromptSubmit", "s14", tmp_path, prompt=ASK)
        done = subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps(payload).encode(),
            capture_output=True,
            env=env,
            timeout=60,
        )
        served_log = _read(served)
    assert json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"] == block(
        f"[fact] {DB}"
    )
    modules = json.loads(done.stderr.decode().strip().splitlines()[-1])
    heavy = (
        "typer",
        "click",
        "numpy",
        "pydantic",
        "memlane.engine",
        "memlane.cli",
        "httpx",
        "torch",
    )
    assert [m for m in modules if m.split(".")[0] in heavy or m.startswith(heavy)] == []
    assert "POST /v1/turn" in served_log


def _read(served: Served) -> str:
    return served.log.read_text() if served.log.exists() else ""


def test_python_m_memlane_hook_help_goes_to_the_cli() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "memlane", "hook", "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0 and "hookSpecificOutput" in done.stdout


def test_engine_max_chars_is_exact_and_checked(seeded: MemoryEngine) -> None:
    """``inject(max_chars=)``: a block of exactly the limit fits; one character less drops the
    item (and nothing is recorded for it); a bad limit is refused before anything is counted."""
    full = block(f"[fact] {DB}")
    fits = seeded.inject("m1", ASK, owner=OWNER, agent="claude-code", max_chars=len(full))
    assert fits.block == full
    short = seeded.inject("m2", ASK, owner=OWNER, agent="claude-code", max_chars=len(full) - 1)
    assert short.block is None and short.skipped["budget"] >= 1
    assert seeded.session("m2", owner=OWNER).injected == {}
    with pytest.raises(InvalidArgument, match="max_chars"):
        seeded.inject("m3", ASK, owner=OWNER, max_chars=0)
    assert seeded.session("m3", owner=OWNER).turn == 0


def test_session_start_prints_pinned_memories_when_ambient_is_on(
    store_backend: Backend, seeded: MemoryEngine, tmp_path: Path
) -> None:
    """Ambient awareness on: a new session (and one just compacted) starts with the pinned
    memories as SessionStart context, recorded, so the next prompt does not repeat them."""
    (store_backend.home / "memlane.toml").write_text(
        '[injection]\nambient_enabled = true\npinned_types = ["preference"]\n'
    )
    with run_server(store_backend) as served:
        for env in (hook_env(store_backend), hook_env(store_backend, url=served.url)):
            session = f"a-{env['MEMLANE_HOOKS__URL'][-4:]}"
            start = claude_payload("SessionStart", session, tmp_path, source="startup")
            done = run_hook(env, "SessionStart", start)
            assert json.loads(done.stdout) == {
                "hookSpecificOutput": {
                    "hookEventName": "SessionStart",
                    "additionalContext": "\n".join(
                        [INJECTION_BLOCK_PREFIX, "[Pinned context]", f"[preference] {CAT}"]
                    ),
                }
            }
            ask = claude_payload(
                "UserPromptSubmit", session, tmp_path, prompt="what is the cat called?"
            )
            shown = run_hook(env, "UserPromptSubmit", ask).context() or ""
            assert CAT not in shown  # pinned at the start: not repeated
            resume = claude_payload("SessionStart", session, tmp_path, source="resume")
            assert run_hook(env, "SessionStart", resume).stdout == ""
            compact = claude_payload("SessionStart", session, tmp_path, source="compact")
            assert f"[preference] {CAT}" in (run_hook(env, "SessionStart", compact).context() or "")
