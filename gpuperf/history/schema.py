"""The history database's tables, its schema version and the migrations that reach it.

One schema for SQLite and PostgreSQL, written with SQLAlchemy Core. ``RUNS`` and ``RECORDS`` are the tables as
the current code reads and writes them; a database is brought to ``SCHEMA_VERSION`` by running, in order, every
migration above the version it records in ``schema_version`` (a fresh database runs them all, so the upgrade path
is exercised by every new database). A database recorded by a newer gpuperf is refused, never rewritten.

A run row carries what explains a curve a month later (host, model, versions, commit, CI job, options, the
baseline digest); a record row is one case's figures as the columns the history's questions read, and its
``position`` in the run's document. The whole results document of a run is kept once, compressed, in
``run_documents``: every figure of every record (samples, kernels, fields added to results files later) is
recovered from it, and the records table stays small enough for a million rows to be read in a second.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Callable

import json
import zlib

import sqlalchemy as sa

from gpuperf.install.command import upgrade_command

#: The schema this code reads and writes.
SCHEMA_VERSION = 6

METADATA = sa.MetaData()

#: The columns ``history changes`` reads from every record: an index holding all of them (a covering index) of
#: small integers, two floats and two short texts answers it in one scan of some 40 bytes a record, which is what
#: keeps it fast over a million records (with the case id's text in it, it was five times that). The figure a
#: record is judged on is its ``value`` or, where its ``basis`` is ``cycles``, its ``value_at_max_clock``.
SERIES_COLUMNS = ("series_pk", "run_pk", "status", "basis", "value", "value_at_max_clock")
SERIES_INDEX = "records_series"

VERSION_TABLE = sa.Table("schema_version", METADATA, sa.Column("version", sa.Integer, nullable=False))

RUNS = sa.Table(
    "runs", METADATA,
    sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(64), nullable=False, unique=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("started", sa.String(40), nullable=False),
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
    #: ``started`` as the instant it names, in UTC (``rows.started_instant``): the runs' order; ``NULL``
    #: only for a run migrated from an older schema whose ``started`` is not a timestamp (refused when read).
    sa.Column("started_utc", sa.String(40), index=True),
)

#: A series' key as records name it: a case and its method ("" for none), numbered.
SERIES = sa.Table(
    "series", METADATA,
    sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("case_id", sa.Text, nullable=False),
    sa.Column("method", sa.Text, nullable=False),
    sa.UniqueConstraint("case_id", "method", name="series_key"),
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
    #: ``[[name, symbol, code, config], …]`` (``rows.kernel_identity``) where a kernel has more than a name: the
    #: gate's kernel change under one name (another symbol, code or configuration) is told from it.
    sa.Column("kernel_identity", sa.Text),
    sa.Column("status", sa.Text),
    sa.Column("note", sa.Text),
    sa.Column("gpu_index", sa.Integer),
    sa.Column("cycles_per_call", sa.Float),
    sa.Column("sm_clock_mhz", sa.Float),
    sa.Column("value_at_max_clock", sa.Float),  # none for a memory-bound case (gate.figure_at_max_clock)
    sa.Column("cycles_spread", sa.Float),  # the relative IQR of the cycles per call (``cycles_rel_iqr``)
    sa.Column("basis", sa.String(8)),  # gate.Basis: what the record is judged on by itself (gate.own_basis)
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("series_pk", sa.Integer, sa.ForeignKey("series.pk")),
    sa.Index(SERIES_INDEX, *SERIES_COLUMNS),
    sa.Index("records_run", "run_pk"),
)

#: A record's basis when it is judged at max clock (``gate.Basis.CYCLES``, written out: this module imports no
#: verdict; ``tests/test_history_basis.py`` holds them equal).
CYCLES = "cycles"
#: The figure the history judges a record on: at max clock where its basis is cycles, else the measured one.
JUDGED_FIGURE = sa.case((RECORDS.c.basis == CYCLES, RECORDS.c.value_at_max_clock), else_=RECORDS.c.value)
#: Whether a record is judged at max clock, as a whole number (1 or 0: a million of them read as fast as figures).
AT_MAX_CLOCK = sa.case((RECORDS.c.basis == CYCLES, 1), else_=0)

#: How ``run_documents.body`` is encoded: the results-file text, UTF-8, zlib-compressed.
DOCUMENT_ENCODING = "zlib-json"

RUN_DOCUMENTS = sa.Table(
    "run_documents", METADATA,
    sa.Column("run_pk", sa.Integer, sa.ForeignKey("runs.pk", ondelete="CASCADE"), primary_key=True,
              autoincrement=False),
    sa.Column("encoding", sa.String(16), nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),
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


def create_series_index(connection: sa.Connection) -> None:
    connection.execute(sa.text(f"CREATE INDEX IF NOT EXISTS {SERIES_INDEX} ON records ({', '.join(SERIES_COLUMNS)})"))


def has_series_index(connection: sa.Connection) -> bool:
    """Whether the series index is there (a backfill drops it while it runs)."""
    if connection.dialect.name == "sqlite":
        query = "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = :name"
    else:
        query = "SELECT 1 FROM pg_indexes WHERE indexname = :name AND schemaname = current_schema()"
    return connection.execute(sa.text(query), {"name": SERIES_INDEX}).first() is not None


def _index_series(connection: sa.Connection) -> None:
    """Version 3: the covering index of the series, in place of the (case, run) index it extends."""
    connection.execute(sa.text("DROP INDEX records_case_run"))
    connection.execute(sa.text(f"CREATE INDEX {SERIES_INDEX} ON records (case_id, method, run_pk, value, status)"))


def encode_document(text: str | bytes) -> bytes:
    """A run's results-file text as ``run_documents.body`` stores it: a zlib stream at level 1 (higher levels
    save little more and cost twice the time)."""
    return zlib.compress(text if isinstance(text, bytes) else text.encode("utf-8"), 1)


def decode_document(body: bytes) -> str:
    return decode_document_bytes(body).decode("utf-8")


def decode_document_bytes(body: bytes) -> bytes:
    """``run_documents.body`` → the results file's UTF-8 bytes (a JSON parser takes them without a text first)."""
    return zlib.decompress(body)


def _documents_once_per_run(connection: sa.Connection) -> None:
    """Version 4: each run's document once, compressed, in place of every record's JSON; a record keeps its
    position in that document. A migrated run's document is rebuilt from its run and records as they were kept
    (its text is then canonical JSON, not the original file's)."""
    frozen = sa.MetaData()
    sa.Table("runs", frozen, sa.Column("pk", sa.Integer, primary_key=True))  # what the key points at
    documents = sa.Table(
        "run_documents", frozen,
        sa.Column("run_pk", sa.Integer, sa.ForeignKey("runs.pk", ondelete="CASCADE"), primary_key=True,
                  autoincrement=False),
        sa.Column("encoding", sa.String(16), nullable=False),
        sa.Column("body", sa.LargeBinary, nullable=False))
    documents.create(connection)
    connection.execute(sa.text("ALTER TABLE records ADD COLUMN position INTEGER"))
    runs = connection.execute(sa.text("SELECT pk, run_json FROM runs ORDER BY pk")).all()
    for pk, run_json in runs:
        kept = connection.execute(sa.text("SELECT pk, data FROM records WHERE run_pk = :run ORDER BY pk"),
                                  {"run": pk}).all()
        document = {"run": json.loads(run_json), "records": [json.loads(data) for _, data in kept]}
        text = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        connection.execute(sa.insert(documents).values(run_pk=pk, encoding=DOCUMENT_ENCODING,
                                                       body=encode_document(text)))
        if kept:
            connection.execute(sa.text("UPDATE records SET position = :position WHERE pk = :pk"),
                               [{"position": position, "pk": record} for position, (record, _) in enumerate(kept)])
    connection.execute(sa.text("ALTER TABLE records DROP COLUMN data"))
    _number_series(connection, frozen)


def _number_series(connection: sa.Connection, frozen: sa.MetaData) -> None:
    """Each record names its series (case and method) by number, and the series index holds that number."""
    connection.execute(sa.text(f"DROP INDEX {SERIES_INDEX}"))
    sa.Table("series", frozen,
             sa.Column("pk", sa.Integer, primary_key=True, autoincrement=True),
             sa.Column("case_id", sa.Text, nullable=False),
             sa.Column("method", sa.Text, nullable=False),
             sa.UniqueConstraint("case_id", "method", name="series_key")).create(connection)
    connection.execute(sa.text("INSERT INTO series (case_id, method) SELECT DISTINCT case_id, COALESCE(method, '') "
                               "FROM records ORDER BY 1, 2"))
    connection.execute(sa.text("ALTER TABLE records ADD COLUMN series_pk INTEGER REFERENCES series (pk)"))
    connection.execute(sa.text("UPDATE records SET series_pk = (SELECT series.pk FROM series WHERE series.case_id = "
                               "records.case_id AND series.method = COALESCE(records.method, ''))"))


def _judged_figures(connection: sa.Connection) -> None:
    """Version 5: each record's basis, its figure at max clock only where it has one (none for a memory-bound
    case) and its cycles' spread, from the runs' documents; each run's start as an instant; the series index holds
    the basis and both figures."""
    from gpuperf.history.rows import BASIS_KEYS, bases, started_instant

    connection.execute(sa.text("ALTER TABLE records ADD COLUMN cycles_spread FLOAT"))
    connection.execute(sa.text("ALTER TABLE records ADD COLUMN basis VARCHAR(8)"))
    connection.execute(sa.text("ALTER TABLE runs ADD COLUMN started_utc VARCHAR(40)"))
    connection.execute(sa.text("DROP INDEX IF EXISTS ix_runs_started"))
    connection.execute(sa.text("CREATE INDEX ix_runs_started_utc ON runs (started_utc)"))
    connection.execute(sa.text(f"DROP INDEX IF EXISTS {SERIES_INDEX}"))
    starts = connection.execute(sa.text("SELECT pk, started FROM runs")).all()
    if starts:
        connection.execute(sa.text("UPDATE runs SET started_utc = :utc WHERE pk = :pk"),
                           [{"utc": started_instant(started), "pk": pk} for pk, started in starts])
    pks = [row[0] for row in connection.execute(sa.text("SELECT run_pk FROM run_documents ORDER BY run_pk"))]
    for pk in pks:
        body = connection.execute(sa.text("SELECT body FROM run_documents WHERE run_pk = :pk"), {"pk": pk}).one()[0]
        document = json.loads(decode_document(bytes(body)))
        records = [record if isinstance(record, dict) else {} for record in (document or {}).get("records") or []]
        keys = {name: [record.get(name) for record in records] for name in ("value_at_max_clock", *BASIS_KEYS)}
        figures, basis = bases(keys["clock_bound"], keys["value_at_max_clock"], keys["call_clock_mhz"],
                               keys["max_clock_mhz"])
        spreads = [record.get("cycles_rel_iqr") for record in records]
        if records:
            connection.execute(sa.text("UPDATE records SET basis = :basis, value_at_max_clock = :figure, "
                                       "cycles_spread = :spread WHERE run_pk = :pk AND position = :position"),
                               [{"basis": b, "figure": f, "pk": pk, "position": position,
                                 "spread": spread if type(spread) is float else None}
                                for position, (b, f, spread) in enumerate(zip(basis, figures, spreads))])


def _kernel_identities(connection: sa.Connection) -> None:
    """Version 6: each record's kernels as the gate tells them apart (name, symbol, code, configuration), from
    the runs' documents."""
    from gpuperf.history.rows import kernel_identity

    connection.execute(sa.text("ALTER TABLE records ADD COLUMN kernel_identity TEXT"))
    pks = [row[0] for row in connection.execute(sa.text("SELECT run_pk FROM run_documents ORDER BY run_pk"))]
    for pk in pks:
        body = connection.execute(sa.text("SELECT body FROM run_documents WHERE run_pk = :pk"), {"pk": pk}).one()[0]
        document = json.loads(decode_document(bytes(body)))
        records = [record if isinstance(record, dict) else {} for record in (document or {}).get("records") or []]
        known = [{"pk": pk, "position": position, "identity": identity}
                 for position, record in enumerate(records)
                 if (identity := kernel_identity(record.get("kernels"))) is not None]
        if known:
            connection.execute(sa.text("UPDATE records SET kernel_identity = :identity WHERE run_pk = :pk AND "
                                       "position = :position"), known)


#: ``MIGRATIONS[n - 1]`` takes a database from version ``n - 1`` to ``n``.
MIGRATIONS: tuple[Callable[[sa.Connection], None], ...] = (_create_v1, _add_clock_figures, _index_series,
                                                           _documents_once_per_run, _judged_figures,
                                                           _kernel_identities)


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
                          f"{SCHEMA_VERSION} this gpuperf knows; upgrade gpuperf ({upgrade_command()}), or "
                          "point --history (or $GPUPERF_HISTORY) at another database")
    for version in range(found + 1, SCHEMA_VERSION + 1):
        MIGRATIONS[version - 1](connection)
    if found < SCHEMA_VERSION:
        connection.execute(sa.delete(VERSION_TABLE))
        connection.execute(sa.insert(VERSION_TABLE).values(version=SCHEMA_VERSION))
    return found
