"""``memlane import`` of an export file is all or nothing (#33 item 6): a duplicated id, the id
of another owner's memory, ids that are not memlane ids, JSON nested too deep, counters out of
range, bytes that are not UTF-8 and times after this machine's clock are each refused with the
line number and the field, the store stays as it was, and the fixed file imports."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import Backend
from memlane.cli import app
from memlane.transfer import export_lines

Lines = list[bytes]


def exported(backend: Backend) -> Lines:
    """An export of three of alice's memories (one with history) from ``backend``'s store."""
    engine = backend.engine()
    first = engine.add("The cellar key is under the blue pot", owner="alice").memory
    engine.add("Alice prefers green tea in the morning", owner="alice")
    engine.add("The team meets on Thursdays at ten", owner="alice")
    assert first is not None
    engine.update(first.id, "The cellar key is under the red pot", owner="alice")
    lines = [line.encode("utf-8") for line in export_lines(engine, "alice")]
    backend.close_all()
    assert len(lines) == 4
    return lines


def edit(lines: Lines, n: int, **fields: Any) -> Lines:
    """``lines`` with line ``n`` (1-based) changed: ``fields`` set in its JSON object."""
    out = list(lines)
    row = json.loads(out[n - 1])
    row.update(fields)
    out[n - 1] = json.dumps(row).encode("utf-8")
    return out


def replace(lines: Lines, n: int, raw: bytes) -> Lines:
    out = list(lines)
    out[n - 1] = raw
    return out


#: name: (how the file is spoilt, the line named, what the error line says)
CASES: dict[str, tuple[Callable[[Lines], Lines], int, str]] = {
    "duplicate id": (
        lambda ls: edit(ls, 4, id=json.loads(ls[1])["id"]),
        4,
        "is also the id on line 2",
    ),
    "path as id": (lambda ls: edit(ls, 3, id="../../etc/passwd"), 3, "id: '../../etc/passwd'"),
    "NUL in id": (lambda ls: edit(ls, 3, id="0190f3c2-0000-7000-8000-00000000\x0000"), 3, "id: "),
    "huge id": (lambda ls: edit(ls, 2, id="x" * 100_000), 2, "(100,002 characters)"),
    "deep JSON": (lambda ls: replace(ls, 3, b"[" * 100_000), 3, "nested too deep"),
    "huge number": (lambda ls: edit(ls, 2, confirmations=-(10**20)), 2, "confirmations: "),
    "invalid UTF-8": (
        lambda ls: replace(ls, 4, ls[3].replace(b"Thursdays", b"Thur\xffdays")),
        4,
        "not UTF-8",
    ),
    "year 2999": (
        lambda ls: edit(ls, 3, created_at="2999-01-01T00:00:00.000000+00:00"),
        3,
        "created_at: 2999-01-01",
    ),
}


def import_file(backend: Backend, path: Path, *args: str) -> Any:
    return CliRunner().invoke(app, ["import", str(path), *args], env=backend.child_env())


def contents(backend: Backend) -> list[tuple[str, str, str]]:
    engine = backend.engine()
    rows = sorted(
        (m.owner, m.id, m.content)
        for owner in ("alice", "bob")
        for m in engine.list(owner=owner, limit=100)
    )
    backend.close_all()
    return rows


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_line_is_named_and_nothing_is_restored(
    store_backend: Backend, tmp_path: Path, case: str
) -> None:
    good = exported(store_backend)
    spoil, line, says = CASES[case]
    target = store_backend.sibling(tmp_path / "target")
    keep = target.engine()
    keep.add("Bob's bike is in the shed", owner="bob")  # the store has something to keep
    target.close_all()
    before = contents(target)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\n".join(spoil(good)) + b"\n")
    done = import_file(target, bad, "--json")
    assert done.exit_code == 1, done.output  # not 70: no internal error
    report = json.loads(done.stdout)
    assert report["restored"] == 0
    assert [e["line"] for e in report["errors"]] == [line], report
    error = report["errors"][0]["error"]
    assert says in error and len(error) < 200, error
    assert contents(target) == before  # nothing partial was committed
    plain = import_file(target, bad)  # the same refusal for a person
    assert plain.exit_code == 1 and f"line {line}: " in plain.stderr
    assert "nothing restored" in plain.stderr
    fixed = tmp_path / "fixed.jsonl"
    fixed.write_bytes(b"\n".join(good) + b"\n")
    again = import_file(target, fixed, "--json")  # the file fixed: imported
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["restored"] == 3
    assert len(contents(target)) == len(before) + 3


def test_the_id_of_another_owners_memory_is_refused(store_backend: Backend, tmp_path: Path) -> None:
    good = exported(store_backend)
    target = store_backend.sibling(tmp_path / "target")
    bobs = target.engine().add("Bob's bike is in the shed", owner="bob").memory
    assert bobs is not None
    target.close_all()
    before = contents(target)
    path = tmp_path / "theirs.jsonl"
    path.write_bytes(b"\n".join(edit(good, 3, id=bobs.id)) + b"\n")
    done = import_file(target, path, "--json")
    assert done.exit_code == 1, done.output
    errors = json.loads(done.stdout)["errors"]
    assert errors == [
        {"line": 3, "error": f"id: {bobs.id} is a memory of another owner in this store"}
    ]
    assert contents(target) == before
    # the same file again into a store holding alice's own copy: skipped, not an error
    same = tmp_path / "same.jsonl"
    same.write_bytes(b"\n".join(good) + b"\n")
    assert import_file(target, same).exit_code == 0
    twice = import_file(target, same, "--json")
    assert (twice.exit_code, json.loads(twice.stdout)["skipped"]) == (0, 3)
