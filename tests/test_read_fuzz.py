"""Generated logs with arbitrary texts and ids (issue 28): every read command and ``report``
exits 0, or with a declared one-line error, never with 70 (an internal error) nor a traceback,
and prints no control, C1 or bidi character.

Texts are any Unicode (controls, NUL, bidi overrides, markup, ``$`` signs), drawn alone or
mixed with pieces of the hostile corpus; ids are any text the store accepts (no control
character). Each example is a small log built through :class:`tests.logs.Log` (every event
validated) and stored with the Python API. ``DIAGEVO_READ_FUZZ_EXAMPLES`` sets how many the
fast tier runs (default 6); the slow tier runs 100.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagevo.log import open_log
from tests.input_cases import cli
from tests.logs import Log
from tests.test_untrusted_text import BIDI, CSI, LINK, MARKUP, MATH, OSC8, OSC52, UNBALANCED, assert_clean

EXAMPLES = int(os.environ.get("DIAGEVO_READ_FUZZ_EXAMPLES", "6"))
PIECES = [
    MARKUP,
    UNBALANCED,
    LINK,
    OSC8,
    OSC52,
    CSI,
    BIDI,
    MATH,
    "[",
    "]",
    "\\",
    "'",
    '"',
    "\x00",
    "\r",
    "\n",
    "\t",
    ":smile:",
    "%s",
    "{0}",
]

_chunks = st.one_of(st.text(max_size=12), st.sampled_from(PIECES))
texts = st.lists(_chunks, min_size=1, max_size=5).map(lambda parts: "".join(parts).replace("\x00", ""))
no_nul = texts  # NUL is refused in every text of an event (PostgreSQL cannot hold it)
_CONTROL = {*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029}
ids = (
    st.lists(
        st.one_of(st.text(max_size=8), st.sampled_from(["[/b]", "'", '"', "$", MATH, "\u202e", ":x:", "C1", "../"])),
        min_size=1,
        max_size=4,
    )
    .map(lambda parts: "".join(ch for ch in "".join(parts) if ord(ch) not in _CONTROL)[:60])
    .filter(bool)
)


@st.composite
def logs(draw: st.DrawFn) -> tuple[Log, list[str]]:
    """A log of one or two committed rounds; every text and id drawn."""
    run = draw(ids)
    node_ids = draw(st.lists(ids, min_size=1, max_size=2, unique=True))
    cause_ids = draw(st.lists(ids, min_size=1, max_size=3, unique=True))
    log = Log(run=run)
    for n in node_ids:
        log.node(n, draw(texts))
    for i, c in enumerate(cause_ids):
        log.cause(c, node_ids[i % len(node_ids)], draw(texts), failure=f"f{i}")
    q = draw(ids)
    f = draw(ids.filter(lambda x: x not in {f"f{i}" for i in range(len(cause_ids))}))  # a failure is counted once
    log.add("question.generated", question_id=q, mode="targeted", active_cause=cause_ids[0], text=draw(no_nul))
    log.add(
        "question.scored",
        question_id=q,
        n=12,
        p1=0.5,
        p2=0.5,
        pseudo_label=draw(texts),
        retained=True,
        reference=draw(no_nul),
    )
    log.add("failure.recorded", failure_id=f, question_id=q, response=draw(no_nul), reference=draw(no_nul))
    log.add("failure.diagnosed", failure_id=f, error_cause=draw(texts), model=draw(texts), raw=draw(no_nul))
    log.add("failure.attributed", failure_id=f, cause_id=cause_ids[-1], via="dedup", similarity=0.7)
    log.add("eval.recorded", benchmark=draw(texts), n=3, accuracy=0.5, model=draw(texts))
    log.commit(heldout_acc=0.5, timing={draw(texts): 1.0}, **{draw(texts): 0.1})
    if draw(st.booleans()):
        log.question(draw(ids.filter(lambda x: x != q)), 0.9, active=cause_ids[0])  # a question is generated once
        log.add("cause.promoted", cause_id=cause_ids[0], acc=0.9, n_candidates=1)
        log.add("eval.recorded", **{f"acc/{draw(texts)}": 0.3, "heldout_acc": 0.4})
        log.commit()
    return log, cause_ids


def read_commands(db: str, run: str, causes: list[str], root: Path) -> list[list[str]]:
    r = ["--db", db, "--run", run]
    return [
        ["memory", "show", *r],
        ["memory", "show", "--json", *r],
        ["memory", "replay", "--round", "1", *r],
        *(["memory", "why", c, *r] for c in causes),
        ["memory", "why", causes[0], "--json", *r],
        ["memory", "events", "--limit", "0", *r],
        ["memory", "events", "--json", *r],
        ["memory", "events", "--cause", causes[0], *r],
        ["memory", "stats", "--wide", *r],
        ["memory", "stats", "--json", *r],
        ["memory", "verify", *r],
        ["memory", "plot", *r],
        ["memory", "plot", "-o", str(root / "p.svg"), *r],
        ["memory", "diff", "--run", run, "--run", run, "--db", db],
        ["memory", "export", *r],
        ["report", "-o", str(root / "r.html"), *r],
    ]


def check_log(log: Log, causes: list[str]) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        db = f"sqlite:///{root / 'f.db'}"
        with open_log(db, create=True) as store:
            store.append(log.events())
        for args in read_commands(db, log.run, causes, root):
            code, out, err = cli(*args)
            assert code != 70 and code != -1 and "Traceback" not in err, (args[:2], err[-3000:])
            assert code == 0 or len(err.strip().splitlines()) == 1, (args[:2], err)
            if args[:2] == ["memory", "verify"]:  # the drawn logs keep every rule: verify must say so
                assert code == 0, out
            assert_clean(out, f"{args[:2]} stdout")
            assert_clean(err, f"{args[:2]} stderr")


_SETTINGS = dict(
    deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
)


@settings(max_examples=EXAMPLES, **_SETTINGS)  # type: ignore[arg-type]
@given(drawn=logs())
def test_every_read_command_on_generated_logs(drawn: tuple[Log, list[str]]) -> None:
    check_log(*drawn)


@pytest.mark.slow
@pytest.mark.timeout(3600)  # 100 logs of 20 commands each, on a loaded machine
@settings(max_examples=100, **_SETTINGS)  # type: ignore[arg-type]
@given(drawn=logs())
def test_every_read_command_on_many_generated_logs(drawn: tuple[Log, list[str]]) -> None:
    check_log(*drawn)
