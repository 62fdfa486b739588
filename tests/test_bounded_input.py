"""Bounded memory and linear time on any input (issue 47, item 6).

``memory ingest /dev/zero`` and ``round record /dev/zero`` grew to 13-14 GB, a 300 MB line took
627 MB before the 256 MiB line limit refused it, and a pipe that never sends a line break did the
same: reading now goes a chunk at a time and stops at the line limit holding about one line. Each
command runs in a process of its own under a 2 GiB address-space limit (what it used to reach
ends there as a MemoryError, not on the machine), and its own peak resident memory is measured by
the small process that started it. Answer normalisation is linear: a 4 MB ``\\boxed{$...$}``
(one ``$`` pair stripped per pass used to copy the string each time) gives the right answer, and
the new code agrees with the old, quadratic one on every small input Hypothesis draws."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagevo.curriculum.answers import _BRACED_COMMA, _SPACING, _THOUSANDS, _WS, extract_answer, normalize_answer
from diagevo.errors import BadInput
from diagevo.text.parsing import MAX_CHARS, file_lines, read_text
from tests.test_cli_memory import assert_one_line_error

LIMIT = 2 * 2**30

# a small Python that limits its address space, runs the command (which inherits the limit) and
# writes the command's own peak resident memory: measured from a fork of this small process, not
# of the test process (a forked copy of pytest would count in the child's peak)
WRAP = (
    "import resource, subprocess, sys\n"
    "resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]), int(sys.argv[2])))\n"
    "code = subprocess.run(sys.argv[3:]).returncode\n"
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(code)\n"
)


def run_bounded(cwd: Path, *args: str, feed_mib: int = 0) -> tuple[int, str, int]:
    """Run ``diagevo ARGS`` (stdin: ``feed_mib`` MiB of ``a`` without a line break, or nothing);
    its exit code, stderr and peak resident memory in bytes."""
    peak_file = cwd / "peak.txt"
    p = subprocess.Popen(
        [sys.executable, "-c", WRAP, str(peak_file), str(LIMIT), sys.executable, "-m", "diagevo.cli.app", *args],
        cwd=cwd,
        stdin=subprocess.PIPE if feed_mib else subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    err: list[bytes] = []
    reader = threading.Thread(target=lambda: err.append(p.stderr.read()))  # type: ignore[union-attr]
    reader.start()

    def feed() -> None:
        try:
            for _ in range(feed_mib):
                p.stdin.write(b"a" * 2**20)  # type: ignore[union-attr]
            p.stdin.close()  # type: ignore[union-attr]
        except (BrokenPipeError, ValueError):  # it stopped reading: what it should do
            pass

    writer = threading.Thread(target=feed)
    if feed_mib:
        writer.start()
    code = p.wait()
    reader.join()
    if feed_mib:
        writer.join()
    return code, err[0].decode(), int(peak_file.read_text()) * 1024


@pytest.mark.parametrize(
    "args",
    [("memory", "ingest", "/dev/zero"), ("round", "record", "/dev/zero", "--run", "r")],
    ids=["ingest", "record"],
)
def test_dev_zero_is_one_line_and_reads_one_chunk(tmp_path: Path, args: tuple[str, ...]) -> None:
    code, err, peak = run_bounded(tmp_path, *args, "--db", f"sqlite:///{tmp_path / 'x.db'}")
    assert_one_line_error(code, err, "/dev/zero line 1: a NUL byte")
    assert peak < 256 * 2**20, peak  # about the interpreter: one chunk of the file is read


@pytest.mark.parametrize(
    "args", [("memory", "ingest", "-"), ("round", "record", "-", "--run", "r")], ids=["ingest", "record"]
)
def test_a_pipe_without_a_line_break_stops_at_the_line_limit(tmp_path: Path, args: tuple[str, ...]) -> None:
    """300 MiB of ``a`` and no line break: refused at the 256 MiB line limit, holding about one
    line (the process before held the whole input, then a copy of it)."""
    code, err, peak = run_bounded(tmp_path, *args, "--db", f"sqlite:///{tmp_path / 'x.db'}", feed_mib=300)
    assert_one_line_error(code, err, f"stdin line 1: longer than the limit of {MAX_CHARS:,} bytes")
    assert peak < MAX_CHARS + 200 * 2**20, peak


def test_lines_are_read_a_chunk_at_a_time_and_numbered_as_in_the_file(tmp_path: Path) -> None:
    f = tmp_path / "x.jsonl"
    f.write_bytes(b"\xef\xbb\xbf{}\r\n\n" + b"x" * 3_000_000 + b'\n{"a": 1}')  # a line over three chunks
    lines = list(file_lines(f))
    assert [len(line) for line in lines] == [2, 0, 3_000_000, 8] and lines[0] == "{}" and lines[3] == '{"a": 1}'
    with pytest.raises(BadInput, match=r"x.jsonl line 3: longer than the limit of 1,000,000 bytes: stopped reading"):
        list(file_lines(f, max_line=1_000_000))
    f.write_bytes(b"{}\n{}\n" + b"\xff" + b"\n")
    with pytest.raises(BadInput, match=r"line 3: not UTF-8 text \(byte 0xff at offset 0\)"):
        list(file_lines(f))
    f.write_bytes(b"{}\n\n{\x00}\n")
    with pytest.raises(BadInput, match=r"line 3: a NUL byte"):
        list(file_lines(f))


def test_a_whole_file_read_stops_past_its_limit(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_bytes(b"# " + b"x" * 5000)
    with pytest.raises(BadInput, match=r"holds more than 4,096 bytes: stopped reading"):
        read_text(f, max_bytes=4096)
    assert read_text(f, max_bytes=8192).startswith("# x")


# --- answers ------------------------------------------------------------------------------------


def reference_normalize(answer: str) -> str:
    """The earlier ``normalize_answer`` as it was written (one ``$`` pair copied away per pass,
    ``\\!`` by a regular expression): what the linear code must agree with."""
    s = answer.strip()
    while len(s) >= 2 and s.startswith("$") and s.endswith("$"):
        s = s[1:-1].strip()
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")

    def glue(m: re.Match[str]) -> str:
        before, after = m.string[m.start() - 1 : m.start()], m.string[m.end() : m.end() + 1]
        return " " if before.isalpha() and after.isalpha() else ""

    s = _BRACED_COMMA.sub(",", re.sub(r"(?:\s*\\!)+\s*", glue, s))
    s = _SPACING.sub(" ", s)
    s = _WS.sub(" ", s).strip()
    if s.endswith((".", ",")) and not s[:-1].rstrip().endswith("\\") and not s.endswith("..."):
        s = s[:-1].rstrip()
    if m := _THOUSANDS.fullmatch(s):
        s = m.group(1).replace(",", "")
    return s


ANSWER_PIECES = st.sampled_from(["$", " ", "\t", "\n", "\u00a0", "\\!", "\\", "!", "a", "x", "1", "{", "}", ",", "."])


@settings(max_examples=3000, deadline=None)
@given(st.lists(ANSWER_PIECES, max_size=16).map("".join))
def test_normalisation_agrees_with_the_earlier_one(answer: str) -> None:
    assert normalize_answer(answer) == reference_normalize(answer)


@pytest.mark.parametrize(
    ("response", "answer"),
    [
        ("\\boxed{" + "$" * 2_000_000 + "7" + "$" * 2_000_000 + "}", "7"),  # the 4 MB response
        ("\\boxed{" + "$ " * 1_000_000 + "7" + " $" * 1_000_000 + "}", "7"),
        ("\\boxed{" + " " * 4_000_000 + "10,\\!080}", "10080"),
        ("\\boxed{" + "a \\! " * 800_000 + "b}", "a" + " a" * 799_999 + " b"),
    ],
    ids=["dollars", "dollars-and-blanks", "blanks", "thin-spaces"],
)
def test_a_4_mb_answer_is_normalised_right(response: str, answer: str) -> None:
    assert extract_answer(response) == answer
