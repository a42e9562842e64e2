"""In-memory BM25 index per owner, caught up from the store (the source of truth).

Why our own index and not FTS5's ``bm25()``: FTS5 computes the rank of *every* row that holds any
query term before it can sort, about 2 us a row on this machine, and it has no way to restrict that
work to one owner. At 100,000 memories a six-word question touches tens of thousands of rows and
the full-text leg alone took 20-60 ms (docs/benchmarks.md). Here each term's postings are a pair
of numpy arrays, so scoring is a handful of vectorised operations over the postings of the query
terms: p50 0.3 ms, p95 0.5 ms at 100,000 memories. The FTS5 table stays in the database file
(SQL-side full-text queries, e.g. ``sqlite3 memlane.db "... MATCH 'garden'"``); this index is a
cache of the same rows, like the vector index, and is rebuilt or caught up from ``vec_seq``.

Scoring: Okapi BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and
Beyond", 2009) with ``k1 = 1.2`` and ``b = 0.75`` (FTS5's and Lucene's defaults) and Lucene's
non-negative IDF ``ln(1 + (N - df + 0.5) / (df + 0.5))``. ``N``, ``df`` and the average length are
this owner's active memories only, so one owner's data never shifts another's ranking.

Tokens: lower-cased letter/digit runs of NFKC text, split at apostrophes (as FTS5's unicode61
tokenizer does), stop words removed, Porter-stemmed (the stemmer of FTS5's ``porter`` tokenizer,
through PyStemmer's C implementation).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from typing import Any

import numpy as np
import Stemmer
from numpy.typing import NDArray

from memlane._text import STOP_WORDS, words

#: Version of :func:`tokens` and of the saved arrays; a saved index of another version is rebuilt.
TOKENS_VERSION = "porter-stop-v1/types/projects"

#: BM25 term-frequency saturation and length normalisation (FTS5 and Lucene defaults).
K1 = 1.2
B = 0.75

_STEMMER = Stemmer.Stemmer("porter")
#: Scope masks kept between changes of an index (one per scope asked for: agent, project, types).
MASKS = 16


def tokens(text: str) -> list[str]:
    """Index terms of ``text``: words split at apostrophes, stop words and 1-letter tokens
    removed, Porter-stemmed. Used for both memories and queries, so they always agree."""
    out: list[str] = []
    for word in words(text):
        for part in word.replace("’", "'").split("'"):
            if len(part) >= 2 and part not in STOP_WORDS:
                out.append(part)
    return list(_STEMMER.stemWords(out)) if out else []


class TextIndex:
    """BM25 inverted index of one owner's active memories, keyed by the row number.

    Each memory's scope is kept beside its postings (its agent, its project, its type, as small
    integer codes), so a search filters by scope inside the index (:meth:`search`) and the
    vector leg asks it which keys a scope sees (:meth:`in_scope`, :meth:`scope_size`) without
    reading rows.

    Each memory gets a *slot* (0, 1, 2, ...); postings are per term ``(slots int32, tf float32)``
    numpy arrays, grown by doubling. A removed or changed memory's slot is marked dead (its
    postings stay until :meth:`_compact` drops them, once a quarter of the slots are dead).
    Not thread-safe on its own: the store calls it under its lock.
    """

    def __init__(self) -> None:
        self.watermark = 0
        #: Watermark of the copy saved on disk (-1: none); the store skips saving an unchanged one.
        self.saved_at = -1
        self._slot_of: dict[int, int] = {}
        self._keys = np.zeros(64, dtype=np.int64)
        self._lengths = np.zeros(64, dtype=np.float32)
        self._agents = np.zeros(64, dtype=np.int32)  # 0 = shared (no agent)
        self._projects = np.zeros(64, dtype=np.int32)  # 0 = global (no project)
        self._types = np.zeros(64, dtype=np.int32)  # memory type, coded
        self._alive = np.zeros(64, dtype=bool)
        self._used = 0  # slots handed out (alive or dead)
        self._total_length = 0.0  # sum of lengths of alive slots
        self._agent_code: dict[str, int] = {}
        self._project_code: dict[str, int] = {}
        self._type_code: dict[str, int] = {}
        # term -> [slots, tfs, used]
        self._postings: dict[str, list[Any]] = {}
        # the scope masks of :meth:`_allowed` since the last change (a turn asks for its
        # scope's three times: the vector leg's size and hits, and the BM25 search)
        self._masks: dict[tuple[Any, ...], NDArray[np.bool_]] = {}

    def __len__(self) -> int:
        return len(self._slot_of)

    def key_set(self) -> set[int]:
        """The keys of every memory in the index (active rows)."""
        return set(self._slot_of)

    # ------------------------------------------------------------------ writes
    def apply(
        self, rows: Iterable[tuple[int, bool, str, str | None, str, str | None]], watermark: int
    ) -> None:
        """Apply changed rows ``(key, active, content, agent, type, project)``; then set the
        watermark."""
        for key, active, content, agent, mtype, project in rows:
            if self._masks:
                self._masks.clear()
            self._remove(key)
            if active:
                self._add(key, content, agent, mtype, project)
        self.watermark = max(self.watermark, watermark)
        dead = self._used - len(self._slot_of)
        if dead > 1000 and dead > self._used // 4:
            self._compact()

    def _remove(self, key: int) -> None:
        slot = self._slot_of.pop(key, None)
        if slot is not None:
            self._alive[slot] = False
            self._total_length -= float(self._lengths[slot])

    def _add(
        self, key: int, content: str, agent: str | None, mtype: str, project: str | None
    ) -> None:
        slot = self._used
        if slot == len(self._keys):
            size = 2 * slot
            self._keys = _resized(self._keys, size)
            self._lengths = _resized(self._lengths, size)
            self._agents = _resized(self._agents, size)
            self._projects = _resized(self._projects, size)
            self._types = _resized(self._types, size)
            self._alive = _resized(self._alive, size)
        self._used += 1
        terms = tokens(content)
        self._slot_of[key] = slot
        self._keys[slot] = key
        self._lengths[slot] = len(terms)
        self._agents[slot] = 0 if agent is None else _code(self._agent_code, agent)
        self._projects[slot] = 0 if project is None else _code(self._project_code, project)
        self._types[slot] = _code(self._type_code, mtype)
        self._alive[slot] = True
        self._total_length += len(terms)
        for term, tf in Counter(terms).items():
            entry = self._postings.get(term)
            if entry is None:
                entry = self._postings[term] = [
                    np.empty(4, dtype=np.int32),
                    np.empty(4, dtype=np.float32),
                    0,
                ]
            n = entry[2]
            if n == len(entry[0]):
                entry[0] = _resized(entry[0], 2 * n)
                entry[1] = _resized(entry[1], 2 * n)
            entry[0][n] = slot
            entry[1][n] = tf
            entry[2] = n + 1

    def _compact(self) -> None:
        """Drop dead slots: renumber the alive ones in order and filter every posting list."""
        self._masks.clear()
        alive = self._alive[: self._used]
        new_slot = np.cumsum(alive, dtype=np.int64) - 1
        n = int(alive.sum())
        keep = np.flatnonzero(alive)
        self._keys = _resized(self._keys[keep], max(64, 2 * n))
        self._lengths = _resized(self._lengths[keep], max(64, 2 * n))
        self._agents = _resized(self._agents[keep], max(64, 2 * n))
        self._projects = _resized(self._projects[keep], max(64, 2 * n))
        self._types = _resized(self._types[keep], max(64, 2 * n))
        self._alive = np.zeros(max(64, 2 * n), dtype=bool)
        self._alive[:n] = True
        self._used = n
        self._slot_of = {int(k): i for i, k in enumerate(self._keys[:n].tolist())}
        postings: dict[str, list[Any]] = {}
        for term, (slots, tfs, used) in self._postings.items():
            s = slots[:used]
            m = alive[s]
            if m.any():
                postings[term] = [
                    new_slot[s[m]].astype(np.int32),
                    tfs[:used][m].copy(),
                    int(m.sum()),
                ]
        self._postings = postings

    # ------------------------------------------------------------------ reads
    def _allowed(
        self, agent: str | None, project: str | None, types: Collection[str] | None
    ) -> NDArray[np.bool_]:
        """Per slot (``(used,)``): alive and in the scope. ``agent``: that agent's and shared
        memories (``None``: every agent's); ``project``: that project's and global ones
        (``None``: every project's); ``types`` (type names): only those types. Kept until the
        index changes (:data:`MASKS` scopes at most); callers never write into it."""
        key = (agent, project, None if not types else frozenset(types))
        found = self._masks.get(key)
        if found is None:
            if len(self._masks) >= MASKS:
                self._masks.clear()
            found = self._masks[key] = self._scope_mask(agent, project, types)
        return found

    def _scope_mask(
        self, agent: str | None, project: str | None, types: Collection[str] | None
    ) -> NDArray[np.bool_]:
        """:meth:`_allowed`, computed."""
        used = self._used
        allowed = self._alive[:used]
        if agent is not None:
            code = self._agent_code.get(agent, -1)
            agents = self._agents[:used]
            allowed = allowed & ((agents == 0) | (agents == code))
        if project is not None:
            code = self._project_code.get(project, -1)
            projects = self._projects[:used]
            allowed = allowed & ((projects == 0) | (projects == code))
        if types:
            codes = [self._type_code[t] for t in types if t in self._type_code]
            allowed = allowed & np.isin(self._types[:used], codes)
        return allowed

    def scope_size(
        self,
        agent: str | None = None,
        project: str | None = None,
        types: Collection[str] | None = None,
    ) -> int:
        """How many active memories the scope sees (arguments as :meth:`search`'s)."""
        return int(self._allowed(agent, project, types).sum())

    def in_scope(
        self,
        keys: Sequence[int],
        agent: str | None = None,
        project: str | None = None,
        types: Collection[str] | None = None,
    ) -> NDArray[np.int8]:
        """For each of ``keys``, shape ``(len(keys),)``: 1 an active memory of the scope, 0 one
        outside it, -1 a key this index does not hold (not active, or not caught up yet: the
        caller decides from its row). Arguments as :meth:`search`'s."""
        slot_of = self._slot_of
        slots = np.fromiter((slot_of.get(int(k), -1) for k in keys), np.int64, len(keys))
        allowed = self._allowed(agent, project, types)
        inside = allowed[np.maximum(slots, 0)] if len(allowed) else np.zeros(len(keys), bool)
        return np.where(slots >= 0, inside.astype(np.int8), np.int8(-1)).astype(np.int8)

    def search(
        self,
        terms: Sequence[str],
        k: int,
        agent: str | None = None,
        types: Collection[str] | None = None,
        project: str | None = None,
    ) -> list[tuple[int, float]]:
        """Top ``k`` keys by BM25 over query ``terms`` (already :func:`tokens`), best first.

        With ``agent``, only that agent's and shared (agent-less) memories are returned; with
        ``project``, only that project's and global (project-less) ones; with ``types`` (type
        names), only memories of those types. The scope is applied to the scores, before the
        top ``k`` is taken (no over-fetching). The statistics (N, df, average length) stay the
        owner's, so a hit's score does not depend on who asked or for what.
        """
        n_docs = len(self._slot_of)
        if n_docs == 0 or k <= 0:
            return []
        used = self._used
        alive = self._alive[:used]
        allowed = self._allowed(agent, project, types)
        avg_len = max(self._total_length / n_docs, 1e-9)
        scores: NDArray[np.float32] | None = None
        for term in dict.fromkeys(terms):
            entry = self._postings.get(term)
            if entry is None:
                continue
            slots = entry[0][: entry[2]]
            tfs = entry[1][: entry[2]]
            live = alive[slots]
            df = int(live.sum())
            if df == 0:
                continue
            idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
            if scores is None:
                scores = np.zeros(used, dtype=np.float32)
            # slots are unique within one term's postings, so fancy-index += is exact
            norm = K1 * (1.0 - B + B * self._lengths[slots] / avg_len)
            scores[slots] += (idf * (K1 + 1.0)) * tfs / (tfs + norm) * live
        if scores is None:
            return []
        scores[~allowed] = 0.0
        hit = np.flatnonzero(scores > 0.0)
        if len(hit) > k:
            hit = hit[np.argpartition(-scores[hit], k - 1)[:k]]
        # best first; equal scores by the older memory (smaller key) for a stable order
        order = sorted(hit.tolist(), key=lambda s: (-float(scores[s]), int(self._keys[s])))
        return [(int(self._keys[s]), float(scores[s])) for s in order]

    def scope_codes(self, keys: NDArray[Any]) -> NDArray[np.int64]:
        """One code per key for its exact scope, agent and project (equal codes: the same
        agent, or both shared, and the same project, or both global; -1: a key not in the
        index), shape ``(len(keys),)``."""
        slot_of = self._slot_of
        slots = np.fromiter((slot_of.get(int(k), -1) for k in keys), np.int64, len(keys))
        at = np.maximum(slots, 0)
        agents = self._agents[at].astype(np.int64)
        projects = self._projects[at].astype(np.int64)
        return np.where(slots >= 0, (agents << np.int64(31)) | projects, -1)

    def rare_groups(self, max_df: int) -> list[NDArray[np.int64]]:
        """The keys of the active memories sharing each term held by 2 to ``max_df`` of them
        (one array per such term): rare key tokens (names, numbers, unusual words)."""
        out: list[NDArray[np.int64]] = []
        alive = self._alive
        for slots, _tfs, used in self._postings.values():
            if used < 2:
                continue
            s = slots[:used]
            live = s[alive[s]]
            if 2 <= len(live) <= max_df:
                out.append(self._keys[live])
        return out

    # ------------------------------------------------------------------ persistence
    def to_arrays(self) -> dict[str, NDArray[Any]]:
        """The index as flat arrays (for ``numpy.savez``); alive slots only."""
        if self._used != len(self._slot_of):
            self._compact()
        n = self._used
        terms = sorted(self._postings)
        counts = np.array([self._postings[t][2] for t in terms], dtype=np.int64)
        empty_i = np.zeros(0, dtype=np.int32)
        empty_f = np.zeros(0, dtype=np.float32)
        agents = sorted(self._agent_code, key=self._agent_code.__getitem__)
        return {
            "keys": self._keys[:n].copy(),
            "lengths": self._lengths[:n].copy(),
            "agents": self._agents[:n].copy(),
            "projects": self._projects[:n].copy(),
            "types": self._types[:n].copy(),
            "type_names": np.array(
                sorted(self._type_code, key=self._type_code.__getitem__), dtype=np.str_
            ),
            "agent_names": np.array(agents, dtype=np.str_),
            "project_names": np.array(
                sorted(self._project_code, key=self._project_code.__getitem__), dtype=np.str_
            ),
            "terms": np.array(terms, dtype=np.str_),
            "offsets": np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            "slots": np.concatenate([self._postings[t][0][: self._postings[t][2]] for t in terms])
            if terms
            else empty_i,
            "tfs": np.concatenate([self._postings[t][1][: self._postings[t][2]] for t in terms])
            if terms
            else empty_f,
        }

    @classmethod
    def from_arrays(cls, data: Any) -> TextIndex:
        """Rebuild from :meth:`to_arrays` output (raises ``KeyError``/``ValueError`` if corrupt)."""
        index = cls()
        keys = np.asarray(data["keys"], dtype=np.int64)
        n = len(keys)
        size = max(64, 2 * n)
        index._keys = _resized(keys, size)
        index._lengths = _resized(np.asarray(data["lengths"], dtype=np.float32), size)
        index._agents = _resized(np.asarray(data["agents"], dtype=np.int32), size)
        index._projects = _resized(np.asarray(data["projects"], dtype=np.int32), size)
        index._types = _resized(np.asarray(data["types"], dtype=np.int32), size)
        index._type_code = {str(t): i + 1 for i, t in enumerate(data["type_names"].tolist())}
        index._alive = np.zeros(size, dtype=bool)
        index._alive[:n] = True
        index._used = n
        index._total_length = float(index._lengths[:n].sum())
        index._slot_of = {int(k): i for i, k in enumerate(keys.tolist())}
        index._agent_code = {str(a): i + 1 for i, a in enumerate(data["agent_names"].tolist())}
        index._project_code = {str(p): i + 1 for i, p in enumerate(data["project_names"].tolist())}
        offsets = np.asarray(data["offsets"], dtype=np.int64).tolist()
        slots = np.asarray(data["slots"], dtype=np.int32)
        tfs = np.asarray(data["tfs"], dtype=np.float32)
        if len(offsets) != len(data["terms"]) + 1 or offsets[-1] != len(slots):
            raise ValueError("postings do not match the term list")
        for i, term in enumerate(data["terms"].tolist()):
            lo, hi = offsets[i], offsets[i + 1]
            index._postings[str(term)] = [slots[lo:hi].copy(), tfs[lo:hi].copy(), hi - lo]
        return index


def _code(codes: dict[str, int], name: str) -> int:
    """The small integer standing for ``name`` (1, 2, ...; assigned on first sight)."""
    code = codes.get(name)
    if code is None:
        code = codes[name] = len(codes) + 1
    return code


def _resized(array: NDArray[Any], size: int) -> NDArray[Any]:
    out = np.zeros(size, dtype=array.dtype)
    n = min(len(array), size)
    out[:n] = array[:n]
    return out
