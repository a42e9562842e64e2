"""CLI commands for write-time deduplication: ``memlane dedup pairs`` (evaluation on labelled
sentence pairs) and ``memlane dedup calibrate`` (the threshold sweep); the ``dedup-log`` command
lives with the other memory commands. The evaluation itself is :mod:`memlane.eval.pairs` and
:mod:`memlane.eval.calibrate`, imported inside the commands only."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from memlane.cli.app import (
    HomeOption,
    JsonOption,
    app,
    err,
    fail,
    handle_errors,
    print_json,
    progress_bar,
)
from memlane.cli.render import command, decision_text, table
from memlane.config import Settings
from memlane.embeddings import embedder_from_settings
from memlane.errors import InvalidArgument
from memlane.types import Decision

if TYPE_CHECKING:
    from memlane.eval.pairs import PairRow

#: Mirrors :data:`memlane.eval.pairs.ROW_NUMBER`: the option's help is built at import time,
#: when memlane.eval must not be imported (tests/test_calibrate.py checks the two agree).
ROW_NUMBER = "#"

dedup_app = typer.Typer(
    name="dedup",
    help="Write-time deduplication: measure the write path on labelled sentence pairs.",
    no_args_is_help=True,
)
app.add_typer(dedup_app, name="dedup")


@command(dedup_app, "pairs")
def pairs(
    file: Annotated[
        Path,
        typer.Argument(
            help="Tab-separated file with a header: id, sentence1, sentence2 (label or score "
            "optional).",
            show_default=False,
        ),
    ],
    out_file: Annotated[
        Path,
        typer.Option("--out", "-o", help="Output JSONL: one line per row.", show_default=False),
    ],
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=1, help="Only the first N rows.")
    ] = None,
    id_column: Annotated[
        str,
        typer.Option(
            "--id-column",
            help=f"Column naming each row ('{ROW_NUMBER}' numbers the rows 1, 2, ...).",
        ),
    ] = "id",
    llm: Annotated[
        bool,
        typer.Option(
            "--llm",
            help="Let the configured LLM ([llm]) verify the gray-zone pairs (without it, no "
            "model is asked); its calls, failures and tokens join the summary.",
        ),
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """The write path's decision for sentence2 offered to a store holding only sentence1.

    Each row gets its own scope in a throwaway store (a temporary folder; your store is never
    touched) with the settings of --home: thresholds, embedding model. One JSON line per row:
    {"id", "similarity", "decision", "duplicate"}; duplicate is true when sentence2 would not be
    stored as a memory of its own (hash_exact, auto_reject, replaced, llm_merge, llm_reject,
    fallback_reject); similarity is the cosine of the two sentences (1.0 for hash_exact). A row
    that cannot be offered (an empty sentence, missing fields) gets decision "invalid".

    A summary goes to stderr (and to stdout as JSON with --json). When the file has a label
    column (1 = same meaning) or a score column (duplicate when score >= 4.0, as in STS-B), the
    summary has the precision and recall of "duplicate", and how many label-0 pairs made of the
    same words in another order were marked duplicate.

    Example:  memlane dedup pairs examples/pairs.tsv --out decisions.jsonl [--llm]
    """
    from memlane.eval import pairs as evaluation

    started = time.perf_counter()
    with handle_errors():
        rows, label_column = evaluation.read_pairs(file, id_column, limit)
        settings = Settings.load(home)
        with progress_bar() as progress:
            llm_stats = evaluation.evaluate(rows, settings, progress, llm=llm)

    lines = evaluation.decision_lines(rows)
    try:
        out_file.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot write {out_file}: {exc.strerror or exc}") from None

    decisions = Counter("invalid" if r.result is None else r.result.decision.value for r in rows)
    summary: dict[str, Any] = {
        "file": str(file),
        "out": str(out_file),
        "rows": len(rows),
        "invalid": decisions.get("invalid", 0),
        "duplicates": sum(1 for r in rows if r.result is not None and r.result.duplicate),
        "decisions": dict(decisions.most_common()),
        "labels": label_column,
        "seconds": round(time.perf_counter() - started, 2),
    }
    if llm:
        summary["llm"] = llm_stats
    if label_column is not None:
        summary["metrics"] = evaluation.metrics(rows)
    _print_summary(summary, [r for r in rows if r.error is not None], evaluation.SCORE_DUPLICATE)
    if as_json:
        print_json(summary)


def _print_summary(summary: dict[str, Any], bad: Sequence[PairRow], score_duplicate: float) -> None:
    """The summary on stderr; ``score_duplicate`` is the score from which a pair is a duplicate."""
    for row in bad[:20]:
        err.print(
            Text.assemble(
                ("warning:", "yellow"), f" row {row.n} (id {row.id}) not offered: {row.error}"
            )
        )
    if len(bad) > 20:
        err.print(Text(f"... and {len(bad) - 20} more invalid rows", style="yellow"))
    err.print(Text(f"{summary['rows']} pairs from {summary['file']}", style="bold"))
    t = table()
    t.add_column("decision")
    t.add_column("rows", justify="right")
    t.add_column("duplicate")
    for decision, count in summary["decisions"].items():
        if decision == "invalid":
            t.add_row(Text("invalid", style="red"), str(count), "-")
        else:
            t.add_row(
                decision_text(decision), str(count), "yes" if Decision(decision).duplicate else "no"
            )
    err.print(t)
    err.print(
        Text(
            f"{summary['duplicates']} of {summary['rows']} rows marked duplicate; "
            f"wrote {summary['out']} in {summary['seconds']} s"
        )
    )
    llm = summary.get("llm")
    if llm:
        err.print(
            Text(
                f"LLM {llm['provider']} {llm['model']}: {llm['calls']} calls, "
                f"{llm['failures']} failed, tokens in/out {llm['tokens_in']}/{llm['tokens_out']}"
            )
        )
    metrics = summary.get("metrics")
    if metrics:

        def fmt(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.3f}"

        reference = "label = 1" if summary["labels"] == "label" else f"score >= {score_duplicate}"
        err.print(
            Text(
                f"against {reference} ({metrics['labelled']} labelled rows, "
                f"{metrics['positives']} duplicates): precision {fmt(metrics['precision'])}, "
                f"recall {fmt(metrics['recall'])}, F1 {fmt(metrics['f1'])} "
                f"(tp {metrics['tp']}, fp {metrics['fp']}, fn {metrics['fn']}, "
                f"tn {metrics['tn']})"
            )
        )
        if metrics["same_words_label0"]:
            err.print(
                Text(
                    f"label-0 pairs with the same words in another order: "
                    f"{metrics['same_words_label0_duplicate']} of "
                    f"{metrics['same_words_label0']} marked duplicate"
                )
            )
    kept = sum(summary["decisions"].get(d, 0) for d in ("gray_keep", "guard_keep"))
    if not llm and kept:  # 0 duplicates, recall 0.000: not broken, say why
        err.print(
            Text(
                f"recall is low by design without an LLM: {kept} similar pairs were kept apart "
                "(gray_keep, guard_keep), since only near-identical wordings (cosine >= replace, "
                "words agreeing) merge without one; with [llm] configured, --llm asks the model "
                "about them (docs/dedup.md, 'With an LLM')",
                style="dim",
            )
        )


@command(dedup_app, "calibrate")
def calibrate(
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Labelled TSV files (sentence1, sentence2, label or score). Default: "
            "paws/paws_dev.tsv and stsb/stsb_dev.tsv under --data.",
            show_default=False,
        ),
    ] = None,
    data: Annotated[
        Path,
        typer.Option("--data", help="Folder of the default files (../shared/data/README.md)."),
    ] = Path("../shared/data"),
    auto_reject: Annotated[
        float | None,
        typer.Option(
            "--auto-reject",
            min=0.0,
            max=1.0,
            help="auto_reject threshold. Default: the auto_reject of the dedup settings.",
        ),
    ] = None,
    cos_low: Annotated[
        float,
        typer.Option("--cos-low", min=0.0, max=1.0, help="Lowest cosine-only threshold."),
    ] = 0.70,
    profile: Annotated[
        bool,
        typer.Option(
            "--profile",
            help="Also derive the model's profile (thresholds by memlane.eval.calibrate."
            "derive_profile; needs PAWS and STS-B) and print it as memlane.toml lines.",
        ),
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Sweep the replace threshold on labelled pairs with the write path's own decision.

    Each pair is embedded with the model of --home's settings; for every replace threshold from
    0.80 to 0.98, sentence2 gets the decision the write path (no LLM) would take against
    sentence1: the content-hash check, then memlane.dedup.pipeline.decide with the [dedup]
    settings. Prints precision, recall and the swap pairs merged per threshold, next to the
    cosine-only rule. See docs/dedup.md.

    Example:  memlane dedup calibrate --data ../shared/data
    """
    from memlane.eval import calibrate as sweep

    results: dict[str, Any] = {}
    with handle_errors():
        settings = Settings.load(home)
        dedup = settings.dedup
        if auto_reject is not None:
            dedup = dedup.model_copy(update={"auto_reject": auto_reject})
        paths = files or [data / name for name in sweep.DEFAULT_FILES]
        emb = settings.embedding
        embedder = embedder_from_settings(emb)
        for path in paths:
            pairs = sweep.load_pairs(path)
            if not pairs:
                raise InvalidArgument(f"{path} has no labelled pairs (a label or score column)")
            cos = sweep.cosines(embedder, pairs)
            results[path.stem] = sweep.evaluate(pairs, cos, dedup, cos_low)
        if profile:
            active = emb.profile()
            derived = sweep.derive_profile(
                emb.model if emb.provider != "hash" else embedder.name,
                embedder.dimension,
                results,
                query_prefix=active.query_prefix,
                passage_prefix=active.passage_prefix,
            )
    if as_json:
        print_json({**results, **({"profile": derived.as_dict()} if profile else {})})
        return
    for name, res in results.items():
        for line in sweep.report_lines(name, res):
            typer.echo(line)
    if profile:
        for line in sweep.profile_lines(derived):
            typer.echo(line)
