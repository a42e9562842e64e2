"""PostgreSQL's side of ``bench --backend``: the plans of the hot queries (``EXPLAIN ANALYZE``)
and the HNSW ``ef_search`` trade-off of the vector leg, measured on the bench store."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import psycopg

from memlane.eval.bench.generator import Generator
from memlane.eval.timing import TimedEmbedder, latency_summary
from memlane.store.postgres.connect import configure

#: The hot queries of a search and an injection turn, as the store sends them.
HOT_QUERIES: dict[str, str] = {
    "vector leg (HNSW)": "SELECT id, embedding <=> %(v)s FROM memories WHERE owner = %(o)s "
    "AND status = 'active' ORDER BY embedding <=> %(v)s LIMIT 10",
    "dedup: nearest in scope": "SELECT id, embedding <=> %(v)s FROM memories WHERE owner = %(o)s "
    "AND agent IS NULL AND status = 'active' ORDER BY embedding <=> %(v)s LIMIT 5",
    "dedup: exact hash": "SELECT id FROM memories WHERE owner = %(o)s AND agent IS NULL "
    "AND content_hash = %(h)s AND status = 'active' ORDER BY created_at, num LIMIT 1",
    "BM25 cache catch-up": "SELECT num, status = 'active', content, agent, type, change_seq "
    "FROM memories WHERE owner = %(o)s AND change_seq > %(w)s ORDER BY change_seq",
    "rows of the hits": "SELECT id, content FROM memories WHERE owner = %(o)s "
    "AND id = ANY(%(ids)s::text[])",
    "turn start: embeddings of the window and the candidates": "SELECT id, embedding "
    "FROM memories WHERE owner = %(o)s AND id IN (SELECT memory_id FROM session_injections "
    "WHERE owner = %(o)s AND session = %(s)s) UNION ALL SELECT id, embedding FROM memories "
    "WHERE owner = %(o)s AND id = ANY(%(ids)s::text[])",
}


def _connect(dsn: str, ef_search: int = 40) -> psycopg.Connection[Any]:
    conn = psycopg.connect(dsn, autocommit=True)
    configure(conn, ef_search, 60_000)
    return conn


def explain(dsn: str, timer: TimedEmbedder, owner: str) -> dict[str, list[str]]:
    """``EXPLAIN (ANALYZE, COSTS OFF)`` of :data:`HOT_QUERIES` on ``owner``'s memories."""
    vec = np.asarray(timer.embed_batch(["what does the team use for deployments?"])[0])
    with _connect(dsn) as conn:
        row = conn.execute(
            "SELECT content_hash, (SELECT max(change_seq) FROM memories WHERE owner = %s) "
            "FROM memories WHERE owner = %s LIMIT 1",
            (owner, owner),
        ).fetchone()
        ids = [r[0] for r in conn.execute("SELECT id FROM memories LIMIT 10").fetchall()]
        args = {
            "v": vec,
            "o": owner,
            "h": row[0] if row else "",
            "w": (row[1] or 0) - 5 if row else 0,
            "ids": ids,
            "s": "bench-session",
        }
        plans = {}
        for name, sql in HOT_QUERIES.items():
            rows = conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF, BUFFERS OFF) {sql}", args)
            plans[name] = [str(r[0]) for r in rows.fetchall()]
    return plans


def hnsw_tradeoff(
    dsn: str,
    timer: TimedEmbedder,
    n: int,
    seed: int,
    *,
    queries: int = 100,
    ef_values: tuple[int, ...] = (10, 20, 40, 100, 200),
) -> list[dict[str, Any]]:
    """Recall@10 of the HNSW vector leg against an exact scan, and its latency, per
    ``hnsw.ef_search`` (the bench's questions)."""
    texts = [q.text for q in Generator(seed).queries(queries, n, salt="hnsw")]
    vecs = [np.asarray(v, dtype=np.float32) for v in timer.embed_batch(texts)]
    sql = HOT_QUERIES["vector leg (HNSW)"]
    with _connect(dsn) as conn:
        conn.execute("SET enable_indexscan = off")  # exact: a scan and a sort
        exact = [{r[0] for r in conn.execute(sql, {"v": v, "o": "bench"}).fetchall()} for v in vecs]
    out = []
    for ef in ef_values:
        with _connect(dsn, ef) as conn:
            for v in vecs[:5]:  # warm the index pages and the prepared plan
                conn.execute(sql, {"v": v, "o": "bench"}).fetchall()
            ms, recall = [], []
            for v, truth in zip(vecs, exact, strict=True):
                started = time.perf_counter()
                got = {r[0] for r in conn.execute(sql, {"v": v, "o": "bench"}).fetchall()}
                ms.append((time.perf_counter() - started) * 1000.0)
                recall.append(len(got & truth) / max(len(truth), 1))
        out.append(
            {
                "ef_search": ef,
                "recall_at_10": round(float(np.mean(recall)), 4),
                **latency_summary(ms),
            }
        )
    return out
