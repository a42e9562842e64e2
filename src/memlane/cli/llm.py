"""``memlane llm check`` (one request of each kind to the configured server, and what works) and
``memlane llm bench`` (the model on labelled gray-zone pairs and one LoCoMo session). The work
is :mod:`memlane.llm.check` and :mod:`memlane.eval.llm_bench`, imported inside the commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from memlane.cli.app import HomeOption, JsonOption, app, fail, handle_errors, out, print_json
from memlane.cli.app import progress_bar as _progress_bar
from memlane.cli.render import command, table
from memlane.config import Settings
from memlane.errors import ConfigError, LLMError

llm_app = typer.Typer(
    name="llm",
    help="The configured LLM ([llm]): check what the server accepts, measure the model.",
    no_args_is_help=True,
)
app.add_typer(llm_app, name="llm")


@command(llm_app, "check")
def check(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Send one verify, one merge and one learn request to the configured server ([llm] in
    memlane.toml) and print what works: the structured-output form it accepted (json_schema,
    json_object or text; tool_use, prefill or text for anthropic), each call's answer or its
    error, tokens and seconds. Exit code 11 when a call failed, 5 without an LLM configured.

    Example:  memlane llm check --json
    """
    from memlane.llm.check import check as run_check
    from memlane.llm.providers import ChatLLM

    with handle_errors():
        settings = Settings.load(home)
        from memlane.llm import make_llm

        llm = make_llm(settings.llm)
        if not isinstance(llm, ChatLLM):
            raise ConfigError(
                "llm.provider", "none", "set [llm] provider and model (docs/dedup.md)"
            )
        result = run_check(llm)
    if as_json:
        print_json(result)
    else:
        _print_check(result)
    if not result["ok"]:
        raise typer.Exit(LLMError.exit_code)


def _print_check(result: dict[str, Any]) -> None:
    out.print(
        f"{result['provider']} model {result['model']!r} at {result['endpoint']}: "
        f"structured output as {result['form']}",
        highlight=False,
    )
    for line in result["form_changes"]:
        out.print(f"  {line}", highlight=False)
    t = table("calls")
    for column in ("kind", "ok", "form", "tokens in/out", "seconds", "answer or error"):
        t.add_column(column)
    for c in result["calls"]:
        t.add_row(
            c["kind"],
            "yes" if c["ok"] else "NO",
            c["form"],
            f"{c['tokens_in']}/{c['tokens_out']}",
            f"{c['latency_s']:.2f}",
            c["answer"] if c["ok"] else c["error"],
        )
    out.print(t)


@command(llm_app, "bench")
def bench(
    data: Annotated[
        Path,
        typer.Option("--data", help="The evaluation data folder (paws/, stsb/, locomo/)."),
    ] = Path("../shared/data"),
    pairs: Annotated[
        int, typer.Option("--pairs", min=2, help="Gray-zone pairs to decide (half per file).")
    ] = 200,
    learn: Annotated[
        bool, typer.Option("--learn/--no-learn", help="Also learn from one LoCoMo session.")
    ] = True,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Measure the configured model ([llm]) where memlane uses it: labelled PAWS and STS-B
    pairs in the gray zone that the write path sends to the model (the share of calls answered
    and parsed, precision and recall with the model and without it, latency p50/p95 per call),
    and learn on LoCoMo conv-26 session 1 (memories, how many one of LoCoMo's observations of
    the session supports, tokens). Slow with a local model: one call per pair.

    Example:  memlane llm bench --data ../shared/data --pairs 200 --json
    """
    from memlane.eval import llm_bench

    with handle_errors():
        settings = Settings.load(home)
        if not data.is_dir():
            raise fail(f"no data folder at {data}: pass --data (../shared/data)")
        with _progress_bar(remaining=True) as progress:
            task = progress.add_task("gray-zone pairs", total=pairs)
            figures = llm_bench.bench_pairs(
                data, settings, pairs, lambda i, n: progress.update(task, completed=i, total=n)
            )
        result: dict[str, Any] = {"pairs": figures}
        if learn:
            result["learn"] = llm_bench.bench_learn(data, settings)
    if as_json:
        print_json(result)
        return
    _print_bench(result)


def _print_bench(result: dict[str, Any]) -> None:
    p = result["pairs"]
    t = table(f"{p['pairs']} gray-zone pairs ({p['duplicates']} duplicates), form {p['form']}")
    t.add_column("figure")
    t.add_column("value")
    share = "n/a" if p["answered_share"] is None else f"{p['answered_share']:.1%}"
    t.add_row("calls answered and parsed", f"{p['answered_and_parsed']} of {p['calls']} ({share})")
    t.add_row("failed calls", str(p["errors"] or "none"))
    for name in ("with_model", "without_model"):
        s = p[name]
        t.add_row(
            name.replace("_", " "),
            f"precision {s['precision']:.3f}, recall {s['recall']:.3f}, F1 {s['f1']:.3f} "
            f"({s['merged']} marked duplicate, {s['false_merges']} wrongly)",
        )
    t.add_row("decisions with the model", str(p["decisions_with_model"]))
    t.add_row("latency per call p50 / p95", f"{p['latency_p50_s']} s / {p['latency_p95_s']} s")
    t.add_row("tokens in / out", f"{p['tokens_in']} / {p['tokens_out']}")
    out.print(t)
    learn = result.get("learn")
    if learn:
        out.print(
            f"learn {learn['conversation']} session {learn['session']} ({learn['turns']} turns): "
            f"{learn['learned']} memories, {learn['supported']} supported by an observation "
            f"(cosine >= {learn['supported_cosine']}), tokens {learn['tokens_in']}/"
            f"{learn['tokens_out']}, {learn['seconds']} s"
            + (f"; error: {learn['error']}" if learn["error"] else ""),
            highlight=False,
        )
        for m in learn["memories"]:
            out.print(
                f"  {m['cosine']:.2f} {m['content']}  <- {m['best_observation']}", highlight=False
            )
