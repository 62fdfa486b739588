"""Untrusted text stays text: a hostile corpus in every text and id of a log, through every
command that prints log text, checked byte for byte (issue 28, items 1, 2 and 9).

The corpus (markup, unbalanced tags, a markup link, every C0 and C1 control, OSC 8 and OSC 52,
CSI screen clear, bidi overrides and isolates, ``$\\frac{$``, emoji codes, right-to-left
words and a 200,000-character line; NUL is refused in every text, on every backend) is placed in
run ids, node labels, cause descriptions,
questions, pseudo-labels, trajectories, diagnoses, benchmark, family, phase and metric names of
real logs: one ingested through ``memory ingest``, its fork driven through the round protocol
and ``diagnose`` (the diagnostician's hostile replies come from a loopback server), and an hf-like
run scored by ``eval --run``. Every read command then runs

- in a pipe (stdout is no terminal): not one control byte but ``\\n``, no C1 control, no bidi
  control, and the corpus visible as text (``computes [x/2] instead of floor(x/2)`` literally,
  ESC as ``\\x1b``);
- with a forced terminal (``FORCE_COLOR=1``, Rich's variable, read at every print): the same,
  but for the cursor moves of Rich's own progress bars;
- in a narrow terminal (``COLUMNS=40``): the same bytes checks, the wrapping paths;
- in a real colour terminal (a subprocess with ``FORCE_COLOR=1 TERM=xterm-256color``): the only
  escapes are Rich's own styles (SGR) and cursor moves of its progress bars; stripped of them,
  the same checks.

Every run exits 0. The report's HTML is opened in Chromium: no script runs, no request leaves,
every hostile text sits in a ``<bdi>``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diagevo.catalog import CauseCreated
from diagevo.config.limits import LimitsConfig
from diagevo.log import open_log
from diagevo.log.paths import beside_database, run_dir
from tests.input_cases import cli
from tests.llm_server import LLMServer
from tests.logs import Log, wire_event

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "data" / "benchmarks"

# --- the corpus ---------------------------------------------------------------------------------

MARKUP = "computes [x/2] instead of floor(x/2)"
UNBALANCED = "[/b] [/] [bold"
LINK = "[link=http://evil.example]x[/link]"
OSC8 = "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\"
OSC52 = "\x1b]52;c;ZXZpbA==\x07"
CSI = "\x1b[2J\x1b[31mred\x1b[0m\x1b[H"
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
C0 = "".join(chr(i) for i in range(1, 0x20))  # NUL on its own (refused in texts kept as artifacts)
C1 = "".join(chr(i) for i in range(0x7F, 0xA0))
MATH = "$\\frac{$"
EMOJI = ":smile: :thumbs_up:"
RTL = "مرحبا עולם"
LONG = "y" * 200_000

# the corpus as one text, the markers first (a table cell shows the start of a text)
TEXT = " ".join([MARKUP, UNBALANCED, LINK, OSC52, CSI, MATH, EMOJI, BIDI, OSC8, C0, C1, RTL, "end"])

# how each marker shows in a terminal (and in the report)
SHOWN = {
    "markup": MARKUP,
    "unbalanced": UNBALANCED,
    "link": LINK,
    "osc52": "\\x1b]52;c;ZXZpbA==\\x07",
    "csi": "\\x1b[2J\\x1b[31mred\\x1b[0m\\x1b[H",
    "math": MATH,
    "emoji": EMOJI,
    "bidi": "\\u202a\\u202b\\u202c\\u202d\\u202e",
}
TABLE_MARKERS = ("markup", "unbalanced", "link")  # what fits a cut table cell

# ids hold no control character (refused at ingest) but markup, quotes, bidi, mathtext and emoji codes
RUN = "tr[/b]x[link=http://evil.example]y[/link]\u202e$\\frac{$'\":smile:"
RUN_SHOWN = "tr[/b]x[link=http://evil.example]y[/link]\\u202e$\\frac{$'\":smile:"
FORK = "fork[/b]\u2066'"
HF = "hf[/b]\u202e$x$"
CAUSE = "C2'[/b]\u202e"
NODE = "N2[/b]'"
BENCH = "bench$\\frac{$[/b]\u202e"
FAMILY = "fam$\\frac{$[/b]"
PHASE = "phase$\\frac{$[/b]\u202e"
METRIC = "m[/b]$\\frac{$"


def hostile_log() -> Log:
    """Two committed rounds; every text and id of the catalogue holds the corpus."""
    log = Log(run=RUN)
    log.node("N1", "label " + TEXT).node(NODE, "second " + TEXT)
    log.cause("C1", "N1", "desc " + TEXT)
    log.cause("C3", "N1", "long " + LONG)
    log.add("question.generated", question_id="q'1[/b]", mode="targeted", active_cause="C1", text="Q " + TEXT + LONG)
    log.add(
        "question.scored",
        question_id="q'1[/b]",
        n=12,
        p1=0.5,
        p2=0.5,
        pseudo_label="L " + TEXT,
        retained=True,
        reference="ref " + TEXT,
    )
    log.add(
        "failure.recorded",
        failure_id="f'1[/b]",
        question_id="q'1[/b]",
        response="R " + TEXT + LONG,
        reference="ref " + TEXT,
    )
    log.add(
        "failure.diagnosed",
        failure_id="f'1[/b]",
        error_cause="diag " + TEXT,
        model="model " + TEXT,
        raw="raw " + TEXT,
    )
    log.add("cause.created", cause_id=CAUSE, node_id=NODE, description="d2 " + TEXT, failure_id="f'1[/b]")
    log.add("failure.recorded", failure_id="f2", question_id="q'1[/b]", response="R2 " + TEXT, reference="ref")
    log.add("failure.diagnosed", failure_id="f2", error_cause="diag2 " + TEXT, model="m", raw="raw2")
    log.add("failure.attributed", failure_id="f2", cause_id="C1", via="dedup", similarity=0.9)
    log.add("eval.recorded", benchmark=BENCH, n=3, accuracy=0.5, model="m " + TEXT)
    log.commit(heldout_acc=0.5, timing={PHASE: 1.0, "solver": 2.0})
    log.question("q2", 0.9, active="C1")
    log.add("cause.promoted", cause_id="C1", acc=0.9, n_candidates=1)
    log.add("eval.recorded", **{f"acc/{FAMILY}": 0.3, "heldout_acc": 0.4})
    log.commit(**{METRIC: 0.25})
    return log


# --- checks ---------------------------------------------------------------------------------

_FORBIDDEN = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
# what Rich itself writes to a terminal: styles (SGR), its progress bars' cursor moves and line erases
_RICH = re.compile(r"\x1b\[(?:[0-9;]*m|\?25[lh]|2K|[0-9]*[ABCDG])|\r")


def assert_clean(out: str, where: str) -> None:
    """No control byte but a newline, no C1 or bidi control, no line separator."""
    bad = _FORBIDDEN.search(out)
    assert bad is None, (
        f"{where}: U+{ord(bad.group()):04X} at {bad.start()}: {out[max(0, bad.start() - 60) : bad.start() + 20]!r}"
    )


def assert_shown(out: str, markers: tuple[str, ...], where: str) -> None:
    for m in markers:
        assert SHOWN.get(m, m) in out, f"{where}: {m} not shown as text"


class World:
    """The databases and files the commands run on."""

    def __init__(self, root: Path, db: str, srv: LLMServer, diagnosed: str) -> None:
        self.root, self.db, self.srv, self.diagnosed = root, db, srv, diagnosed


HOSTILE_MODEL = "m[/b]\u202e"  # the model the loopback server serves and lists, markup and a bidi override


@pytest.fixture(scope="module")
def srv() -> Iterator[LLMServer]:
    with LLMServer(models=(HOSTILE_MODEL,)) as server:
        yield server


def _ok(*args: str) -> str:
    code, out, err = cli(*args)
    assert code == 0, (args, err[-2000:])
    assert_clean(out + err, " ".join(args[:2]))
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, srv: LLMServer) -> World:
    root = tmp_path_factory.mktemp("untrusted")
    db = f"sqlite:///{root / 'h.db'}"
    src = root / "hostile.jsonl"
    src.write_text(hostile_log().jsonl(), encoding="utf-8")
    _ok("memory", "ingest", str(src), "--db", db)
    _ok("memory", "fork", "--run", RUN, "--round", "1", "--to", FORK, "--db", db)

    # the fork goes on through the round protocol: hostile questions, pseudo-labels and a metric name
    _ok("round", "start", "--run", FORK, "--db", db)
    requests = [
        json.loads(x) for x in _ok("round", "requests", "--n", "6", "--run", FORK, "--db", db, "--jsonl").splitlines()
    ]
    assert requests
    lines = []
    for i, q in enumerate(requests):
        answers = ["7"] * 9 + ["8"] * 3 if i % 2 else ["7"] * 12
        lines.append(
            json.dumps({**q, "question_id": f"{q['question_id']}[/b]", "text": "Q " + TEXT, "answers": answers})
        )
    record = root / "record.jsonl"
    record.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _ok("round", "record", str(record), "--run", FORK, "--db", db)
    _ok("round", "promote", "--run", FORK, "--db", db)
    _ok("round", "commit", "--run", FORK, "--db", db, "--metric", f"{METRIC}=0.5", "--allow-undiagnosed")

    # round 3 of the fork: the diagnostician (a loopback server) answers with hostile texts
    _ok("round", "start", "--run", FORK, "--db", db)
    cause_text = (
        "halves odd counts as computes [x/2] instead of floor(x/2) " + OSC52 + " then \x1b[2J clears the screen [/b]"
    )
    label = "rounding [/b] " + CSI + " \u202e of halves when dividing odd integers by two in counting"

    def extract(body: dict[str, Any]) -> str:  # the failure naming C1 recurs there: C1 differs between the runs
        if "Known Causes" in body["messages"][1]["content"]:
            return json.dumps({"matched_cause_id": "C1", "error_cause": None})
        return json.dumps({"matched_cause_id": None, "error_cause": cause_text})

    srv.default("extract", extract)
    srv.default("assign_node", json.dumps({"create_new_node": True, "new_node_label": label, "assigned_node": None}))
    failures = root / "failures.jsonl"
    failure = {
        "failure_id": "fd[/b]\u202e",
        "question_id": "qd[/b]",
        "question": "Q " + TEXT,
        "pseudo_label": "7",  # the label round 3 recorded for its question (a hostile one is round 1's)
        "response": "R " + TEXT,
        "reference": "ref " + TEXT,
        "known_causes": [],
    }
    again = {**failure, "failure_id": "fe[/b]", "question_id": "qe[/b]", "known_causes": ["C1"]}
    failures.write_text(json.dumps(failure) + "\n" + json.dumps(again) + "\n", encoding="utf-8")
    question = root / "question3.jsonl"  # the retained question of those failures, which diagnose records
    question.write_text(
        json.dumps({"question_id": "qd[/b]", "mode": "free", "text": "Q " + TEXT, "answers": ["7"] * 9 + ["8"] * 3})
        + "\n"
        + json.dumps(  # the question of the failure that names C1: targeted at it, its
            # accuracy (8 of 12) under theta_up, so C1 stays Active in the fork
            {
                "question_id": "qe[/b]",
                "mode": "targeted",
                "active_cause": "C1",
                "text": "Q " + TEXT,
                "answers": ["7"] * 8 + ["8"] * 4,
            }
        )
        + "\n",
        encoding="utf-8",
    )
    _ok("round", "record", str(question), "--run", FORK, "--db", db)
    _ok("round", "promote", "--run", FORK, "--db", db)  # the failures come after the promotions
    _ok(
        "diagnose",
        str(failures),
        "--run",
        FORK,
        "--round",
        "3",
        "--llm-url",
        srv.url,
        "--model",
        HOSTILE_MODEL,
        "--embedder",
        srv.url,
        "--embed-model",
        "e",
        "--db",
        db,
        "--index",
        str(root / "idx.lance"),
    )
    _ok("round", "commit", "--run", FORK, "--db", db)
    _ok("round", "start", "--run", FORK, "--db", db)  # round 4 open: its requests name the hostile causes
    with open_log(db) as store:
        diagnosed = [e.event.cause_id for e in store.read(FORK, types=(CauseCreated,), in_round=3)]
    assert len(diagnosed) == 1
    d = json.loads(_ok("memory", "diff", "--run", RUN, "--run", FORK, "--db", db, "--json"))
    assert "C1" in {c["cause_id"] for c in d["causes_differing"]}  # its description is in diff's table

    # an hf-like run whose checkpoints eval --run scores (the server answers every question)
    with open_log(db) as store:
        config = {"k": 0.5, "train": {"backend": "hf"}, "solver": {"model": "base-solver"}}
        events = [wire_event("run.started", HF, 0, "hf/0", config=config, seed=0)]
        events += [
            wire_event("round.started", HF, 1, "hf/1/s"),
            wire_event("checkpoint.written", HF, 1, "hf/1/c", path="round001-solver", phase="solver"),
            wire_event("round.committed", HF, 1, "hf/1/commit"),
        ]
        store.append(events)
        (run_dir(beside_database(store.url, ".runs"), HF) / "round001-solver").mkdir(parents=True)
    srv.default("other", lambda body: ["The answer is $\\boxed{3}$ " + TEXT] * body.get("n", 1))
    return World(root, db, srv, diagnosed[0])


def commands(w: World) -> dict[str, tuple[list[str], tuple[str, ...]]]:
    """name -> (argv, markers its output must show as text)."""
    db, root = w.db, w.root
    r, f = ["--run", RUN, "--db", db], ["--run", FORK, "--db", db]
    everything = tuple(SHOWN)
    return {
        "show": (["memory", "show", *r], (*everything, RUN_SHOWN)),
        "show-json": (["memory", "show", "--json", *r], ()),
        "show-latest": (["memory", "show", "--db", db], ()),  # the latest run, without --run
        "replay": (["memory", "replay", "--round", "1", *r], everything),
        "replay-json": (["memory", "replay", "--round", "2", "--json", *r], ()),
        "why": (["memory", "why", "C1", *r], everything),
        "why-hostile-id": (["memory", "why", CAUSE, *r], everything),
        "why-diagnosed": (["memory", "why", w.diagnosed, *f], ("markup", "osc52")),
        "why-json": (["memory", "why", CAUSE, "--json", *r], ()),
        "events": (["memory", "events", "--limit", "0", *r], TABLE_MARKERS),
        "events-json": (["memory", "events", "--json", *r], ()),
        "events-jsonl": (["memory", "events", "--jsonl", *f], ()),
        "events-cause": (["memory", "events", "--cause", CAUSE, *r], ()),
        "stats": (["memory", "stats", *r], ()),
        "stats-wide": (["memory", "stats", "--wide", *r], ("[/b]",)),
        "stats-json": (["memory", "stats", "--json", *f], ()),
        "verify": (["memory", "verify", *r], (RUN_SHOWN,)),
        "verify-fork": (["memory", "verify", *f], ()),
        "plot": (["memory", "plot", *r], (RUN_SHOWN,)),
        "plot-svg": (["memory", "plot", "-o", str(root / "plot.svg"), *r], ()),
        "plot-csv": (["memory", "plot", "-o", str(root / "plot.csv"), *f], ()),
        "diff": (["memory", "diff", "--run", RUN, "--run", FORK, "--db", db], ("markup",)),
        "diff-json": (["memory", "diff", "--run", RUN, "--run", FORK, "--db", db, "--json"], ()),
        "export": (["memory", "export", *r], ()),
        "export-file": (["memory", "export", "-o", str(root / "export.jsonl"), *f], ()),
        "report": (["report", "-o", str(root / "report.html"), *r], (RUN_SHOWN,)),
        "report-fork": (["report", "-o", str(root / "fork.html"), "--json", *f], ()),
        "requests": (["round", "requests", "--n", "6", *f], ("[/b]",)),
        "eval": (
            [
                "eval",
                "--run",
                HF,
                "--url",
                w.srv.url,
                "--out",
                str(root / "ev"),
                "--db",
                db,
                "--bench",
                f"gsm8k={FIXTURES / 'gsm8k_main_test.parquet'}",
            ],
            ("[/b]",),
        ),
        "error-run": (["memory", "show", "--run", "no[/b]\x1b[2J\u202e", "--db", db], ()),
        "error-cause": (["memory", "why", "C9[/b]\x1b]52;c;eA==\x07", *r], ()),
        "error-round": (["memory", "replay", "--round", "99999999999999999999", *r], ()),
    }


ERRORS = {"error-run", "error-cause", "error-round"}
MODES = {
    "pipe": {"COLUMNS": "4000"},
    "terminal": {"COLUMNS": "4000", "FORCE_COLOR": "1"},
    "narrow": {"COLUMNS": "40", "FORCE_COLOR": "1"},
}
NAMES = [
    "show",
    "show-json",
    "show-latest",
    "replay",
    "replay-json",
    "why",
    "why-hostile-id",
    "why-diagnosed",
    "why-json",
    "events",
    "events-json",
    "events-jsonl",
    "events-cause",
    "stats",
    "stats-wide",
    "stats-json",
    "verify",
    "verify-fork",
    "plot",
    "plot-svg",
    "plot-csv",
    "diff",
    "diff-json",
    "export",
    "export-file",
    "report",
    "report-fork",
    "requests",
    "eval",
    "error-run",
    "error-cause",
    "error-round",
]


def check(name: str, code: int, out: str, err: str, markers: tuple[str, ...], *, shown: bool = True) -> None:
    if name in ERRORS:
        assert code not in (0, 70) and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err[-2000:]
    else:
        assert code == 0, err[-3000:]
    assert_clean(out, f"{name} stdout")
    assert_clean(err, f"{name} stderr")
    if shown:
        assert_shown(out, markers, name)
    if name.endswith("json") or name == "events-jsonl":
        for line in out.splitlines():
            json.loads(line)  # valid JSON, escapes and all
    if name == "export":
        assert out.count("\n") == len(hostile_log().events())


# JSON, the export and the files written have no terminal layout: not run narrow
CASES = [
    (n, m)
    for m in MODES
    for n in NAMES
    if not (m == "narrow" and (n.endswith("json") or n.startswith(("export", "report", "plot-"))))
]


@pytest.mark.parametrize(("name", "mode"), CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_hostile_corpus_through_every_command(
    world: World, name: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("COLUMNS", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in MODES[mode].items():
        monkeypatch.setenv(key, value)
    argv, markers = commands(world)[name]
    code, out, err = cli(*argv)
    if mode != "pipe":  # a terminal: Rich's own cursor moves (progress bars) may be there, nothing else
        out, err = _RICH.sub("", out), _RICH.sub("", err)
    check(name, code, out, err, markers, shown=mode != "narrow")


def test_the_json_outputs_give_the_texts_back_exactly(world: World) -> None:
    code, out, _ = cli("memory", "why", "C1", "--json", "--run", RUN, "--db", world.db)
    assert code == 0 and json.loads(out)["description"] == "desc " + TEXT
    code, out, _ = cli("memory", "export", "--run", RUN, "--db", world.db)
    rows = [json.loads(x) for x in out.splitlines()]
    assert {r["data"].get("label") for r in rows if r["type"] == "node.created"} == {
        "label " + TEXT,
        "second " + TEXT,
    }
    other = f"sqlite:///{world.root / 'again.db'}"
    path = world.root / "again.jsonl"
    path.write_text(out, encoding="utf-8")
    assert cli("memory", "ingest", str(path), "--db", other)[0] == 0
    with open_log(other) as a, open_log(world.db) as b:
        assert [(e.event_id, e.hash) for e in a.read(RUN)] == [(e.event_id, e.hash) for e in b.read(RUN)]


def test_long_texts_are_cut_in_the_terminal_only(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "4000")
    code, out, _ = cli("memory", "show", "--run", RUN, "--db", world.db)
    assert code == 0 and "characters left out]" in out and len(out) < 40_000
    code, out, _ = cli("memory", "why", "C3", "--run", RUN, "--db", world.db, "--json")
    # the stored text exactly: a phrase past limits.phrase_bytes is stored cut, and marked so
    stored = ("long " + LONG)[: LimitsConfig().phrase_bytes]
    assert json.loads(out)["description"] == stored
    code, out, _ = cli("memory", "export", "--run", RUN, "--db", world.db)
    rows = [json.loads(x) for x in out.splitlines()]
    (created,) = [r["data"] for r in rows if r["type"] == "cause.created" and r["data"]["cause_id"] == "C3"]
    assert created["description"] == stored and created["cut"]["description"]["bytes"] == len("long " + LONG)


# the real entry point in a colour terminal: one process runs every command (Rich reads FORCE_COLOR,
# TERM and COLUMNS when the consoles are made), each command's stdout and stderr captured as bytes
DRIVER = """
import base64, io, json, sys
import diagevo.cli.app
results = []
for argv in json.load(sys.stdin):
    out, err = io.BytesIO(), io.BytesIO()
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
    sys.argv = ["diagevo", *argv]
    code = 0
    try:
        diagevo.cli.app.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush(); sys.stderr.flush()
    results.append([code, base64.b64encode(out.getvalue()).decode(), base64.b64encode(err.getvalue()).decode()])
sys.__stdout__.write(json.dumps(results))
"""


def test_hostile_corpus_in_a_colour_terminal(world: World) -> None:
    table = commands(world)
    names = [n for n in NAMES if not n.endswith("json") and n != "events-jsonl"]
    env = {**os.environ, "FORCE_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "4000", "PYTHONPATH": str(ROOT)}
    env.pop("NO_COLOR", None)
    done = subprocess.run(
        [sys.executable, "-c", DRIVER],
        input=json.dumps([table[n][0] for n in names]),
        capture_output=True,
        text=True,
        env=env,
        cwd=world.root,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    styled = 0
    for name, (code, out64, err64) in zip(names, json.loads(done.stdout), strict=True):
        raw_out, raw_err = base64.b64decode(out64), base64.b64decode(err64)
        styled += raw_out.count(b"\x1b[")
        out, err = _RICH.sub("", raw_out.decode("utf-8")), _RICH.sub("", raw_err.decode("utf-8"))
        check(name, code, out, err, table[name][1])
    assert styled > 0  # the terminal was a colour terminal: Rich styled the output


def test_the_report_isolates_every_hostile_text(world: World, browser: Any) -> None:
    out = world.root / "browser.html"
    code, _, err = cli("report", "-o", str(out), "--run", RUN, "--db", world.db)
    assert code == 0, err
    html = out.read_text(encoding="utf-8")
    assert_clean(html.replace("\n", " "), "report.html")
    assert SHOWN["markup"] in html and "\\x1b]52;c;" in html and "$\\frac{$" in html
    page = browser.new_page()
    problems: list[str] = []
    page.on(
        "console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))

    def route(r: Any) -> None:
        if r.request.url == out.as_uri():
            r.continue_()
        else:
            problems.append(f"request: {r.request.url}")
            r.abort()

    page.route("**/*", route)
    page.goto(out.as_uri())
    page.wait_for_load_state("load")
    found = page.evaluate("""() => {
      const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
      const hostile = [], outside = [], controls = [], isolated = [];
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        const t = n.nodeValue;
        if (/[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f\\u202a-\\u202e\\u2066-\\u2069]/.test(t)) controls.push(t.slice(0, 40));
        if (t.includes('computes [x/2]') || t.includes('tr[/b]x')) {
          hostile.push(t.slice(0, 40));
          // right-to-left words (any character beyond ASCII) are isolated; escapes are ASCII
          if (/[^\\u0000-\\u007f]/.test(t) && !n.parentElement.closest('bdi')) outside.push(t.slice(0, 60));
          if (t.includes('\\u0645\\u0631\\u062d\\u0628\\u0627') && n.parentElement.closest('bdi')) isolated.push(t.slice(0, 40));
        }
      }
      return {hostile: hostile.length, isolated: isolated.length, outside, controls, title: document.title,
              links: document.querySelectorAll('a[href^="http"]').length};
    }""")  # noqa: E501
    assert found["hostile"] >= 5 and found["isolated"] >= 3 and found["outside"] == [] and found["controls"] == [], (
        found
    )
    assert "\\u202e" in found["title"] and found["links"] == 0
    page.close()
    assert problems == []


def test_a_suggested_command_runs_as_shown() -> None:
    """An id the terminal shows with escapes is quoted as bash's $'...': the same escapes, the same bytes."""
    from diagevo.text.untrusted import shell_join, visible

    args = [RUN, FORK, "tr[/b]x\u202e's \x1b[2J", "a b", "plain"]
    line = shell_join(args)
    assert visible(line) == line  # nothing to escape: it is shown as it is
    done = subprocess.run(["bash", "-c", f"printf '%s\\0' {line}"], capture_output=True, check=True)
    assert done.stdout.split(b"\0")[:-1] == [a.encode() for a in args]


@pytest.mark.slow
def test_train_with_a_hostile_run_id_ends_cleanly(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 't.db'}"
    run = "tr[/b]x[link=http://evil.example]y[/link]\u202e"
    code, out, err = cli(
        "train",
        "--db",
        db,
        "--run",
        run,
        "--rounds",
        "1",
        "--set",
        "train.challenger_questions=16",
        "--set",
        "train.curriculum_questions=48",
        "--set",
        f'train.out_dir="{tmp_path / "ckpt"}"',
    )
    assert code == 0, err[-3000:]
    assert_clean(out, "train stdout")
    assert_clean(err, "train stderr")
    assert "run: tr[/b]x[link=http://evil.example]y[/link]\\u202e" in out
    assert "--run $'tr[/b]x[link=http://evil.example]y[/link]\\u202e'" in out  # the suggested commands, runnable


def test_a_wide_table_leaves_the_console_width_to_the_terminal(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """``stats --wide`` used to pin the shared console's width: later output in the process
    ignored $COLUMNS and cut long texts across lines."""
    from diagevo.cli.common import console

    monkeypatch.setenv("COLUMNS", "123")
    code, out, err = cli("memory", "stats", "--wide", "--run", RUN, "--db", world.db)
    assert code == 0, err
    monkeypatch.setenv("COLUMNS", "321")
    assert console.width == 321
