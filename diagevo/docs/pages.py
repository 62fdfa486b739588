"""The documentation's pages, wherever diagevo is installed: found, listed, named and read.

``docs/`` in the repository is the one source of the pages. A checkout (an editable install
included) reads them there, as written. A wheel, or a non-editable ``pip install .``, carries
them rendered when it is built (``setup.py`` runs ``docs/render.py``) in
``diagevo/docs/packaged/``: each page (``docs/**.md``) with its generated sections (the
references: CLI, Python API, configuration, event types, errors) built from the code packaged
beside it and the files it includes in place, its pictures (``docs/img/``), and the files a user
runs or copies (``configs/``, whose ``sim.toml`` is ``diagevo train``'s default, and
``examples/``), laid out as in the repository, so that one root serves both. This module only
reads: it builds no section, and no file of the project's own travels with the pages.

Beside the pages, the listing names the files a user runs or copies (``examples/verl_round.sh``,
``configs/verl/solver.yaml``), each with its path in this installation, so that
``cp "$(diagevo docs --path examples/verl_round.sh)" .`` works in a wheel as in a checkout.

A page is named by its path below ``docs/`` without ``.md`` (``how-to/audit``). A name is looked
up among the pages listed, never joined to a folder: ``..``, an absolute path or a name no page
has is refused in one line, naming the closest page. The listing itself takes only regular
files that lie below the pages' folder (a link is skipped), and a page's ``--8<-- "FILE"`` line
(pymdownx.snippets, as the site includes it) names a file below the root or is refused.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from diagevo.errors import BadInput, Call, NotFound
from diagevo.errors.installation import PACKAGED, installation
from diagevo.text.parsing import error_line, quoted
from diagevo.text.words import close_to, you_mean

MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)
"""A line of a page's source that the build fills from the code (``<!-- generated: configuration -->``)."""
UNRENDERED = (
    "*(Generated from the code when the site or the wheel is built: the contributing page says how to "
    "render the pages of a checkout.)*"
)
"""What a checkout shows for a generated section: its pages are the sources, rendered by a build."""

FILES = ("examples/*.py", "examples/*.sh", "configs/*.toml", "configs/*/*.yaml")
"""The files beside the pages that a user runs or copies, as ``setup.py`` ships them (its
``documentation()``; tests/test_docs_files.py holds the two equal)."""

SNIPPET = re.compile(r'^--8<-- "([^"\n]*)"$', re.M)
HEADING = re.compile(r"^# (.+)$")
LISTING = Call("pages", "diagevo.docs.pages.pages()")


def _json(fields: list[tuple[str, Any]]) -> dict[str, Any]:
    return {k: str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v for k, v in fields}


class _Listed:
    """``to_dict()``: the fields, in order, as ``diagevo docs --json`` prints them (a path as its text)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self, dict_factory=_json)  # type: ignore[call-overload]


@dataclass(frozen=True)
class DocPage(_Listed):
    """One page: its ``name`` (``how-to/audit``), its ``title`` (its first heading) and its file."""

    name: str
    title: str
    path: Path


@dataclass(frozen=True)
class File(_Listed):
    """A file shipped beside the pages for a user to run or copy: its ``name`` as the pages write
    it (``examples/verl_round.sh``) and where it is in this installation."""

    name: str
    path: Path


@dataclass(frozen=True)
class Pages(_Listed):
    """Every page (``diagevo docs --json``), the folder that holds them, whether that folder is a
    checkout's ``docs/`` (``checkout``), the built site's ``index.html`` where there is one, and
    the files shipped beside the pages (``files``)."""

    folder: Path
    checkout: bool
    site: Path | None
    pages: tuple[DocPage, ...]
    files: tuple[File, ...] = ()


def root() -> Path:
    """The folder holding ``docs/`` and the files its pages read: the packaged copy in a built
    package, else the checkout's root."""
    if (PACKAGED / "docs" / "index.md").is_file():
        return PACKAGED
    checkout = installation().root
    if checkout is not None and (checkout / "docs" / "index.md").is_file():
        return checkout
    raise NotFound(f"this diagevo carries no documentation: no pages in {PACKAGED} (a package built without docs/)")


def below(top: Path, relative: str) -> Path | None:
    """``top/relative`` when it is a regular file below ``top``, reached without a link and
    without ``..``; None otherwise."""
    parts = relative.split("/")
    if not relative or relative.startswith("/") or "\\" in relative or "\x00" in relative or ".." in parts:
        return None
    path = top.joinpath(*parts)
    if path.is_symlink() or not path.is_file() or not path.resolve().is_relative_to(top.resolve()):
        return None
    return path


def _order(name: str) -> tuple[int, bool, str]:
    """The listing's order: the pages at the top first (the home page leading), then each folder's."""
    return name.count("/"), name != "index", name


def title(markdown: str) -> str | None:
    """The first ``# `` heading outside a fenced block."""
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        found = None if fenced else HEADING.match(line)
        if found:
            return found.group(1).strip()
    return None


def _title(markdown: str, top: Path) -> str | None:
    """A page's title: its first heading, or that of the file it includes first (the changelog)."""
    found = title(markdown)
    first = SNIPPET.search(markdown) if found is None else None
    path = below(top, first.group(1)) if first is not None else None
    return title(path.read_text(encoding="utf-8")) if path is not None else found


def pages() -> Pages:
    """Every page below ``docs/``, the top ones first."""
    top = root()
    folder = top / "docs"
    found: list[DocPage] = []
    for page in sorted(folder.rglob("*.md")):
        relative = page.relative_to(folder).as_posix()
        if any(part.startswith(("_", ".")) for part in Path(relative).parts[:-1]):
            continue  # a hidden or private folder's pages are none of the docs'
        path = below(folder, relative)
        if path is not None:
            name = relative.removesuffix(".md")
            found.append(DocPage(name, _title(path.read_text(encoding="utf-8"), top) or name, path))
    site = top / "site" / "index.html"
    checkout = top != PACKAGED
    return Pages(
        folder,
        checkout,
        site if checkout and site.is_file() else None,
        tuple(sorted(found, key=lambda p: _order(p.name))),
        _files(top),
    )


def _files(top: Path) -> tuple[File, ...]:
    """The files of :data:`FILES` below ``top`` (no package file such as ``__init__.py``, no link)."""
    names = sorted({p.relative_to(top).as_posix() for pattern in FILES for p in top.glob(pattern)})
    found = ((n, below(top, n)) for n in names if not n.rpartition("/")[2].startswith(("_", ".")))
    return tuple(File(name, path) for name, path in found if path is not None)


def shipped_file(name: str, listing: Pages | None = None) -> File | None:
    """The file shipped beside the pages that ``name`` names exactly (``examples/verl_round.sh``,
    a leading ``./`` allowed), or None."""
    wanted = name.removeprefix("./")
    return next((f for f in (listing or pages()).files if f.name == wanted), None)


def _refusal(name: str) -> str | None:
    """Why ``name`` cannot name a page, whatever pages there are."""
    if not name.strip():
        return "an empty name"
    if "\x00" in name:
        return "a NUL character in it"
    if name.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", name):
        return "an absolute path"
    if ".." in re.split(r"[/\\]", name):
        return "a path out of the pages ('..')"
    return None


def find(name: str, listing: Pages | None = None) -> DocPage:
    """The page ``name`` names: its name as listed, with or without ``.md`` (and ``docs/``), or
    the last part of one name alone (``audit``)."""
    refusal = _refusal(name)
    if refusal is not None:
        raise BadInput(
            f"{name!r} is not a page: {refusal}; a page is named as the listing names it", LISTING, aside=True
        )
    listing = listing or pages()
    wanted = name.removeprefix("./").removeprefix("docs/").removesuffix(".md")
    by_name = {p.name: p for p in listing.pages}
    if wanted in by_name:
        return by_name[wanted]
    ends = [p for p in listing.pages if p.name.rpartition("/")[2] == wanted]
    if len(ends) == 1:
        return ends[0]
    likely = [p.name for p in ends] or close_to(wanted, [*by_name, *(f.name for f in listing.files)])
    raise NotFound(
        f"no page or file {name!r}{you_mean([repr(n) for n in likely])};",
        LISTING,
        then=" lists them",
        value=name,
        allowed=tuple(by_name),
    )


def included(markdown: str, top: Path, where: str) -> str:
    """``markdown`` with each ``--8<-- "FILE"`` line replaced by the file (below ``top``)."""

    def include(match: re.Match[str]) -> str:
        path = below(top, match.group(1))
        if path is None:  # a page is input too (an edited copy): refused as NotFound, a LookupError
            raise NotFound(f"{where}: includes {quoted(match.group(1))}, which is no file beside the pages")
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(f"{where}: cannot include {quoted(match.group(1))}: {error_line(exc)}") from None

    return SNIPPET.sub(include, markdown)


def text(page: DocPage) -> str:
    """The page's Markdown as the site shows it: the files it includes in place. A built
    package's pages come rendered; a checkout's generated sections are rendered only by a build
    (:data:`UNRENDERED` says so in their place)."""
    markdown = included(page.path.read_text(encoding="utf-8"), root(), page.name)
    return MARKER.sub(UNRENDERED, markdown)
