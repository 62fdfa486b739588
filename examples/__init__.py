"""Runnable examples, each on the public API alone (``import diagevo``)."""
