"""The report's templates escape every text of a run: hostile HTML and template text (``<script>``,
``</style>``, ``{{ ... }}``, ``{% ... %}``, comments, entities, quotes), ANSI escapes, control characters and
right-to-left words in every id, label, question, answer, diagnosis, name, tag and note of a real
log, rendered through ``diagevo report`` and its comparison, and read back with the standard
library's HTML parser.

The check is structural: the hostile page has exactly the elements and attributes of the same
log written with plain texts (a ``<bdi>`` around each non-ASCII text aside; in a figure, no kind
of element or attribute the plain figure lacks), so no text of a run opens, closes or changes an
element; each hostile text is in the page's text as :func:`diagevo.text.untrusted.visible` shows it
(template syntax literally, never evaluated); no control character but a newline reaches the
file. Each figure's SVG is well-formed XML whose texts are the names as the figure shows them
(:func:`diagevo.report.svg.shown`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from diagevo.log import open_log
from diagevo.text.untrusted import visible
from tests.logs import Log, wire_event
from tests.test_cli_memory import run_cli

# every way a text could turn into markup or template code, and the terminal's escapes
HOSTILE = (
    "<script>alert(1)</script> </style><style>*{display:none}</style> {{ 7 * 7 }} {% if true %}T{% endif %} "
    "{# comment #} <!-- open </textarea> ]]> <img src=x onerror=alert(2)> &amp; &lt;b&gt; \"dq\" 'sq' `bt` "
    "\x1b[2J\x1b[31mred\x1b[0m \x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\ \u202eevil\u202c مرحبا"
)
WITH_CONTROL = HOSTILE + " soh\x01soh"  # labels may hold a control character (NUL is refused in every text)
HOSTILE_ID = "<b>{{ 7 * 7 }}</b>'\"&amp;\u202e"  # ids: anything but control characters
PLAIN = "plain"


@dataclass
class Texts:
    """The texts of one log: all hostile, or all plain."""

    text: str
    label: str
    ident: str
    run: str


def run_log(t: Texts) -> Log:
    """Two committed rounds; every text and id the report shows is ``t``'s."""
    log = Log(run=t.run)
    log.node("N1", "label " + t.label).node("N2" + t.ident, "second " + t.label)
    log.cause("C1", "N1", "desc " + t.label)
    q, f = "q1" + t.ident, "f1" + t.ident
    log.add("question.generated", question_id=q, mode="targeted", active_cause="C1", text="Q " + t.text)
    log.add("question.scored", question_id=q, n=12, p1=0.5, p2=0.5, pseudo_label="L " + t.label, retained=True)
    log.add("failure.recorded", failure_id=f, question_id=q, response="R " + t.text, reference="ref " + t.text)
    log.add("failure.diagnosed", failure_id=f, error_cause="diag " + t.label, model="model " + t.label)
    log.add("cause.created", cause_id="C2" + t.ident, node_id="N2" + t.ident, description="d2 " + t.label, failure_id=f)
    log.add("failure.attributed", failure_id=f, cause_id="C1", via="recurrence", similarity=0.9)
    log.add("eval.recorded", benchmark="bench " + t.text, n=3, accuracy=0.5, model="m " + t.label)
    log.add("checkpoint.selected", benchmark="val " + t.text, accuracy=0.5, scores={"1": 0.5})
    log.add("run.tagged", tags=["tag" + t.ident])
    log.add("run.noted", note="note " + t.label)
    log.commit(heldout_acc=0.5, timing={"phase " + t.text: 1.0, "solver": 2.0}, diagevo="v " + t.ident)
    log.question("q2", 0.9, active="C1")
    log.add("cause.promoted", cause_id="C1", acc=0.9, n_candidates=1)
    log.add("nodes.merged", survivor="N1", absorbed="N2" + t.ident, label="merged " + t.label, similarity=0.95)
    log.add("eval.recorded", **{"acc/family " + t.text: 0.3, "heldout_acc": 0.4, "metric " + t.text: 0.25})
    log.commit()
    return log


HOSTILE_TEXTS = Texts(HOSTILE, WITH_CONTROL, HOSTILE_ID, "run " + HOSTILE_ID)
PLAIN_TEXTS = Texts(PLAIN, PLAIN, PLAIN, "run-plain")


class Page(HTMLParser):
    """A page as the browser's parser reads it: its elements (name and attribute names, in order),
    its text, its attribute values, the text of its scripts and of its styles (outside figures)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, tuple[str, ...]]] = []  # outside the figures
        self.figure_elements: list[tuple[str, tuple[str, ...]]] = []
        self.text: list[str] = []
        self.attributes: list[str] = []
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = (tag, tuple(sorted(a for a, _ in attrs)))
        if "svg" in self._open:
            self.figure_elements.append(element)
        elif tag != "bdi":  # around each non-ASCII text: plain texts need none
            self.elements.append(element)
        self.attributes.extend(v for _, v in attrs if v is not None)
        self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._open:
            del self._open[len(self._open) - 1 - self._open[::-1].index(tag) :]

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._open and self._open[-1] == "script":
            self.scripts.append(data)
        elif self._open and self._open[-1] == "style" and "svg" not in self._open:
            self.styles.append(data)


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


def write(tmp: Path, name: str, texts: Texts, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """The log of ``texts`` in its own database: its report, and its comparison with another run."""
    db = f"sqlite:///{tmp / name}.db"
    with open_log(db) as store:
        store.append(run_log(texts).events())
        # a second run to compare it with
        store.append([wire_event("run.started", "other", 0, "other/0", config={"k": 0.5}, seed=0)])
    pages = []
    for page, runs in (("report", [texts.run]), ("compare", [texts.run, "other"])):
        out = tmp / f"{name}-{page}.html"
        args = [a for r in runs for a in ("--run", r)]
        code, _, err = run_cli(capsys, "report", "--db", db, *args, "-o", str(out))
        assert code == 0, err
        pages.append(out.read_text(encoding="utf-8"))
    return pages[0], pages[1]


def test_hostile_texts_add_no_element_and_stay_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hostile, hostile_compare = write(tmp_path, "hostile", HOSTILE_TEXTS, capsys)
    plain, plain_compare = write(tmp_path, "plain", PLAIN_TEXTS, capsys)
    for bad, good, name in ((hostile, plain, "report"), (hostile_compare, plain_compare, "comparison")):
        page, twin = parse(bad), parse(good)
        assert page.elements == twin.elements, name  # not one element or attribute more, less or other
        # in a figure, the log's names are drawn as <text> and nothing else (the figures' numbers
        # differ: a hostile question has more words, so Fig. 4 may have other ticks)
        assert set(page.figure_elements) <= set(twin.figure_elements), name
        assert not any(a.startswith("on") or a == "href" for _, attrs in page.figure_elements for a in attrs), name
        assert len(page.scripts) == len(twin.scripts) and page.scripts == twin.scripts, name  # ours alone
        assert page.styles == twin.styles, name
        control = re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", bad)
        assert control is None, (name, bad[max(0, control.start() - 40) : control.start() + 10])
    text = "".join(parse(hostile).text)
    # every hostile text is in the page's text, as the terminal shows it, template syntax literal
    for shown in (visible(HOSTILE, newlines=True), visible(WITH_CONTROL, newlines=True), visible(HOSTILE_ID)):
        assert shown in text
    assert "{{ 7 * 7 }}" in text and "{% if true %}T{% endif %}" in text and "{# comment #}" in text
    assert "\\x1b[31mred" in text and "\\u202eevil" in text and "soh\\x01soh" in text
    # the ids in attributes (anchors, titles) are the same escaped text
    page = parse(hostile)
    assert f"cause-C2{visible(HOSTILE_ID)}" in page.attributes
    assert visible("metric " + HOSTILE) in page.attributes  # the Rounds table's header of the metric
    assert "".join(parse(hostile_compare).text).count(visible("run " + HOSTILE_ID)) >= 3


def test_figures_are_well_formed_xml_with_the_names_as_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each figure of the hostile report and the comparison, and ``memory plot -o FILE.svg``,
    parsed as XML: every hostile name is a text of its figure, shown as the figure shows it."""
    from diagevo.report.svg import shown

    report, compare = write(tmp_path, "hostile", HOSTILE_TEXTS, capsys)
    db = f"sqlite:///{tmp_path / 'hostile'}.db"
    code, _, err = run_cli(
        capsys, "memory", "plot", "--db", db, "--run", HOSTILE_TEXTS.run, "-o", str(tmp_path / "p.svg")
    )
    assert code == 0, err
    figures = re.findall(r"<svg.*?</svg>", report + compare, flags=re.S) + [(tmp_path / "p.svg").read_text("utf-8")]
    texts = set()
    for figure in figures:
        root = ElementTree.fromstring(figure)  # a text that were markup would break it or add an element
        assert {e.tag.split("}")[1] for e in root.iter()} <= {
            "svg",
            "defs",
            "pattern",
            "rect",
            "path",
            "g",
            "text",
            "circle",
            "polygon",
        }
        texts.update(t.text for t in root.iter("{http://www.w3.org/2000/svg}text"))
    for name in (
        f"run {HOSTILE_TEXTS.run}",  # a legend of the comparison
        f"Memory lifecycle, run {HOSTILE_TEXTS.run}",  # the title of memory plot
        f"bench {HOSTILE} (pass@1)",  # Fig. 3a's legend
        f"metric {HOSTILE}",  # a metric's curve, a comparison's title
        f"family {HOSTILE}",  # a row of the heat map
        f"phase {HOSTILE}",  # the time per phase
    ):
        assert shown(name) in texts or shown(name, 120) in texts, name


def test_one_place_marks_markup_safe() -> None:
    """No template marks a text safe or turns autoescaping off; the figures' SVG is the one
    markup trusted, in ``page.chart``."""
    import diagevo.report

    root = Path(diagevo.report.__file__).parent
    for path in (root / "templates").rglob("*"):
        if path.is_file():
            assert not re.search(r"\|\s*safe\b|{%-?\s*autoescape", path.read_text(encoding="utf-8")), path
    sources = {p.name: p.read_text(encoding="utf-8") for p in root.glob("*.py")}
    assert {name: s.count("Markup(") for name, s in sources.items() if "Markup(" in s} == {"page.py": 1}


def test_templates_are_compiled_once_per_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from diagevo.report.data import load_run
    from diagevo.report.html import environment, render

    db = f"sqlite:///{tmp_path / 'plain.db'}"
    with open_log(db) as store:
        store.append(run_log(PLAIN_TEXTS).events())
        data = load_run(store, PLAIN_TEXTS.run)
    env = environment()
    command = lambda *args: " ".join(["diagevo", *args])  # noqa: E731
    render(data, db, command)  # every template loaded (compiled unless an earlier test did)
    compiled: list[str | None] = []
    compile_source = env.compile

    def counted(source: Any, name: str | None = None, *args: Any, **kwargs: Any) -> Any:
        compiled.append(name)
        return compile_source(source, name, *args, **kwargs)

    monkeypatch.setattr(env, "compile", counted)
    assert environment() is env and not env.auto_reload
    assert 'data-chart="lifecycle"' in render(data, db, command)
    assert compiled == []  # every template came from the environment's cache
