"""One read path (issue 91): a module that reads the log's rows reads them through the run's
admission (:func:`diagevo.views.admission.admitted_rows`, or :meth:`Admission.admitted` over a
read), or is one of the few allowed a raw read, each for a reason: the log itself, verify, the
rules the admission is made of, the writers' decisions against the log's head under the append
lock, and the log's interchange (an export is the log as stored). A new reader that reads rows
raw fails here: its output would carry what the rules refuse."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STORES = {"store", "self.store", "log", "self._store"}
ALLOWED = {
    # the log itself: its recorders, the chain's check
    "diagevo/log/checks.py": "the chain's check reads every row as stored",
    # verify: names every row, refused or not
    "diagevo/views/verify.py": "verify reads every row to name each",
    # a rule of the admission: decides on rows as stored
    "diagevo/views/withdrawn.py": "the withdrawal rule, part of the admission",
    # the writers' decisions against the log's head, under the append lock
    "diagevo/views/counts.py": "the writer's tally of a batch it appends",
    "diagevo/rounds/protocol.py": "the round protocol's read under the append lock",
    "diagevo/rounds/refusals.py": "a writer's refusals, decided against the head",
    "diagevo/rounds/round.py": "the round's steps, decided against the head",
    "diagevo/rounds/runs.py": "a run's start and configs, decided against the head",
    "diagevo/rounds/state.py": "where a run stands, from its milestones (the fold's rule)",
    "diagevo/rounds/withdraw.py": "a withdrawal, decided against the head",
    # the log's interchange and its event listing: every row as stored, each refusal marked
    "diagevo/interchange.py": "export is the log as stored; ingest checks against it",
    "diagevo/views/follow.py": "memory events --follow: every row, refusals marked as memory events marks them",
}


def raw_readers() -> dict[str, bool]:
    """Module -> whether it reads through the admission, for every module that reads the log's rows."""
    found = {}
    for folder in ("diagevo", "cli"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            calls = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)]
            reads = [
                c
                for c in calls
                if (isinstance(c.func, ast.Attribute) and c.func.attr in ("rows", "read", "raw"))
                and ast.unparse(c.func.value) in STORES
                or (isinstance(c.func, ast.Name) and c.func.id == "every_row")
            ]
            if reads and not path.is_relative_to(ROOT / "diagevo" / "log" / "recorder.py"):
                found[path.relative_to(ROOT).as_posix()] = "admission" in source or "admitted_rows" in source
    return found


def test_every_reader_reads_through_the_admission_or_is_allowed_a_raw_read() -> None:
    readers = raw_readers()
    raw = sorted(m for m, admitted in readers.items() if not admitted and not m.startswith("diagevo/log/"))
    assert [m for m in raw if m not in ALLOWED] == []
    assert sorted(m for m in ALLOWED if m in raw or m.startswith("diagevo/log/")) == sorted(ALLOWED)  # none stale
