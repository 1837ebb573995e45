"""The history database's tables, its schema version and the migrations that reach it.

One schema for SQLite and PostgreSQL, written with SQLAlchemy Core. ``RUNS`` and ``RECORDS`` are the tables as
the current code reads and writes them; a database is brought to ``SCHEMA_VERSION`` by running, in order, every
migration above the version it records in ``schema_version`` (a fresh database runs them all, so the upgrade path
is exercised by every new database). A database recorded by a newer gpuperf is refused, never rewritten.

A run row carries what explains a curve a month later (host, model, versions, commit, CI job, options, the
baseline digest); a record row is one case's figures: indexed columns for the questions asked of the history and
the whole results-file record as JSON, so a field added to results files later is kept without a migration.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

#: The schema this code reads and writes.
SCHEMA_VERSION = 3

METADATA = sa.MetaData()

#: The columns ``history changes`` reads from every record: an index holding all of them answers it without
#: reading the records' JSON (a covering index), which is what keeps it fast over a million records.
SERIES_COLUMNS = ("case_id", "method", "run_pk", "value", "status")
SERIES_INDEX = "records_series"

VERSION_TABLE = sa.Table("schema_version", METADATA, sa.Column("version", sa.Integer, nullable=False))

RUNS = sa.Table(
    "runs", METADATA,
    sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(64), nullable=False, unique=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("started", sa.String(40), nullable=False, index=True),
    sa.Column("appended", sa.String(40), nullable=False),
    sa.Column("source", sa.Text, nullable=False),
    sa.Column("gpu_model", sa.Text, nullable=False),
    sa.Column("gpu_slug", sa.String(120), nullable=False, index=True),
    sa.Column("host", sa.Text, nullable=False),
    sa.Column("gpu_uuid", sa.Text),
    sa.Column("gpu_serial", sa.Text),
    sa.Column("pci_bus_id", sa.Text),
    sa.Column("driver", sa.Text),
    sa.Column("cuda_runtime", sa.Text),
    sa.Column("cublas", sa.Text),
    sa.Column("cupy", sa.Text),
    sa.Column("git_commit", sa.String(64)),
    sa.Column("git_dirty", sa.Boolean),
    sa.Column("branch", sa.Text),
    sa.Column("ci_job", sa.Text),
    sa.Column("options", sa.Text),
    sa.Column("baseline_digest", sa.String(64)),
    sa.Column("run_json", sa.Text, nullable=False),
)

RECORDS = sa.Table(
    "records", METADATA,
    sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_pk", sa.Integer, sa.ForeignKey("runs.pk", ondelete="CASCADE"), nullable=False),
    sa.Column("case_id", sa.Text, nullable=False),
    sa.Column("value", sa.Float),
    sa.Column("unit", sa.Text),
    sa.Column("spread", sa.Float),
    sa.Column("samples", sa.Integer),
    sa.Column("method", sa.Text),
    sa.Column("flush", sa.Text),
    sa.Column("kernels", sa.Text),
    sa.Column("status", sa.Text),
    sa.Column("note", sa.Text),
    sa.Column("gpu_index", sa.Integer),
    sa.Column("cycles_per_call", sa.Float),
    sa.Column("sm_clock_mhz", sa.Float),
    sa.Column("value_at_max_clock", sa.Float),
    sa.Column("data", sa.Text, nullable=False),
    sa.Index(SERIES_INDEX, *SERIES_COLUMNS),
    sa.Index("records_run", "run_pk"),
)


class SchemaError(RuntimeError):
    """The database's schema cannot be used by this code; the message names the database and the fix."""


def _create_v1(connection: sa.Connection) -> None:
    """Version 1: runs and records without the clock figures (its own table objects: history is frozen)."""
    frozen = sa.MetaData()
    sa.Table("schema_version", frozen, sa.Column("version", sa.Integer, nullable=False))
    sa.Table(
        "runs", frozen,
        sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), nullable=False, unique=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("started", sa.String(40), nullable=False, index=True),
        sa.Column("appended", sa.String(40), nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("gpu_model", sa.Text, nullable=False),
        sa.Column("gpu_slug", sa.String(120), nullable=False, index=True),
        sa.Column("host", sa.Text, nullable=False),
        *(sa.Column(name, sa.Text) for name in ("gpu_uuid", "gpu_serial", "pci_bus_id", "driver", "cuda_runtime",
                                                 "cublas", "cupy")),
        sa.Column("git_commit", sa.String(64)),
        sa.Column("git_dirty", sa.Boolean),
        sa.Column("branch", sa.Text),
        sa.Column("ci_job", sa.Text),
        sa.Column("options", sa.Text),
        sa.Column("baseline_digest", sa.String(64)),
        sa.Column("run_json", sa.Text, nullable=False),
    )
    sa.Table(
        "records", frozen,
        sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_pk", sa.Integer, sa.ForeignKey("runs.pk", ondelete="CASCADE"), nullable=False),
        *(sa.Column(name, kind) for name, kind in (
            ("case_id", sa.Text), ("value", sa.Float), ("unit", sa.Text), ("spread", sa.Float),
            ("samples", sa.Integer), ("method", sa.Text), ("flush", sa.Text), ("kernels", sa.Text),
            ("status", sa.Text), ("note", sa.Text), ("gpu_index", sa.Integer))),
        sa.Column("data", sa.Text, nullable=False),
        sa.Index("records_case_run", "case_id", "run_pk"),
        sa.Index("records_run", "run_pk"),
    )
    frozen.create_all(connection)


def _add_clock_figures(connection: sa.Connection) -> None:
    """Version 2: the per-call cycles, the SM clock and the figure at the maximum clock, nullable."""
    for name in ("cycles_per_call", "sm_clock_mhz", "value_at_max_clock"):
        connection.execute(sa.text(f"ALTER TABLE records ADD COLUMN {name} FLOAT"))


def _index_series(connection: sa.Connection) -> None:
    """Version 3: the covering index of the series, in place of the (case, run) index it extends."""
    connection.execute(sa.text("DROP INDEX records_case_run"))
    connection.execute(sa.text(f"CREATE INDEX {SERIES_INDEX} ON records ({', '.join(SERIES_COLUMNS)})"))


#: ``MIGRATIONS[n - 1]`` takes a database from version ``n - 1`` to ``n``.
MIGRATIONS: tuple[Callable[[sa.Connection], None], ...] = (_create_v1, _add_clock_figures, _index_series)


def recorded_version(connection: sa.Connection) -> int:
    """The version a database records; 0 for one without the history tables."""
    if not sa.inspect(connection).has_table("schema_version"):
        return 0
    version = connection.execute(sa.select(sa.func.max(VERSION_TABLE.c.version))).scalar()
    return int(version or 0)


def migrate(connection: sa.Connection, where: str) -> int:
    """Bring the database to ``SCHEMA_VERSION`` inside the caller's transaction; returns the version found.

    The caller holds a write lock (SQLite ``BEGIN IMMEDIATE``, a PostgreSQL advisory lock), so two processes
    opening a fresh database never both create it."""
    found = recorded_version(connection)
    if found > SCHEMA_VERSION:
        raise SchemaError(f"{where}: the history database has schema version {found}, newer than the "
                          f"{SCHEMA_VERSION} this gpuperf knows; upgrade gpuperf (pip install -U gpuperf), or "
                          "point --history (or $GPUPERF_HISTORY) at another database")
    for version in range(found + 1, SCHEMA_VERSION + 1):
        MIGRATIONS[version - 1](connection)
    if found < SCHEMA_VERSION:
        connection.execute(sa.delete(VERSION_TABLE))
        connection.execute(sa.insert(VERSION_TABLE).values(version=SCHEMA_VERSION))
    return found
