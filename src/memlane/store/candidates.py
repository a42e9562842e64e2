"""The janitor's candidate pairs over the backend-neutral index caches
(:class:`~memlane.store.index_cache.IndexCache`): never all pairs.

Two sources, both per owner, each pair kept only inside one agent scope and one project scope
(a project's memories pair among themselves, global ones among themselves; the scopes from the
BM25 index's codes, before any row is read) and at or above the similarity asked for:

- **vector**: every active memory's ``neighbours`` nearest in the owner's ANN index (usearch HNSW,
  batch queries on all cores; exact below 5,000 memories). At most ``neighbours`` pairs per
  memory, fewer once symmetric pairs are counted once.
- **identical**: memories whose stored vectors are equal, bit for bit (a text written twice, or
  twice up to punctuation under an embedder that ignores it), found exactly by a hash of each
  vector. HNSW is weakest there: a point inserted next to an identical one keeps few other
  links (the neighbour-selection heuristic of Malkov & Yashunin 2018, Algorithm 4, prefers the
  copy over every other candidate), and measured here at 100,000 memories the vector leg missed
  34 such pairs that a second janitor run, on a rebuilt graph, found. Each group is chained
  (consecutive pairs), which is enough for the clusters.
- **tokens**: memories sharing a *rare key token*, a BM25 term (stemmed, stop words removed) that
  2 to ``max_df`` active memories of the owner hold: names, numbers, unusual words. An ANN index
  is approximate and a dense cluster may hold more near-copies than ``neighbours``; a shared rare
  token finds those pairs again. A term of ``df`` memories gives ``df * (df - 1) / 2`` pairs, so
  ``max_df`` bounds the work per memory.

The cosine of a pair is the dot product of the stored unit-norm vectors (the index's copies).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from memlane.store.base import CandidatePair, Candidates
from memlane.store.records import PairsAsk

if TYPE_CHECKING:
    from memlane.store.index_cache import IndexCache
    from memlane.store.vector_index import OwnerIndex

#: Memories per batch query of the ANN index (bounds the memory of one step: 2,048 x dimension).
BLOCK = 2048
#: HNSW search breadth of the batch queries (the index's own is 96, for search). Measured here on
#: 20,000 clustered 384-dim vectors, 11 neighbours: 96 -> 0.76 ms a query, recall 1.0; 24 -> 0.24
#: ms, recall 0.998 (a pair the index misses may still come from a shared rare token).
EXPANSION = 24
#: How much wider the search is for a memory whose ``neighbours`` nearest are all at or above the
#: similarity asked for (a dense cluster of near-copies that may hold more members); the lost
#: memories below are asked for as many. Measured on the janitor bench: at 1,000,000 memories 40 %
#: are such (template look-alikes) and 4x wider took 3 minutes of a 17-minute run; 2x wider
#: merged 0.19 % fewer clusters in the first run there (the second run merged 337 against 244),
#: and as many (7,150) at 100,000.
SATURATED = 2
#: How much wider a memory the graph search did not lead back to is searched again before it is
#: searched by brute force (measured at 100,000 memories: ~1,500 lost at breadth 24, ~630 at 48).
LOST_WIDER = 16


def _pair_ids(a: NDArray[np.uint64], b: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """One 64-bit number per unordered pair of 32-bit row keys (smaller key high)."""
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    return (lo << np.uint64(32)) | hi


def _digest(rows: NDArray[np.float32], salt: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """A 64-bit hash of each row's bits (equal rows, equal digests; a collision of unequal rows
    only adds a pair whose cosine is then computed)."""
    bits = np.ascontiguousarray(rows, dtype=np.float32).view(np.uint32).astype(np.uint64)
    with np.errstate(over="ignore"):
        digest: NDArray[np.uint64] = (bits * salt).sum(axis=1, dtype=np.uint64)
    return digest


def _collect(
    rows: NDArray[np.uint64],
    found: NDArray[np.uint64],
    cos: NDArray[np.float32],
    counts: NDArray[np.int64],
    ids: list[NDArray[np.uint64]],
    sims: list[NDArray[np.float32]],
) -> None:
    """Append the pairs (query row, each valid neighbour but itself) and their cosines."""
    cols = np.arange(found.shape[1])
    valid = (cols[None, :] < counts[:, None]) & (found != rows[:, None])
    q = np.broadcast_to(rows[:, None], found.shape)[valid]
    ids.append(_pair_ids(q, found[valid]))
    sims.append(cos[valid])


def _identical(
    keys: NDArray[np.uint64], digests: NDArray[np.uint64], vectors: OwnerIndex
) -> tuple[NDArray[np.uint64], NDArray[np.float32]]:
    """Pairs of rows with equal digests, chained within each group, with their cosines."""
    order = np.argsort(digests, kind="stable")
    d = digests[order]
    same = np.flatnonzero(d[1:] == d[:-1])
    a, b = keys[order[same]], keys[order[same + 1]]
    return _pair_ids(a, b), _cosines(vectors, a, b)


def _cosines(
    vectors: OwnerIndex, a: NDArray[np.uint64], b: NDArray[np.uint64]
) -> NDArray[np.float32]:
    """Cosine of each pair ``(a[i], b[i])`` of keys: the dot product of the index's unit
    vectors, :data:`BLOCK` pairs at a time."""
    cos = np.empty(len(a), dtype=np.float32)
    for start in range(0, len(a), BLOCK):
        x = vectors.vectors(a[start : start + BLOCK])
        y = vectors.vectors(b[start : start + BLOCK])
        cos[start : start + BLOCK] = np.einsum("ij,ij->i", x, y)
    return cos


def _group_pairs(groups: list[NDArray[np.int64]]) -> NDArray[np.uint64]:
    """Every unordered pair of keys within each group, as sorted unique pair ids."""
    out: list[NDArray[np.uint64]] = []
    upper: dict[int, tuple[NDArray[np.intp], NDArray[np.intp]]] = {}
    for group in groups:
        size = len(group)
        if size not in upper:
            upper[size] = np.triu_indices(size, 1)
        i, j = upper[size]
        g = np.asarray(group, dtype=np.uint64)
        out.append(_pair_ids(g[i], g[j]))
    if not out:
        return np.zeros(0, dtype=np.uint64)
    return np.unique(np.concatenate(out))


def candidate_pairs(cache: IndexCache, owner: str, ask: PairsAsk) -> Candidates:
    """See :meth:`memlane.store.base.MemoryStore.candidate_pairs` (and the module doc)."""
    neighbours, min_similarity, max_df, progress = ask
    vectors = cache.vector(owner)
    text = cache.text(owner)
    keys = vectors.keys()
    n = len(keys)
    if n < 2:
        return Candidates([], 0, n, {"vector": 0, "tokens": 0})
    if int(keys.max()) >= 2**32:
        raise ValueError("row keys above 2**32 are not supported by the janitor's pair ids")
    scopes = text.scope_codes(keys)  # agent and project, from the BM25 index (no row read)
    ids: list[NDArray[np.uint64]] = []
    sims: list[NDArray[np.float32]] = []
    lost_keys: list[NDArray[np.uint64]] = []
    digests = np.empty(n, dtype=np.uint64)
    salt = np.random.default_rng(0).integers(1, 2**63, size=vectors.dimension, dtype=np.uint64)
    for start in range(0, n, BLOCK):
        block = keys[start : start + BLOCK]
        queries = vectors.vectors(block)
        digests[start : start + len(block)] = _digest(queries, salt)
        found, cos, counts = vectors.search_many(queries, neighbours + 1, EXPANSION)
        # A memory the graph search did not lead back to (its own key missing from its
        # results) sits where the graph navigates badly: it is searched exactly, below.
        lost = ~(found == block[:, None]).any(axis=1)
        lost_keys.append(block[lost])
        # A memory whose last neighbour is still similar enough may have more: in a dense
        # region near-copies crowd its list. Those are asked again, SATURATED times wider.
        full = ~lost & (counts == found.shape[1]) & (cos[:, -1] >= min_similarity)
        keep = ~full & ~lost
        parts = [(block[keep], found[keep], cos[keep], counts[keep])]
        if full.any():
            wide = vectors.search_many(
                queries[full], SATURATED * neighbours + 1, SATURATED * EXPANSION
            )
            parts.append((block[full], *wide))
        for rows, f, c, cnt in parts:
            _collect(rows, f, c, cnt, ids, sims)
        if progress is not None:
            progress(min(start + BLOCK, n), n)
    # The lost ones (measured at 100,000 memories: 1.5% of them, and the pairs a second run
    # found that the first had missed were among theirs): searched again LOST_WIDER times wider,
    # then the few still lost by brute force, all of them in one pass over the stored vectors
    # (one pass in all, not one per block of queries: each pass copies every vector out of the
    # index)
    lost_all = np.concatenate(lost_keys)
    still: list[NDArray[np.uint64]] = []
    k_lost = SATURATED * neighbours + 1
    for start in range(0, len(lost_all), BLOCK):
        rows = lost_all[start : start + BLOCK]
        f, c, cnt = vectors.search_many(vectors.vectors(rows), k_lost, LOST_WIDER * EXPANSION)
        found_self = (f == rows[:, None]).any(axis=1)
        _collect(rows[found_self], f[found_self], c[found_self], cnt[found_self], ids, sims)
        still.append(rows[~found_self])
    exact_rows = np.concatenate(still) if still else np.zeros(0, dtype=np.uint64)
    if len(exact_rows):
        f, c, cnt = vectors.exact_many(vectors.vectors(exact_rows), k_lost, floor=min_similarity)
        _collect(exact_rows, f, c, cnt, ids, sims)
    same_ids, same_sims = _identical(keys, digests, vectors)
    ids.append(same_ids)
    sims.append(same_sims)
    vec_ids, first = np.unique(np.concatenate(ids), return_index=True)
    vec_sims = np.concatenate(sims)[first]

    # rare key tokens: pairs not already scored by the vector leg
    tok_ids = _group_pairs(text.rare_groups(max_df))
    new_tok = tok_ids[~np.isin(tok_ids, vec_ids, assume_unique=True)]
    lo = new_tok >> np.uint64(32)
    hi = new_tok & np.uint64(0xFFFFFFFF)
    tok_sims = _cosines(vectors, lo, hi)

    pairs: list[tuple[int, int, float, str]] = []
    order = np.argsort(keys)
    sorted_keys, sorted_scopes = keys[order], scopes[order]

    def scope(of: NDArray[np.uint64], missing: int) -> NDArray[np.int64]:
        """Each key's scope code; ``missing`` for a key not among ``keys`` or not in the BM25
        index (its -1)."""
        at = np.clip(np.searchsorted(sorted_keys, of), 0, n - 1)
        code = np.where(sorted_keys[at] == of, sorted_scopes[at], missing)
        return np.where(code < 0, missing, code).astype(np.int64)

    for pid_arr, sim_arr, source in ((vec_ids, vec_sims, "vector"), (new_tok, tok_sims, "tokens")):
        a_arr, b_arr = pid_arr >> np.uint64(32), pid_arr & np.uint64(0xFFFFFFFF)
        # one agent scope and one project scope (memlane.scope: a merge never moves a memory
        # into another project, nor a global memory into one project): equal codes (keys
        # outside the indexes never pair)
        keep = (sim_arr >= min_similarity) & (scope(a_arr, -2) == scope(b_arr, -3))
        for a, b, sim in zip(
            a_arr[keep].tolist(), b_arr[keep].tolist(), sim_arr[keep].tolist(), strict=True
        ):
            pairs.append((a, b, sim, source))
    refs = cache.feed.row_refs(owner, list({k for p in pairs for k in p[:2]}))
    # the rows decide (source of truth): both active and of one project
    out = [
        CandidatePair(refs[a].id, refs[b].id, round(sim, 6), source)
        for a, b, sim, source in pairs
        if a in refs
        and b in refs
        and refs[a].active
        and refs[b].active
        and refs[a].project == refs[b].project
    ]
    return Candidates(
        out,
        considered=len(vec_ids) + len(new_tok),
        memories=n,
        by_source={"vector": len(vec_ids), "identical": len(same_ids), "tokens": len(tok_ids)},
    )
