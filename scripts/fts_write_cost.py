"""What the FTS5 table ``memories_fts`` and its three triggers cost a write (docs/benchmarks.md).

Two fresh stores in one sitting, one as migrated and one with the FTS5 triggers and table dropped
(the table is re-created on the first when missing), both written with the hash embedder (so
the model does not dominate) from the bench generator's texts, taking turns so that machine noise
hits both alike:

1. build: ``--memories`` memories through ``add_many`` in batches of 256 (ms per memory);
2. singles: ``--singles`` timed ``add`` calls, alternating between the stores (ms per call);
3. store-level: ``--singles`` bare ``insert`` calls, each in its own transaction (ms per call);
4. the file size of each (after a WAL checkpoint).

Usage: python scripts/fts_write_cost.py --memories 10000 --singles 300
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from memlane import HashEmbedder, MemoryEngine, Settings
from memlane._ids import new_id, utcnow
from memlane._text import content_hash
from memlane.eval.bench.generator import Generator
from memlane.store import NewMemory
from memlane.types import MemoryType

_DROP = """
DROP TRIGGER IF EXISTS memories_fts_ai;
DROP TRIGGER IF EXISTS memories_fts_ad;
DROP TRIGGER IF EXISTS memories_fts_au;
DROP TABLE IF EXISTS memories_fts;
"""

_CREATE = """
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5 (
    content, content = 'memories', content_rowid = 'num',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS memories_fts_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content) VALUES (new.num, new.content);
END;
CREATE TRIGGER IF NOT EXISTS memories_fts_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content)
        VALUES ('delete', old.num, old.content);
END;
CREATE TRIGGER IF NOT EXISTS memories_fts_au AFTER UPDATE OF content ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content)
        VALUES ('delete', old.num, old.content);
    INSERT INTO memories_fts (rowid, content) VALUES (new.num, new.content);
END;
"""


def _open(home: Path, fts: bool) -> MemoryEngine:
    settings = Settings.load(home)
    engine = MemoryEngine.open(home, settings, embedder=HashEmbedder())
    engine.close()
    conn = sqlite3.connect(settings.db_path)
    conn.executescript(_CREATE if fts else _DROP)
    conn.close()
    return MemoryEngine.open(home, settings, embedder=HashEmbedder())


def _size(engine: MemoryEngine) -> int:
    db = engine.settings.db_path
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return db.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--singles", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    gen = Generator(args.seed)
    texts = [m.content for m in gen.memories(args.memories + 2 * args.singles)]
    build, singles = texts[: args.memories], texts[args.memories :]
    with tempfile.TemporaryDirectory() as tmp:
        engines = {name: _open(Path(tmp) / name, name == "fts") for name in ("fts", "no_fts")}
        batch_ms: dict[str, list[float]] = {name: [] for name in engines}
        for start in range(0, len(build), 256):
            chunk = [{"content": t} for t in build[start : start + 256]]
            for name, engine in _turns(engines, start // 256):
                t0 = time.perf_counter()
                engine.add_many(chunk)
                batch_ms[name].append((time.perf_counter() - t0) * 1000 / len(chunk))
        add_ms: dict[str, list[float]] = {name: [] for name in engines}
        for i, text in enumerate(singles[: args.singles]):
            for name, engine in _turns(engines, i):
                t0 = time.perf_counter()
                engine.add(text)
                add_ms[name].append((time.perf_counter() - t0) * 1000)
        insert_ms: dict[str, list[float]] = {name: [] for name in engines}
        vectors = HashEmbedder().embed_batch(singles[args.singles :])
        for i, (text, vector) in enumerate(zip(singles[args.singles :], vectors, strict=True)):
            draft = NewMemory(
                new_id(), text, content_hash(text), MemoryType.FACT, 0.5, "default", None, None,
                None, utcnow(),
            )  # fmt: skip
            for name, engine in _turns(engines, i):
                t0 = time.perf_counter()
                with engine.store.transaction():
                    engine.store.insert(draft, vector)
                insert_ms[name].append((time.perf_counter() - t0) * 1000)
                draft = dataclasses.replace(draft, id=new_id())
        out = {
            name: {
                "build_ms_per_memory": round(statistics.median(batch_ms[name]), 4),
                "add_ms_median": round(statistics.median(add_ms[name]), 4),
                "insert_ms_median": round(statistics.median(insert_ms[name]), 4),
                "file_bytes": _size(engine),
                "memories": engine.store.count("default"),
            }
            for name, engine in engines.items()
        }
        for engine in engines.values():
            engine.close()
    print(json.dumps({"memories": args.memories, "singles": args.singles, **out}, indent=2))


def _turns(engines: dict[str, MemoryEngine], i: int) -> list[tuple[str, MemoryEngine]]:
    """Both stores, the first one first on even rounds, last on odd ones."""
    items = list(engines.items())
    return items if i % 2 == 0 else items[::-1]


if __name__ == "__main__":
    main()
