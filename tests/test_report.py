"""``diagevo report`` and ``memory plot -o``: the report of a short simulator run opened in real
headless Chromium (Debian's package), offline; it must load without a console error or a
network request, draw every chart with a non-zero size, and answer clicks. A screenshot is
saved (``$DIAGEVO_SCREENSHOT_DIR`` when set, else the test's temporary directory). Both run
where neither polars nor matplotlib can be imported (the core install has neither)."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from diagevo.cli.app import main
from diagevo.log import open_log
from diagevo.results.stats import RoundRow
from tests.logs import wire_event
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_train import small_args

# "metrics": the run's val_acc, a metric by name that no other chart draws
EXPECTED_CHARTS = {
    "accuracy",
    "metrics",
    "pseudo-labels",
    "heldout-families",
    "lifecycle",
    "schedule",
    "questions",
    "timing",
}
COMPARED_CHARTS = {
    f"compare-{c}"
    for c in (
        "heldout_acc",
        "pseudo_label_acc",
        "retained_label_acc",  # the label figures overall; by skill they are detail, not compared
        "wrong_reward_share",
        "val_acc",
        "bench/math500",
        "bench/aime2024",
        "F",
        "epsilon_next",
        "active",
        "mastered",
    )
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A 3-round simulator run, plus benchmark scores and a checkpoint choice as `eval --run`
    records them (appended directly: the simulator's checkpoints are not language models)."""
    tmp = tmp_path_factory.mktemp("report")
    db = f"sqlite:///{tmp / 'run.db'}"
    sys.argv, argv = ["diagevo", *small_args(db, "rep", 3, tmp)], sys.argv
    try:
        main()
    except SystemExit as exc:
        assert not exc.code
    finally:
        sys.argv = argv
    with open_log(db) as store:
        events = []
        for t, acc in ((0, 0.0), (1, 0.25), (2, 0.35), (3, 0.30)):  # the base model scores 0: a mark on the axis
            data = {
                "benchmark": "math500",
                "kind": "math500",
                "n": 20,
                "accuracy": acc,
                "k": None,
                "mean_at_k": None,
                "model": f"m{t}",
            }
            events.append(wire_event("eval.recorded", "rep", t, f"rep/{t}/eval/math500", **data))
        aime = {
            "benchmark": "aime2024",
            "kind": "aime",
            "n": 30,
            "accuracy": 0.1,
            "k": 4,
            "mean_at_k": 0.05,
            "model": "m2",
        }
        events.append(wire_event("eval.recorded", "rep", 2, "rep/2/eval/aime", **aime))
        events.append(
            wire_event(
                "checkpoint.selected",
                "rep",
                2,
                "rep/2/select",
                benchmark="val",
                accuracy=0.4,
                scores={"0": 0.2, "1": 0.3, "2": 0.4, "3": 0.35},
            )
        )
        store.append(events)
    return db, tmp


def test_report_is_written_from_the_log(trained: tuple[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    db, tmp = trained
    out = tmp / "report.html"
    code, stdout, err = run_cli(capsys, "report", "--db", db, "--run", "rep", "-o", str(out), "--json")
    assert code == 0, err
    info = json.loads(stdout)
    assert info["rounds"] == [1, 2, 3] and info["causes"] > 0 and info["bytes"] == out.stat().st_size
    html = out.read_text(encoding="utf-8")
    assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html  # nothing to fetch
    assert "<script src" not in html and "<link" not in html
    for section in (
        "summary",
        "accuracy",
        "memory",
        "questions",
        "causes",
        "tree",
        "rounds",
        "timing",
        "config",
        "audit",
    ):
        assert f'<section id="{section}">' in html
    assert f"diagevo memory replay --round 3 --db {db} --run rep" in html
    assert "checkpoint selected on val: round 2" in html


def test_report_of_a_run_without_a_committed_round(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    with open_log(db) as store:
        store.append([wire_event("run.started", "new", 0, "new/0", config={"k": 0.5}, seed=0)])
    out = tmp_path / "r.html"
    code, stdout, err = run_cli(capsys, "report", "--db", db, "-o", str(out))
    assert code == 0, err
    assert "0 committed rounds" in stdout and "no committed round yet" in out.read_text()
    code, _, err = run_cli(capsys, "report", "--db", db, "-o", str(tmp_path / "r.pdf"))
    assert_one_line_error(code, err, "the report is an .html file")
    code, _, err = run_cli(capsys, "report", "--db", db, "-o", str(tmp_path / "nodir" / "r.html"))
    assert_one_line_error(code, err, "no directory")


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_memory_plot_writes_the_lifecycle_figure(
    trained: tuple[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db, _ = trained
    code, out, err = run_cli(capsys, "memory", "plot", "--db", db, "-o", str(tmp_path / "life.svg"))
    assert code == 0, err
    assert "█ active" in out and "▒ mastered" in out  # the legend tells the glyphs apart, not only colours
    svg = ElementTree.parse(tmp_path / "life.svg").getroot()  # a standalone SVG file: well-formed XML
    assert svg.tag == "{http://www.w3.org/2000/svg}svg" and float(svg.get("width")) >= 600
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert {"Memory lifecycle, run rep", "Mastered causes (hatched ///)", "Active causes (solid)", "round"} <= set(
        texts
    )
    stats = json.loads(run_cli(capsys, "memory", "stats", "--db", db, "--json")[1])["rounds"]
    assert [f"{r['active']}+{r['mastered']}" for r in stats] == [t for t in texts if "+" in t]  # a note per bar
    code, _, _ = run_cli(capsys, "memory", "plot", "--db", db, "-o", str(tmp_path / "series.csv"))
    lines = (tmp_path / "series.csv").read_text().splitlines()
    assert lines[0] == "round,active,mastered,nodes,F,epsilon_next" and len(lines) == 1 + len(stats)
    code, _, err = run_cli(capsys, "memory", "plot", "--db", db, "-o", str(tmp_path / "life.png"))
    assert_one_line_error(code, err, "life.png", "write a .svg figure", "no PNG")
    code, _, err = run_cli(capsys, "memory", "plot", "--db", db, "-o", str(tmp_path / "life.gif"))
    assert_one_line_error(code, err, "write a .svg figure")
    assert not (tmp_path / "life.png").exists() and not (tmp_path / "life.gif").exists()


def test_memory_plot_of_a_run_without_a_committed_round_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    with open_log(db) as store:
        store.append([wire_event("run.started", "new", 0, "new/0", config={"k": 0.5}, seed=0)])
    code, out, _ = run_cli(capsys, "memory", "plot", "--db", db)
    assert code == 0 and "run new has no committed round yet" in out
    code, _, err = run_cli(capsys, "memory", "plot", "--db", db, "-o", str(tmp_path / "x.svg"))
    assert_one_line_error(code, err, "no committed round yet", "not written")
    assert not (tmp_path / "x.svg").exists()


def test_figure_ticks_name_the_values_drawn() -> None:
    """Round numbers cover an axis's values, with the decimals that tell them apart; a constant
    series (a learning rate of 1e-6) gets ticks around its value, not around 0."""
    from diagevo.report import figures
    from diagevo.report.svg import tick_labels, ticks

    assert tick_labels(ticks(0.7854, 0.818)) == ["0.790", "0.795", "0.800", "0.805", "0.810", "0.815"]
    assert tick_labels(ticks(0, 165)) == ["0", "25", "50", "75", "100", "125", "150"]
    assert ticks(0.2, 20.8, integer=True) == [5, 10, 15, 20]
    rows = [{"round": 1, "role": "solver", "global_step": s, "learning_rate": 1e-6} for s in (1, 2, 3)]
    svg = ElementTree.fromstring(figures.steps(rows, ["learning_rate"]))
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert "1e-06" in texts and "0.0" not in texts and "solver" in texts and "challenger" not in texts


def _row(t: int, figures: dict[str, float]) -> RoundRow:
    """Round ``t`` with an empty memory and these figures."""
    return RoundRow(round=t, active=0, mastered=0, nodes=0, F=0.0, epsilon_next=1.0, figures=figures)


def test_metrics_that_are_shares_are_drawn_on_the_unit_axis() -> None:
    """Accuracies between 0.788 and 0.797 on an axis zoomed to them made a change of under a
    point look steep beside accuracy's 0-1 axis; a metric outside [0, 1] keeps its own scale."""
    from diagevo.report import figures

    def ticks_of(values: dict[str, list[float]]) -> list[str | None]:
        rows = [_row(t, {k: v[t - 1] for k, v in values.items()}) for t in (1, 2, 3)]
        svg = ElementTree.fromstring(figures.metrics(rows, sorted(values)))
        return [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text") if t.get("text-anchor") == "end"]

    assert ticks_of({"acc": [0.788, 0.79, 0.797]}) == ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]
    assert ticks_of({"acc": [0.788, 0.79, 0.797], "loss": [0.5, 1.5, 2.5]}) == ["0.5", "1.0", "1.5", "2.0", "2.5"]
    assert ticks_of({"loss": [10.0, 12.0, 14.0]}) == ["10", "11", "12", "13", "14"]
    two = {run: [_row(t, {"pseudo_label_acc": 0.9 + t / 100}) for t in (1, 2)] for run in ("a", "b")}
    svg = ElementTree.fromstring(figures.overlay(two, "pseudo_label_acc", "pseudo-label accuracy", "value"))
    ticks = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text") if t.get("text-anchor") == "end"]
    assert ticks == ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]  # a comparison's shares too


# a diagevo command in a process where `import polars` and `import matplotlib` raise ImportError,
# as in an install without them
WITHOUT_PLOTTING = (
    "import sys; sys.modules['polars'] = sys.modules['matplotlib'] = None; "
    "from diagevo.cli.app import main; sys.argv[0] = 'diagevo'; main()"
)


def without_plotting(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_PLOTTING, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_report_and_memory_plot_need_neither_polars_nor_matplotlib(trained: tuple[str, Path], tmp_path: Path) -> None:
    import shutil

    db, tmp = trained
    shutil.copy(db.removeprefix("sqlite:///"), tmp_path / "two.db")
    db2 = f"sqlite:///{tmp_path / 'two.db'}"
    with open_log(db2) as store:  # a second run to compare with
        store.append([wire_event("run.started", "other", 0, "other/0", config={"k": 0.5}, seed=0)])
    for args in (
        ["report", "--run", "rep", "-o", "report.html"],
        ["report", "--run", "rep", "--run", "other", "-o", "compare.html"],
        ["memory", "plot", "--run", "rep", "-o", "life.svg"],
        ["memory", "plot", "--run", "rep", "-o", "life.csv"],
        ["memory", "stats", "--run", "rep", "-o", "stats.csv"],
    ):
        done = without_plotting(tmp_path, *args, "--db", db2)
        assert done.returncode == 0, (args, done.stderr)
    charts = set(re.findall(r'data-chart="([^"]+)"', (tmp_path / "report.html").read_text(encoding="utf-8")))
    assert charts == EXPECTED_CHARTS
    assert 'data-chart="compare-active"' in (tmp_path / "compare.html").read_text(encoding="utf-8")
    assert ElementTree.parse(tmp_path / "life.svg").getroot().tag == "{http://www.w3.org/2000/svg}svg"
    assert (tmp_path / "life.csv").read_text().startswith("round,active,mastered,nodes,F,epsilon_next\n")
    header = (tmp_path / "stats.csv").read_text().splitlines()[0].split(",")
    assert header[:6] == ["round", "active", "mastered", "nodes", "F", "epsilon_next"] and "heldout_acc" in header
    done = without_plotting(tmp_path, "memory", "stats", "--db", db2, "--run", "rep", "-o", "stats.parquet")
    assert done.returncode == 1 and done.stderr.strip().count("\n") == 0, done.stderr  # one line, no traceback
    assert "needs polars" in done.stderr and "[data]" in done.stderr and ".csv" in done.stderr
    assert not (tmp_path / "stats.parquet").exists()


# In a chart's SVG (diagevo/report/svg.py): each panel is a <g class="axes"> whose <rect
# class="area"> is its plot area; its <g class="series"> hold the plotted lines, markers and bars;
# the legend is a <g class="legend">. Returns what overlaps, as strings.
LAYOUT_PROBLEMS = """
(figure) => {
  const svg = figure.querySelector('svg');
  const box = (e) => e.getBoundingClientRect();
  const meets = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
  const inside = (a, b) => a.left >= b.left - 0.5 && a.right <= b.right + 0.5 && a.top >= b.top - 0.5 && a.bottom <= b.bottom + 0.5;
  const problems = [];
  const legends = [...svg.querySelectorAll('g.legend')].map(box);
  [...svg.querySelectorAll('g.axes')].forEach((axes, i) => {
    const area = box(axes.querySelector('rect.area'));
    for (const legend of legends) if (meets(legend, area)) problems.push(`legend over the plot area of panel ${i}`);
    for (const mark of axes.querySelectorAll('g.series')) {
      for (const legend of legends) if (meets(legend, box(mark))) problems.push(`legend over a series of panel ${i}`);
      for (const m of mark.querySelectorAll('circle, polygon')) if (!inside(box(m), area)) problems.push(`a marker cut by the edge of panel ${i}`);
    }
  });
  return problems;
}
"""  # noqa: E501


def test_report_in_headless_chromium(
    trained: tuple[str, Path], browser: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    db, tmp = trained
    out = tmp / "browser.html"
    code, _, err = run_cli(capsys, "report", "--db", db, "--run", "rep", "-o", str(out))
    assert code == 0, err
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on(
        "console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

    def route(r: Any) -> None:  # offline: the file itself and nothing else
        if r.request.url == out.as_uri():
            r.continue_()
        else:
            problems.append(f"request: {r.request.url}")
            r.abort()

    page.route("**/*", route)
    page.goto(out.as_uri())
    page.wait_for_load_state("load")

    charts = {c.get_attribute("data-chart"): c for c in page.query_selector_all("figure.chart")}
    assert set(charts) == EXPECTED_CHARTS
    for name, chart in charts.items():
        box = chart.query_selector("svg").bounding_box()
        assert box is not None and box["width"] > 200 and box["height"] > 100, name
        assert len(chart.query_selector_all("svg path, svg rect, svg polygon, svg circle")) > 5, name  # drawn

    # the page uses the window's width, and the Rounds table fits it (no sideways scroll)
    assert page.query_selector("main").bounding_box()["width"] >= 1280 - 20
    rounds_table = page.query_selector("#rounds .scroll")
    assert rounds_table.evaluate("e => e.scrollWidth <= e.clientWidth"), rounds_table.evaluate(
        "e => [e.scrollWidth, e.clientWidth]"
    )
    # legends never cover a plotted mark; every marker, a score of 0 included, is wholly inside its plot
    for name, chart in charts.items():
        assert chart.evaluate(LAYOUT_PROBLEMS) == [], name

    # the tree shows one round at a time, the picker switches it
    visible = lambda: [d.get_attribute("data-round") for d in page.query_selector_all("div.tree") if d.is_visible()]  # noqa: E731
    assert visible() == ["3"]
    page.select_option("#tree-round", "1")
    assert visible() == ["1"]
    assert page.query_selector('div.tree[data-round="1"] ul.tree li').is_visible()

    # a cause's story opens on a click
    story = page.query_selector("#causes details.story")
    assert not story.query_selector("ol").is_visible()
    story.query_selector("summary").click()
    assert story.query_selector("ol").is_visible() and "created" in story.inner_text()

    # the filter hides causes that do not match
    rows = page.query_selector_all("#causes tbody tr")
    first_id = rows[0].query_selector("code").inner_text()
    page.fill("#cause-filter", first_id)
    shown = [r for r in rows if r.is_visible()]
    assert shown and all(first_id in r.inner_text() for r in shown) and len(shown) < len(rows)
    page.fill("#cause-filter", "")

    shots = Path(os.environ.get("DIAGEVO_SCREENSHOT_DIR") or tmp)
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "report.png"), full_page=False)
    page.screenshot(path=str(shots / "report-full.png"), full_page=True)
    assert png_size(shots / "report.png") == (1280, 900)
    page.close()
    assert problems == []


def test_comparison_report_in_headless_chromium(
    trained: tuple[str, Path], browser: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Two runs of one database (the trained run and one with k = 2, no filter) compared: every
    chart has both runs' lines; a screenshot at 1280 px."""
    import shutil

    db, tmp = trained
    copy = tmp_path / "two.db"
    shutil.copy(db.removeprefix("sqlite:///"), copy)
    db2 = f"sqlite:///{copy}"
    other = 'k2 <none> & "nofilter"'
    args = [*small_args(db2, other, 3, tmp_path), "--set", "memory.k=2.0", "--set", "filter.mode=none"]
    # in its own process: the browser's event loop runs in this one
    cli = "import sys; from diagevo.cli.app import main; sys.argv[0] = 'diagevo'; main()"
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run(
        [sys.executable, "-c", cli, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    out = tmp_path / "compare.html"
    code, _, err = run_cli(capsys, "report", "--db", db2, "--run", "rep", "--run", other, "-o", str(out))
    assert code == 0, err
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on(
        "console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.route(
        "**/*",
        lambda r: r.continue_() if r.request.url == out.as_uri() else (problems.append(r.request.url), r.abort()),
    )
    page.goto(out.as_uri())
    page.wait_for_load_state("load")
    charts = {c.get_attribute("data-chart"): c for c in page.query_selector_all("figure.chart")}
    assert set(charts) == COMPARED_CHARTS
    for name, chart in charts.items():
        box = chart.query_selector("svg").bounding_box()
        assert box is not None and box["width"] > 200 and box["height"] > 100, name
        legend = chart.inner_text()
        assert "run rep" in legend and f"run {other}" in legend, name  # both runs' series, the id as text
        assert chart.evaluate(LAYOUT_PROBLEMS) == [], name
    assert page.query_selector("main").bounding_box()["width"] >= 1280 - 20
    assert other in page.query_selector("#runs").inner_text()
    shots = Path(os.environ.get("DIAGEVO_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / "compare.png"), full_page=False)
    page.screenshot(path=str(shots / "compare-full.png"), full_page=True)
    assert png_size(shots / "compare.png") == (1280, 900)
    page.close()
    assert problems == []


def test_report_data_by_hand(tmp_path: Path) -> None:
    """A two-round log whose numbers are computed by hand."""
    from diagevo.report.data import load_run
    from diagevo.report.html import render
    from tests.logs import Log

    log = Log(run="h")
    log.node("N1", "checking conditions").cause("C1", "N1", "forgets to check the domain after squaring both sides")
    log.add("question.generated", question_id="q1", mode="free", text="a b c a b")
    log.add("question.generated", question_id="q2", mode="targeted", active_cause="C1", text="x y")
    log.commit(timing={"challenger": 1.0, "solver": 3.0}, heldout_acc=0.5)
    log.add("cause.promoted", cause_id="C1", acc=0.8, n_candidates=2)
    log.commit(timing={"challenger": 1.0, "solver": 3.0}, heldout_acc=0.75)
    db = f"sqlite:///{tmp_path / 'h.db'}"
    with open_log(db) as store:
        store.append(log.events())
        for acc, key in ((0.1, "a"), (0.3, "b")):  # the same benchmark twice: the latest counts
            store.append(
                [wire_event("eval.recorded", "h", 1, f"h/1/eval/{key}", benchmark="math500", n=10, accuracy=acc)]
            )
        data = load_run(store, "h")
    assert data.committed == [1, 2]
    rounds = [(r.active, r.mastered, r.nodes, r.value("heldout_acc")) for r in data.rounds]
    assert rounds == [(1, 0, 1, 0.5), (0, 1, 1, 0.75)]
    q = {(s.round, s.mode): s for s in data.questions}
    # "a b c a b": 5 words, 2-grams ab bc ca ab -> 3 of 4 distinct; with "x y": 5 2-grams, 4 distinct
    assert (q[1, "free"].n, q[1, "free"].mean_words, q[1, "free"].distinct_2) == (1, 5.0, 0.75)
    assert (q[1, "all"].n, q[1, "all"].mean_words, q[1, "all"].distinct_2) == (2, 3.5, 0.8)
    assert [(b.round, b.benchmark, b.accuracy) for b in data.benchmarks] == [(1, "math500", 0.3)]
    html = render(data, db, lambda *args: " ".join(["diagevo", *args]))
    assert 'class="cell A" title="1 created">A&nbsp;1<span class="mark">★</span>' in html
    assert 'class="cell M" title="1 promoted">M&nbsp;0<span class="mark">▲</span>' in html
    assert "<td>25.0</td>" in html.replace(' class=""', "") and "<td>75.0</td>" in html.replace(
        ' class=""', ""
    )  # Table 6 shares
    assert "promoted to Mastered</b>: mean p1 0.800 over 2 targeted candidates" in html
