"""`make demo`: memlane on real text, offline, with the default model (all-MiniLM-L6-v2).

1. The write path: ``examples/memories.jsonl`` is imported into a temporary home and each
   offered memory's decision is printed (exact repeats, rewordings, swapped roles, changed
   numbers ... and what the file expected).
2. The main job: ``memlane replay`` on the first conversation of
   ``../shared/data/locomo/locomo_dev.json`` when that file exists (relative to the repository
   root), else on the small LoCoMo-format sample ``examples/locomo_sample.json``: observations
   stored session by session, an injection before every turn, then the questions scored by
   evidence recall against the vector-only and full-text-only baselines.

Run from the repository root: ``.venv/bin/python scripts/demo.py``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from memlane.cli.replay import print_summary, run_replay  # noqa: E402
from memlane.engine import MemoryEngine, MemoryInput  # noqa: E402
from memlane.errors import MemlaneError  # noqa: E402
from memlane.eval.replay import load_locomo  # noqa: E402

DEV = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
SAMPLE = ROOT / "examples" / "locomo_sample.json"
MEMORIES = ROOT / "examples" / "memories.jsonl"

out = Console()
err = Console(stderr=True)


def write_path_demo() -> None:
    """Import the example memories into a temporary home; one table row per offered memory."""
    lines = [ln for ln in MEMORIES.read_text(encoding="utf-8").splitlines() if ln.strip()]
    items = [MemoryInput.from_dict(json.loads(ln)) for ln in lines]
    with (
        tempfile.TemporaryDirectory(prefix="memlane-demo-") as home,
        MemoryEngine.open(home) as engine,
    ):
        with err.status("embedding and deduplicating the example memories ..."):
            results = engine.add_many(items)
        stored = engine.count()
    table = Table(title=f"Write path: {MEMORIES.relative_to(ROOT)} (the duplicate-like cases)")
    for name in ("owner", "offered text", "decision", "cosine", "expected"):
        table.add_column(name, justify="right" if name == "cosine" else "left")
    agree = plain = 0
    for item, result in zip(items, results, strict=True):
        expected = str(item.metadata.get("expect", ""))
        decision = result.decision.value
        ok = expected == decision or (expected == "distinct" and decision == "added")
        agree += ok
        if ok and decision == "added":
            plain += 1  # a distinct memory stored as new: not shown
            continue
        sim = "" if result.similarity is None else f"{result.similarity:.3f}"
        text = " ".join(item.content.split())
        table.add_row(
            item.owner,
            text if len(text) <= 48 else text[:45] + "...",
            decision if ok else f"[bold red]{decision}[/]",
            sim,
            expected,
        )
    out.print(table)
    out.print(
        f"{len(items)} offered ({plain} distinct ones added, not shown), {stored} stored; "
        f"{agree}/{len(items)} decisions as expected\n",
        highlight=False,
    )


def replay_demo() -> None:
    """The replay on one conversation, with a progress bar and the summary tables."""
    path = DEV if DEV.is_file() else SAMPLE
    conversations = load_locomo(path)[:1]
    shown = path.relative_to(ROOT.parent) if path == DEV else path.relative_to(ROOT)
    out.print(
        f"[bold]Replaying[/] {conversations[0].sample_id} from {shown}: "
        f"{len(conversations[0].sessions)} sessions, {conversations[0].turns} turns, "
        f"{len(conversations[0].questions)} questions",
        highlight=False,
    )
    report = run_replay(conversations, source=str(shown))
    print_summary(report)


def main() -> int:
    try:
        write_path_demo()
        replay_demo()
    except MemlaneError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
