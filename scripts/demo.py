"""`make demo`: memlane on real text, offline, with the default model (all-MiniLM-L6-v2).

1. The write path: ``examples/memories.jsonl`` is imported into a temporary home and each
   duplicate-like line's decision is printed in words, beside the stored memory it was compared
   with and the cosine (exact repeats, rewordings, swapped roles, changed numbers ...), with a
   summary that adds up; then one injection block for a turn of alice's chat, and why the other
   candidates were left out (and the same message again: nothing repeated).
2. The main job: ``memlane replay`` on the first conversation of
   ``../shared/data/locomo/locomo_dev.json`` when that file exists (relative to the repository
   root), else on the small LoCoMo-format sample ``examples/locomo_sample.json``: observations
   stored session by session, an injection before every turn, then the questions scored by
   evidence recall against the vector-only and full-text-only (BM25) baselines of the same run.

Run from the repository root: ``.venv/bin/python scripts/demo.py`` (``--sample``: the small
sample conversation even when the LoCoMo file exists; tests/test_demo.py runs it so).
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

from collections import Counter  # noqa: E402
from difflib import SequenceMatcher  # noqa: E402

from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402
from rich.table import Table  # noqa: E402
from rich.text import Text  # noqa: E402

from memlane.cli.replay import print_summary, run_replay  # noqa: E402
from memlane.dedup.guard import GuardVerdict, compare  # noqa: E402
from memlane.engine import MemoryEngine, MemoryInput  # noqa: E402
from memlane.errors import MemlaneError  # noqa: E402
from memlane.eval.replay import load_locomo  # noqa: E402
from memlane.explain import DECISION_WORDS, SKIP_WORDS  # noqa: E402
from memlane.types import Decision, WriteResult  # noqa: E402

DEV = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
SAMPLE = ROOT / "examples" / "locomo_sample.json"
MEMORIES = ROOT / "examples" / "memories.jsonl"

out = Console()
err = Console(stderr=True)


def write_path_demo() -> None:
    """Import the example memories into a temporary home; one table row per duplicate-like
    offered memory (its decision in words, the stored memory it was compared with, the cosine);
    then one injection for a turn, with what was left out and why."""
    lines = [ln for ln in MEMORIES.read_text(encoding="utf-8").splitlines() if ln.strip()]
    items = [MemoryInput.from_dict(json.loads(ln)) for ln in lines]
    with (
        tempfile.TemporaryDirectory(prefix="memlane-demo-") as home,
        MemoryEngine.open(home) as engine,
    ):
        with err.status("embedding and deduplicating the example memories ..."):
            results = engine.add_many(items)
        stored = sum(engine.count(owner) for owner in {i.owner for i in items})
        compared = {
            r.matched_id: engine.get(r.matched_id, owner=i.owner, include_inactive=True).content
            for i, r in zip(items, results, strict=True)
            if r.matched_id
        }
        write_table(items, results, compared, stored)
        injection_demo(engine)


def write_table(
    items: list[MemoryInput], results: list[WriteResult], compared: dict[str, str], stored: int
) -> None:
    table = Table(title=f"Write path: {MEMORIES.relative_to(ROOT)} (the duplicate-like lines)")
    for name in ("offered text", "decision: what it means", "compared with (stored)", "cosine"):
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
        stored_text = compared.get(result.matched_id or "", "")
        offered, kept = marked(item.content, stored_text)
        verdict = Text.assemble((decision, "bold"), ": ", meaning(decision, stored_text, item))
        if not ok:
            verdict.append(f" (the file expects {expected})", style="bold red")
        table.add_row(offered, verdict, kept, sim)
    out.print(table)
    out.print("[bold]bold[/]: the words that differ between the two texts", highlight=False)
    kinds = Counter(r.decision.value for r in results)
    own = [d for d in kinds if not Decision(d).duplicate]
    absorbed = [d for d in kinds if Decision(d).duplicate]
    n_own = sum(kinds[d] for d in own)
    out.print(
        f"{len(items)} lines offered = {n_own} stored as memories of their own "
        f"({_counts(kinds, own)}; {plain} plain additions not shown above) "
        f"+ {len(items) - n_own} not stored again ({_counts(kinds, absorbed)}); "
        f"the store holds {stored} memories. {agree}/{len(items)} decisions as the file expects.\n",
        highlight=False,
    )


#: What the near-identical guard saw, by verdict (memlane.dedup.guard.compare): the reason a
#: guard_keep line was stored apart. A rewording is not "a different fact": the guard only
#: cannot prove it the same without an LLM.
GUARD_WORDS = {
    GuardVerdict.NUMBERS_DIFFER: "a number changed, so a different fact",
    GuardVerdict.NEGATION_DIFFERS: "a negation added or removed, so a different fact",
    GuardVerdict.REORDERED: "the same words in another order (who does what changed)",
    GuardVerdict.EXTENDS: "the new text says more",
    GuardVerdict.NARROWS: "the new text says less",
    GuardVerdict.DIFFERENT: "a rewording with other words: the guard cannot prove it the same "
    "fact, so it is kept apart to be safe (an LLM would decide)",
}


def meaning(decision: str, stored: str, item: MemoryInput) -> str:
    """The decision in words; of a guard_keep, what the guard saw between the two texts."""
    if decision != Decision.GUARD_KEEP.value or not stored:
        return DECISION_WORDS.get(decision, decision)
    verdict = compare(stored, item.content).verdict
    return f"stored apart: {GUARD_WORDS.get(verdict, DECISION_WORDS[decision])}"


def marked(new: str, old: str) -> tuple[Text, Text]:
    """Both texts whole (never cut: the words that differ are often at the end), each with the
    words the other does not have in bold."""
    a, b = new.split(), old.split()
    first, second = Text(), Text()
    for tag, i1, i2, j1, j2 in SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        style = "" if tag == "equal" else "bold"
        for text, words in ((first, a[i1:i2]), (second, b[j1:j2])):
            if words:
                text.append(" " if text else "")
                text.append(" ".join(words), style=style)
    return first, second


def _counts(kinds: Counter[str], names: list[str]) -> str:
    return ", ".join(f"{d} {kinds[d]}" for d in sorted(names, key=lambda d: -kinds[d]))


def injection_demo(engine: MemoryEngine) -> None:
    """One turn of a chat with alice: the block memlane puts before the model's turn, and why
    the other candidates were left out; then the same message again (the delay at work)."""
    message = (
        "Can you set up my editor and plan lunch before the weekly sync on sprint-planning day?"
    )
    out.print(f"[bold]Injection[/] before alice's turn: [italic]{escape(message)}[/]")
    for turn in (1, 2):
        inj = engine.inject("demo-chat", message, owner="alice")
        if inj.block:
            out.print(escape(inj.block), highlight=False)
        else:
            out.print("(no block this turn)")
        for reason, n in sorted(inj.skipped.items()):
            out.print(f"  left out {n}: {SKIP_WORDS.get(reason, reason)} ({reason})")
        if turn == 1:
            out.print("[bold]The same message, next turn[/] (nothing repeated):")
    out.print()


def replay_demo() -> None:
    """The replay on one conversation, with a progress bar and the summary tables, then the
    headline: hybrid recall beside the two single-leg baselines of the same run."""
    path = SAMPLE if "--sample" in sys.argv or not DEV.is_file() else DEV
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
    ret = report["retrieval"]
    base = ret["baselines"]
    out.print(
        f"recall@10 over {ret['questions']} questions: hybrid {ret['recall_at_10']:.3f}, "
        f"vector alone {base['vector']['recall_at_10']:.3f}, "
        f"BM25 alone {base['fts']['recall_at_10']:.3f} (same run, same memories)",
        highlight=False,
    )


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
