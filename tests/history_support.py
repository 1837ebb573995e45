"""Shared by the history tests: a database per test on each engine, and synthetic results documents.

PostgreSQL runs where ``$GPUPERF_TEST_POSTGRES_URL`` names a server (``.ci/run`` starts one); each test gets a
fresh database there, dropped afterwards.
"""

from __future__ import annotations

import copy
import json
import os
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from gpuperf.history.database import sqlite_url, to_url

ROOT = Path(__file__).resolve().parent.parent
POSTGRES_ENV = "GPUPERF_TEST_POSTGRES_URL"
TEMPLATE = json.loads((ROOT / "evidence" / "h200" / "results.json").read_text())


ENGINES = ["sqlite", "postgresql"]


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty history database URL on the engine named by the test's ``engine`` parameter."""
    if request.param == "sqlite":
        yield sqlite_url(tmp_path / "history.sqlite")
        return
    server = os.environ.get(POSTGRES_ENV)
    if not server and os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no", "off"):
        pytest.fail(f"${POSTGRES_ENV} is not set in CI: .ci/run starts a PostgreSQL server and exports it")
    if not server:
        pytest.skip(f"${POSTGRES_ENV} is not set: no PostgreSQL server to test against (.ci/run starts one)")
    admin = sa.create_engine(to_url(server, ROOT), isolation_level="AUTOCOMMIT")
    name = f"gpuperf_test_{uuid.uuid4().hex[:12]}"
    with admin.connect() as connection:
        connection.execute(sa.text(f"CREATE DATABASE {name}"))
    try:
        yield str(sa.make_url(to_url(server, ROOT)).set(database=name).render_as_string(hide_password=False))
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


def document(started: str, values: Mapping[str, float], host: str = "GPU-aaaa0001", commit: str | None = None,
             driver: str = "580.159.04", kernels: Mapping[str, str] | None = None,
             **record_fields: Any) -> dict[str, Any]:
    """A results document shaped like a real run's (the README's H200 run as template): one record per case."""
    template_record = TEMPLATE["records"][0]
    run = copy.deepcopy(TEMPLATE["run"])
    run.update(started=started, driver=driver)
    run["extra"].update(uuid=host, serial=f"serial-{host}")
    if commit is not None:
        run["extra"]["provenance"] = {"kind": "run", "git_commit": commit, "git_dirty": False, "branch": "main",
                                      "ci_job": None, "options": {}, "baseline_digest": None}
    records = []
    for case, value in values.items():
        record = copy.deepcopy(template_record)
        record.update(case_id=case, nodeid=case, value=value, tflops=value, **record_fields)
        if kernels and case in kernels:
            record["kernels"] = [{**record["kernels"][0], "name": kernels[case]}]
        records.append(record)
    return {"schema": 1, "run": run, "records": records}


def write(path: Path, doc: Mapping[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path
