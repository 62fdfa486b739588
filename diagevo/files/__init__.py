"""Paths and files: what diagevo writes for the user, and the folders it owns beside a database
(and nothing outside them)."""
