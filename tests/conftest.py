"""Shared set-up of the CPU tests."""

# pytester's in-process runs forget the modules first imported inside them; SQLAlchemy (imported by the plugin's
# history append at a session's end) does not survive being imported a second time into one process, so it is
# imported once here, before any in-process run; nor does NumPy (imported by the history store).
import numpy  # noqa: F401
import sqlalchemy  # noqa: F401
