"""``diagevo docs``: the pages in any installation, and page names that never lead out of the
pages (issue 51, item 5); the pages as a build renders them, each generated section filled from
the code (``docs/render.py``, issue 93, item 4).

The checkout's own ``docs/`` is read here (an editable install): its sources, each generated
section pointing at the builds that render it; tests/test_wheel.py reads the rendered copy a wheel
carries. A hostile pages folder (a link out, a page that includes a file out, control characters
and a markup link in a page) stands in for a tampered package: a real folder of files.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from diagevo.docs import pages as docs_pages
from diagevo.errors import BadInput, NotFound
from docs import render
from tests.test_cli_memory import assert_one_line_error, run_cli

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {p.relative_to(ROOT / "docs").with_suffix("").as_posix(): p for p in (ROOT / "docs").rglob("*.md")}


def _listing(capsys: pytest.CaptureFixture[str]) -> dict:
    code, out, err = run_cli(capsys, "docs", "--json")
    assert code == 0, err
    return json.loads(out)


def test_the_list_names_every_page_of_docs_with_its_title_and_where_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    listing = _listing(capsys)
    assert listing["folder"] == str(ROOT / "docs") and listing["checkout"] is True
    by_name = {p["name"]: p for p in listing["pages"]}
    assert set(by_name) == set(SOURCES)
    assert [p["name"] for p in listing["pages"]][0] == "index"
    for name, page in by_name.items():
        assert page["path"] == str(SOURCES[name])
        assert page["title"] and page["title"] != name, page  # each page's first heading
    assert by_name["how-to/audit"]["title"] == "Audit why a cause was reactivated"
    assert by_name["changelog"]["title"] == "Changelog"  # from the CHANGELOG.md it includes
    code, out, _ = run_cli(capsys, "docs")
    assert code == 0
    assert all(name in out for name in SOURCES) and "Audit why a cause was reactivated" in out
    assert f"pages: {ROOT / 'docs'}" in " ".join(out.split())
    code, out, _ = run_cli(capsys, "docs", "--path")
    assert (code, out) == (0, f"{ROOT / 'docs'}\n")
    markdown = run_cli(capsys, "docs", "how-to/audit")[1]
    page = json.loads(run_cli(capsys, "docs", "how-to/audit", "--json")[1])
    assert page == {**by_name["how-to/audit"], "markdown": markdown}


def test_the_list_says_where_a_built_site_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    top = tmp_path / "checkout"
    (top / "docs").mkdir(parents=True)
    (top / "docs" / "index.md").write_text("# Home\n", encoding="utf-8")
    monkeypatch.setattr(docs_pages, "PACKAGED", tmp_path / "nowhere")
    from diagevo.errors.installation import Installation

    checkout = Installation("checkout", "0", top, tmp_path, False)
    monkeypatch.setattr(docs_pages, "installation", lambda: checkout)
    assert docs_pages.pages().site is None
    (top / "site").mkdir()
    (top / "site" / "index.html").write_text("<html></html>", encoding="utf-8")
    assert docs_pages.pages().site == top / "site" / "index.html"


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_page_renders_filled_and_a_checkout_prints_its_source(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """As a build renders it (the wheel's copy), each generated section is filled and each include
    in place; a checkout prints the page as written, its includes in place and each generated
    section a pointer to the builds that render it, the rest the same text as the rendered page."""
    source = SOURCES[name].read_text(encoding="utf-8")
    rendered = render.render(name)
    assert not docs_pages.MARKER.search(rendered) and not re.search(r"^--8<--|^::: ", rendered, re.M), name
    if "<!-- generated:" in source or "--8<--" in source:
        assert len(rendered) > len(source) + 500, name  # filled, not emptied
    else:
        assert rendered == source, name  # a page as it is
    code, out, err = run_cli(capsys, "docs", name)
    assert code == 0, err
    markers = len(docs_pages.MARKER.findall(source))
    assert not docs_pages.MARKER.search(out) and not re.search(r"^--8<--", out, re.M), name
    assert out.count(docs_pages.UNRENDERED) == markers, name
    if not markers:
        assert out == rendered, name  # Markdown into a pipe: the page as the wheel carries it


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("reference/configuration", "### `[memory]`"),
        ("reference/events", "### `cause.reactivated`"),
        ("reference/errors", "- `diagevo.NotFound` (`diagevo.errors`): A run, round, cause, file"),
        ("reference/python-api", "### diagevo.open_store\n\n```python\nopen_store("),
        ("reference/cli", "## diagevo memory why\n"),
        ("reference/cli", "More: [`diagevo docs how-to/audit`](../how-to/audit.md)"),
        (
            "contributing",
            "views\n      │ imports only what is below\nlog\n",
        ),  # the layers, from pyproject.toml's contract
        ("how-to/diagnostician", '"response_format": {'),
        ("changelog", "## [Unreleased]"),
    ],
)
def test_a_generated_section_is_built_from_the_code(name: str, shown: str) -> None:
    assert shown in render.render(name)


def test_a_section_no_generator_builds_fails_the_build() -> None:
    assert render.fill("a\n<!-- generated: x -->\nb", {"x": lambda: "X"}, "p") == "a\nX\nb"
    with pytest.raises(render.Undocumented, match="p: unknown generated section 'y'"):
        render.fill("<!-- generated: y -->", {}, "p")
    assert set(render.GENERATORS) >= {m for p in SOURCES.values() for m in docs_pages.MARKER.findall(p.read_text())}


def test_the_python_api_page_shows_each_export_from_its_signature_and_docstring() -> None:
    import diagevo
    from docs.render_api import docstring

    out = render.render("reference/python-api")
    for name in diagevo._EXPORTS:
        assert f"### diagevo.{name}\n" in out, name
    assert "#### Round.requests\n\n```python\nRound.requests(" in out  # a member a caller uses, without self
    assert "#### Round.record_failures" in out and "Round._" not in out
    assert ":class:" not in out and ":meth:" not in out  # roles shown as code
    assert " at 0x" not in out and "spell: Callable[[Fix | Step], str] = in_python" in out  # a default by its name
    assert docstring(":class:`~diagevo.errors.NotFound` and ``x``::") == "`NotFound` and `x`:"


@pytest.mark.parametrize("name", ["how-to/audit", "how-to/audit.md", "docs/how-to/audit.md", "audit", "./how-to/audit"])
def test_a_page_is_named_as_listed_with_or_without_md_or_by_its_last_part(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "docs", name, "--path")
    assert (code, out) == (0, f"{ROOT / 'docs' / 'how-to' / 'audit.md'}\n"), err


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("../CHANGELOG", "a path out of the pages"),  # a file that exists, beside docs/
        ("how-to/../../pyproject.toml", "a path out of the pages"),
        ("..", "a path out of the pages"),
        ("/etc/passwd", "an absolute path"),
        ("~/notes", "an absolute path"),
        ("C:\\docs\\index", "an absolute path"),
        ("how-to\\..\\..\\README", "a path out of the pages"),
    ],
)
def test_a_name_out_of_the_pages_is_refused_in_one_line(
    name: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (("docs", name), ("docs", name, "--path"), ("docs", name, "--json")):
        code, out, err = run_cli(capsys, *argv)
        assert_one_line_error(code, err, f"{name!r} is not a page: {said}", "`diagevo docs`")
        assert out == ""
    with pytest.raises(BadInput, match="is not a page"):
        docs_pages.find(name)


def test_an_unknown_page_names_the_closest_one(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "docs", "how-to/audti")
    assert_one_line_error(
        code, err, "no page or file 'how-to/audti' (did you mean 'how-to/audit'", "`diagevo docs` lists"
    )
    code, _, err = run_cli(capsys, "docs", "what-if")  # two pages end so
    assert_one_line_error(code, err, "did you mean 'concepts/what-if' or 'how-to/what-if'?")
    with pytest.raises(NotFound, match=r"no page or file 'nothing-like-it'; `diagevo\.docs\.pages\.pages\(\)` lists"):
        docs_pages.find("nothing-like-it")  # a Python caller reads the Python call; the CLI, `diagevo docs` (above)
    with pytest.raises(BadInput, match="an empty name"):
        docs_pages.find(" ")
    with pytest.raises(BadInput, match="a NUL character"):
        docs_pages.find("how-to/audit\x00.md")


@pytest.fixture()
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A packaged pages folder with a link out, an include out and a page of hostile text."""
    top = tmp_path / "packaged"
    docs = top / "docs"
    (docs / "how-to").mkdir(parents=True)
    outside = tmp_path / "outside.md"
    outside.write_text("# Secret\n\nnot a page\n", encoding="utf-8")
    (docs / "index.md").write_text(
        "# Home\n\nSee [the audit](how-to/audit.md#trust), [a site](https://example.org) and ![a figure](img/x.svg).\n",
        encoding="utf-8",
    )
    (docs / "how-to" / "audit.md").write_text(
        "# Audit \x1b]52;c;ZXZpbA==\x07\n\nred \x1b[31mred\x1b[0m [link=http://evil.example]x[/link] :smile:\n",
        encoding="utf-8",
    )
    (docs / "secret.md").symlink_to(outside)
    (docs / "include.md").write_text('# Include\n\n--8<-- "../outside.md"\n', encoding="utf-8")
    monkeypatch.setattr(docs_pages, "PACKAGED", top)
    return top


def test_a_link_out_of_the_pages_is_not_a_page_and_an_include_out_is_refused(hostile: Path) -> None:
    listing = docs_pages.pages()
    assert listing.folder == hostile / "docs" and not listing.checkout and listing.site is None
    assert [p.name for p in listing.pages] == ["index", "include", "how-to/audit"]
    with pytest.raises(NotFound, match="no page or file 'secret'"):
        docs_pages.find("secret", listing)
    with pytest.raises(LookupError, match="includes '../outside.md', which is no file beside the pages"):
        docs_pages.text(docs_pages.find("include", listing))


def test_a_refused_include_is_one_line_from_the_command(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An include out of the pages, or of a file that is not UTF-8, is the command's one-line
    error naming the value (was ``internal error: LookupError``)."""
    code, out, err = run_cli(capsys, "docs", "include")
    assert code == 1 and out == "" and err.count("\n") == 1, err
    assert "include: includes '../outside.md', which is no file beside the pages" in err
    assert "internal error" not in err
    (hostile / "latin1.md").write_bytes(b"caf\xe9\n")
    (hostile / "docs" / "include.md").write_text('# Include\n\n--8<-- "latin1.md"\n', encoding="utf-8")
    code, out, err = run_cli(capsys, "docs", "include")
    assert code == 1 and err.count("\n") == 1 and "cannot include 'latin1.md'" in err and "internal" not in err, err


def test_a_page_is_text_on_a_terminal_and_in_a_pipe(
    hostile: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run_cli(capsys, "docs", "how-to/audit")  # a pipe: the Markdown, escaped
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    assert "# Audit \\x1b]52;c;ZXZpbA==\\x07" in out and "[link=http://evil.example]x[/link] :smile:" in out
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_cli(capsys, "docs", "how-to/audit")
    assert code == 0, err
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)  # Rich's own styles (SGR, where it has colours) and nothing else
    assert "# Audit" not in plain and "Audit" in plain  # rendered by Rich, not the Markdown
    assert "\x1b" not in plain and "\x07" not in plain
    assert "\\x1b]52;c;ZXZpbA==" in plain and "[link=http://evil.example]x[/link] :smile:" in plain  # (Rich drops BEL)
    code, out, err = run_cli(capsys, "docs", "index")
    plain = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", out).split())
    assert "the audit (diagevo docs how-to/audit)" in plain  # a page as the command that shows it
    assert "a site (https://example.org)" in plain and "[picture: a figure]" in plain
    assert "\x1b]8;" not in out  # no hyperlink escapes


def test_the_library_pages_read_without_the_cli(hostile: Path) -> None:
    page = docs_pages.find("audit")
    assert page.path == hostile / "docs" / "how-to" / "audit.md"
    assert os.path.isabs(page.to_dict()["path"])
