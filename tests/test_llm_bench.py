"""``memlane llm bench`` on small labelled files and a scripted model server (tests/llm_server.py):
the pairs the write path sends to the model are the ones decided, the model's answers drive the
figures, failed answers are counted as what they are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llm_server import Reply, Script, serve
from memlane.cli import app

pytest.importorskip("openai")

PAWS = [
    ("Alice prefers dark mode in her editor", "Alice prefers a dark theme in her editor", 1),
    ("Bob lives in Paris with his sister", "Bob lives in Paris with his brother", 0),
    ("The river flows into the northern lake", "The river runs into the lake in the north", 1),
]
STSB = [
    ("A man is playing a guitar on stage.", "A man plays the guitar on a stage.", 4.6),
    ("A woman is slicing an onion.", "A woman is cutting a tomato.", 1.2),
    ("Two dogs run across the field.", "Two dogs are running through a field.", 4.8),
]
REJECT = json.dumps({"action": "reject", "merged_text": "", "reasoning": "the same"})


def data_folder(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    (data / "paws").mkdir(parents=True)
    (data / "stsb").mkdir()
    paws = ["id\tsentence1\tsentence2\tlabel"]
    paws += [f"{n}\t{a}\t{b}\t{label}" for n, (a, b, label) in enumerate(PAWS)]
    (data / "paws" / "paws_dev.tsv").write_text("\n".join(paws) + "\n", encoding="utf-8")
    stsb = ["genre\tfile\tyear\tsid\tscore\tsentence1\tsentence2"]
    stsb += [f"g\tf\t2012\t{n:04d}\t{s}\t{a}\t{b}" for n, (a, b, s) in enumerate(STSB)]
    (data / "stsb" / "stsb_dev.tsv").write_text("\n".join(stsb) + "\n", encoding="utf-8")
    return data


def bench(tmp_path: Path, url: str) -> dict[str, object]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "memlane.toml").write_text(
        '[embedding]\nprovider = "hash"\n'
        # a gray zone as wide as the hash embedder's cosines need: every pair goes to the model
        "[dedup]\ngray_low = 0.0\nreplace = 0.9999\nauto_reject = 0.99999\n"
        f'[llm]\nprovider = "openai"\nmodel = "m"\nbase_url = "{url}"\nmax_retries = 0\n',
        encoding="utf-8",
    )
    args = ["llm", "bench", "--data", str(data_folder(tmp_path)), "--pairs", "6", "--no-learn"]
    result = CliRunner().invoke(app, [*args, "--home", str(home), "--json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output[result.output.index("{") :])["pairs"]
    assert isinstance(figures, dict)
    return figures


def test_the_models_answers_are_the_decisions_measured(tmp_path: Path) -> None:
    script = Script("openai", default=Reply(REJECT))
    with serve(script) as url:
        p = bench(tmp_path, url)
    assert p["pairs"] == 6 and p["from"] == {"paws/paws_dev.tsv": 3, "stsb/stsb_dev.tsv": 3}
    assert p["duplicates"] == 4
    assert p["calls"] == len(script.requests) == 6 and p["answered_share"] == 1.0
    assert p["decisions_with_model"] == {"llm_reject": 6}
    # the model called every pair a duplicate: all 4 found, 2 wrongly
    assert p["with_model"]["recall"] == 1.0 and p["with_model"]["false_merges"] == 2
    # without a model the gray zone keeps both texts: nothing marked
    assert p["decisions_without_model"] == {"gray_keep": 6}
    assert p["without_model"]["merged"] == 0 and p["without_model"]["recall"] == 0.0
    assert p["latency_p50_s"] is not None and p["tokens_in"] > 0


def test_failed_answers_are_counted_and_fall_back(tmp_path: Path) -> None:
    script = Script("openai", default=Reply("I am not sure, they look alike."))
    with serve(script) as url:
        p = bench(tmp_path, url)
    assert p["answered_and_parsed"] == 0 and p["answered_share"] == 0.0
    assert p["errors"] == {"malformed answer": 6}
    assert p["decisions_with_model"] == {"fallback_keep": 6}
