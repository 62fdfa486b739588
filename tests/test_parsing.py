"""diagevo/text/parsing.py, the one reader of outside JSON: limits, line splitting, ids, messages;
and the JSONL codec's round trip for any text."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from diagevo.errors import BadInput
from diagevo.interchange import encode_line
from diagevo.text.formats import Id
from diagevo.text.parsing import (
    MAX_ID_CHARS,
    check_id,
    decode,
    error_reason,
    loads,
    loads_object,
    one_line,
    quoted,
    split_lines,
)


def test_split_lines_ends_lines_at_newline_only() -> None:
    text = "a\r\n\n  \nb\u2028c\u2029d\x85e\x0bf\x0cg\x1ch\x1di\x1ej\rk\n"
    assert list(split_lines(text)) == [(1, "a"), (4, "b\u2028c\u2029d\x85e\x0bf\x0cg\x1ch\x1di\x1ej\rk")]
    assert len(text.splitlines()) > 3  # what str.splitlines makes of it


def test_limits_and_messages() -> None:
    with pytest.raises(BadInput, match=r"^line 3: 11 characters, more than the limit of 10$"):
        loads('"abcdefghi"', "line 3", max_chars=10)
    with pytest.raises(BadInput, match=r"^x: malformed JSON \(.* at column \d+\)$"):
        loads("{oops", "x")
    for bad in ("NaN", "[Infinity]", '"\\ud800"', '"a\x01b"', "1e400"):
        with pytest.raises(BadInput, match="malformed JSON"):
            loads(bad)
    with pytest.raises(BadInput, match="expected a JSON object, not an array"):
        loads_object("[1]")
    with pytest.raises(BadInput, match=r"^f line 3: not UTF-8 text \(byte 0xff at offset 4\)$"):
        decode(b"ok\n\n\xff", "f")
    assert decode("\ufeffé".encode(), "f") == "é"


def test_quoted_and_one_line_bound_what_is_shown() -> None:
    big = "z" * 10_000_000
    assert len(quoted(big)) < 100 and "10,000,000 characters" in quoted(big)
    assert len(quoted(list(range(10**5)))) < 100
    assert one_line("a\nb\r\nc" + "d" * 1000).startswith("a b c") and len(one_line("d" * 1000)) == 300


@pytest.mark.parametrize(
    "value", ["", "a\x00", "a\nb", "tab\there", "\x7f", "x\x9fy", "p\u2028q", "r" * (MAX_ID_CHARS + 1)]
)
def test_bad_ids(value: str) -> None:
    with pytest.raises(ValueError):
        check_id(value)


def test_good_ids() -> None:
    for value in ("run-1", "r/3/q1-00002", "dx-" + "a" * 32, "причина 7", "C\u00a01", "x" * MAX_ID_CHARS):
        assert check_id(value) == value


class _M(BaseModel):
    cause: Id | None = None
    n: int = 0


def test_error_reason_names_the_field_and_shortens_the_value() -> None:
    with pytest.raises(ValidationError) as exc:
        _M.model_validate({"cause": {}})
    assert error_reason(exc.value.errors(include_url=False)[0]).startswith(
        "cause: Input should be a valid string (got dict)"
    )
    with pytest.raises(ValidationError) as exc:
        _M.model_validate({"n": "q" * 5_000_000})
    reason = error_reason(exc.value.errors(include_url=False)[0])
    assert reason.startswith("n: Input should be a valid integer") and len(reason) < 300


_texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=60)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(_texts, min_size=1, max_size=4), key=_texts)
def test_every_text_survives_the_jsonl_codec(texts: list[str], key: str) -> None:
    objs = [{"event_id": f"e{i}", "data": {"text": t, key: [t, {"k": t}]}} for i, t in enumerate(texts)]
    text = "".join(encode_line(o) for o in objs)
    assert text.count("\n") == len(objs) and len(text.splitlines()) == len(objs)
    assert [loads(line) for _, line in split_lines(text)] == objs
    assert [json.loads(line) for line in text.splitlines()] == objs  # any other line reader too


def test_close_to_prefers_the_same_name_but_for_case_then_close_ones() -> None:
    from diagevo.text.words import close_to, did_you_mean

    assert close_to("c1", ["C1", "C10", "C11"]) == ["C1"]  # case aside first, however many are close
    assert close_to("dmeo", ["demo", "other"]) == ["demo"]
    assert close_to("zzz", ["demo", "C1"]) == [] and close_to("x" * 201, ["x" * 201]) == []
    assert did_you_mean("demo1", ["demo", "demo2", "x"]) == " (did you mean 'demo' or 'demo2'?)"
    assert did_you_mean("zzz", ["demo"]) == "" and did_you_mean("demo", ["demo"]) == ""


def test_the_one_shortening_helper_cuts_the_end_or_the_middle_and_folds_on_request() -> None:
    from diagevo.text.untrusted import shorten

    assert shorten("abcdef", 6) == "abcdef"
    assert shorten("abcdefg", 6) == "abcde…"
    assert shorten("a \n b\tc", 10) == "a \n b\tc"
    assert shorten("a \n b\tc", 10, fold=True) == "a b c"
    # the middle: (50 - 40) // 2 = 5 characters each side, the 90 between them named
    assert shorten("x" * 5 + "y" * 90 + "z" * 5, 50, middle=True) == "xxxxx …[90 characters left out]… zzzzz"
