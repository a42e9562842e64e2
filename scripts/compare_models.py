"""Compare two local embedding models on the dev data: agreement of their vectors and quality.

    python scripts/compare_models.py ../shared/data all-MiniLM-L6-v2 all-MiniLM-L6-v2-q8

Prints, for each model: STS-B dev Spearman of the cosine against the gold score (all pairs) and
PAWS dev ROC AUC of the cosine against the label (all pairs); then, model B against model A on the
turns of LoCoMo dev conversations 0-1 (docs/embeddings.md measured the fp32 reference on the same
texts): the cosine of each text's two vectors (min, 1st percentile, median) and the overlap of each
text's top-10 neighbours among those texts (every 7th text as the query); then single-query
latency, both models interleaved on one onnxruntime thread (``--threads``), p50 / p95 in ms.
Texts are embedded one call per text, as a search or an injection embeds its query.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from memlane.embeddings import Embedder, LocalEmbedder, embed_texts, make_embedder
from memlane.eval.replay.locomo import load_locomo


def _ranks(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Ranks with ties averaged (Spearman's definition)."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=np.float64)
    for value in np.unique(x):
        tied = x == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def spearman(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    return float(np.corrcoef(_ranks(a), _ranks(b))[0, 1])


def roc_auc(labels: NDArray[np.int64], scores: NDArray[np.float64]) -> float:
    """Mann-Whitney U / (n1 * n0)."""
    ranks = _ranks(scores) + 1
    n1 = int(labels.sum())
    n0 = len(labels) - n1
    return float((ranks[labels == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def one_by_one(embedder: Embedder, texts: list[str]) -> NDArray[np.float32]:
    return np.concatenate([embed_texts(embedder, [t]) for t in texts])


def pair_cosines(
    embedder: Embedder, file: Path, column: str
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The cosine of each pair of ``file`` (a TSV of sentence1, sentence2, ``column``) and the
    pair's ``column`` value."""
    with file.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    a = one_by_one(embedder, [r["sentence1"] for r in rows])
    b = one_by_one(embedder, [r["sentence2"] for r in rows])
    gold = np.array([float(r[column]) for r in rows])
    return (a * b).sum(axis=1).astype(np.float64), gold


def latency(embedders: dict[str, Embedder], texts: list[str]) -> dict[str, list[float]]:
    ms: dict[str, list[float]] = {name: [] for name in embedders}
    for text in texts:
        for name, embedder in embedders.items():
            t0 = time.perf_counter()
            embedder.embed_batch([text])
            ms[name].append((time.perf_counter() - t0) * 1000.0)
    return ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("model_a")
    parser.add_argument("model_b")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    models: dict[str, Embedder] = {}
    for name in (args.model_a, args.model_b):
        embedder = make_embedder("local", model=name)
        if isinstance(embedder, LocalEmbedder):
            embedder = type(embedder)(threads=args.threads)
        models[name] = embedder
    for name, embedder in models.items():
        cos, score = pair_cosines(embedder, args.data / "stsb" / "stsb_dev.tsv", "score")
        sts = spearman(cos, score)
        cos, label = pair_cosines(embedder, args.data / "paws" / "paws_dev.tsv", "label")
        auc = roc_auc(label.astype(np.int64), cos)
        print(
            f"{name}: STS-B dev Spearman {sts:.4f} ({len(score)} pairs), "
            f"PAWS dev AUC {auc:.4f} ({len(label)} pairs)"
        )
    conversations = load_locomo(args.data / "locomo" / "locomo_dev.json")[:2]
    texts = [t.message() for c in conversations for _, turns in c.sessions for t in turns]
    a, b = (one_by_one(e, texts) for e in models.values())
    cos = (a * b).sum(axis=1)
    queries = np.arange(0, len(texts), 7)
    overlap = []
    for q in queries:
        top_a = set(np.argsort(-(a @ a[q]))[1:11].tolist())
        top_b = set(np.argsort(-(b @ b[q]))[1:11].tolist())
        overlap.append(len(top_a & top_b) / 10)
    print(
        f"{args.model_b} against {args.model_a} on {len(texts)} LoCoMo dev turns "
        f"(conversations 0-1): cosine min {cos.min():.4f}, 1st percentile "
        f"{np.percentile(cos, 1):.4f}, median {np.median(cos):.4f}; top-10 neighbours "
        f"overlap {100 * np.mean(overlap):.1f} % ({len(queries)} queries)"
    )
    ms = latency(models, texts[:200])
    for name, values in ms.items():
        p50, p95 = np.percentile(values, 50), np.percentile(values, 95)
        print(
            f"{name}: one query, {args.threads} thread(s), interleaved: p50 {p50:.2f} ms, "
            f"p95 {p95:.2f} ms ({len(values)} LoCoMo turns)"
        )


if __name__ == "__main__":
    main()
