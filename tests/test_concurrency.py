"""Two real processes on one store: both writers succeed, and session state is shared."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

from conftest import Backend
from memlane import MemoryEngine

WRITER = textwrap.dedent(
    """
    import json, random, sys, time
    from pathlib import Path
    from memlane import MemoryEngine, MemoryInput

    name, n, go = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    words = "apple river stone cloud violin harbor maple copper lantern meadow orbit pepper quartz " \\
        "saddle tunnel velvet walnut yacht zephyr anchor basil candle dune ember falcon glacier " \\
        "hazel iris jasmine kettle lemon mango nectar olive pebble quill raven sage tulip".split()
    rng = random.Random(name)
    (go.parent / f"ready-{name}").touch()
    while not go.exists():  # start together
        time.sleep(0.005)
    decisions = []
    started = time.time()
    with MemoryEngine.open() as engine:
        for i in range(n):
            text = f"{name} note {i}: " + " ".join(rng.sample(words, 6))
            if i % 10 == 9:  # some batches too
                extra = f"{name} extra {i}: " + " ".join(rng.sample(words, 6))
                results = engine.add_many([MemoryInput(text), MemoryInput(extra)])
                decisions += [r.decision.value for r in results]
            else:
                decisions.append(engine.add(text).decision.value)
    print(json.dumps({"decisions": decisions, "started": started, "ended": time.time()}))
    """
)


def run_together(backend: Backend, script: str, runs: dict[str, list[str]], go: Path) -> list[Any]:
    """Run ``script`` once per name (argv: the name, its arguments, the ``go`` file); each run
    touches ``ready-<name>`` beside ``go`` and waits for ``go``, so all are released at the same
    moment. Returns the JSON each printed, in the order of ``runs``."""
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-c", script, name, *args, str(go)],
            env=backend.child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, args in runs.items()
    }
    deadline = time.monotonic() + 60
    while not all((go.parent / f"ready-{name}").exists() for name in procs):
        assert time.monotonic() < deadline, f"{sorted(procs)} did not start"
        for proc in procs.values():
            assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    go.touch()
    reports = []
    for proc in procs.values():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "locked" not in err.lower() and "busy" not in err.lower(), err
        reports.append(json.loads(out))
    return reports


def start_writers(backend: Backend, names: tuple[str, ...], n: int) -> list[dict[str, Any]]:
    """Run one writer process per name, released at the same moment; their reports."""
    return run_together(backend, WRITER, {name: [str(n)] for name in names}, backend.home / "go")


def test_two_processes_write_the_same_store_at_once(store_backend: Backend) -> None:
    # The store exists before the writers start (a fresh file is covered below).
    store_backend.engine().close()
    reports = start_writers(store_backend, ("alpha", "bravo"), 100)
    a, b = reports
    assert a["started"] < b["ended"] and b["started"] < a["ended"]  # they really overlapped
    decisions = [d for r in reports for d in r["decisions"]]
    assert len(decisions) == 220  # 2 x (90 single adds + 10 batches of 2)
    assert set(decisions) <= {"added", "gray_keep", "guard_keep"}  # all distinct memories
    engine = store_backend.engine()
    stored = engine.list(limit=1000)
    assert engine.count() == len(stored) == 220
    for name in ("alpha", "bravo"):
        for i in range(100):
            assert any(m.content.startswith(f"{name} note {i}: ") for m in stored)


def test_two_processes_create_a_fresh_store_at_once(store_backend: Backend) -> None:
    start_writers(store_backend, ("charlie", "delta"), 10)
    engine = store_backend.engine()
    assert engine.count() == 2 * (9 + 2)


INJECTOR = textwrap.dedent(
    """
    import json, sys
    from memlane import MemoryEngine

    with MemoryEngine.open() as engine:
        inj = engine.inject(sys.argv[1], sys.argv[2], owner="alice")
        print(json.dumps({"turn": inj.turn, "ids": [i.memory.id for i in inj.items]}))
    """
)


def inject_in_another_process(backend: Backend, session: str, text: str) -> dict[str, Any]:
    """One injection for ``alice`` by a fresh process; its turn and the injected ids."""
    proc = subprocess.run(
        [sys.executable, "-c", INJECTOR, session, text],
        env=backend.child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def test_a_second_process_sees_what_the_first_injected(store_backend: Backend) -> None:
    engine = store_backend.engine()
    mid = engine.add("Alice is allergic to peanuts and carries an epipen", owner="alice").memory.id
    question = "Can Alice eat the peanuts satay at dinner?"
    assert inject_in_another_process(store_backend, "chat-1", question) == {"turn": 1, "ids": [mid]}

    # This process (the engine was open all along) sees the other's session state.
    assert dict(engine.session("chat-1", owner="alice").injected) == {mid: 1}
    inj = engine.inject("chat-1", question, owner="alice")
    assert inj.turn == 2
    assert inj.items == () and inj.block is None
    assert inj.skipped.get("already_injected") == 1
    # Another session of the same owner is not affected.
    assert [i.memory.id for i in engine.inject("chat-2", question, owner="alice").items] == [mid]

    # A reset in this process lets the other process inject it again.
    engine.reset_session("chat-1", "compact", owner="alice")
    assert inject_in_another_process(store_backend, "chat-1", question)["ids"] == [mid]


def test_threads_share_one_engine(engine: MemoryEngine) -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(20):
                engine.add(f"thread {n} wrote memory {i} about topic {n * 100 + i}")
                engine.search(f"topic {n * 100 + i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert engine.count() == 80


RACER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from memlane import MemoryEngine

    name, session, n, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    with MemoryEngine.open() as engine:
        engine.search("warm up", owner="alice")
        (go.parent / f"ready-{name}").touch()
        while not go.exists():  # start together
            time.sleep(0.001)
        turns = []
        for i in range(n):
            inj = engine.inject(session, "what is planned for the garden project?", owner="alice")
            turns.append([inj.turn, [item.memory.id for item in inj.items]])
    print(json.dumps(turns))
    """
)


def test_two_processes_injecting_into_one_session_never_repeat(store_backend: Backend) -> None:
    """Two processes inject turns of the same session at the same moment: the window rule holds
    across them (a memory is never injected twice within context_window_depth turns)."""
    engine = store_backend.engine()
    for i in range(30):
        engine.add(
            f"garden project plan {i}: plant row {i} with crop number {i * 7}", owner="alice"
        )
    depth = engine.settings.injection.context_window_depth
    runs = {name: ["shared", "6"] for name in ("a", "b")}
    reports = run_together(store_backend, RACER, runs, store_backend.home / "go-inject")
    turns = [(t, ids) for report in reports for t, ids in report]
    assert sorted(t for t, _ in turns) == list(range(1, 13))  # every turn numbered once
    seen: dict[str, int] = {}
    for turn, ids in sorted(turns):
        for mid in ids:
            assert mid not in seen or turn - seen[mid] >= depth, (mid, seen.get(mid), turn)
            seen[mid] = turn
    assert seen  # something was injected
