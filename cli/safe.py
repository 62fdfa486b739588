"""The CLI's one rule for untrusted text in the terminal.

Ids, labels, descriptions, questions, trajectories, diagnoses, benchmark and metric names come
from models and from other people's files. The CLI shows them

- as text, never as Rich markup or emoji codes: the consoles are built with both off, and
  styled lines are assembled from :class:`rich.text.Text` parts (:func:`text`), so
  ``computes [x/2] instead of floor(x/2)`` shows as written and ``[/b]`` breaks nothing;
- without a control character: C0/C1 controls, DEL, bidi overrides and isolates and lone
  surrogates are shown as escapes (ESC as ``\\x1b``; :func:`diagevo.text.untrusted.visible`);
- cut in the middle when a single text is longer than :data:`LONGEST` characters (``--json``
  has them whole), so a 200,000-character line costs neither time nor a screen of noise.

The consoles also pass every segment they render through the same escape (:class:`SafeConsole`),
so a text that reaches them some other way still cannot move the cursor or set the clipboard;
:func:`json_text` applies the rule to JSON output, and :func:`plain` to lines written without
Rich (progress on stderr).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

from diagevo.text.untrusted import UNSAFE, json_visible, shorten, visible

LONGEST = 2000
"""Characters of one untrusted text shown in the terminal (the middle is cut)."""

Part = str | tuple[str, str] | Text


class SafeConsole(Console):
    """A Rich console that renders no control character it was handed as content: whatever
    :func:`text` missed is escaped here (Rich's own escapes travel as control segments or
    styles, not as text)."""

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            content = segment.text
            if segment.control is None and content != "\n" and UNSAFE.search(content):
                yield Segment(visible(content, newlines=True), segment.style, None)
            else:
                yield segment


def make_console(*, stderr: bool = False, **kwargs: Any) -> SafeConsole:
    """A console for the CLI: markup and emoji codes off, control characters escaped. Without a
    ``width`` given, its width is the terminal's or ``$COLUMNS`` when it prints, not the value
    ``$COLUMNS`` held when it was made (which Rich keeps: a console made at import would keep the
    width of whatever environment imported it first)."""
    console = SafeConsole(stderr=stderr, markup=False, emoji=False, **kwargs)
    if kwargs.get("width") is None:
        console.width = None  # type: ignore[assignment]  # Rich's setter: the width is measured when it prints
    return console


def plain(value: object, *, newlines: bool = False, limit: int | None = LONGEST) -> str:
    """``value`` as a string that is safe to show: control characters escaped, cut to ``limit``."""
    s = value if isinstance(value, str) else str(value)
    if limit is not None:
        s = shorten(s, limit, middle=True)
    return visible(s, newlines=newlines)


def text(*parts: Part, newlines: bool = False, limit: int | None = LONGEST) -> Text:
    """A line from parts: a string is shown as it is (through :func:`plain`), ``(string,
    style)`` in that style, a :class:`Text` as built. Nothing is read as markup."""
    out = Text()
    for part in parts:
        if isinstance(part, Text):
            out.append_text(part)
        elif isinstance(part, tuple):
            out.append(plain(part[0], newlines=newlines, limit=limit), style=part[1])
        else:
            out.append(plain(part, newlines=newlines, limit=limit))
    return out


def error_line(message: str, label: str = "error:") -> Text:
    """``error: MESSAGE`` with the label in red."""
    return text((label, "red"), " ", message)


def json_text(obj: Any) -> str:
    """One JSON document on one line, escaped as :func:`diagevo.text.untrusted.json_visible` says
    (the same JSON value: a reader gets the texts back exactly)."""
    return json_visible(json.dumps(obj, ensure_ascii=False, default=str))


__all__ = ["LONGEST", "SafeConsole", "error_line", "json_text", "make_console", "plain", "text"]
