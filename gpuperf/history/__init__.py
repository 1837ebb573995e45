"""The history: every run remembered, its series judged for change points (docs/history.md).

Its modules, from the pure ones to those that touch the database (each imports only those before it):

- ``changepoints``: the change points of one series of figures, and the runs each could have been placed at;
- ``rows``: a results document → the run and record rows (each record's basis and figure at max clock, the run's
  start as an instant), the run id, the checked reading of results files, ``RunSummary``;
- ``changes``: the history's series (per case, method, GPU model, host) → change points told with their runs,
  commits and every version, kernel or basis change within their uncertainty;
- ``schema``: the tables, the schema version and its migrations, the figure a record is judged on;
- ``engine``: the engine for a history URL, SQLite's settings on every connection;
- ``driver_rows``: many rows of a query through the database driver's own cursor;
- ``figures``: every series' judged figures as arrays, for ``history changes``;
- ``backfill``: results files read and checked in worker processes while the history writes them;
- ``database``: ``History``, the store: append, ingest, the questions, one code path for SQLite and PostgreSQL;
- ``bisect``: ``git bisect run`` with a measured case as the oracle, each step appended to the history.

Which history a session or command uses is ``store.history_target``'s (no SQLAlchemy); the commands are
``commands/history.py`` and ``commands/history_page.py``, the trend site ``trend/``.

PYTEST_DONT_REWRITE
"""
