"""``diagevo train`` with a diagnostician that goes down in round 2 and comes back (issue 46,
item 1): asked again with backoff for ``diagnosis.outage_wait_s``, then the run stops with the
``--resume`` command, round 2 uncommitted; resumed once the server is back, it diagnoses the rest
and goes on, to the memory of a run whose server never died (same seed).

The simulator's world with a real diagnostician: ``diagnosis.llm_url`` names a loopback
OpenAI-compatible server (:mod:`tests.llm_server`) whose replies depend on the request alone,
killed mid-round (connections refused, kept-alive ones dropped) and restarted on its port."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import threading
from pathlib import Path
from typing import Any

import pytest

from diagevo.catalog import LLMCalled, RoundCommitted
from diagevo.log import open_log
from diagevo.views.memory import load_memory
from tests.llm_server import LLMServer
from tests.test_cli_memory import run_cli
from tests.test_train import small_args

CAUSES = (
    "forgets to carry the remainder when adding multi digit numbers column by column",
    "misreads which quantity the question asks for and answers an intermediate value instead",
)
LABEL = "performing multi step arithmetic carefully and answering exactly the quantity the question asks for"


def ids_in(body: dict[str, Any]) -> list[str]:
    """The ids the request's JSON Schema allows (its first ``enum`` of strings)."""
    m = re.search(r'"enum": \[("[^\]]*)\]', json.dumps(body.get("response_format") or {}))
    return json.loads(f"[{m.group(1)}]") if m else []


def extract(body: dict[str, Any]) -> str:
    digest = hashlib.sha256(body["messages"][1]["content"].encode()).digest()
    return json.dumps({"matched_cause_id": None, "error_cause": CAUSES[digest[0] % 2]})


def deduplicate(body: dict[str, Any]) -> str:
    ids = ids_in(body)
    return json.dumps({"duplicate": bool(ids), "matched_cause_id": ids[0] if ids else None})


def assign(body: dict[str, Any]) -> str:
    ids = ids_in(body)
    if ids:
        return json.dumps({"create_new_node": False, "new_node_label": None, "assigned_node": ids[0]})
    return json.dumps({"create_new_node": True, "new_node_label": LABEL, "assigned_node": None})


def serve(srv: LLMServer) -> None:
    srv.default("extract", extract)
    srv.default("deduplicate", deduplicate)
    srv.default("assign_node", assign)
    srv.default("consolidate", json.dumps({"merge": False, "merged_label": None}))


def args(db: str, run: str, srv: LLMServer, tmp: Path) -> list[str]:
    return [
        *small_args(db, run, 3, tmp),
        "--set",
        f'diagnosis.llm_url="{srv.url}"',
        "--set",
        'diagnosis.model="test-model"',
        "--set",
        "diagnosis.max_retries=1",
        "--set",
        "diagnosis.outage_wait_s=1",
        "--set",
        "diagnosis.outage_backoff_s=0.2",
    ]


def memory_of(db: str, run: str) -> Any:
    with open_log(db) as s:
        m = load_memory(s, run)
    causes = sorted(
        (c.id, c.node, c.description, c.frequency, c.state.value, c.created_round) for c in m.causes.values()
    )
    return causes, sorted((n.id, n.label) for n in m.nodes.values()), m.committed


def rounds_of(db: str, run: str) -> dict[int, dict[str, int]]:
    """Per round: its events by type (the ones this test is about)."""
    out: dict[int, dict[str, int]] = {}
    with open_log(db) as s:
        for e in s.read(run):
            if e.type in ("failure.recorded", "failure.diagnosed", "diagnosis.failed", "round.committed"):
                row = out.setdefault(e.round, {})
                row[e.type] = row.get(e.type, 0) + 1
    return out


@pytest.mark.slow
def test_a_diagnostician_down_in_round_2_stops_the_run_and_a_resume_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with LLMServer() as srv:
        serve(srv)
        calm = f"sqlite:///{tmp_path / 'calm.db'}"
        code, _, err = run_cli(capsys, *args(calm, "calm", srv, tmp_path / "calm"))
        assert code == 0, err
        with open_log(calm) as s:  # Prompt 1 requests of round 1 (the same in any run of this seed)
            first = sum(1 for e in s.read("calm", types=(LLMCalled,), in_round=1) if e.event.stage == "extract")

        asked = {"n": 0}
        lock = threading.Lock()

        def dying(body: dict[str, Any]) -> str:
            with lock:
                asked["n"] += 1
                if asked["n"] == first + 3:  # three of round 2's failures in: the server dies
                    threading.Thread(target=srv.stop).start()
            return extract(body)

        srv.default("extract", dying)
        db = f"sqlite:///{tmp_path / 'down.db'}"
        code, out, err = run_cli(capsys, *args(db, "down", srv, tmp_path / "down"))
        assert code == 1 and len(err.strip().splitlines()) == 1, err
        # the last ask within diagnosis.outage_wait_s: refused up front, or its replies failing at the endpoint
        said = r"run 'down' stopped in round 2, not committed: (cannot reach the diagnostician|\d+ of \d+ failures)"
        assert re.search(said, err), err
        resume = re.search(r"continue with `([^`]*)`", err)
        assert resume is not None and shlex.split(resume.group(1))[1:] == [
            "train",
            "--resume",
            "--run",
            "down",
            "--out-dir",  # the run's checkpoints are where its command put them: the resume is told
            str(tmp_path / "down" / "ckpt"),
            "--db",
            db,
        ]
        per_round = rounds_of(db, "down")
        assert "round.committed" in per_round[1] and "round.committed" not in per_round[2]
        assert per_round[2]["diagnosis.failed"] > 0

        srv.restart()
        serve(srv)
        code, out, err = run_cli(capsys, *shlex.split(resume.group(1))[1:], "--quiet")
        assert code == 0, err
        per_round = rounds_of(db, "down")
        assert all("round.committed" in per_round[t] for t in (1, 2, 3))
        code, out, err = run_cli(capsys, "memory", "verify", "--db", db, "--run", "down")
        assert code == 0, err
        assert memory_of(db, "down") == memory_of(calm, "calm")
        print(json.dumps({"calm": rounds_of(calm, "calm"), "down": rounds_of(db, "down")}))


def test_the_outage_wait_is_shown_and_a_diagnostician_back_in_time_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the diagnostician does not answer, the wait is reported through the progress
    callback (seconds waited, before each wait); one back within ``outage_wait_s`` goes on."""
    import diagevo.train.loop as loop
    from diagevo.errors import EndpointUnreachable
    from diagevo.train.config import load_config
    from diagevo.train.run import TrainOptions, train

    real, asked = loop.diagnose, {"n": 0}

    def down_twice(*a: Any, **kw: Any) -> Any:
        asked["n"] += 1
        if asked["n"] <= 2:
            raise EndpointUnreachable("cannot reach the diagnostician at http://127.0.0.1:9/v1: connection refused")
        return real(*a, **kw)

    monkeypatch.setattr(loop, "diagnose", down_twice)
    cfg = load_config(
        Path(__file__).resolve().parent.parent / "configs" / "sim.toml",
        [
            "train.challenger_questions=8",
            "train.curriculum_questions=16",
            "train.rounds=1",
            f'train.out_dir="{tmp_path / "ckpt"}"',
            "diagnosis.outage_wait_s=5",
            "diagnosis.outage_backoff_s=0.05",
        ],
    )
    said: list[tuple[str, int, int | None]] = []
    with open_log(f"sqlite:///{tmp_path / 'o.db'}") as store:
        run, _ = train(cfg, store, TrainOptions(progress=lambda phase, done, total: said.append((phase, done, total))))
        assert [e.round for e in store.read(run, types=(RoundCommitted,))] == [1]
    waits = [(done, total) for phase, done, total in said if phase == "outage"]
    assert asked["n"] == 3 and len(waits) == 2 and all(total is None for _, total in waits), said
