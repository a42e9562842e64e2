"""Profiles per model: the cosine-scale thresholds default to the active model's profile, a value
the user sets wins; calibration derives a profile with rules that reproduce the MiniLM choices."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlane import ConfigError, Settings
from memlane.embeddings.profiles import E5_SMALL, MINILM, PROFILE_KEYS, profile_for
from memlane.eval.calibrate import Pair, derive_profile, evaluate, profile_lines


def _values(s: Settings) -> dict[str, float]:
    return {k: getattr(getattr(s, sec), k) for sec, keys in PROFILE_KEYS.items() for k in keys}


def test_defaults_come_from_the_active_models_profile(tmp_path: Path) -> None:
    default = Settings.load(tmp_path)
    assert _values(default) == {k: getattr(MINILM, k) for k in _values(default)}
    e5 = Settings.load(tmp_path, embedding={"model": "multilingual-e5-small"})
    assert _values(e5) == {k: getattr(E5_SMALL, k) for k in _values(e5)}
    assert e5.dedup.gray_low != default.dedup.gray_low  # another scale, other thresholds
    # the fp32 reference is the same model: the same profile
    fp32 = Settings.load(tmp_path, embedding={"model": "all-MiniLM-L6-v2-fp32"})
    assert _values(fp32) == _values(default)


def test_a_value_the_user_set_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "memlane.toml").write_text(
        '[embedding]\nmodel = "multilingual-e5-small"\n'
        "[dedup]\nreplace = 0.985\n"
        "[agents.coder.injection]\nmax_total = 5\n"
    )
    monkeypatch.setenv("MEMLANE_RETRIEVAL__FLOOR_ABSOLUTE", "0.5")
    s = Settings.load(tmp_path)
    assert s.dedup.replace == 0.985  # the file's
    assert s.retrieval.floor_absolute == 0.5  # the environment's
    assert s.dedup.gray_low == E5_SMALL.gray_low  # the rest: the e5 profile
    assert s.retrieval.floor_relative == E5_SMALL.floor_relative
    # an agent's injection settings inherit the profile's semantic_threshold
    assert s.injection_for("coder").semantic_threshold == E5_SMALL.semantic_threshold
    # explicit values of Settings.load win over everything
    s = Settings.load(tmp_path, injection={"semantic_threshold": 0.5})
    assert s.injection.semantic_threshold == 0.5


def test_a_set_value_that_contradicts_the_profile_is_named(tmp_path: Path) -> None:
    # MiniLM's replace 0.97 under e5 is below e5's gray_low: the order check names it
    with pytest.raises(ConfigError, match=r"dedup\.gray_low"):
        Settings.load(
            tmp_path, embedding={"model": "multilingual-e5-small"}, dedup={"replace": 0.9}
        )


def test_unknown_models_get_the_default_values_marked_uncalibrated() -> None:
    p = profile_for("some-server-model", dimension=1024)
    assert not p.calibrated and p.dimension == 1024 and p.replace == MINILM.replace
    assert profile_for("intfloat/multilingual-e5-small") is E5_SMALL
    assert E5_SMALL.query_prefix == "query: " and E5_SMALL.passage_prefix == "passage: "


def _pairs(cosines: list[tuple[float, bool]]) -> tuple[list[Pair], list[float]]:
    # the offered text adds to the stored one: the write path merges it at or above replace
    pairs = [
        Pair(f"Person {i} likes green tea", f"Person {i} likes green tea every day", dup)
        for i, (_, dup) in enumerate(cosines)
    ]
    return pairs, [c for c, _ in cosines]


def test_derive_profile_follows_its_rules() -> None:
    """On a scale where duplicates sit at ~0.95 and non-duplicates at ~0.80: gray_low holds 80 %
    of the duplicates, replace is the first threshold precise enough, and MiniLM's carried
    values land between the anchors."""
    settings = Settings.load(Path("/nonexistent-home")).dedup
    stsb = [(0.80, False)] * 50 + [(0.96, False)] + [(0.90 + i / 100, True) for i in range(9)]
    stsb += [(0.99, True)] * 11  # 20 duplicates; 4 of them below 0.93
    paws = [(0.97, False)] + [(0.985, True)] * 20
    res = {
        "paws_dev": evaluate(*_pairs(paws), settings, 0.70),
        "stsb_dev": evaluate(*_pairs(stsb), settings, 0.70),
    }
    p = derive_profile("m", 384, res, query_prefix="q: ")
    # STS-B: the 0.96 non-duplicate is merged below 0.97; PAWS: the 0.97 one below 0.98
    assert p.replace == 0.98 and p.auto_reject == 0.99
    assert p.gray_low == 0.94  # 16 of 20 duplicates at >= 0.94 (0.94 .. 0.99)
    assert p.cos_unrelated == 0.80 and p.cos_duplicate == 0.99
    assert 0.80 < p.semantic_threshold < 0.99 and 0.0 < p.floor_relative <= 1.0
    assert p.query_prefix == "q: "
    lines = "\n".join(profile_lines(p))
    assert "[dedup]\nauto_reject = 0.99\nreplace = 0.98\ngray_low = 0.94" in lines
