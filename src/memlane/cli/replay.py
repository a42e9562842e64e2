"""``memlane replay FILE``: replay a LoCoMo-format file and report memory, injection and retrieval.

See :mod:`memlane.eval.replay` for what is measured and ``docs/replay.md`` for the report's keys.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from memlane.cli.app import JsonOption, app, handle_errors, out, print_json, progress_bar
from memlane.errors import InvalidArgument


def run_replay(
    chosen: list[Any],
    *,
    home: Path | None = None,
    source: str,
    learn: bool = False,
    recipes: tuple[Any, ...] = (),
    score_only: bool = False,
) -> dict[str, Any]:
    """Replay ``chosen`` conversations on a fresh engine with a progress bar on stderr; returns
    the report (shared by ``memlane replay`` and ``make demo``). ``score_only``: score the
    questions on the store ``home`` holds (:mod:`memlane.eval.replay.stored`)."""
    from memlane.eval.replay import open_replay_engine, replay

    if score_only and home is None:
        raise InvalidArgument("--score-only scores a kept store: give its folder with --home")
    owners = [] if score_only else [c.sample_id for c in chosen]
    with (
        open_replay_engine(home, owners=owners) as engine,
        progress_bar(transient=True) as bar,
    ):
        task = bar.add_task("loading the model", total=None)

        def progress(done: int, total: int, description: str) -> None:
            bar.update(task, completed=done, total=total, description=description)

        if score_only:
            from memlane.eval.replay.stored import score_stored

            return score_stored(engine, chosen, progress=progress, source=source, recipes=recipes)
        return replay(
            engine, chosen, progress=progress, source=source, learn=learn, recipes=recipes
        )


@app.command("replay")
def replay_command(
    file: Annotated[
        Path,
        typer.Argument(
            help="A LoCoMo-format JSON file (a list of conversations), or BEAM chats: a chat "
            "folder (chat.json, probing_questions/) or a folder of them (BEAM's chats/100K).",
            show_default=False,
        ),
    ],
    conversations: Annotated[
        str | None,
        typer.Option(
            "--conversations",
            "-c",
            help="Which conversations: indexes or sample ids (a BEAM chat's folder name), "
            "comma-separated (e.g. 0,2). Default: all.",
        ),
    ] = None,
    report_out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Also write the JSON report to this file."),
    ] = None,
    home: Annotated[
        Path | None,
        typer.Option(
            "--home",
            help=(
                "Keep the replay's store in this memlane home (its memlane.toml is used; it must "
                "hold no memories of the replayed conversations). Default: a temporary store, "
                "deleted afterwards, with the settings of $MEMLANE_HOME or ~/.memlane."
            ),
        ),
    ] = None,
    learn: Annotated[
        bool,
        typer.Option(
            "--learn",
            help="Learn memories from the raw dialogue with the configured LLM ([llm]) instead "
            "of storing the dataset's prepared observations (one call per session).",
        ),
    ] = False,
    recipe: Annotated[
        list[str] | None,
        typer.Option(
            "--recipe",
            help="Also score the questions with this retrieval recipe, side by side with the "
            "modes (repeatable; names: memlane.retrieval.RECIPES and LEVERS).",
        ),
    ] = None,
    score_only: Annotated[
        bool,
        typer.Option(
            "--score-only",
            help="Do not replay: score the questions (retrieval, first-turn injection) on the "
            "store a replay kept in --home (after a change to search or injection).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Replay LoCoMo conversations or BEAM chats: store each session's observations (or, with
    --learn, what the LLM learns from its dialogue; of a BEAM chat, its messages), inject before
    every (user) turn, then score the questions by evidence recall (hybrid vs vector-only vs
    full-text-only), per category.

    Errors: a file that does not exist or is neither LoCoMo nor BEAM JSON (exit code 3)."""
    from memlane.eval.replay import load_conversations, select_conversations

    with handle_errors():
        if report_out is not None and report_out.is_dir():
            raise InvalidArgument(f"--out {report_out} is a folder: give a file name")
        recipes = tuple(named_recipe(name) for name in recipe or [])
        chosen = select_conversations(load_conversations(file), conversations)
        report = run_replay(
            chosen,
            home=home,
            source=str(file),
            learn=learn,
            recipes=recipes,
            score_only=score_only,
        )
        if report_out is not None:
            report_out.parent.mkdir(parents=True, exist_ok=True)
            report_out.write_text(
                json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
            )
    if as_json:
        print_json(report)
        return
    print_summary(report)
    if report_out is not None:
        out.print(f"report written to {report_out}", highlight=False)


def print_summary(report: dict[str, Any]) -> None:
    """Readable tables of a replay report on stdout."""
    mem = report["memories"]
    inj = report["injection"]
    ret = report["retrieval"]
    base = ret["baselines"]
    convs = report["conversations"]
    out.print(
        f"[bold]Replay[/] of {len(convs)} conversation(s) from {report.get('file')} "
        f"in {report['seconds']:.1f} s",
        highlight=False,
    )

    table = Table(title="Retrieval: evidence recall over the questions with evidence")
    table.add_column("questions")
    modes = {"hybrid": ret, **base}  # the modes, then any --recipe
    for mode in modes:
        table.add_column(mode, justify="right")
    for key, label in (
        ("recall_at_5", "recall@5"),
        ("recall_at_10", "recall@10"),
        ("hit_at_10", "hit@10"),
    ):
        table.add_row(f"all ({ret['questions']}) {label}", *(f"{modes[m][key]:.3f}" for m in modes))
    for cat, row in ret["by_category"].items():
        table.add_row(
            f"{_label(cat, row['name'])} ({row['questions']}) recall@10",
            *(
                f"{modes[m]['by_category'].get(cat, {}).get('recall_at_10', 0.0):.3f}"
                for m in modes
            ),
        )
    table.add_row(
        "search latency p50 / p95 ms",
        *(
            f"{modes[m]['latency_ms']['p50']:.1f} / {modes[m]['latency_ms']['p95']:.1f}"
            for m in modes
        ),
    )
    out.print(table)

    first = report.get("injection_first_turn") or {}
    if first:
        table = Table(title="Injection, each question as the first turn of a fresh session")
        table.add_column("block")
        for mode in first:
            table.add_column(mode, justify="right")
        for key, label, fmt in (
            ("items_mean", "items (mean)", "{:.1f}"),
            ("items_median", "items (median)", "{}"),
            ("chars_mean", "characters (mean)", "{:,.0f}"),
            ("empty_blocks", "questions without a block", "{}"),
            ("precision", "precision (items citing evidence / items)", "{:.3f}"),
            ("recall", "recall (evidence covered)", "{:.3f}"),
        ):
            table.add_row(label, *(fmt.format(first[m][key]) for m in first))
        out.print(table)

    table = Table(title="Injection and memories")
    table.add_column("metric")
    table.add_column("value", justify="right")
    lat = inj["latency_ms"]
    rows = [
        (
            "turns with a block",  # of all turns: the count beside it is not a second group
            f"{inj['turns'] - inj['skipped_turns']} of {inj['turns']} "
            f"({inj['skipped_turns']} without one)",
        ),
        ("items injected", str(inj["items"])),
        (
            f"tokens ({inj['tokenizer'].split(' ')[0]}) vs naive top-k every turn",
            f"{inj['tokens']:,} / {inj['tokens_naive']:,} ({inj['tokens_ratio']:.0%})",
        ),
        ("latency p50 / p95 / max ms", f"{lat['p50']:.1f} / {lat['p95']:.1f} / {lat['max']:.1f}"),
        (
            f"repeated within {inj['context_window_depth']} turns (must be 0)",
            str(inj["repeated_within_window"]),
        ),
        (
            f"max blocks in history (limit {inj['max_injected_blocks_in_history']})",
            str(inj["max_blocks_in_history"]),
        ),
        ("memories offered / stored", f"{mem['offered']} / {mem['stored']}"),
        ("write decisions", ", ".join(f"{k} {v}" for k, v in mem["decisions"].items())),
    ]
    for label, value in rows:
        table.add_row(label, value)
    out.print(table)

    if len(report["per_conversation"]) > 1:
        table = Table(title="Per conversation")
        for name in ("conversation", "turns", "memories", "R@10 hybrid", "vector", "fts", "tokens"):
            table.add_column(name, justify="left" if name == "conversation" else "right")
        for conv in report["per_conversation"]:
            r = conv["retrieval"]
            i = conv["injection"]
            table.add_row(
                conv["sample_id"],
                str(i["turns"]),
                str(conv["memories"]["stored"]),
                f"{r['recall_at_10']:.3f}",
                f"{r['baselines']['vector']['recall_at_10']:.3f}",
                f"{r['baselines']['fts']['recall_at_10']:.3f}",
                f"{i['tokens_ratio']:.0%}",
            )
        out.print(table)


def _label(category: str, name: str) -> str:
    """A category's row label: ``"1 multi-hop"`` (LoCoMo), ``"knowledge_update"`` (BEAM)."""
    return name if category == name else f"{category} {name}"


def named_recipe(name: str) -> Any:
    """The retrieval recipe called ``name`` (:data:`memlane.retrieval.RECIPES` or ``LEVERS``).
    Raises :class:`InvalidArgument` naming the known ones."""
    from memlane.retrieval import LEVERS, RECIPES

    known = {**RECIPES, **LEVERS}
    if name not in known:
        raise InvalidArgument(f"unknown recipe {name!r}; known: {', '.join(known)}")
    return known[name]
