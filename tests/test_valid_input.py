"""Odd but valid input is no crash (issue 28, item 9): a cause id with an unbalanced quote and
``$\\frac{$`` in a benchmark name, a family label, a timing phase or a run id make a report
(and a figure); an integer option beyond 64 bits is a one-line usage error naming the option,
one at the edge of 64 bits a declared error at worst; an ingest of many runs names a few of
them on one short line."""

from __future__ import annotations

import json
import re
import shlex
from html import unescape
from pathlib import Path

import pytest

from diagevo.log import open_log
from tests.input_cases import cli
from tests.logs import Log, wire_event
from tests.test_cli_memory import case_study

MATH = "$\\frac{$"


def odd_log(run: str) -> Log:
    log = Log(run=run)
    log.node("N1", "label").cause("C1'", "N1", "a cause whose id has an unbalanced quote")
    log.cause('C"2', "N1", "and another with a double quote")
    log.question("q1", 0.5, active="C1'")
    log.add("eval.recorded", benchmark=f"bench{MATH}", n=3, accuracy=0.5, model="m")
    log.commit(heldout_acc=0.5, timing={f"phase{MATH}": 1.0, "solver": 2.0})
    log.add("eval.recorded", **{f"acc/family{MATH}": 0.3, "acc/other": 0.6, "heldout_acc": 0.4})
    log.add("eval.recorded", benchmark=f"bench{MATH}", n=3, accuracy=0.7, model="m", k=4, mean_at_k=0.5)
    log.commit()
    return log


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("valid")
    url = f"sqlite:///{root / 'v.db'}"
    for run in (f"run{MATH}", "r1"):
        path = root / "in.jsonl"
        path.write_text((odd_log(run) if run != "r1" else case_study()).jsonl(), encoding="utf-8")
        code, _, err = cli("memory", "ingest", str(path), "--db", url)
        assert code == 0, err
    return url, root


def test_report_of_odd_ids_and_mathtext_names(db: tuple[str, Path]) -> None:
    url, root = db
    out = root / "r.html"
    code, _, err = cli("report", "-o", str(out), "--db", url, "--run", f"run{MATH}")
    assert code == 0, err
    html = out.read_text(encoding="utf-8")
    # the audit commands quote the ids: split by a shell, they give the ids back
    commands = [
        shlex.split(unescape(re.sub(r"<[^>]+>", "", c)))
        for c in re.findall(r"<code>(diagevo memory why .*?)</code>", html)
    ]
    assert {c[3] for c in commands} == {"C1'", 'C"2'} and all(c[c.index("--run") + 1] == f"run{MATH}" for c in commands)
    # the names are drawn as written (SVG text), not as mathtext
    for name in (f"bench{MATH}", f"family{MATH}", f"phase{MATH}"):
        assert name in unescape(html), name


def test_a_figure_titled_with_mathtext_is_drawn(db: tuple[str, Path]) -> None:
    url, root = db
    out = root / "plot.svg"
    code, _, err = cli("memory", "plot", "-o", str(out), "--db", url, "--run", f"run{MATH}")
    assert code == 0, err
    assert out.stat().st_size > 1000 and f"run{MATH}" in unescape(out.read_text(encoding="utf-8"))


HUGE = "99999999999999999999"
EDGE = str(2**63 - 1)


def int_options(url: str) -> list[list[str]]:
    r = ["--db", url, "--run", "r1"]
    return [
        ["memory", "replay", "--round", "{}", *r],
        ["memory", "events", "--round", "{}", *r],
        ["memory", "events", "--limit", "{}", *r],
        ["memory", "diff", "--run", "r1", "--run", "r1", "--round", "{}", "--db", url],
        ["memory", "fork", "--run", "r1", "--round", "{}", "--to", "z", "--db", url],
        ["round", "requests", "--n", "1", "--round", "{}", *r],
        ["round", "requests", "--n", "{}", *r],
        ["round", "promote", "--round", "{}", *r],
        ["round", "commit", "--round", "{}", *r],
        ["round", "start", "--run", "new", "--seed", "{}", "--db", url],
        ["train", "--rounds", "{}", "--dry-run", "--db", url],
        ["train", "--seed", "{}", "--dry-run", "--db", url],
        [
            "eval",
            "--model",
            "m",
            "--url",
            "http://127.0.0.1:9/v1",
            "--bench",
            "gsm8k=/nonexistent.jsonl",
            "--limit",
            "{}",
        ],
        [
            "diagnose",
            "/nonexistent.jsonl",
            "--run",
            "r1",
            "--round",
            "{}",
            "--llm-url",
            "http://127.0.0.1:9/v1",
            "--db",
            url,
        ],
    ]


@pytest.mark.parametrize("i", range(14))
def test_an_integer_beyond_64_bits_is_a_usage_error_naming_the_option(db: tuple[str, Path], i: int) -> None:
    url, _ = db
    args = int_options(url)[i]
    option = args[args.index("{}") - 1]
    code, _, err = cli(*(HUGE if a == "{}" else a for a in args))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and option in lines[0] and "out of range" in lines[0], err
    code, _, err = cli(*(EDGE if a == "{}" else a for a in args))  # the largest 64-bit integer: no crash
    assert code in (0, 1) and "Traceback" not in err and "internal error" not in err, err
    code, _, err = cli(*(f"-{HUGE}" if a == "{}" else a for a in args))
    assert code in (1, 2) and "internal error" not in err, err


def test_an_ingest_of_many_runs_names_a_few_on_one_short_line(tmp_path: Path) -> None:
    from diagevo.cli.operate import _runs

    line = _runs([f"run-{i:06d}" for i in range(100_000)])
    assert (
        len(line) < 200
        and line.startswith("100,000 runs: run-000000, ")
        and "(99,995 more; --json lists them all)" in line
    )
    events = [wire_event("run.started", f"r{i}", 0, f"r{i}/0", config={"k": 0.5}).line() for i in range(60)]
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'm.db'}"
    code, out, err = cli("memory", "ingest", str(path), "--db", url)
    assert code == 0, err
    assert (
        out.strip()
        == "ingested 60 events (0 already stored) into 60 runs: r0, r1, r2, r3, r4, … (55 more; --json lists them all)"
    )
    code, out, _ = cli("memory", "ingest", str(path), "--db", url, "--json")
    assert code == 0 and len(json.loads(out)["runs"]) == 60
    with open_log(url) as store:
        assert len(store.runs()) == 60
