"""What a new user meets in the first hour (issue 38), each as they would see it: the grouped
command list, option suggestions, validation before a store is created, control characters,
``<private>`` spans, a forgotten memory, the inject summary, ``review`` with nothing for the
default owner, and every CLI table read whole at 80 columns.

Runs in-process with the ``hash`` embedder (no model), in temporary homes.
"""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from memlane.cli import app
from memlane.cli.app import PANELS


@pytest.fixture(autouse=True)
def _hash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_EMBEDDING__PROVIDER", "hash")
    monkeypatch.delenv("MEMLANE_HOME", raising=False)


def run(*args: str, width: int = 80) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), terminal_width=width, env={"COLUMNS": str(width)})
    return result.exit_code, result.stdout, result.stderr


# ------------------------------------------------------------------------- --help, options


def test_help_groups_the_commands_the_way_a_user_meets_them() -> None:
    code, listing, _ = run("--help")
    assert code == 0
    headings = re.findall(r"^(\S[^:\n]*):$", listing, re.M)
    panels = [h for h in headings if h in PANELS]
    assert panels == list(PANELS), listing
    assert "Commands:" not in listing and "Other commands:" not in listing, listing
    # each command under its panel, in the panel's order
    for panel, names in PANELS.items():
        section = listing.split(f"\n{panel}:\n")[1].split("\n\n")[0]
        shown = re.findall(r"^  (\S+)", section, re.M)
        assert shown == list(names), (panel, shown)
    first = listing.index("\n  add ")
    assert first < listing.index("\n  inject ") < listing.index("\n  review ")
    assert listing.index("\n  review ") < listing.index("\n  serve ") < listing.index("\n  bench ")


def test_an_unknown_option_suggests_only_a_close_one() -> None:
    code, _, stderr = run("hooks", "install", "--json")
    assert code == 2
    assert "Possible options" not in stderr and "--scope" not in stderr, stderr
    assert "No such option: --json" in stderr
    code, _, stderr = run("add", "--tpye", "fact")
    assert code == 2 and "(Possible options: --type)" in stderr, stderr
