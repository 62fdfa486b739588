"""``diagevo docs``: the documentation, offline, in any installation.

With no page, the pages (name and title) and where they are on disk, the files shipped beside
them (the examples and configs, each with its path), and the built site where a checkout has one;
with a page (``diagevo docs how-to/audit``), the page as the site shows it, its references
rendered from the code when the wheel was built (:mod:`diagevo.docs.pages` reads it): rendered
as Markdown on a terminal, the Markdown itself into a pipe or a file; with a shipped file
(``diagevo docs examples/verl_round.sh``), its text. ``--path`` prints the file's path alone,
for a pager, an editor or ``cp``.

A page is package data, yet shown as untrusted text: Rich renders its Markdown as text (no markup,
no emoji codes, no link escapes), and the console escapes any control character left.
"""

from __future__ import annotations

import posixpath
import re
import sys
from typing import Annotated

import typer
from rich import box
from rich.markdown import Markdown
from rich.table import Table

from diagevo.cli.common import JsonOpt, console, emit_json, spell
from diagevo.cli.safe import plain, text
from diagevo.docs.pages import File, Pages, find, pages, shipped_file
from diagevo.docs.pages import text as page_text

LINK = re.compile(r"(!?)\[([^\]\n]*)\]\(([^)\s]+)\)")


def docs_command(
    page: Annotated[
        str | None,
        typer.Argument(
            help="A page (how-to/audit; .md optional) or a shipped file (examples/verl_round.sh) as the list "
            "names it; none: the list.",
            show_default=False,
        ),
    ] = None,
    path: Annotated[
        bool,
        typer.Option(
            "--path", help='Print only the file\'s path: cp "$(diagevo docs --path examples/verl_round.sh)" .'
        ),
    ] = False,
    json: JsonOpt = False,
) -> None:
    listing = pages()
    if page is None:
        _listing(listing, path, json)
        return
    file = shipped_file(page, listing)
    if file is not None:
        _file(file, path, json)
        return
    found = find(page, listing)
    if path:
        sys.stdout.write(plain(str(found.path), limit=None) + "\n")
        return

    markdown = page_text(found)
    if json:
        emit_json({**found.to_dict(), "markdown": markdown})
    elif console.is_terminal:
        console.print(Markdown(for_terminal(markdown, found.name), hyperlinks=False))
    else:
        sys.stdout.write(plain(markdown, newlines=True, limit=None))


def _file(file: File, path: bool, as_json: bool) -> None:
    if path:
        sys.stdout.write(plain(str(file.path), limit=None) + "\n")
        return
    content = file.path.read_text(encoding="utf-8")
    if as_json:
        emit_json({**file.to_dict(), "text": content})
    else:
        sys.stdout.write(plain(content, newlines=True, limit=None))


def _listing(listing: Pages, path: bool, as_json: bool) -> None:
    if as_json:
        emit_json(listing.to_dict())
        return
    if path:
        sys.stdout.write(plain(str(listing.folder), limit=None) + "\n")
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("page", no_wrap=True)
    table.add_column("title")
    for p in listing.pages:
        table.add_row(text(p.name), text(p.title))
    console.print(table)
    files = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    files.add_column("file (to run or copy)", no_wrap=True)
    files.add_column("path", overflow="fold")
    for f in listing.files:
        files.add_row(text(f.name), text(str(f.path)))
    console.print(files)
    console.print(text(("pages: ", "bold"), str(listing.folder)), soft_wrap=True)
    if listing.site is not None:
        console.print(text(("site: ", "bold"), f"{listing.site} (the same pages as HTML, offline)"), soft_wrap=True)
    elif listing.checkout:
        console.print(text(("site: ", "bold"), "not built (make docs builds it into site/)"), soft_wrap=True)
    console.print(text(("a page: ", "bold"), f"{spell('docs', 'NAME')} (rendered on a terminal, Markdown into a pipe)"))
    copy = spell("docs", "--path", "examples/verl_round.sh")
    console.print(text(("a file: ", "bold"), f'cp "$({copy})" . (a copy to edit)'), soft_wrap=True)


def for_terminal(markdown: str, name: str) -> str:
    """A page's Markdown for the terminal, where its links lead nowhere: a link to another page
    names the page as ``diagevo docs`` takes it, a picture its file."""

    def shown(match: re.Match[str]) -> str:
        picture, label, target = match.groups()
        if "://" in target or target.startswith(("#", "mailto:")):
            return match.group(0)
        file = posixpath.normpath(posixpath.join(posixpath.dirname(name), target.partition("#")[0]))
        if picture:
            return f"[picture: {label or file}]"
        other = file.removesuffix(".md")
        if not target.partition("#")[0].endswith(".md") or other.startswith(".."):
            return match.group(0)
        said = label.strip("`")
        return label if said in (other, f"diagevo docs {other}") else f"{label} (`diagevo docs {other}`)"

    return LINK.sub(shown, markdown)
