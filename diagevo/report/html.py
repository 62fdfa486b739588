"""The report's pages as HTML, from the templates in ``diagevo/report/templates`` (jinja2): one
self-contained file each, inline CSS, inline SVG charts, a few lines of inline JavaScript (the
round picker of the skill-node tree, the cause filter); nothing is fetched, so a page opens
offline from a file.

The views (:mod:`diagevo.report.sections`, :mod:`diagevo.report.compare`) hand the templates
plain text; autoescaping is on for every template, so the engine escapes every text from the
log. What the templates add to jinja2: ``{% text value %}`` (:class:`TextTag`) writes a text from
a run inside an element; the filter ``visible_line`` shows a text in an attribute or the title
(control characters and bidi overrides as escapes, as the terminal shows them:
:func:`diagevo.text.untrusted.visible`, ESC as ``\\x1b``, RLO as ``\\u202e``, a newline as ``\\n``).
The one markup marked safe is a figure's SVG (:func:`diagevo.report.page.chart`).

The templates are compiled once per process: one environment, its templates cached and never
checked for changes on disk.
"""

from __future__ import annotations

from functools import cache

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.parser import Parser

from diagevo.report.data import RunData
from diagevo.report.sections import Command, run_page
from diagevo.text.untrusted import visible


def _visible(value: object) -> str:
    return visible("" if value is None else str(value), newlines=True)


def _visible_line(value: object) -> str:
    return visible("" if value is None else str(value))


def _ascii(value: object) -> bool:
    return str(value).isascii()


class TextTag(Extension):
    """``{% text value %}``: a text from a run (an id, a label, a question, an answer, a
    diagnosis, a name) inside an element. Its control characters and bidi overrides are shown
    as escapes and its newlines kept (the filter ``visible``), the engine's autoescaping escapes
    it, and a text with any character beyond ASCII sits in its own ``<bdi>`` (bidirectional
    isolation), so right-to-left words reorder nothing outside it.

    The tag compiles to ``{% set shown = value|visible %}{% if shown is ascii %}{{ shown }}{% else
    %}<bdi>{{ shown }}</bdi>{% endif %}`` in place: the stories of a long run hold thousands of
    steps with several texts each, and a macro call per text costs several times that ``if``."""

    tags = {"text"}

    def parse(self, parser: Parser) -> list[nodes.Node]:
        lineno = next(parser.stream).lineno
        value = parser.parse_expression()
        name = parser.free_identifier(lineno).name
        shown = nodes.Name(name, "load", lineno=lineno)
        plain = nodes.Test(shown, "ascii", [], [], None, None, lineno=lineno)
        isolated = [nodes.TemplateData("<bdi>"), shown, nodes.TemplateData("</bdi>")]
        return [
            nodes.Assign(nodes.Name(name, "store"), nodes.Filter(value, "visible", [], [], None, None), lineno=lineno),
            nodes.If(plain, [nodes.Output([shown])], [], [nodes.Output(isolated)], lineno=lineno),
        ]


@cache
def environment() -> jinja2.Environment:
    """The one template environment of the process."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("diagevo.report", "templates"),
        autoescape=True,  # every template, whatever its name
        undefined=jinja2.StrictUndefined,  # a misspelt field is an error, not an empty text
        auto_reload=False,
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[TextTag],
    )
    env.filters["visible"] = _visible
    env.filters["visible_line"] = _visible_line
    env.tests["ascii"] = _ascii
    return env


def page_html(template: str, page: object) -> str:
    """``page`` (a page's view data) laid out by ``template``."""
    return environment().get_template(template).render(page=page)


def render(data: RunData, db_url: str, command: Command) -> str:
    """The run report. ``command(*args)`` spells a diagevo command for this database and run."""
    return page_html("run.html", run_page(data, db_url, command))
