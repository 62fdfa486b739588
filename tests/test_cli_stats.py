"""``memory stats``: every metric a run records, by name (table, --wide, --json, -o FILE), a
run with no committed round, and which columns a narrow terminal keeps."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from tests.logs import Log
from tests.test_cli_memory import assert_one_line_error, run_cli, write


@pytest.fixture()
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'stats.db'}"


def metric_run(run: str = "r1", scale: float = 1.0) -> Log:
    """Two committed rounds with a trainer's metrics (what ``round commit --metric acc=0.71``
    stores), held-out accuracy and a benchmark score."""
    log = Log(run)
    log.node("N1", "roots").cause("C1", "N1", "keeps a root that fails the check")
    log.question("q1", 0.5)
    log.add("eval.recorded", acc=0.71 * scale, loss=1.25 * scale, heldout_acc=0.5 * scale)
    log.commit()
    log.question("q2", 0.75)
    log.add("eval.recorded", acc=0.74 * scale, loss=0.98 * scale, heldout_acc=0.625 * scale)
    log.add("eval.recorded", benchmark="gsm8k", n=10, accuracy=0.3 * scale)
    log.commit()
    return log


def ingest(capsys: pytest.CaptureFixture[str], tmp_path: Path, db: str, log: Log, name: str = "log.jsonl") -> None:
    code, _, err = run_cli(capsys, "memory", "ingest", str(write(tmp_path, log, name)), "--db", db)
    assert code == 0, err


def header(out: str) -> list[str]:
    return next(line for line in out.splitlines() if line.lstrip().startswith("t ")).split()


def test_every_metric_by_name_in_table_wide_and_json(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest(capsys, tmp_path, db, metric_run())
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli(capsys, "memory", "stats", "--db", db)
    assert code == 0, err
    assert {"acc", "loss", "held-out", "bench/gsm8k"} <= set(header(out))
    row2 = next(line.split() for line in out.splitlines() if line.split()[:1] == ["2"])
    assert {"0.740", "0.980", "0.625", "0.300"} <= set(row2)
    code, out, _ = run_cli(capsys, "memory", "stats", "--db", db, "--wide")
    assert code == 0 and {"acc", "loss", "bench/gsm8k"} <= set(header(out))
    data = json.loads(run_cli(capsys, "memory", "stats", "--db", db, "--json")[1])
    assert [r["acc"] for r in data["rounds"]] == [0.71, 0.74]
    assert [r.get("bench/gsm8k") for r in data["rounds"]] == [None, 0.3]
    assert {"acc", "loss", "heldout_acc", "bench/gsm8k"} <= set(data["metrics"])


def test_metric_names_are_shown_as_text(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    log = Log("r[red]x")
    log.question("q1", 0.5)
    log.add("eval.recorded", **{"[bold]acc\x1b[2J": 0.5})
    log.commit()
    ingest(capsys, tmp_path, db, log)
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli(capsys, "memory", "stats", "--db", db)
    assert code == 0, err
    assert "\x1b" not in out and "[bold]acc\\x1b[2J" in out and "run r[red]x" in out


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_stats_written_as_csv_and_parquet(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    ingest(capsys, tmp_path, db, metric_run())
    out = tmp_path / f"stats{suffix}"
    code, _, err = run_cli(capsys, "memory", "stats", "--db", db, "-o", str(out))
    assert code == 0, err
    if suffix == ".csv":  # read back with the csv module: a missing value is an empty field
        with out.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        column = lambda name: [json.loads(r[name]) if r[name] else None for r in rows]  # noqa: E731
    else:
        frame = pytest.importorskip("polars").read_parquet(out)
        column = lambda name: frame[name].to_list()  # noqa: E731
    expected = json.loads(run_cli(capsys, "memory", "stats", "--db", db, "--json")[1])
    assert column("round") == [r["round"] for r in expected["rounds"]]
    assert column("acc") == [0.71, 0.74] and column("bench/gsm8k") == [None, 0.3]
    assert column("active") == [r["active"] for r in expected["rounds"]]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


@pytest.mark.parametrize("name", ["stats.xlsx", "stats"])
def test_stats_unknown_suffix_is_refused(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    ingest(capsys, tmp_path, db, metric_run())
    code, _, err = run_cli(capsys, "memory", "stats", "--db", db, "-o", str(tmp_path / name))
    assert_one_line_error(code, err, name, ".csv or .parquet")
    assert not (tmp_path / name).exists()


def test_no_committed_round_is_one_line_with_round_0_scores(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    log = Log("fresh")
    log.round = 0
    log.add("eval.recorded", benchmark="gsm8k", n=10, accuracy=0.25)
    log.round = 1
    log.question("q1", 0.5)
    ingest(capsys, tmp_path, db, log)
    code, out, err = run_cli(capsys, "memory", "stats", "--db", db)
    assert code == 0, err
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1 and "run fresh has no committed round yet" in lines[0]
    assert "round 0 bench/gsm8k=0.250" in lines[0]
    data = json.loads(run_cli(capsys, "memory", "stats", "--db", db, "--json")[1])
    assert data["rounds"] == [] and data["uncommitted"] == [{"round": 0, "bench/gsm8k": 0.25}]


def test_no_committed_round_and_no_scores(tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]) -> None:
    log = Log("empty")
    log.question("q1", 0.5)
    ingest(capsys, tmp_path, db, log)
    code, out, _ = run_cli(capsys, "memory", "stats", "--db", db)
    assert code == 0 and out.strip() == "run empty has no committed round yet"


def test_80_columns_keep_accuracy_and_metrics(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest(capsys, tmp_path, db, metric_run())
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(capsys, "memory", "stats", "--db", db)
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 80
    shown = header(out)
    assert {"t", "held-out", "acc", "loss", "bench/gsm8k", "F_t"} <= set(shown)
    left_out = next(line for line in out.splitlines() if "left out to fit 80 columns" in line)
    assert "merge" in left_out and "acc" not in left_out.split(":")[1]
    legend = {h for h in ("kept", "new", "attr", "prom", "react") if f"{h}: " in out}
    assert legend == {h for h in ("kept", "new", "attr", "prom", "react") if h in shown}  # only what is shown
    code, out, _ = run_cli(capsys, "memory", "stats", "--db", db, "--wide")
    assert "merge" in header(out) and "left out" not in out and "react: reactivations" in out


def test_show_before_F1_is_fixed(tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]) -> None:
    log = Log("quiet")
    log.question("q1", 0.5)
    log.commit()
    ingest(capsys, tmp_path, db, log)
    code, out, err = run_cli(capsys, "memory", "show", "--db", db)
    assert code == 0, err
    assert "None" not in out and "F_1 = 0   F_1 not fixed yet   k = 0.5" in out


def test_replay_names_F_1_once_at_round_1_and_beside_F_t_later(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    log = Log("ref")
    log.node("N1").cause("C1", "N1").attribute("C1", "f2").commit()  # F_1 = 2
    log.attribute("C1", "f3").commit()  # F_2 = 3
    ingest(capsys, tmp_path, db, log)
    footers = []
    for t in ("1", "2"):
        code, out, err = run_cli(capsys, "memory", "replay", "--round", t, "--db", db)
        assert code == 0, err
        footers.append(next(line for line in out.splitlines() if line.startswith("F_")))
    assert footers[0].startswith("F_1 = 2   k = 0.5   ε_2 = ") and footers[0].count("F_1") == 1
    assert footers[1].startswith("F_2 = 3   F_1 = 2   k = 0.5   ε_3 = ")


def test_report_shows_every_metric_by_name(tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]) -> None:
    from diagevo.log import open_log
    from diagevo.report.data import load_run
    from diagevo.report.html import render

    ingest(capsys, tmp_path, db, metric_run())
    with open_log(db, readonly=True) as store:
        data = load_run(store, "r1")
    assert [(r.value("acc"), r.value("loss")) for r in data.rounds] == [(0.71, 1.25), (0.74, 0.98)]
    assert data.metrics == ["acc", "loss", "bench/gsm8k"]
    html = render(data, db, lambda *args: " ".join(["diagevo", *args]))
    assert 'data-chart="metrics"' in html  # a curve per metric
    rounds = html[html.index('<section id="rounds">') :]
    rounds = rounds[: rounds.index("</section>")]
    for name in ("acc", "loss"):
        assert f'title="{name}"' in rounds  # a column per metric name
    assert 'title="bench/gsm8k"' not in rounds and "gsm8k" in html  # the benchmarks: their own table
    assert "<td>0.740</td>" in rounds.replace(' class=""', "") and "<td>0.980</td>" in rounds.replace(' class=""', "")


def test_report_compares_two_runs(tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]) -> None:
    ingest(capsys, tmp_path, db, metric_run("base"), "a.jsonl")
    ingest(capsys, tmp_path, db, metric_run('k<2>&"b"', scale=0.5), "b.jsonl")
    out = tmp_path / "compare.html"
    code, stdout, err = run_cli(
        capsys, "report", "--db", db, "--run", "base", "--run", 'k<2>&"b"', "-o", str(out), "--json"
    )
    assert code == 0, err
    info = json.loads(stdout)
    assert info["runs"] == ["base", 'k<2>&"b"'] and info["rounds"] == {"base": [1, 2], 'k<2>&"b"': [1, 2]}
    html = out.read_text(encoding="utf-8")
    assert "k<2>" not in html and "k&lt;2&gt;&amp;&#34;b&#34;" in html  # the id escaped (markupsafe), wherever it shows
    charts = set(re.findall(r'data-chart="([^"]+)"', html))
    assert {
        "compare-heldout_acc",
        "compare-acc",
        "compare-loss",
        "compare-bench/gsm8k",
        "compare-F",
        "compare-epsilon_next",
        "compare-active",
        "compare-mastered",
    } <= charts
    # each figure has both runs' series: a legend entry per run (SVG text kept as text)
    for chart in re.findall(r'<figure class="chart" data-chart="compare-[^"]+">(.*?)</figure>', html, flags=re.S):
        assert "run base" in chart and "run k&lt;2&gt;&amp;" in chart
    summary = (
        html[html.index('<section id="runs">') : html.index('<section id="curves">')]
        .replace(' class=""', "")
        .replace(' class="l"', "")
    )
    assert "<td>0.740</td>" in summary and "<td>0.370</td>" in summary  # each run's last acc


def test_report_of_one_run_is_unchanged_by_the_comparison(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ingest(capsys, tmp_path, db, metric_run("base"), "a.jsonl")
    ingest(capsys, tmp_path, db, metric_run("second-run"), "b.jsonl")
    out = tmp_path / "one.html"
    code, _, err = run_cli(capsys, "report", "--db", db, "--run", "base", "-o", str(out))
    assert code == 0, err
    html = out.read_text(encoding="utf-8")
    assert '<section id="causes">' in html and "compare-" not in html and "second-run" not in html
    code, _, err = run_cli(capsys, "report", "--db", db, "--run", "base", "--run", "base", "-o", str(out))
    assert_one_line_error(code, err, "--run base is given twice")
    code, _, err = run_cli(
        capsys, "report", "--db", db, "--run", "base", "--run", "nope", "-o", str(tmp_path / "x.html")
    )
    assert_one_line_error(code, err, "nope")
    assert not (tmp_path / "x.html").exists()


SKILL = "[red]x\x1b[2J"  # a skill name from the world's data: text, never markup or a control


def labelled_run(run: str = "lab", scale: float = 1.0) -> Log:
    """Two committed rounds whose commits carry the label figures, overall and by skill (what
    the loop records where the world knows the truth), and the pseudo-label accuracy; and a
    trainer's metric by name."""
    log = Log(run)
    for q, acc, wrong in (("q1", 0.75, 0.125), ("q2", 0.875, 0.25)):
        log.question(q, 0.5)
        log.add("eval.recorded", acc=0.25)
        log.commit(
            heldout_acc=0.5,
            pseudo_label_acc=0.625,
            retained_label_acc=acc * scale,
            retained_label_acc_by_skill={"add": 1.0, SKILL: 0.5},
            wrong_reward_share=wrong * scale,
            wrong_reward_share_by_skill={"add": 0.0, SKILL: 0.375},
        )
    return log


def test_the_label_figures_are_columns_and_their_skills_detail(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest(capsys, tmp_path, db, labelled_run())
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli(capsys, "memory", "stats", "--db", db)
    assert code == 0, err
    heads = next(line for line in out.splitlines() if line.lstrip().startswith("t "))
    assert "kept lab" in heads and "wrong+" in header(out)
    assert not {"retained_label_acc", "wrong_reward_share"} & set(header(out))  # named once, short
    column = {name: heads.index(name) + len(name) for name in ("kept lab", "wrong+")}  # right-aligned
    row2 = next(line for line in out.splitlines() if line.split()[:1] == ["2"])
    assert row2[: column["kept lab"]].endswith("0.875") and row2[: column["wrong+"]].endswith("0.250")
    said = " ".join(out.split())
    assert "kept lab: retained questions whose pseudo-label is right" in said
    assert "wrong+: positive rewards on wrong answers" in said
    # by skill: detail, kept last, as acc/FAMILY is; at 80 columns left out before the schedule
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, "memory", "stats", "--db", db)
    assert {"kept", "lab", "wrong+", "F_t", "ε_t+1"} <= set(header(out))
    assert "retained_label_acc/add" in out.split("left out to fit 80 columns:")[1]
    code, out, _ = run_cli(capsys, "memory", "stats", "--db", db, "--wide")
    assert code == 0 and "retained_label_acc/add" in out and "wrong_reward_share/[red]x\\x1b[2J" in out
    assert "\x1b" not in out
    data = json.loads(run_cli(capsys, "memory", "stats", "--db", db, "--json")[1])
    assert [r["retained_label_acc"] for r in data["rounds"]] == [0.75, 0.875]
    assert [r["wrong_reward_share"] for r in data["rounds"]] == [0.125, 0.25]
    assert [r[f"wrong_reward_share/{SKILL}"] for r in data["rounds"]] == [0.375, 0.375]


def test_a_run_without_the_label_figures_has_no_such_column(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest(capsys, tmp_path, db, metric_run())
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli(capsys, "memory", "stats", "--db", db, "--wide")
    assert code == 0, err
    assert "kept lab" not in out and "wrong+" not in out


def test_the_report_shows_the_label_figures_overall(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rounds table and Fig. 3c: the two overall figures (not the skills'); a line each on
    the pseudo-label chart; none of them for a run without them."""
    from xml.etree import ElementTree

    from diagevo.log import open_log
    from diagevo.report.data import load_run
    from diagevo.report.html import render

    ingest(capsys, tmp_path, db, labelled_run(), "a.jsonl")
    ingest(capsys, tmp_path, db, metric_run(), "b.jsonl")
    with open_log(db, readonly=True) as store:
        data, plain_run = load_run(store, "lab"), load_run(store, "r1")
    labels = [(r.value("retained_label_acc"), r.value("wrong_reward_share")) for r in data.rounds]
    assert labels == [(0.75, 0.125), (0.875, 0.25)]
    assert not any("/" in c for c in data.rounds[0].columns)  # the skills' detail stays in memory stats --json
    assert data.metrics == ["acc"]  # "every other metric": not these again
    assert not {"retained_label_acc", "wrong_reward_share"} & set(plain_run.rounds[0].columns)
    html = render(data, db, lambda *args: " ".join(["diagevo", *args]))
    rounds = html[html.index('<section id="rounds">') :]
    rounds = rounds[: rounds.index("</section>")].replace(' class=""', "")
    assert 'title="retained_label_acc"' in rounds and 'title="wrong_reward_share"' in rounds
    assert "<td>0.875</td>" in rounds and "<td>0.250</td>" in rounds and "[red]" not in rounds
    figure = html[html.index('data-chart="pseudo-labels"') :]
    svg = ElementTree.fromstring(figure[figure.index("<svg") : figure.index("</svg>") + len("</svg>")])
    legend = {t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")}
    assert {
        "pseudo-label accuracy on the shared questions",
        "retained questions whose pseudo-label is right",
        "positive rewards on wrong answers",
    } <= legend
    plain_html = render(plain_run, db, lambda *args: " ".join(["diagevo", *args]))
    assert "retained_label_acc" not in plain_html and "wrong answers" not in plain_html


def test_the_comparison_shows_the_label_figures_overall(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ingest(capsys, tmp_path, db, labelled_run("a"), "a.jsonl")
    ingest(capsys, tmp_path, db, labelled_run("b", scale=0.5), "b.jsonl")
    out = tmp_path / "compare.html"
    code, stdout, err = run_cli(capsys, "report", "--db", db, "--run", "a", "--run", "b", "-o", str(out), "--json")
    assert code == 0, err
    metrics = json.loads(stdout)["metrics"]
    assert metrics == ["heldout_acc", "pseudo_label_acc", "retained_label_acc", "wrong_reward_share", "acc"]
    html = out.read_text(encoding="utf-8")
    charts = set(re.findall(r'data-chart="([^"]+)"', html))
    assert {"compare-retained_label_acc", "compare-wrong_reward_share"} <= charts
    assert not any(c.startswith(("compare-retained_label_acc/", "compare-wrong_reward_share/")) for c in charts)
    summary = html[html.index('<section id="runs">') : html.index('<section id="curves">')]
    summary = summary.replace(' class=""', "").replace(' class="l"', "")
    # each run's last round: 0.875 and 0.25, and half of them
    assert all(f"<td>{v}</td>" in summary for v in ("0.875", "0.250", "0.438", "0.125"))
    assert "[red]" not in summary
