"""README.md runs: every ``python`` and every ``bash`` block, as a new user would paste them, in a
temporary ``HOME`` (so ``~/.memlane`` is a fresh store) with the real embedding model, and the
results the README shows in its comments are checked.

The comments the README uses, and what each checks:

- Python, ``expr  # -> VALUE``: ``expr`` equals the Python literal ``VALUE`` (an enum by its value,
  a float to 0.01, a tuple, list or dict element by element); text after the literal is prose.
  ``expr  # raises Name``: ``expr`` raises the exception class ``Name``. The Python blocks run in
  order in one namespace (the second block uses ``inj`` of the first).
- Shell, ``command  # -> TEXT``: the command exits 0 and prints ``TEXT`` (stdout or stderr);
  ``command  # exits N``: it exits ``N``; any other line must exit 0.
  ``make TARGET`` lines are checked with ``make -n TARGET`` (the target exists and its recipe
  parses) rather than run: ``make test`` would run this test again, and ``make demo`` has its
  own test (tests/test_demo.py). ``memlane serve`` is started, must answer ``/health``, and
  must stop cleanly (exit 0) on SIGINT.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)

pytestmark = pytest.mark.model


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(README.read_text()) if lang == language]


def literal_prefix(text: str) -> Any:
    """The longest prefix of ``text`` that is a Python literal (the rest is prose)."""
    for end in range(len(text), 0, -1):
        try:
            return ast.literal_eval(text[:end].strip())
        except (ValueError, SyntaxError):
            continue
    raise AssertionError(f"README comment {text!r} does not start with a Python literal")


def matches(actual: Any, expected: Any) -> bool:
    if isinstance(expected, float) and not isinstance(actual, bool):
        return isinstance(actual, int | float) and abs(actual - expected) <= 0.01
    if isinstance(expected, tuple | list):
        return (
            isinstance(actual, tuple | list)
            and len(actual) == len(expected)
            and all(matches(a, e) for a, e in zip(actual, expected, strict=True))
        )
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and set(actual) == set(expected)
            and all(matches(actual[k], v) for k, v in expected.items())
        )
    return bool(actual == expected)


def checked_python(source: str) -> tuple[str, int]:
    """``source`` with each ``# -> VALUE`` / ``# raises Name`` line turned into a check; also the
    number of checks (a README whose comments stop being checked fails below)."""
    lines: list[str] = []
    checks = 0
    for number, line in enumerate(source.splitlines(), 1):
        code, sep, comment = line.partition("  #")
        comment = comment.strip()
        indent = code[: len(code) - len(code.lstrip())]
        if sep and comment.startswith("->"):
            expected = repr(literal_prefix(comment[2:]))
            lines.append(f"{indent}_expect(({code.strip()}), {expected}, {number})")
            checks += 1
        elif sep and comment.startswith("raises "):
            name = comment.split()[1].rstrip(":")
            lines.append(f"{indent}_raises(lambda: {code.strip()}, {name!r}, {number})")
            checks += 1
        else:
            lines.append(line)
    return "\n".join(lines), checks


PRELUDE = """
import enum, sys
sys.path.insert(0, {tests!r})
from test_readme import matches

def _expect(actual, expected, line):
    shown = actual.value if isinstance(actual, enum.Enum) else actual
    assert matches(actual, expected), f"README line {{line}}: got {{shown!r}}, README says {{expected!r}}"

def _raises(call, name, line):
    try:
        call()
    except Exception as exc:
        assert type(exc).__name__ == name, f"README line {{line}}: raised {{exc!r}}, not {{name}}"
    else:
        raise AssertionError(f"README line {{line}}: raised nothing, README says {{name}}")
"""


@pytest.fixture
def user_env(tmp_path: Path) -> dict[str, str]:
    """A new user's environment: ``HOME`` a temporary folder (``~/.memlane`` does not exist), no
    ``MEMLANE_*`` variables, the venv's ``memlane`` first on ``PATH``; the working directory
    holds a copy of ``examples/`` (the README's relative paths)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    env.update(HOME=str(tmp_path / "user"), PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    (tmp_path / "user").mkdir()
    work = tmp_path / "work"
    shutil.copytree(ROOT / "examples", work / "examples")
    return env


def test_python_blocks_run_and_show_what_the_code_returns(
    user_env: dict[str, str], tmp_path: Path
) -> None:
    sources = blocks("python")
    assert len(sources) >= 2, "README lost its Python examples"
    script, checks = "", 0
    for source in sources:
        code, n = checked_python(source)
        script += code + "\n"
        checks += n
    assert checks >= 10, f"only {checks} results checked: README comments changed form?"
    path = tmp_path / "readme_python.py"
    path.write_text(PRELUDE.format(tests=str(Path(__file__).parent)) + script)
    run = subprocess.run(
        [sys.executable, str(path)],
        cwd=tmp_path / "work",
        env=user_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert (tmp_path / "user" / ".memlane" / "memlane.db").exists(), "~/.memlane was not used"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(line: str, env: dict[str, str], cwd: Path) -> None:
    port = _free_port()
    env = {**env, "MEMLANE_SERVER__PORT": str(port)}
    log = cwd / "serve.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(shlex.split(line), cwd=cwd, env=env, stdout=sink, stderr=sink)
        try:
            deadline = time.monotonic() + 120
            while True:
                assert proc.poll() is None, log.read_text()
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "memlane serve did not answer in 120 s"
                time.sleep(0.5)
        finally:
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=60)
    assert code == 0, f"memlane serve exited {code} on SIGINT:\n{log.read_text()}"


def test_shell_blocks_run_and_print_what_the_readme_says(
    user_env: dict[str, str], tmp_path: Path
) -> None:
    lines = [ln for body in blocks("bash") for ln in body.splitlines() if ln.strip()]
    assert any(ln.startswith("memlane ") for ln in lines), "README lost its CLI examples"
    work = tmp_path / "work"
    ran = 0
    for line in lines:
        command, _, comment = line.partition("  #")
        command, comment = command.strip(), comment.strip()
        if command.startswith("make "):
            target = command.split()[1]
            dry = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True)
            assert dry.returncode == 0, f"`{command}`: {dry.stderr}"
            continue
        if command == "memlane serve":
            _serve(command, user_env, work)
            ran += 1
            continue
        run = subprocess.run(
            command, shell=True, cwd=work, env=user_env, capture_output=True, text=True, timeout=300
        )
        printed = run.stdout + run.stderr
        code = int(comment.split()[1].rstrip(":")) if comment.startswith("exits ") else 0
        assert run.returncode == code, f"`{command}` exited {run.returncode}:\n{printed[-2000:]}"
        if comment.startswith("->"):
            expected = comment[2:].strip()
            assert expected in printed, f"`{command}` did not print {expected!r}:\n{printed}"
        ran += 1
    assert ran >= 10
    assert not Path("/tmp/no-such-home").exists(), "a read command created the missing home"
