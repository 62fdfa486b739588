"""The documentation in any installation: :mod:`~diagevo.docs.pages` finds, lists and reads the
pages (a checkout's ``docs/``, or the copy a wheel carries, its references rendered from the code
when the wheel was built by ``docs/render.py``, which the package does not carry)."""
