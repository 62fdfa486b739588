"""Generated bad files against the four commands that read files from outside (``memory
ingest``, ``round record``, ``diagnose``, ``eval``): every one is refused with one line on
stderr of at most 400 characters, a non-zero exit, no traceback, and nothing stored.

Each file is a few valid lines with one bad line among them: nested too deep, a field of the
wrong type, a huge string, bytes that are not UTF-8, a control character, a line cut short.
``DIAGEVO_FUZZ_EXAMPLES`` sets the number of files per command (default 60: 300 in all).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.input_cases import (
    ID_FIELD,
    WRONG_TYPES,
    cli,
    command,
    db_state,
    dumps,
    make_db,
    nested,
    valid_objects,
    with_field,
)

EXAMPLES = int(os.environ.get("DIAGEVO_FUZZ_EXAMPLES", "60"))
KINDS = ("ingest", "record", "diagnose", "eval", "eval-json")  # eval-json: a benchmark file that is one JSON list
MAX_ERR = 400

FAULTS = ("deep", "wrong_type", "huge", "bad_utf8", "control", "truncated", "not_object")


@st.composite
def bad_line(draw: st.DrawFn, kind: str, fault: str) -> tuple[str, bytes]:
    """(fault, line bytes) of a line with ``fault`` that no command may accept."""
    base: dict[str, Any] = dict(draw(st.sampled_from(valid_objects(kind))))
    if fault == "deep":
        levels = draw(st.integers(65, 5000))
        value = nested(levels, draw(st.sampled_from([1, "x", None, {}])), draw(st.booleans()))
        where = draw(st.sampled_from(["top", *base]))
        if where == "top":
            return fault, value
        head = dumps({**base, where: 0})
        marker = dumps(where) + b":0"
        return fault, head.replace(marker, dumps(where) + b":" + value, 1)
    if fault == "wrong_type":
        field = draw(st.sampled_from(sorted(WRONG_TYPES[kind])))
        return fault, dumps(with_field(base, field, draw(st.sampled_from(WRONG_TYPES[kind][field]))))
    if fault == "huge":
        n = draw(st.sampled_from([10**4, 10**5, 10**6, 3 * 10**6]))
        how = draw(st.sampled_from(["id", "key", "garbage"] if kind in ID_FIELD else ["key", "garbage"]))
        big = "é" * n if draw(st.booleans()) else "x" * n
        if how == "id":
            return fault, dumps({**base, ID_FIELD[kind]: big})
        if how == "key":  # an unknown field with a huge name (eval rows: a huge line cut short)
            line = dumps({**base, big: 1})
            return fault, line if not kind.startswith("eval") else line[:-1]
        return fault, big.encode() + b"{"
    if fault == "bad_utf8":
        line = dumps(base)
        at = draw(st.integers(0, len(line)))
        junk = draw(
            st.sampled_from([b"\xff", b"\xfe\xff", b"\xc3", b"\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"])
        )
        return fault, line[:at] + junk + line[at:]
    if fault == "control":
        char = draw(st.sampled_from([chr(c) for c in [*range(0, 10), *range(11, 32)]] + ["\x7f", "\x85", "\u2028"]))
        if kind in ID_FIELD and (char in "\x7f\x85\u2028" or draw(st.booleans())):
            # a JSON escape in an id: valid JSON, refused as an id
            return fault, dumps({**base, ID_FIELD[kind]: f"id{char}x"})
        if char in "\x7f\x85\u2028":  # legal raw inside a JSON string: put it where no token may be
            return fault, dumps(base)[:-1] + char.encode() + b"}"
        # a raw control character inside a JSON string is not JSON
        line = dumps({**base, "zz": "ab"})
        return fault, line.replace(b'"ab"', b'"a' + char.encode() + b'b"')
    if fault == "truncated":
        line = dumps(base)
        cut = draw(st.integers(1, len(line) - 1))
        return fault, line[:cut]
    if fault == "not_object":
        return fault, draw(
            st.sampled_from([b"1", b'"x"', b"[]", b"null", b"true", b"[{}]", b"{", b"}", b"nul", b"NaN"])
        )
    raise AssertionError(fault)


@st.composite
def bad_file(draw: st.DrawFn, kind: str, fault: str) -> tuple[str, bytes]:
    fault, bad = draw(bad_line(kind, fault))
    good = [
        dumps(o) for o in draw(st.lists(st.sampled_from(valid_objects(kind)), max_size=3, unique_by=lambda o: str(o)))
    ]
    good.insert(draw(st.integers(0, len(good))), bad)
    if kind == "eval-json":  # the rows as one JSON list, pretty-printed or not
        return fault, b"[" + draw(st.sampled_from([b",", b",\n  ", b", \r\n"])).join(good) + b"]"
    ending = draw(st.sampled_from([b"\n", b"\r\n"]))
    return fault, ending.join(good) + draw(st.sampled_from([ending, b""]))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("fuzz")
    return make_db(root), root


# every fault for every kind (parametrized, not left to the draws: a derandomized search seeds
# itself from the test's source, so which faults 60 draws reach changed with its formatting)
CASES = [(k, f) for k in KINDS for f in FAULTS if f != "wrong_type" or WRONG_TYPES[k]]


@pytest.mark.parametrize(("kind", "fault"), CASES)
def test_bad_files_are_refused_in_one_line_and_store_nothing(kind: str, fault: str, world: tuple[str, Path]) -> None:
    db, root = world
    before = db_state(db)
    path = root / f"bad-{kind}.{'json' if kind == 'eval-json' else 'jsonl'}"

    @settings(
        max_examples=max(3, EXAMPLES // len(FAULTS)),
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    @given(case=bad_file(kind, fault))
    def check(case: tuple[str, bytes]) -> None:
        _, content = case
        path.write_bytes(content)
        code, out, err = cli(*command(kind, path, db, root / "eval-out"))
        assert "Traceback" not in err, err[-3000:]
        assert code not in (0, -1), (fault, code, out[:300], err[:300])
        lines = err.strip().splitlines()
        assert len(lines) == 1, (fault, err[:1000])
        assert len(lines[0]) <= MAX_ERR, (fault, len(lines[0]), lines[0][:500])
        assert db_state(db) == before, (fault, err)

    check()
