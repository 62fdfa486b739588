"""Shared by the hostile-input tests: a database with something in it, the four commands that
read files from outside, valid lines for each, and a way to run the CLI and see what it did.

The CLI runs in this process (through ``diagevo.cli.app.main``, the real entry point), with stdout and
stderr captured; an exception escaping ``main`` is what a user would see as a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
import sys
import traceback
from pathlib import Path
from typing import Any

from diagevo.cli.app import main
from tests.test_cli_memory import case_study

RUN = "x"  # the run with an open round (round 1) that `round record` and `diagnose` write to
DEAD_URL = "http://127.0.0.1:9/v1"  # nothing listens on the discard port

COMMANDS = ("ingest", "record", "diagnose", "eval")


def cli(*args: str) -> tuple[int, str, str]:
    """``diagevo ARGS`` in this process: (exit code, stdout, stderr). An exception that escapes
    ``main`` comes back as exit code -1 with its traceback in stderr."""
    out, err = io.StringIO(), io.StringIO()
    old = sys.argv
    sys.argv = ["diagevo", *args]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - the point is to see it
        code = -1
        err.write(traceback.format_exc())
    finally:
        sys.argv = old
    return code, out.getvalue(), err.getvalue()


def make_db(root: Path) -> str:
    """A SQLite database holding the case study (run ``r1``, three rounds) and run ``x`` with
    round 1 open."""
    db = f"sqlite:///{root / 'fuzz.db'}"
    log = root / "case.jsonl"
    log.write_text(case_study().jsonl(), encoding="utf-8")
    for args in (["memory", "ingest", str(log)], ["round", "start", "--run", RUN, "--set", "memory.k=1.0"]):
        code, _, err = cli(*args, "--db", db)
        assert code == 0, err
    return db


def db_state(db: str) -> dict[str, Any]:
    """Row count and a digest of every table: equal before and after means nothing was stored."""
    path = db.removeprefix("sqlite:///")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        state: dict[str, Any] = {}
        for t in tables:
            rows = con.execute(f'SELECT * FROM "{t}"').fetchall()
            state[t] = (len(rows), hash(tuple(map(repr, rows))))
        return state
    finally:
        con.close()


def command(kind: str, path: Path, db: str, out_dir: Path) -> list[str]:
    """The command line that reads ``path`` as input of ``kind``."""
    if kind == "ingest":
        return ["memory", "ingest", str(path), "--db", db]
    if kind == "record":
        return ["round", "record", str(path), "--run", RUN, "--db", db]
    if kind == "diagnose":
        return [
            "diagnose",
            str(path),
            "--run",
            RUN,
            "--round",
            "1",
            "--llm-url",
            DEAD_URL,
            "--embedder",
            DEAD_URL,
            "--db",
            db,
        ]
    if kind in ("eval", "eval-json"):
        return ["eval", "--run", RUN, "--bench", f"gsm8k={path}", "--db", db, "--out", str(out_dir)]
    raise AssertionError(kind)


# --- valid lines of each format -------------------------------------------------------------


def valid_objects(kind: str) -> list[dict[str, Any]]:
    """A few valid lines (as objects) of each command's input format."""
    if kind == "ingest":
        return [
            {
                "type": "run.started",
                "run": "fz",
                "round": 0,
                "event_id": "fz-0",
                "data": {"config": {"k": 0.5}, "seed": 1},
            },
            {"type": "round.started", "run": "fz", "round": 1, "event_id": "fz-1", "data": {}},
            {
                "type": "question.generated",
                "run": "fz",
                "round": 1,
                "event_id": "fz-2",
                "data": {"question_id": "q1", "mode": "free", "text": "What is 2+2?"},
            },
        ]
    if kind == "record":
        return [
            {
                "question_id": f"fq{i}",
                "mode": "free",
                "text": f"What is {i}+1?",
                "answers": [str(i + 1)] * 6 + ["0"] * 2,
            }
            for i in range(3)
        ]
    if kind == "diagnose":
        return [
            {
                "failure_id": f"ff{i}",
                "question_id": f"fq{i}",
                "question": "Solve x+1=2.",
                "pseudo_label": "1",
                "response": "x = 3",
                "reference": "x = 1",
                "known_causes": [],
            }
            for i in range(3)
        ]
    if kind in ("eval", "eval-json"):
        return [{"question": f"What is {i}+1?", "answer": f"#### {i + 1}"} for i in range(3)]
    raise AssertionError(kind)


# Fields of each format and values of a type the field never takes (each makes the line bad).
WRONG_TYPES: dict[str, dict[str, list[Any]]] = {
    "ingest": {
        "type": [{}, [], 1, None, True],
        "run": [{}, [], 1, None, "", 2.5],
        "round": ["x", -1, 1.5, {}, [], None, 2**40, 10**30],
        "event_id": [{}, [], 1, None, ""],
        "data": [[], "x", 1, True],
        # inside data (a field of another event type is an unknown field there: bad as well)
        "data.question_id": [{}, [], 1, None],
        "data.active_cause": [{}, [], 1, True],
        "data.mode": ["bogus", 1, {}],
        "data.config": [{}, [], "x", {"k": -1}, {"k": {}}],
        "data.seed": ["x", {}, 1.5],
    },
    "record": {
        "question_id": [{}, [], 1, None, ""],
        "mode": ["bogus", {}, 1, None],
        "text": [{}, [], 1, True],
        "active_cause": [{}, [], 1, True],
        "mastered_cause": [{}, [], 2.5],
        "node": [{}, [1]],
        "responses": ["x", {}, [1], [{}], 1],
        "answers": ["7", {}, [[]], [{}], True],
        "messages": ["hi", [1], {}],
    },
    "diagnose": {
        "failure_id": [{}, [], 1, None, ""],
        "question_id": [{}, 1, None, ""],
        "question": [{}, [], 1, None],
        "pseudo_label": [{}, 1, None],
        "response": [[], 1, None],
        "reference": [{}, 2.5],
        "known_causes": ["C1", {}, [1], [{}], [None], ["C-unknown"]],
    },
    "eval": {},  # rows are coerced to text; their bad shapes are below
    "eval-json": {},
}

# The line that carries an id (where a huge string or a control character is refused).
ID_FIELD = {"ingest": "event_id", "record": "question_id", "diagnose": "failure_id"}


def with_field(obj: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    """A copy of ``obj`` with ``field`` (``a`` or ``a.b``) set to ``value``."""
    head, dot, rest = field.partition(".")
    if not dot:
        return {**obj, field: value}
    inner = obj.get(head)
    return {**obj, head: with_field(inner if isinstance(inner, dict) else {}, rest, value)}


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def nested(levels: int, inner: Any = 1, as_object: bool = False) -> bytes:
    """A JSON value nested ``levels`` deep, built as text (json.dumps would itself recurse)."""
    core = dumps(inner)
    if as_object:
        return b'{"a":' * levels + core + b"}" * levels
    return b"[" * levels + core + b"]" * levels
