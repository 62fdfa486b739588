"""The alembic environment of the event log (``env.py``) and its revisions (``versions/``)."""
