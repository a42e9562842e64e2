"""What importing memlane costs, and the shape of its import graph.

- ``import memlane`` loads no model framework (torch, transformers, sentence-transformers) and no
  evaluation code (``memlane.eval``); ``import memlane.cli`` loads no evaluation code either
  (ARCHITECTURE.md: "eval/ ... never imported at runtime"). Checked in a fresh interpreter, since
  this test process may have imported anything already.
- The modules under ``src/memlane`` import each other without a cycle (imports under
  ``if TYPE_CHECKING:`` do not count: they never run).
- No module is over :data:`MAX_LINES` lines (the project's rule, STYLE.md's counter-example of a
  4,300-line ``cli.py``).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "memlane"
#: Longest module allowed, in lines (the project's "no module over ~500 lines").
MAX_LINES = 500
#: Model frameworks that only the local embedder may load, and only when it embeds.
FRAMEWORKS = ("torch", "transformers", "sentence_transformers")


# ------------------------------------------------------------------------------ import costs
def _loaded_after(statement: str) -> list[str]:
    """Names of the modules in ``sys.modules`` after running ``statement`` in a fresh
    interpreter with this checkout's ``src`` first on the path."""
    code = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    modules: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return modules


def _matching(modules: list[str], *prefixes: str) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


def test_import_memlane_loads_no_framework_and_no_evaluation() -> None:
    modules = _loaded_after("import memlane\nmemlane.MemoryEngine")
    assert "memlane.engine" in modules  # the check sees memlane's own modules
    assert _matching(modules, "memlane.eval") == []
    assert _matching(modules, *FRAMEWORKS) == []


def test_import_memlane_cli_loads_no_evaluation() -> None:
    modules = _loaded_after("import memlane.cli")
    assert "memlane.cli.bench" in modules and "memlane.cli.replay" in modules
    assert _matching(modules, "memlane.eval") == []
    assert _matching(modules, *FRAMEWORKS) == []


def test_the_import_check_can_fail() -> None:
    """The probe does see memlane.eval once something imports it."""
    modules = _loaded_after("import memlane.cli.bench\nfrom memlane.eval import bench")
    assert "memlane.eval.bench.generator" in modules


# ------------------------------------------------------------------------------ import graph
def _module_name(path: Path, root: Path) -> str:
    """``root/a/b.py`` -> ``<root's name>.a.b``; a package's ``__init__.py`` -> the package."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree``, at any depth (functions included: they run when
    called), except the bodies of ``if TYPE_CHECKING:`` (their ``else`` branch counts)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _resolve(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The memlane modules an import statement names (for ``from X import y``: ``X.y`` when it is
    a module, else ``X``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join([*base, *([node.module] if node.module else [])])
    else:
        target = node.module or ""
    return [target, *(f"{target}.{a.name}" for a in node.names)]


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """``module -> memlane modules it imports at run time`` for every module under ``root``.

    An import of ``a.b.c`` also counts as importing ``a`` and ``a.b`` (their ``__init__`` runs
    first); edges to a module's own package are left out (a package importing its submodule and
    the submodule importing a sibling through the package are one unit, not a cycle)."""
    files = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in _runtime_imports(tree):
            for name in _resolve(node, module, is_package):
                parts = name.split(".")
                for i in range(1, len(parts) + 1):
                    prefix = ".".join(parts[:i])
                    if prefix in files and prefix != module and not module.startswith(prefix + "."):
                        edges.add(prefix)
        graph[module] = edges
    return graph


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for start in sorted(graph):
        if start in state:
            continue
        path = [start]
        iters = [iter(sorted(graph[start]))]
        state[start] = 1
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                iters.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            elif nxt not in state and nxt in graph:
                state[nxt] = 1
                path.append(nxt)
                iters.append(iter(sorted(graph[nxt])))
    return None


def test_find_cycle_finds_one_and_only_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_import_graph_sees_relative_and_guarded_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "memlane"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from memlane import a\n"
        "def f():\n    from ..a import x\n"
    )
    graph = import_graph(pkg)
    assert graph["memlane.a"] == {"memlane.sub", "memlane.sub.b"}
    # the function-level import counts, the one under TYPE_CHECKING does not
    assert graph["memlane.sub.b"] == {"memlane.a"}
    assert find_cycle(graph) == ["memlane.a", "memlane.sub.b", "memlane.a"]


def _is_eval(module: str) -> bool:
    return module == "memlane.eval" or module.startswith("memlane.eval.")


def test_eval_modules_are_in_no_cycle() -> None:
    """The part of the cycle check that holds already: only the CLI commands import
    memlane.eval, memlane.eval never imports the CLI, and memlane.eval has no cycle of its own;
    so no cycle goes through memlane.eval."""
    graph = import_graph()
    assert "memlane.eval.bench.runs" in graph
    importers = {m for m, edges in graph.items() if not _is_eval(m) and any(map(_is_eval, edges))}
    assert importers == {
        "memlane.cli.bench",
        "memlane.cli.bench_backends",
        "memlane.cli.bench_embed",
        "memlane.cli.bench_janitor",
        "memlane.cli.bench_proxy",
        "memlane.cli.dedup",
        "memlane.cli.hooks",
        "memlane.cli.llm",
        "memlane.cli.replay",
    }
    evaluation = {m: edges for m, edges in graph.items() if _is_eval(m)}
    assert not [
        (m, e) for m, edges in evaluation.items() for e in edges if e.startswith("memlane.cli")
    ]
    assert find_cycle(evaluation) is None


def test_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


# ------------------------------------------------------------------------------ module size
def _line_counts() -> dict[str, int]:
    return {
        str(p.relative_to(SRC)): len(p.read_text(encoding="utf-8").splitlines())
        for p in sorted(PACKAGE.rglob("*.py"))
    }


def test_eval_modules_are_small() -> None:
    big = {p: n for p, n in _line_counts().items() if "/eval/" in p and n > MAX_LINES}
    assert big == {}


def test_no_module_over_500_lines() -> None:
    big = {p: n for p, n in _line_counts().items() if n > MAX_LINES}
    assert big == {}, "modules over {} lines: {}".format(
        MAX_LINES, ", ".join(f"{p} ({n})" for p, n in sorted(big.items()))
    )
