"""The vector index: screening mirror and the LanceDB projection of the log."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from diagevo.catalog import CauseCreated, NodeCreated, NodesMerged
from diagevo.log import Recorder, open_log
from diagevo.memory.fold import evolve
from diagevo.views.index import VIEW as CHECKPOINT
from diagevo.views.index import VectorIndex, default_index_path, reindex
from diagevo.views.memory import load_memory
from tests.logs import wire_event

RUN = "run-index"


class HashEmbedder:
    """Deterministic unit vectors from a hash of the text; counts what it embeds."""

    def __init__(self, name: str = "hash-embed", dim: int = 16) -> None:
        self.name, self.dim, self.embedded = name, dim, 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded += len(texts)
        out = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256((self.name + t).encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.dim)
            out.append(v / np.linalg.norm(v))
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Recorder]:
    s = open_log(f"sqlite:///{tmp_path / 'idx.db'}")
    s.append([wire_event("run.started", RUN, 0, "start", config={"k": 0.5})])
    yield s
    s.close()


def add(store: Recorder, rnd: int, nodes: int, causes_per_node: int, start: int = 0) -> None:
    events = []
    c = start * causes_per_node
    for n in range(start + 1, start + nodes + 1):
        events.append(wire_event("node.created", RUN, rnd, f"n{n}", node_id=f"N{n}", label=f"label {n}"))
        for _ in range(causes_per_node):
            c += 1
            events.append(
                wire_event(
                    "cause.created", RUN, rnd, f"c{c}", cause_id=f"C{c}", node_id=f"N{n}", description=f"cause {c}"
                )
            )
    store.append(events)


def test_shortlist_and_screening_agree_with_brute_force(store: Recorder) -> None:
    rng = random.Random(3)
    events = []
    for n in range(1, 9):
        events.append(wire_event("node.created", RUN, 1, f"n{n}", node_id=f"N{n}", label=f"label {n}"))
    for c in range(1, 41):
        events.append(
            wire_event(
                "cause.created",
                RUN,
                1,
                f"c{c}",
                cause_id=f"C{c}",
                node_id=f"N{rng.randint(1, 8)}",
                description=f"cause {c}",
            )
        )
    store.append(events)
    mem = load_memory(store, RUN)
    emb = HashEmbedder()
    index = VectorIndex(emb)
    index.attach(mem)
    q = emb.embed(["a new cause"])[0]
    sims = index.cause_sims(q)
    vec = {cid: emb.embed([c.description])[0] for cid, c in mem.causes.items()}
    brute = {cid: float(v @ q) for cid, v in vec.items()}
    assert dict(zip(index.cause_ids, sims.tolist(), strict=True)) == pytest.approx(brute, abs=1e-5)
    best = {nid: max((brute[c.id], c.id) for c in mem.members(nid)) for nid in mem.nodes if mem.members(nid)}
    want = sorted(best, key=lambda nid: (-best[nid][0], list(mem.nodes).index(nid)))[:5]
    got = index.node_shortlist(sims, 5)
    assert [g[0] for g in got] == want
    assert [g[2] for g in got] == [best[nid][1] for nid in want]
    assert [g[1] for g in got] == pytest.approx([best[nid][0] for nid in want], abs=1e-5)
    top, passed = index.screen(sims, -1.0, 3, q)
    assert passed == 40 and [t[0] for t in top] == [
        c for c, _ in sorted(brute.items(), key=lambda t: (-t[1], t[0]))[:3]
    ]
    assert [t[1] for t in top] == [round(brute[c], 6) for c, _ in top]
    assert index.screen(sims, 2.0, 3, q) == ([], 0)
    # with the query vector, the shortlist's scores are the exact ones
    exact = index.node_shortlist(sims, 5, q)
    assert [g[0] for g in exact] == want and [g[1] for g in exact] == [round(best[nid][0], 6) for nid in want]


def test_identical_texts_tie_by_age_whatever_the_float32_noise(store: Recorder) -> None:
    """Two causes with the same text have the same vector; a float32 product may still rank the
    younger one ~1e-7 ahead (a resumed run computes in other shapes). Decisions use exact
    similarities rounded to 1e-6, then age: the older cause, in every run."""
    events = [wire_event("node.created", RUN, 1, "n1", node_id="N1", label="label 1")]
    events += [
        wire_event("cause.created", RUN, 1, f"c{c}", cause_id=f"C{c}", node_id="N1", description=text)
        for c, text in ((74, "same words"), (75, "same words"), (76, "other words"))
    ]
    store.append(events)
    emb = HashEmbedder()
    index = VectorIndex(emb)
    index.attach(load_memory(store, RUN))
    q = emb.embed(["same words"])[0]
    sims = index.cause_sims(q)
    assert sims[0] == sims[1]
    noisy = sims.copy()
    noisy[1] += 1.2e-7  # what another batch composition or product shape does
    for s in (sims, noisy):
        ranked, passed = index.screen(s, 0.5, 5, q)
        assert [c for c, _ in ranked] == ["C74", "C75"] and passed == 2
        assert [sim for _, sim in ranked] == [1.0, 1.0]
        assert index.node_shortlist(s, 1, q)[0][2] == "C74"


def test_mirror_follows_new_causes_and_merges(store: Recorder) -> None:
    add(store, 1, nodes=2, causes_per_node=1)
    emb = HashEmbedder()
    index = VectorIndex(emb)
    index.attach(load_memory(store, RUN))
    v = emb.embed(["cause 3"])[0]
    mem = load_memory(store, RUN)
    for event in (
        NodeCreated(node_id="N3", label="label 3"),
        CauseCreated(cause_id="C3", node_id="N3", description="cause 3"),
    ):
        mem = evolve(mem, event, 1)
        index.apply(event, mem, v if isinstance(event, CauseCreated) else None)
    sims = index.cause_sims(v)
    assert index.node_shortlist(sims, 1)[0][:3:2] == ("N3", "C3")
    merge = NodesMerged(survivor="N1", absorbed="N3", label="merged")
    index.apply(merge, evolve(mem, merge, 1))  # the node of each cause: the fold's
    short = index.node_shortlist(sims, 5)
    assert [s[0] for s in short][0] == "N1" and "N3" not in [s[0] for s in short]
    assert short[0][2] == "C3"  # C3 now speaks for N1


def test_lancedb_projection_is_idempotent_and_follows_merges(store: Recorder, tmp_path: Path) -> None:
    add(store, 1, nodes=3, causes_per_node=2)
    emb = HashEmbedder()
    path = tmp_path / "v.lance"
    index = VectorIndex(emb, path, RUN)
    assert index.sync(store, RUN) == 9
    rows = index.rows()
    assert len(rows) == 9 and {r["model"] for r in rows} == {"hash-embed"}
    (saved,) = store.view_states(CHECKPOINT, RUN)
    assert saved.seq == store.last_seq(RUN)
    # nothing new: no rows, no embedding, same checkpoint
    before = emb.embedded
    assert index.sync(store, RUN) == 0 and emb.embedded == before and index.rows() == rows
    # a fresh process reopens the table instead of re-embedding
    emb2 = HashEmbedder()
    reopened = VectorIndex(emb2, path, RUN)
    reopened.sync(store, RUN)
    reopened.attach(load_memory(store, RUN))
    assert emb2.embedded <= 1 and reopened.rows() == rows  # at most a dimension probe
    # without its saved state the table is rebuilt to the same rows
    store.drop_view_states(CHECKPOINT, RUN)
    reopened.sync(store, RUN)
    assert reopened.rows() == rows
    # a merge relabels the survivor and drops the absorbed node's row
    store.append(
        [wire_event("nodes.merged", RUN, 1, "m1", survivor="N1", absorbed="N2", label="merged label", similarity=0.9)]
    )
    index.sync(store, RUN)
    nodes = {r["id"]: r for r in index.rows() if r["kind"] == "node"}
    assert set(nodes) == {"N1", "N3"} and nodes["N1"]["text"] == "merged label"
    assert nodes["N1"]["seq"] == store.last_seq(RUN)
    # a rebuild from the log gives the same table
    assert reindex(store, RUN, tmp_path / "w.lance", emb).rows == 8
    again = VectorIndex(emb, tmp_path / "w.lance", RUN)
    again.sync(store, RUN)
    assert _texts(again.rows()) == _texts(index.rows())  # the same texts (each row's seq: the memory's when written)


def _texts(rows: list[dict]) -> list[tuple[str, str, str]]:
    return sorted((r["kind"], r["id"], r["text"]) for r in rows)


def test_another_embedding_model_or_a_lost_table_rebuilds(store: Recorder, tmp_path: Path) -> None:
    add(store, 1, nodes=2, causes_per_node=1)
    path = tmp_path / "v.lance"
    VectorIndex(HashEmbedder(), path, RUN).sync(store, RUN)
    other = VectorIndex(HashEmbedder("other-model"), path, RUN)
    assert other.sync(store, RUN) == 4
    assert {r["model"] for r in other.rows()} == {"other-model"}
    assert store.view_states(CHECKPOINT, RUN)[0].state["model"] == "other-model"
    lost = tmp_path / "elsewhere.lance"  # the checkpoint says done, the table is not there
    fresh = VectorIndex(HashEmbedder("other-model"), lost, RUN)
    assert fresh.sync(store, RUN) == 4 and len(fresh.rows()) == 4


def test_default_index_path_is_beside_or_keyed_by_the_database() -> None:
    assert default_index_path("sqlite:///runs/x.db") == Path("runs/x.diagevo/index.lance")
    assert default_index_path("sqlite:///runs/x.db?synchronous=normal") == Path("runs/x.diagevo/index.lance")
    a = default_index_path("postgresql+psycopg://u:p@h/db")
    assert a.parent.name.startswith("diagevo-db-") and a.parent.suffix == ".diagevo" and a.name == "index.lance"
    assert "p@" not in str(a)
    assert a == default_index_path("postgresql+psycopg://u:other-password@h/db")  # same database
    assert a != default_index_path("postgresql+psycopg://u:p@h/db2")
    assert a != default_index_path("postgresql+psycopg://u:p@h/db?options=-csearch_path%3Dt1")


def test_shortlist_widens_its_search_when_the_best_causes_share_a_node(store: Recorder) -> None:
    events = [wire_event("node.created", RUN, 1, f"n{n}", node_id=f"N{n}", label=f"label {n}") for n in range(1, 5)]
    events += [
        wire_event(
            "cause.created",
            RUN,
            1,
            f"c{c}",
            cause_id=f"C{c}",
            node_id="N1" if c <= 100 else f"N{2 + c % 3}",
            description=f"cause {c}",
        )
        for c in range(1, 131)
    ]
    store.append(events)
    index = VectorIndex(HashEmbedder())
    index.attach(load_memory(store, RUN))
    sims = np.zeros(len(index.cause_ids), dtype=np.float32)
    sims[:100] = np.linspace(0.9, 0.5, 100)  # N1 holds the 100 best causes
    sims[100:] = np.linspace(0.4, 0.1, 30)
    sims[129] = 0.4  # C130 (in N3) ties with C101 (in N4): the older node ranks first
    got = index.node_shortlist(sims, 3)
    assert [g[0] for g in got] == ["N1", "N3", "N4"]
    assert [g[2] for g in got] == ["C1", "C130", "C101"]
    assert [g[1] for g in got] == pytest.approx([0.9, 0.4, 0.4])
