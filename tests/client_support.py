"""The real coding assistants in tests: Claude Code and Gemini CLI installed from npm (pinned,
cached under ``.clients/``, ignored by git; ``make clients`` installs them, and so does the
first test that needs them), driven non-interactively against the fake model servers of
:mod:`memlane.eval.fake_models`, with memlane's hooks installed as a user would (``memlane hooks install``)
in a temporary HOME and memlane home. What reaches the model is read from the requests the
fake servers received.

Used by ``tests/test_clients.py`` and ``scripts/client_sessions.py`` (the 12-turn report).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlane.eval import fake_models

REPO = Path(__file__).resolve().parents[1]
CLIENTS_DIR = REPO / ".clients"
#: Pinned versions (INTEGRATIONS.md: what memlane's hooks were checked against).
CLAUDE_CODE = "2.1.197"
GEMINI_CLI = "0.61.0"
CODEX_CLI = "0.171.0"
OPENCODE = "1.18.33"
COPILOT_CLI = "1.0.102"
QWEN_CODE = "0.24.4"
#: Every client, installed together (npm prunes a package it is not asked for). The same list
#: as the Makefile's CLIENT_PACKAGES.
PACKAGES = {
    "@anthropic-ai/claude-code": CLAUDE_CODE,
    "@google/gemini-cli": GEMINI_CLI,
    "@openai/codex": CODEX_CLI,
    "opencode-ai": OPENCODE,
    "@github/copilot": COPILOT_CLI,
    "@qwen-code/qwen-code": QWEN_CODE,
}
BIN_DIR = CLIENTS_DIR / "node_modules" / ".bin"
#: First line of memlane's block (``memlane.history.INJECTION_BLOCK_PREFIX``).
BLOCK = "[Context from memory]"


def installed_version(package: str) -> str | None:
    manifest = CLIENTS_DIR / "node_modules" / package / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def ensure_clients() -> tuple[Path, Path]:
    """``(claude, gemini)`` executables of the pinned versions, installed with npm into
    ``.clients/`` (every client of :data:`PACKAGES`, the others' executables in
    :data:`BIN_DIR`) when missing. Raises ``RuntimeError`` when npm fails (its output in
    it)."""
    wanted = [f"{p}@{v}" for p, v in PACKAGES.items()]
    if any(installed_version(p) != v for p, v in PACKAGES.items()):  # all at once: npm
        # would prune a package it was not asked for
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError("npm is not on PATH: install Node.js 20+ (it brings npm)")
        CLIENTS_DIR.mkdir(exist_ok=True)
        done = subprocess.run(
            [npm, "install", "--prefix", str(CLIENTS_DIR), "--no-audit", "--no-fund",
             "--no-save", *wanted],
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"npm install {' '.join(wanted)} failed:\n{done.stderr[-3000:]}")
    bin_dir = CLIENTS_DIR / "node_modules" / ".bin"
    return bin_dir / "claude", bin_dir / "gemini"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                          check=True)  # fmt: skip
    return done.stdout.strip()


def make_repo(path: Path, remote: str) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    git(path, "remote", "add", "origin", remote)
    return path


@dataclass
class Lab:
    """A user's machine in a folder: HOME, the memlane home, the clients, the fake models."""

    root: Path
    claude: Path
    gemini: Path
    anthropic: fake_models.FakeModel
    google: fake_models.FakeModel
    env: dict[str, str] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.root / "memlane-home"

    @property
    def user_home(self) -> Path:
        return self.root / "user-home"

    def memlane(self, *args: str, cwd: Path | None = None) -> str:
        """``memlane ARGS`` as the user runs it; returns stdout. Raises on a failure."""
        done = subprocess.run(
            [sys.executable, "-m", "memlane", *args], cwd=cwd, env=self.env,
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"memlane {' '.join(args)}: {done.returncode}\n{done.stderr}")
        return done.stdout

    def close(self) -> None:
        from memlane.hooks.daemon import stop

        stop(self.home, timeout_s=30)
        self.anthropic.close()
        self.google.close()


def make_lab(root: Path, **memlane_env: str) -> Lab:
    """Both clients with memlane's hooks installed at user scope (``--home``), a fresh memlane
    home (hash embedder: no model to load), both fake model servers running."""
    claude, gemini = ensure_clients()
    lab = Lab(root, claude, gemini, fake_models.start("anthropic"), fake_models.start("gemini"))
    lab.user_home.mkdir(parents=True)
    lab.home.mkdir()
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT", "TERM")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(
        HOME=str(lab.user_home),
        MEMLANE_HOME=str(lab.home),
        MEMLANE_EMBEDDING__PROVIDER="hash",
        PYTHONPATH=str(REPO / "src"),
        # Claude Code (INTEGRATIONS.md)
        ANTHROPIC_BASE_URL=lab.anthropic.url,
        ANTHROPIC_API_KEY="sk-test",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        # Gemini CLI
        GOOGLE_GEMINI_BASE_URL=lab.google.url,
        GEMINI_API_KEY="test",
        GEMINI_CLI_TRUST_WORKSPACE="true",
        **memlane_env,
    )
    lab.env = env
    gemini_settings = lab.user_home / ".gemini" / "settings.json"
    gemini_settings.parent.mkdir()
    gemini_settings.write_text(
        json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}})
    )
    command = f"{sys.executable} -m memlane"
    for client in ("claude-code", "gemini"):
        lab.memlane("hooks", "install", "--client", client, "--scope", "user",
                    "--home", str(lab.home), "--command", command)  # fmt: skip
    return lab


# ------------------------------------------------------------------------------ Claude Code
def claude_session(
    lab: Lab, cwd: Path, prompts: list[str], session: str | None = None, *extra: str
) -> str:
    """One ``claude -p --input-format stream-json`` process taking ``prompts`` one at a time
    (each sent once the previous turn's result is out), resuming ``session`` when given;
    ``extra``: more options (``--mcp-config ...``). Returns the session id."""
    args = [str(lab.claude), "-p", "--input-format", "stream-json", "--output-format",
            "stream-json", "--verbose", *extra]  # fmt: skip
    if session:
        args += ["--resume", session]
    proc = subprocess.Popen(args, cwd=cwd, env=lab.env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    found = session or ""
    try:
        for prompt in prompts:
            line = {"type": "user", "message": {"role": "user", "content": prompt}}
            proc.stdin.write(json.dumps(line) + "\n")
            proc.stdin.flush()
            for raw in proc.stdout:
                event = json.loads(raw) if raw.startswith("{") else {}
                found = event.get("session_id") or found
                if event.get("type") == "result":
                    break
        proc.stdin.close()
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    return found


def mcp_config(lab: Lab) -> list[str]:
    """Options that give Claude Code memlane's MCP server (the lab's home) and let it call
    ``remember`` without asking (``-p`` has nobody to ask)."""
    server = {"command": sys.executable, "args": ["-m", "memlane", "mcp"], "env": lab.env}
    config = json.dumps({"mcpServers": {"memlane": server}})
    return ["--mcp-config", config, "--allowedTools", "mcp__memlane__remember"]


def claude_once(lab: Lab, cwd: Path, prompt: str, session: str | None = None) -> dict[str, Any]:
    """``claude -p PROMPT --output-format json [--resume SESSION]``: its JSON result."""
    args = [str(lab.claude), "-p", prompt, "--output-format", "json"]
    if session:
        args += ["--resume", session]
    done = subprocess.run(args, cwd=cwd, env=lab.env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"claude {prompt!r}: {done.returncode}\n{done.stderr[-2000:]}")
    return dict(json.loads(done.stdout))


# ------------------------------------------------------------------------------ Gemini CLI
def gemini_settings(lab: Lab, changes: dict[str, Any]) -> None:
    """Merge ``changes`` (top-level keys) into the lab user's ``~/.gemini/settings.json``."""
    path = lab.user_home / ".gemini" / "settings.json"
    settings = json.loads(path.read_text())
    for key, value in changes.items():
        settings[key] = {**settings.get(key, {}), **value}
    path.write_text(json.dumps(settings, indent=2))


def gemini_once(lab: Lab, cwd: Path, prompt: str, *, resume: bool) -> str:
    """``gemini -p PROMPT [--resume latest]``: its stdout."""
    args = [str(lab.gemini), "-p", prompt] + (["--resume", "latest"] if resume else [])
    done = subprocess.run(args, cwd=cwd, env=lab.env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"gemini {prompt!r}: {done.returncode}\n{done.stderr[-2000:]}")
    return done.stdout


# ------------------------------------------------------------------------------ reading
def request_text(body: dict[str, Any]) -> str:
    """Every string of a request body, joined (messages, system prompt, parts)."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(body.get("messages", body.get("contents", body.get("input", []))))
    return "\n".join(out)


@dataclass
class Row:
    """One request to the model: its number, the memories it holds (id -> copies), blocks."""

    n: int
    memories: dict[str, int]
    blocks: int
    summary: bool = False


def rows(fake: fake_models.FakeModel, memories: dict[str, str]) -> list[Row]:
    """One :class:`Row` per conversation request ``fake`` received (``memories``: id ->
    content)."""
    out = []
    for n, req in enumerate(fake.model_requests(), 1):
        text = request_text(req.body)
        flat = " ".join(text.split())
        held = {mid: flat.count(" ".join(c.split())) for mid, c in memories.items()}
        last = req.body.get("messages") or [{}]
        summary = "create a detailed summary of the conversation" in request_text(
            {"messages": last[-1:]}
        )  # Claude Code's /compact: the last message asks for a summary
        out.append(Row(n, {m: k for m, k in held.items() if k}, text.count(BLOCK), summary))
    return out


def table(title: str, found: list[Row], names: dict[str, str]) -> str:
    lines = [title, f"{'request':>7}  {'memories in the request (copies)':<44} blocks"]
    for r in found:
        held = ", ".join(f"{names.get(m, m[:8])} x{k}" for m, k in sorted(r.memories.items()))
        lines.append(f"{r.n:>7}  {held or '-':<44} {r.blocks}{'  (summary)' if r.summary else ''}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ one client
@dataclass
class ClientLab:
    """One more assistant on a user's machine in a folder: HOME, the memlane home, the
    client's executables on PATH, one fake model server (``fake``)."""

    root: Path
    fake: fake_models.FakeModel
    env: dict[str, str] = field(default_factory=dict)

    home = Lab.home
    user_home = Lab.user_home
    memlane = Lab.memlane

    def install(self, client: str, *extra: str) -> str:
        """``memlane hooks install --client CLIENT --scope user --home HOME`` as the user runs
        it (the clients on PATH); returns what it printed on stderr."""
        done = subprocess.run(
            [sys.executable, "-m", "memlane", "hooks", "install", "--client", client,
             "--scope", "user", "--home", str(self.home), "--command",
             f"{sys.executable} -m memlane", *extra],
            env=self.env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"hooks install --client {client}: {done.stderr}")
        return done.stderr

    def close(self) -> None:
        from memlane.hooks.daemon import stop

        stop(self.home, timeout_s=30)
        self.fake.close()


def make_client_lab(root: Path, kind: str, **more_env: str) -> ClientLab:
    """A fresh user (HOME, memlane home with the hash embedder) with every pinned client on
    PATH and a fake model server of ``kind`` (``responses`` or ``chat``) running."""
    ensure_clients()
    lab = ClientLab(root, fake_models.start(kind))
    lab.user_home.mkdir(parents=True)
    lab.home.mkdir()
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT", "TERM")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["PATH"] = os.pathsep.join(
        [str(Path(sys.executable).parent), str(BIN_DIR), env.get("PATH", "")]
    )
    env.update(
        HOME=str(lab.user_home),
        MEMLANE_HOME=str(lab.home),
        MEMLANE_EMBEDDING__PROVIDER="hash",
        PYTHONPATH=str(REPO / "src"),
        NO_UPDATE_NOTIFIER="1",
        **more_env,
    )
    lab.env = env
    return lab


def added_memory(lab: ClientLab | Lab, text: str, *args: str) -> dict[str, str]:
    """``memlane add TEXT --json ARGS``: ``{id: content}``."""
    memory = json.loads(lab.memlane("add", text, "--json", *args))["memory"]
    return {memory["id"]: memory["content"]}


# ------------------------------------------------------------------------------ Codex CLI
def codex_config(lab: ClientLab, **more: Any) -> None:
    """``~/.codex/config.toml`` of the lab's user: the fake Responses server as the model
    provider (``wire_api = "responses"``: Codex's chat wire is gone), ``more`` as top-level
    keys (``model_auto_compact_token_limit`` ...). Written before ``hooks install``, which
    adds Codex's trust records to the same file."""
    lines = ['model = "fake-model"', 'model_provider = "fake"']
    lines += [f"{k} = {json.dumps(v)}" for k, v in more.items()]
    lines += ["", "[model_providers.fake]", 'name = "fake"',
              f'base_url = "{lab.fake.url}/v1"', 'wire_api = "responses"',
              'env_key = "FAKE_OPENAI_KEY"']  # fmt: skip
    path = lab.user_home / ".codex" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text() if path.exists() else ""
    path.write_text("\n".join(lines) + "\n\n" + old)


def codex_exec(lab: ClientLab, cwd: Path, prompt: str, *, resume: bool) -> str:
    """``codex exec [resume --last] PROMPT`` (a new session, or the last one continued): its
    stdout. Raises ``RuntimeError`` on a failure."""
    args = ["codex", "exec", "--skip-git-repo-check"]
    if resume:
        args += ["resume", "--last"]
    done = subprocess.run([*args, prompt], cwd=cwd, env={**lab.env, "FAKE_OPENAI_KEY": "x"},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=180)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"codex {prompt!r}: {done.returncode}\n{done.stderr[-3000:]}")
    return done.stdout + done.stderr


def input_text(body: dict[str, Any]) -> str:
    """Every string of a Responses API request's ``input`` (or a chat request's
    ``messages``), joined."""
    return request_text({"messages": body.get("input", body.get("messages", []))})


# ------------------------------------------------------------------------------ Qwen Code
def qwen_settings(lab: ClientLab, changes: dict[str, Any] | None = None) -> None:
    """``~/.qwen/settings.json``: the OpenAI-compatible auth (the fake chat server through
    ``OPENAI_BASE_URL``, set by :func:`qwen_once`), ``changes`` merged as top-level keys.
    Written before ``hooks install``, which merges memlane's hooks into the same file."""
    path = lab.user_home / ".qwen" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    settings = json.loads(path.read_text()) if path.exists() else {}
    settings.setdefault("security", {}).setdefault("auth", {})["selectedType"] = "openai"
    settings.setdefault("model", {})["name"] = "fake-model"
    for key, value in (changes or {}).items():
        settings[key] = {**settings.get(key, {}), **value}
    path.write_text(json.dumps(settings, indent=2))


def qwen_once(lab: ClientLab, cwd: Path, prompt: str, *, resume: bool) -> str:
    """``qwen [--continue] PROMPT`` (one-shot, tools approved: ``--yolo``): its stdout."""
    args = ["qwen", "--yolo", *(["--continue"] if resume else []), prompt]
    env = {**lab.env, "OPENAI_BASE_URL": f"{lab.fake.url}/v1", "OPENAI_API_KEY": "sk-test",
           "OPENAI_MODEL": "fake-model"}  # fmt: skip
    done = subprocess.run(args, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"qwen {prompt!r}: {done.returncode}\n{done.stderr[-3000:]}")
    return done.stdout


# ------------------------------------------------------------------------------ Copilot CLI
def copilot_once(
    lab: ClientLab, cwd: Path, prompt: str, *, resume: bool, max_prompt_tokens: int = 100_000
) -> str:
    """``copilot -p PROMPT [--continue] --allow-all-tools`` with the fake chat server as its
    own-key provider (``COPILOT_PROVIDER_BASE_URL``: no GitHub sign-in; the model's window
    ``max_prompt_tokens``): its stdout."""
    args = ["copilot", "-p", prompt, "--allow-all-tools", *(["--continue"] if resume else [])]
    env = {**lab.env, "COPILOT_PROVIDER_BASE_URL": f"{lab.fake.url}/v1",
           "COPILOT_PROVIDER_API_KEY": "sk-test", "COPILOT_MODEL": "fake-model",
           "COPILOT_PROVIDER_MAX_PROMPT_TOKENS": str(max_prompt_tokens),
           "COPILOT_AUTO_UPDATE": "false"}  # fmt: skip
    done = subprocess.run(args, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"copilot {prompt!r}: {done.returncode}\n{done.stderr[-3000:]}")
    return done.stdout


# ------------------------------------------------------------------------------ OpenCode
def opencode_config(lab: ClientLab, limit: dict[str, int] | None = None) -> None:
    """``~/.config/opencode/opencode.json``: the fake chat server as an OpenAI-compatible
    provider (``fake/fake-model``), no update check, no sharing; ``limit``: the model's
    ``{"context": tokens, "output": tokens}`` (OpenCode compacts on its own once a reply's
    reported usage leaves too little of the context)."""
    model: dict[str, Any] = {"name": "fake-model", **({"limit": limit} if limit else {})}
    provider = {"npm": "@ai-sdk/openai-compatible", "name": "fake",
                "options": {"baseURL": f"{lab.fake.url}/v1", "apiKey": "sk-test"},
                "models": {"fake-model": model}}  # fmt: skip
    config = {"provider": {"fake": provider}, "model": "fake/fake-model",
              "autoupdate": False, "share": "disabled"}  # fmt: skip
    path = lab.user_home / ".config" / "opencode" / "opencode.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))


def opencode_run(lab: ClientLab, cwd: Path, prompt: str, *, resume: bool) -> str:
    """``opencode run [--continue] PROMPT``: its stdout."""
    args = ["opencode", "run", *(["--continue"] if resume else []), prompt]
    done = subprocess.run(args, cwd=cwd, env=lab.env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"opencode {prompt!r}: {done.returncode}\n{done.stderr[-3000:]}")
    return done.stdout
