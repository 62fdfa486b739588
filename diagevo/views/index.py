"""The vector index of causes and skill nodes: a view of the memory, rebuildable from the log.

Two layers:

* an in-memory mirror (numpy) used for screening: a growable cause matrix with the node of each
  row, and node-label vectors. Stage 2a/3a cost one matrix-vector product and one reduction,
  O(1) amortised to add a cause, so maintenance stays in the low milliseconds at 10,000 causes;
* an optional LanceDB table (one per run) holding ``id, kind, text, vector, model, seq, run``
  rows (``seq``: the memory's last seq when the row was written): the causes and nodes of the
  run's folded memory, brought up to date after each round
  (its saved state, the view ``vector_index``, names the seq it reached), upserts idempotent. It
  is the cache that spares re-embedding every stored cause each round. A different embedding
  model, a missing table or a saved state the table does not match lead to a rebuild
  (:func:`reindex` forces one).

Which node a cause lies under always comes from the folded memory: the index keeps no rule of
its own for node merges.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Protocol, TypedDict, cast, runtime_checkable

import numpy as np

from diagevo.catalog import CauseCreated, Event, NodeCreated, NodesMerged
from diagevo.errors import require_use
from diagevo.log import Recorder, StoreError, ViewState
from diagevo.log.paths import beside_database
from diagevo.memory.state import Memory
from diagevo.results import Result
from diagevo.runtime.progress import library_logger
from diagevo.views import INDEX_VIEW as VIEW
from diagevo.views.memory import load_memory

log = library_logger("diagevo.cache")


@runtime_checkable  # a public function's argument is checked against it (diagevo.text.calls)
class Embedder(Protocol):
    """Text -> L2-normalised float32 rows, so a dot product is the cosine similarity."""

    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


# float32 similarities of unit vectors are off by well under 1e-5; candidates within this margin
# of a threshold or cutoff are re-scored exactly before anything is decided
_MARGIN = 1e-4


def table_name(run: str) -> str:
    """One table per run; run ids are free text, so the name is derived from a hash."""
    return "vectors_" + hashlib.sha256(run.encode()).hexdigest()[:16]


def default_index_path(db_url: str) -> Path:
    """``sqlite:///dir/x.db`` -> ``dir/x.diagevo/index.lance``; other databases ->
    ``./diagevo-<db>-<key>.diagevo/index.lance``, keyed by the URL so that two databases never share
    an index."""
    return beside_database(db_url, ".lance")


def kept_index_path(db_url: str, embedder: Embedder) -> Path | None:
    """Where a run's vectors are kept between processes: beside the database (LanceDB, the
    ``index`` extra) for an embedder whose vectors cost a model or an endpoint to compute; None
    when LanceDB is not installed, or for vectors cheaper to compute again than to read (an
    embedder whose ``kept`` is False: the static one). Either way the index holds the same
    vectors, so what is decided does not change."""
    if not getattr(embedder, "kept", True) or find_spec("lancedb") is None:
        return None
    return default_index_path(db_url)


@dataclass(frozen=True, slots=True)
class Row:
    id: str
    kind: str  # "cause" | "node"
    text: str
    seq: int


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _table(db: Any, name: str) -> Any:
    """The table ``name`` of ``db``, or None where it has none."""
    try:
        return db.open_table(name)
    except (ValueError, FileNotFoundError):
        return None


def _room(buf: np.ndarray, n: int, fill: float | bool) -> np.ndarray:
    """``buf`` with room for ``n`` rows: itself, or a copy twice as long whose new rows hold
    ``fill``, so that appending a row costs O(1) amortised (the causes' vectors and nodes, the
    nodes' liveness)."""
    if n <= len(buf):
        return buf
    grown = np.full((2 * n, *buf.shape[1:]), fill, dtype=buf.dtype)
    grown[: len(buf)] = buf
    return grown


class IndexRow(TypedDict):
    """A row of the persisted index, as :meth:`VectorIndex.rows` shows it: a cause's or a node's
    text, the embedder's model, and the seq of the memory it was written at."""

    id: str
    kind: str
    text: str
    model: str
    seq: int
    run: str


class VectorIndex:
    """Cause and node vectors of one run for one embedder.

    ``path=None`` keeps only the mirror (vectors are computed from the memory's texts).
    """

    def __init__(self, embedder: Embedder, path: str | Path | None = None, run: str | None = None) -> None:
        if path is not None:
            require_use("the vector index (memory reindex)", f"the vector index at {path}")
        self.embedder = embedder
        self.path = Path(path) if path is not None else None
        self.run = run
        self._vec: dict[tuple[str, str], np.ndarray] = {}  # (kind, id) -> vector of its current text
        self._text: dict[tuple[str, str], str] = {}
        self._held: dict[tuple[str, str], str] = {}  # (kind, id) -> text, as the LanceDB table holds it
        self._table: Any = None
        # the mirror, built by attach()
        self.cause_ids: list[str] = []
        self._cause_row: dict[str, int] = {}
        self._causes: np.ndarray | None = None  # a row per cause (aligned with cause_ids), and room
        self._cause_node = np.zeros(0, dtype=np.int64)
        self.node_ids: list[str] = []  # creation order (age); absorbed nodes keep their slot
        self._node_pos: dict[str, int] = {}
        self._node_live = np.zeros(0, dtype=bool)
        self._pre_vecs: np.ndarray | None = None

    # --- texts -> vectors -------------------------------------------------------------------

    def vectors(self, kind: str, items: Sequence[tuple[str, str]]) -> np.ndarray:
        """Vectors for ``(id, text)`` pairs, reusing stored ones whose text is unchanged."""
        out: list[np.ndarray | None] = []
        missing: list[int] = []
        for i, (id_, text) in enumerate(items):
            key = (kind, id_)
            if self._text.get(key) == text:
                out.append(self._vec[key])
            else:
                out.append(None)
                missing.append(i)
        if missing:
            fresh = self.embedder.embed([items[i][1] for i in missing])
            for i, v in zip(missing, fresh, strict=True):
                out[i] = v
                key = (kind, items[i][0])
                self._vec[key], self._text[key] = v, items[i][1]
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack(out).astype(np.float32, copy=False)  # type: ignore[arg-type]

    @property
    def dim(self) -> int:
        if self._vec:
            return int(next(iter(self._vec.values())).shape[0])
        return int(self.embedder.embed(["dimension probe"]).shape[1])

    # --- the mirror ---------------------------------------------------------------------------

    def attach(self, memory: Memory) -> None:
        """Build the screening mirror for ``memory`` (embedding only texts not yet known)."""
        self._pre_vecs = None
        self.node_ids = list(memory.nodes)
        self._node_pos = {n: i for i, n in enumerate(self.node_ids)}
        self._node_live = np.ones(max(64, 2 * len(self.node_ids)), dtype=bool)
        self.cause_ids = list(memory.causes)
        self._cause_row = {c: i for i, c in enumerate(self.cause_ids)}
        mat = self.vectors("cause", [(c.id, c.description) for c in memory.causes.values()])
        dim = mat.shape[1] if len(mat) else self.dim
        self._causes = np.zeros((max(256, 2 * len(mat)), dim), dtype=np.float32)
        self._causes[: len(mat)] = mat
        self._cause_node = np.array([self._node_pos.get(c.node, -1) for c in memory.causes.values()], dtype=np.int64)

    @property
    def _cause_vectors(self) -> np.ndarray:
        """The stored causes' vectors, a row per cause of ``cause_ids``."""
        assert self._causes is not None, "attach() first"
        return self._causes[: len(self.cause_ids)]

    def add_node(self, node_id: str) -> None:
        if node_id not in self._node_pos:
            n = len(self.node_ids)
            self._node_pos[node_id] = n
            self.node_ids.append(node_id)
            self._node_live = _room(self._node_live, n + 1, True)
            self._node_live[n] = True

    def add_cause(self, cause_id: str, node_id: str, text: str, vec: np.ndarray | None = None) -> None:
        assert self._causes is not None, "attach() first"
        if cause_id in self._cause_row:
            return
        if vec is None:
            vec = self.vectors("cause", [(cause_id, text)])[0]
        else:
            self._vec[("cause", cause_id)], self._text[("cause", cause_id)] = vec, text
        self.add_node(node_id)
        n = len(self.cause_ids)
        self._causes = _room(self._causes, n + 1, 0.0)
        self._causes[n] = vec
        self._cause_node = _room(self._cause_node, n + 1, -1)
        self._cause_node[n] = self._node_pos[node_id]
        self._cause_row[cause_id] = n
        self.cause_ids.append(cause_id)

    def follow(self, memory: Memory) -> None:
        """Take each cause's node, and which nodes live, from ``memory`` (after a node merge: the
        absorbed node keeps its slot, unused)."""
        for i, cid in enumerate(self.cause_ids):
            cause = memory.causes.get(cid)
            pos = None if cause is None else self._node_pos.get(cause.node)
            if pos is not None:
                self._cause_node[i] = pos
        for node, pos in self._node_pos.items():
            self._node_live[pos] = node in memory.nodes

    def apply(self, event: Event, memory: Memory, vec: np.ndarray | None = None) -> None:
        """Keep the mirror in step with one appended memory event; ``memory`` is the memory
        after it."""
        match event:
            case NodeCreated(node_id=node_id):
                self.add_node(node_id)
            case CauseCreated(cause_id=cause_id, node_id=node_id, description=description):
                self.add_cause(cause_id, node_id, description, vec)
            case NodesMerged():
                self.follow(memory)

    def prescreen(self, vecs: np.ndarray, block: int = 256) -> None:
        """Announce the round's new-cause vectors (rows in processing order).

        A matrix-vector product over 10,000 stored causes is memory-bound (~15 MB read per
        failure); one matrix-matrix product per ``block`` new causes reads the stored causes once
        per block instead. Causes added later in the round are still compared one by one."""
        assert self._causes is not None, "attach() first"
        self._pre_vecs = np.asarray(vecs, dtype=np.float32)
        self._pre_n0 = len(self.cause_ids)
        self._pre_base = self._cause_vectors  # rows [:n0] never change, even if the buffer grows
        self._pre_block = block
        self._pre_cache: tuple[int, np.ndarray] | None = None

    def cause_sims(self, vec: np.ndarray, row: int | None = None) -> np.ndarray:
        """Cosine similarity of ``vec`` with every stored cause (aligned with ``cause_ids``);
        ``row`` is ``vec``'s row in the last :meth:`prescreen` batch, if it is one."""
        if self._causes is None or not self.cause_ids:
            return np.zeros(0, dtype=np.float32)
        vec = vec.astype(np.float32, copy=False)
        pre_vecs = self._pre_vecs  # set in __init__, so no getattr fallback is needed
        if row is None or pre_vecs is None:
            return self._cause_vectors @ vec
        b = row // self._pre_block
        if self._pre_cache is None or self._pre_cache[0] != b:
            rows = pre_vecs[b * self._pre_block : (b + 1) * self._pre_block]
            self._pre_cache = (b, rows @ self._pre_base.T)
        head = self._pre_cache[1][row - b * self._pre_block]
        tail = self._cause_vectors[self._pre_n0 :] @ vec
        return np.concatenate([head, tail]) if len(tail) else head

    def _exact(self, sims: np.ndarray, rows: np.ndarray, vec: np.ndarray | None) -> np.ndarray:
        """Similarities of ``rows`` that decisions use: float64 dot products of the stored float32
        vectors, rounded to 1e-6. The float32 screen differs by ~1e-7 with the shape of the product
        (a prescreen block, the causes added so far), which must not flip a rank or a threshold
        between an interrupted and an uninterrupted run. Without ``vec``, ``sims`` rounded."""
        if vec is None or self._causes is None:
            return np.round(sims[rows].astype(np.float64), 6)
        exact = self._cause_vectors[rows].astype(np.float64) @ vec.astype(np.float64)
        return np.round(exact, 6)

    def screen(
        self, sims: np.ndarray, threshold: float, limit: int, vec: np.ndarray | None = None
    ) -> tuple[list[tuple[str, float]], int]:
        """Stage 2a: every cause with similarity >= ``threshold``, best first, ties by age (older
        cause first); returns the first ``limit`` of them and how many passed."""
        rows = np.flatnonzero(sims >= threshold - _MARGIN)
        exact = self._exact(sims, rows, vec)
        keep = exact >= threshold
        rows, exact = rows[keep], exact[keep]
        order = np.lexsort((rows, -exact))[:limit]
        return [(self.cause_ids[rows[i]], float(exact[i])) for i in order], len(rows)

    def node_shortlist(
        self, sims: np.ndarray, k: int, vec: np.ndarray | None = None
    ) -> list[tuple[str, float, str | None]]:
        """Stage 3a: each live node scored by its best member's similarity; the top ``k`` (all
        nodes when there are at most ``k``), ties by node age, then cause age. Returns
        ``(node_id, score, best_member_id)``; a node without members scores -inf and has no
        representative. Scores are the exact ones (cosine against every row) when ``vec`` is given.

        Walking the causes from the most similar down, a node's first member is its best, so
        the top ``k`` nodes are found among the top causes (with every cause within a margin of
        the last one); the candidate set only grows when those span fewer than ``k`` nodes."""
        if not self.node_ids or k <= 0:
            return []
        n = len(self.cause_ids)
        node_of = self._cause_node[:n]
        m = min(n, 8 * k)
        picked: list[tuple[int, float, int]] = []
        while n:
            if m < n:
                cutoff = sims[np.argpartition(-sims, m - 1)[m - 1]]
                cand = np.flatnonzero(sims >= cutoff - _MARGIN)
                safe = float(cutoff) - _MARGIN / 2  # above anything left out, exact or not
            else:
                cand, safe = np.arange(n), float("-inf")
            score = self._exact(sims, cand, vec)
            order = np.lexsort((cand, node_of[cand], -score))
            nodes, first = np.unique(node_of[cand[order]], return_index=True)
            ranked = np.argsort(first, kind="stable")[:k]
            picked = [(int(nodes[i]), float(score[order[first[i]]]), int(cand[order[first[i]]])) for i in ranked]
            if m >= n or (len(picked) >= k and picked[-1][1] >= safe):
                break
            m = min(n, 4 * m)
        out: list[tuple[str, float, str | None]] = [
            (self.node_ids[p], score, self.cause_ids[row]) for p, score, row in picked
        ]
        if len(out) < k:  # live nodes without members (only a hand-written log makes them)
            have = {p for p, _, _ in picked}
            empty = [p for p in np.flatnonzero(self._node_live[: len(self.node_ids)]) if p not in have]
            out.extend((self.node_ids[p], float("-inf"), None) for p in empty[: k - len(out)])
        return out

    def node_vectors(self, memory: Memory) -> tuple[list[str], np.ndarray]:
        """Label vectors of the memory's nodes, in creation order (stage 4a)."""
        ids = list(memory.nodes)
        return ids, self.vectors("node", [(n, memory.nodes[n].label) for n in ids])

    # --- persistence (LanceDB) --------------------------------------------------------------

    def _db(self) -> Any:
        os.environ.setdefault("LANCEDB_LOG", "error")  # read once, when lancedb is first imported
        import lancedb

        assert self.path is not None
        self.path.mkdir(parents=True, exist_ok=True)
        return lancedb.connect(str(self.path))

    def _schema(self, dim: int) -> Any:
        import pyarrow as pa

        return pa.schema(
            [
                pa.field("id", pa.string()),
                pa.field("kind", pa.string()),
                pa.field("text", pa.string()),
                pa.field("vector", pa.list_(pa.float32(), dim)),
                pa.field("model", pa.string()),
                pa.field("seq", pa.int64()),
                pa.field("run", pa.string()),
            ]
        )

    def _open_table(self, run: str, rebuild: bool) -> bool:
        """Open (or create) the run's table; True when it was (re)created empty."""
        db = self._db()
        name = table_name(run)
        tbl = None if rebuild else _table(db, name)
        if tbl is not None:
            data = tbl.to_arrow()
            if set(data.column("model").to_pylist()) <= {self.embedder.name}:
                self._table = tbl
                ids, kinds, texts = (data.column(c).to_pylist() for c in ("id", "kind", "text"))
                flat = np.asarray(data.column("vector").combine_chunks().flatten(), dtype=np.float32)
                mat = flat.reshape(len(ids), -1) if ids else flat.reshape(0, 1)
                for i, (id_, kind, text) in enumerate(zip(ids, kinds, texts, strict=True)):
                    key = (kind, id_)
                    self._vec[key], self._text[key] = mat[i], text
                    self._held[key] = text
                return False
        self._table = db.create_table(name, schema=self._schema(self.dim), mode="overwrite")
        self._held = {}
        return True

    def sync(self, store: Recorder, run: str, *, rebuild: bool = False) -> int:
        """Bring the LanceDB table up to the run's memory now (its causes and nodes, with their
        texts); returns the rows written. Without a path only the vectors are brought up to date."""
        self.run = run
        saved = [] if rebuild else store.view_states(VIEW, run, latest=True)
        if self.path is not None:
            model = saved[0].state.get("model") if saved else None
            stale = model not in (None, self.embedder.name)
            if self._open_table(run, rebuild or stale or not saved):
                saved = []
        memory = load_memory(store, run)
        if saved and saved[0].seq == memory.last_seq:
            return 0
        want = {("cause", c.id): c.description for c in memory.causes.values()}
        want |= {("node", n.id): n.label for n in memory.nodes.values()}
        rows = [
            Row(id_, kind, text, memory.last_seq)
            for (kind, id_), text in want.items()
            if self._held.get((kind, id_)) != text
        ]
        deletes = {key for key in self._held if key not in want}
        for kind in ("cause", "node"):
            self.vectors(kind, [(r.id, r.text) for r in rows if r.kind == kind])
        for r in rows:
            self._held[(r.kind, r.id)] = r.text
        for key in deletes:
            self._held.pop(key, None)
        if self.path is None:
            return len(rows)
        if rows:
            self._write(rows, run)
        for kind in ("cause", "node"):
            gone = sorted(k[1] for k in deletes if k[0] == kind)
            if gone:
                self._table.delete(f"kind = '{kind}' AND id IN ({', '.join(_quote(g) for g in gone)})")
        try:
            at = store.event_at(run, memory.last_seq) if memory.last_seq else None
            if at is not None:
                state = {"model": self.embedder.name, "path": str(self.path)}
                store.put_view_states([ViewState(VIEW, run, 0, at.seq, at.hash, state)])
        except StoreError as exc:  # a cache: the next sync compares the table with the memory again
            log.warning("vector index state of run %r not saved: %s", run, exc)
        return len(rows)

    def _write(self, rows: Iterable[Row], run: str) -> None:
        import pyarrow as pa

        rows = list(rows)
        vecs = np.stack([self._vec[(r.kind, r.id)] for r in rows]).astype(np.float32)
        dim = vecs.shape[1]
        batch = pa.table(
            {
                "id": [r.id for r in rows],
                "kind": [r.kind for r in rows],
                "text": [r.text for r in rows],
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel(), pa.float32()), dim),
                "model": [self.embedder.name] * len(rows),
                "seq": pa.array([r.seq for r in rows], pa.int64()),
                "run": [run] * len(rows),
            },
            schema=self._schema(dim),
        )
        (
            self._table.merge_insert(["kind", "id"])
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(batch)
        )

    def rows(self) -> list[IndexRow]:
        """The persisted rows (for inspection and tests); [] without a path."""
        if self._table is None:
            return []
        data = cast(list[IndexRow], self._table.to_arrow().select(list(IndexRow.__annotations__)).to_pylist())
        return sorted(data, key=lambda r: (r["kind"], r["seq"], r["id"]))


@dataclass(frozen=True)
class Reindexed(Result):
    """What :func:`reindex` wrote (``memory reindex --json``): the run, how many rows, the index's
    path, the embedder's model, and the seq of the log its checkpoint reached."""

    run: str
    rows: int
    path: str
    model: str
    checkpoint: int


def reindex(store: Recorder, run: str, path: str | Path, embedder: Embedder) -> Reindexed:
    """Rebuild the run's LanceDB table from the log."""
    rows = VectorIndex(embedder, path, run).sync(store, run, rebuild=True)
    saved = store.view_states(VIEW, run, latest=True)
    return Reindexed(run, rows, str(path), embedder.name, saved[0].seq if saved else 0)
