"""The documentation in any installation: the pages of ``docs/`` and the references built from the code.

:mod:`~diagevo.docs.pages` finds the pages (a checkout's ``docs/``, or the copy a wheel carries)
and reads one with its generated sections filled; :mod:`~diagevo.docs.generated` and
:mod:`~diagevo.docs.api` build those sections from the code. ``diagevo docs`` and the site's
build (``docs/hooks.py``) call the same generators, so each reference is built in one place.
"""

from __future__ import annotations


class Undocumented(Exception):
    """Something the code declares has no documentation (a config field without a description,
    an export without a docstring): a bug, which fails the site's build and ``diagevo docs``."""
