"""The hostile inputs of ``docs/hostile-input.md``, each run for real (``python -m gpuperf`` in a subprocess
under a 1.5 GiB address-space limit, in a scratch folder so the paths in the messages are short), and the
page checked against what they get: the page cannot drift from the code.

Regenerate the page after changing a message: ``python3 tests/test_hostile_input.py``.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuperf.ab.messages import NO_GPU_CHECK_ENV
from test_plugin import CONFTEST, GEMV_S

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "hostile-input.md"
BASELINE = REPO / "baselines" / "nvidia-h200.yaml"
RUN = REPO / "evidence" / "fleet" / "1e941103-1.json"
OTHER_RUN = REPO / "evidence" / "fleet" / "1e941103-2.json"
MAX_SECONDS = 5.0
ADDRESS_SPACE = 3 << 29  # 1.5 GiB: Python and NumPy's own mappings leave the 1 GiB target for the input


def _run_data() -> dict:  # type: ignore[type-arg]
    return json.loads(RUN.read_text())


def _write_json(path: str, data: object) -> Callable[[Path], None]:
    return lambda d: (d / path).write_text(json.dumps(data))


def _text(path: str, text: str | bytes) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        (d / path).parent.mkdir(parents=True, exist_ok=True)
        (d / path).write_bytes(text if isinstance(text, bytes) else text.encode())
    return make


def _copy(path: str, source: Path, edit: Callable[[str], str] = lambda t: t) -> Callable[[Path], None]:
    return _text(path, edit(source.read_text()))


def _alias_bomb(d: Path) -> None:
    levels = "".join(f"  l{i}: &l{i} [{', '.join(['*l' + str(i - 1)] * 9)}]\n" for i in range(1, 10))
    (d / "bomb.yaml").write_text(f"schema: 1\nheader:\n  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
                                 f"{levels}entries: {{}}\n")


def _deep(d: Path) -> None:
    (d / "deep.yaml").write_text("schema: 1\nheader: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n")


def _fifo(d: Path) -> None:
    os.mkfifo(d / "fifo.yaml")


def _zero(d: Path) -> None:
    (d / "zero.yaml").symlink_to("/dev/zero")


def _big(d: Path) -> None:
    text = BASELINE.read_text()
    (d / "big.yaml").write_text(text + "# padding\n" * (3 * 2**20 // 10))


def _link(name: str, target: str) -> Callable[[Path], None]:
    return lambda d: (d / name).symlink_to(target)


def _link_loop(d: Path) -> None:
    (d / "a.json").symlink_to("b.json")
    (d / "b.json").symlink_to("a.json")


def _twice(d: Path) -> None:
    data = _run_data()
    doubled = dict(data["records"][0], value=data["records"][0]["value"] / 2)
    (d / "twice.json").write_text(json.dumps({**data, "records": [*data["records"], doubled]}))


def _field(name: str, value: object) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        data = _run_data()
        data["records"][0][name] = value
        (d / "bad.json").write_text(json.dumps(data, allow_nan=True))
    return make


def _other_gpu(d: Path) -> None:
    data = _run_data()
    data["run"].update(gpu_name="NVIDIA A100-SXM4-80GB", gpu_slug="nvidia-a100-sxm4-80gb")
    data["run"]["extra"]["uuid"] = "GPU-a1000000-0000-0000-0000-000000000000"
    for record in data["records"]:
        record["gpu"] = "nvidia-a100-sxm4-80gb"
    (d / "a100.json").write_text(json.dumps(data))


def _later(data: dict, minute: int = 59) -> dict:  # type: ignore[type-arg]
    """``data`` as another run: started later."""
    data["run"]["started"] = f"2026-11-30T12:{minute:02d}:00+00:00"
    return data


def _edited(path: str, edit: Callable[[dict], None]) -> Callable[[Path], None]:  # type: ignore[type-arg]
    def make(d: Path) -> None:
        data = _later(_run_data())
        edit(data)
        (d / path).write_text(json.dumps(data))
    return make


def _runs_over_the_baseline_limit(d: Path) -> None:
    """Two runs of 1,100 cases with long ids: the baseline they make is over 2 MiB; a good baseline stands in its
    place."""
    (d / "b").mkdir()
    (d / "b" / "nvidia-h200.yaml").write_text(BASELINE.read_text())
    data = _run_data()
    records = [dict(data["records"][i % len(data["records"])]) for i in range(1100)]
    for i, record in enumerate(records):
        long = f"-{i}-" + "x" * 1200
        record.update(case_id=record["case_id"] + long, nodeid=record["nodeid"] + long, status="PASS")
    data["records"] = records
    from gpuperf.store.results import document_text  # the form gpuperf writes, which its reader reads fast

    (d / "r1.json").write_text(document_text(data))
    (d / "r2.json").write_text(document_text(_later(data)))


def _case_id(text: str) -> Callable[[dict], None]:  # type: ignore[type-arg]
    def edit(data: dict) -> None:  # type: ignore[type-arg]
        data["records"][0]["case_id"] += text
    return edit


def _renamed(data: dict) -> None:  # type: ignore[type-arg]
    for record in data["records"]:
        record["case_id"] += "-renamed"


def _two_gpus(data: dict) -> None:  # type: ignore[type-arg]
    data["records"] = [dict(record, gpu_index=index) for record in data["records"] for index in (0, 1)]


#: A session of the suite's fake GPU (test_plugin's conftest) whose one test's call launched a kernel of a hostile
#: symbol, as the tracer reports it; the conftest prints the kernel the session's results.json recorded.
KERNEL_SESSION = [sys.executable, "-m", "pytest", "test_names.py", "-p", "no:cacheprovider", "-q", "--results-dir",
                  "results"]
_RECORDED_KERNEL = '''

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    import glob
    for path in glob.glob("results/*/results.json"):
        kernel = json.loads(Path(path).read_text())["records"][0]["kernels"][0]
        name = kernel["name"] if len(kernel["name"]) <= 60 else kernel["name"][:59] + "…"
        print(f"\\nrecorded kernel: {name} (length {len(kernel['name'])}), spelled "
              f"{kernel.get('spelled', '')[:40] or 'as its name'}")
'''
_KERNEL_TEST = '''
from dataclasses import replace

import pytest

from gpuperf.measure.kernel_records import KernelActivity, call_kernels
from gpuperf.measure.metrics import gemv_work


@pytest.mark.perf
def test_kernel_name(measure, perf):
    measured = measure(lambda: "gemv", gemv_work(16384, 16384, "fp32"))
    kernels = call_kernels([[KernelActivity(SYMBOL, 0, 200_000, grid=(16384, 1, 1), block=(32, 4, 1))]])
    perf.check(replace(measured, kernels=kernels))
'''


def _kernel_session(symbol: str) -> Callable[[Path], None]:
    """The project of ``KERNEL_SESSION``, its kernel's symbol given as a Python expression."""
    def make(d: Path) -> None:
        (d / "conftest.py").write_text(CONFTEST + _RECORDED_KERNEL)
        (d / "timings.json").write_text(json.dumps({"gemv": GEMV_S}))
        (d / "test_names.py").write_text(f"SYMBOL = {symbol}\n" + _KERNEL_TEST)
    return make


def _mathtext(data: dict) -> None:  # type: ignore[type-arg]
    data["records"] = data["records"][:6]  # a few cases draw the same labels as a whole run, in a tenth of the time
    for record in data["records"]:
        record["kernel"] = "$\\frac{a$"


def _set(where: str, key: str, value: object, index: int = 0) -> Callable[[dict], None]:  # type: ignore[type-arg]
    def edit(data: dict) -> None:  # type: ignore[type-arg]
        (data["run"] if where == "run" else data["records"][index])[key] = value
    return edit


def _above_peak(data: dict) -> None:  # type: ignore[type-arg]
    data["records"][0].update(value=80.0, tflops=80.0, status="PASS")  # an fp32 case; the H200's fp32 peak is 66.9


def _lock_blocked(d: Path) -> None:
    (d / "b").mkdir()
    (d / "b" / "nvidia-h200.yaml").write_text(BASELINE.read_text())
    (d / "b" / "nvidia-h200.yaml.lock").mkdir()


def _no_figure(status: str) -> Callable[[dict], None]:  # type: ignore[type-arg]
    """The first record as a failed run writes it: no figure (``write_run`` writes NaN as null)."""
    return _set_record(value=None, status=status, note="the call could not be timed")


def _set_record(**fields: object) -> Callable[[dict], None]:  # type: ignore[type-arg]
    def edit(data: dict) -> None:  # type: ignore[type-arg]
        data["records"][0].update(fields)
    return edit


def _peakless(precision: str) -> Callable[[dict], None]:  # type: ignore[type-arg]
    """5,000 TFLOPS in ``precision``, with no peak of its own (the committed run's header lists no fp8 peak)."""
    return _set_record(value=5000.0, tflops=5000.0, precision=precision, peak=None, status="PASS")


def _table_loop(d: Path) -> None:
    (d / "cases").mkdir()
    (d / "cases" / "gemm.yaml").symlink_to("gemm.yaml")


def _own_table(text: str) -> Callable[[Path], None]:
    return _text("cases/attention.yaml", "sizes: [batch, seq]\nparams: [mode]\n" + text)


def _repo(d: Path, files: dict[str, str]) -> None:
    """``d`` as a git checkout of one commit holding ``files``."""
    from gitrepos import commit, git

    git(d, "init", "-q")
    commit(d, "the tree", files)


def _used_out(d: Path) -> None:
    _repo(d, {"README": "a tree"})
    (d / "out" / "base" / "20260101-000000").mkdir(parents=True)
    (d / "out" / "base" / "20260101-000000" / "results.json").write_text("an earlier run's")
    (d / "out" / "ab.json").write_text("{}")


def _ini_above_out(d: Path) -> None:
    """The synthetic GPU suite of tests/test_ab.py in a tree with no ini file, and a pytest.ini above ``--out``
    that would deselect every test."""
    from test_ab import CONFTEST, KERNELS, SPEED, TESTS

    _repo(d, {"conftest.py": CONFTEST, "perf_tests/test_fake.py": TESTS, "speed.json": json.dumps(SPEED),
              "kernels.json": json.dumps(KERNELS)})
    (d / "project").mkdir()
    (d / "project" / "pytest.ini").write_text("[pytest]\naddopts = -k no_test_is_named_this\n")


def _table(edit: Callable[[str], str]) -> Callable[[Path], None]:
    return _text("cases/gemm.yaml", edit((REPO / "perf_tests" / "cases" / "gemm.yaml").read_text()))


def _other_database(d: Path) -> None:
    import sqlite3

    with sqlite3.connect(d / "other.db") as other:
        other.execute("CREATE TABLE notes (text)")
    other.close()


def _history_of_run(d: Path) -> Path:
    from gpuperf.history.database import History, sqlite_url

    with History(sqlite_url(d / "h.sqlite")) as history:
        history.ingest([RUN], workers=1)
    return d / "h.sqlite"


def _damaged_page(d: Path) -> None:
    import sqlite3

    path = _history_of_run(d)
    with sqlite3.connect(path) as connection:  # one file: the WAL folded in
        connection.execute("PRAGMA journal_mode = DELETE")
        page_size = connection.execute("PRAGMA page_size").fetchone()[0]
        root = connection.execute("SELECT rootpage FROM sqlite_master WHERE name = 'records'").fetchone()[0]
    connection.close()
    data = bytearray(path.read_bytes())  # the records table's root page: a page in use, not a free one
    data[(root - 1) * page_size:root * page_size] = b"\xff" * page_size
    path.write_bytes(bytes(data))


def _edited_row(d: Path) -> None:
    import sqlite3

    with sqlite3.connect(_history_of_run(d)) as connection:
        connection.execute("UPDATE records SET value = 'fast'")
    connection.close()


def _ab_folder(d: Path) -> None:
    (d / "results" / "20261130-124951").mkdir(parents=True)
    (d / "results" / "20261130-124951" / "results.json").write_text(RUN.read_text())
    (d / "results" / "ab-20261201-090000" / "head").mkdir(parents=True)
    (d / "results" / "ab-20261201-090000" / "ab.json").write_text('{"schema": 1, "cases": []}')
    (d / "results" / "ab-20261201-090000" / "head" / "results.json").write_text(OTHER_RUN.read_text())



def _loader(family: str) -> list[str]:
    """The case-table loader as a test module's collection runs it."""
    return [sys.executable, "-c", "import sys; from pathlib import Path; from gpuperf.suite.cases import "
            f"CaseTableError, load_cases\ntry:\n    load_cases({family!r}, Path('cases'))\nexcept CaseTableError as e:\n"
            "    sys.exit(f'collection error: {e}')"]


LOAD_GEMM = _loader("gemm")
LOAD_OWN = _loader("attention")
LOADERS = {id(LOAD_GEMM): "gemm", id(LOAD_OWN): "attention"}


# --- the makers of issue 54's rows -------------------------------------------------------------------------------


def _every_figure(value: float) -> Callable[[dict], None]:  # type: ignore[type-arg]
    def edit(data: dict) -> None:  # type: ignore[type-arg]
        for record in data["records"]:
            if record["value"] is not None:
                record["value"] = value
    return edit


def _history_edited(*statements: str) -> Callable[[Path], None]:
    """A history of the committed run, then ``statements`` run on it by hand (a table dropped, a version as text)."""
    def make(d: Path) -> None:
        import sqlite3

        with sqlite3.connect(_history_of_run(d)) as connection:
            for statement in statements:
                connection.execute(statement)
        connection.close()
    return make


def _large_run_bad_at_its_end(d: Path) -> None:
    """A 30 MiB results file (a record's ``extra`` of 1.25 million small objects) whose last figure is text."""
    data = _run_data()
    data["records"][0]["extra"] = {"x": [[i, {"k": i}] for i in range(1_250_000)]}
    data["records"][-1]["value"] = "46"
    (d / "large.json").write_text(json.dumps(data))


def _pytest(*options: str) -> list[str]:
    """pytest with the plugin (its entry point) and ``options``, in the row's scratch folder."""
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *options]


@dataclass(frozen=True)
class Hostile:
    what: str
    make: Callable[[Path], None]
    command: list[str]
    exit_code: int
    #: The output line the page shows, by a part of it, where the command prints no error line.
    shown_line: str = ""


HOSTILE = [
    Hostile("billion-laughs alias bomb in a baseline header", _alias_bomb, ["baseline", "check", "bomb.yaml"], 1),
    Hostile("5,000 nested mappings", _deep, ["baseline", "check", "deep.yaml"], 1),
    Hostile("100,000 nested JSON arrays", _text("deep.json", "[" * 100000 + "]" * 100000), ["fleet", "deep.json"], 1),
    Hostile("a baseline that is a link to /dev/zero", _zero, ["baseline", "check", "zero.yaml"], 1),
    Hostile("a FIFO given as a baseline", _fifo, ["baseline", "check", "fifo.yaml"], 1),
    Hostile("a baseline over the size limit (a 100k-entry file is 87 MB)", _big, ["baseline", "check", "big.yaml"], 1),
    Hostile("a baseline with a UTF-8 byte-order mark", _text("bom.yaml", b"\xef\xbb\xbf" + BASELINE.read_bytes()),
            ["baseline", "check", "bom.yaml"], 1),
    Hostile("a results file given to baseline check", _copy("run.json", RUN), ["baseline", "check", "run.json"], 1),
    Hostile("a baseline given to fleet", _copy("b.yaml", BASELINE), ["fleet", "b.yaml"], 1),
    Hostile("a BOM-prefixed results file", _text("bom.json", b"\xef\xbb\xbf" + RUN.read_bytes()), ["fleet", "bom.json"],
            1),
    Hostile("a results file cut short", _text("cut.json", RUN.read_text()[:5000]), ["compare", "cut.json", "cut.json"], 1),
    Hostile("a case recorded twice (the second at half the value)", _twice, ["compare", str(RUN), "twice.json"], 1),
    Hostile("the same run twice", lambda d: None, ["baseline", "from-runs", "new.yaml", str(RUN), str(RUN)], 1),
    Hostile("a string figure", _field("value", "46.6"), ["compare", str(RUN), "bad.json"], 1),
    Hostile("NaN as a figure", _field("value", float("nan")), ["baseline", "diff", str(RUN), "bad.json"], 1),
    Hostile("a figure of 1e999 (inf)", _copy("bad.json", RUN, lambda t: t.replace('"value": 4', '"value": 1e999, "x": 4', 1)),
            ["readme", "bad.json"], 1),
    Hostile("an UPDATED record without a figure (null)", _field("value", None), ["readme", "bad.json"], 1),
    Hostile("results schema 99", _write_json("s.json", {**_run_data(), "schema": 99}), ["compare", "s.json", str(RUN)],
            1),
    Hostile("a run header missing its fields", _write_json("h.json", {**_run_data(), "run": {"gpu_name": "x"}}),
            ["fleet", "h.json"], 1),
    Hostile("an A100 run compared with an H200 run", _other_gpu, ["compare", "a100.json", str(RUN)], 1),
    Hostile("the same, with --allow-other-gpu (header line shown)", _other_gpu,
            ["compare", "a100.json", str(OTHER_RUN), "--allow-other-gpu"], 0),
    Hostile("a folder given to baseline drop", lambda d: (d / "dir.yaml").mkdir(),
            ["baseline", "drop", "dir.yaml", "x"], 1),
    Hostile("the .lock cannot be created (a folder stands there)", _lock_blocked,
            ["baseline", "drop", "b/nvidia-h200.yaml", "x"], 1),
    Hostile("plot --out onto an existing file", _copy("taken.png", BASELINE),
            ["plot", str(BASELINE), "--out", "taken.png"], 1),
    Hostile("readme --images naming a missing file", _text("README.md", "x"),
            ["readme", str(RUN), "--page", "README.md", "--images", "nosuch.png"], 1),
    Hostile("an unknown path tf33 in gemm.yaml", _table(lambda t: t.replace("- paths: [tf32]", "- paths: [tf33]", 1)),
            LOAD_GEMM, 1),
    Hostile("perf: [] in gemm.yaml", _table(lambda t: t[:t.index("\nperf:")] + "\nperf: []\n" + t[t.index("\nslow:"):]),
            LOAD_GEMM, 1),
    Hostile("a shape twice in a case table", _table(lambda t: t.replace("shapes: [512x512x512,",
                                                                        "shapes: [512x512x512, 512x512x512,", 1)),
            LOAD_GEMM, 1),
    Hostile("invalid YAML in a case table", _table(lambda t: t.replace("perf:", "perf: [", 1)), LOAD_GEMM, 1),
    Hostile("a case table that is a link to itself (a loop of links)", _table_loop, LOAD_GEMM, 1),
    Hostile("shell text in a param of a family of the user's own (it would reach the suggested --update-baselines "
            "-k '…' command)", _own_table("perf: [{batch: 2, seq: 8, mode: \"x'; touch pwned; echo '\"}]\n"),
            LOAD_OWN, 1),
    Hostile("-k selector text (::, brackets) in a param", _own_table("perf: [{batch: 2, seq: 8, mode: 'a::b[1]'}]\n"),
            LOAD_OWN, 1),
    Hostile("two cases that differ only in a value's type (1 and '1': one test id, renamed _0/_1 by pytest)",
            _own_table("perf: [{batch: 2, seq: 8, mode: 1}, {batch: 2, seq: 8, mode: '1'}]\n"), LOAD_OWN, 1),
    Hostile("a run with no records (nothing compared)", _edited("empty.json", lambda data: data.update(records=[])),
            ["compare", str(RUN), "empty.json"], 1),
    Hostile("a run whose case ids are all other ones", _edited("other.json", _renamed),
            ["baseline", "diff", str(RUN), "other.json"], 1),
    Hostile("a run of one GPU compared with a run of two (every case keyed per GPU)", _edited("two.json", _two_gpus),
            ["compare", str(RUN), "two.json"], 1),
    Hostile("one run given to fleet (nothing compared)", lambda d: None, ["fleet", str(RUN)], 1),
    Hostile("a figure above the GPU's peak (80 TFLOPS fp32 on a 66.9 peak), status PASS",
            _edited("peak.json", _above_peak), ["compare", str(RUN), "peak.json"], 1, "compared:"),
    Hostile("a failed gate run: an ERROR record with no figure (value null, as the suite writes it)",
            _edited("failed.json", _no_figure("ERROR")), ["compare", str(RUN), "failed.json"], 1, "no figure in B"),
    Hostile("an UNRELIABLE record with no figure", _edited("u.json", _no_figure("UNRELIABLE")),
            ["compare", str(RUN), "u.json"], 0, "no figure in B"),
    Hostile("a NOT_RECORDED record with no figure", _edited("n.json", _no_figure("NOT_RECORDED")),
            ["compare", str(RUN), "n.json"], 0, "no figure in B"),
    Hostile("5,000 TFLOPS in precision fp4, which the peak table does not know", _edited("fp4.json", _peakless("fp4")),
            ["compare", str(RUN), "fp4.json"], 1),
    Hostile("5,000 TFLOPS in precision '' (none)", _edited("none.json", _peakless("")), ["plot", "none.json"], 1),
    Hostile("5,000 TFLOPS in precision FP8 (capitals)", _edited("FP8.json", _peakless("FP8")),
            ["readme", "FP8.json"], 1),
    Hostile("5,000 TFLOPS in fp8, in a run whose header lists no fp8 peak", _edited("fp8.json", _peakless("fp8")),
            ["fleet", str(RUN), "fp8.json"], 1),
    Hostile("the same, given to history ingest", _edited("fp8.json", _peakless("fp8")),
            ["history", "ingest", "fp8.json", "--history", "h.sqlite"], 1, "refused"),
    Hostile("a record of another GPU model inside an H200 run",
            _edited("mixed.json", _set("record", "gpu", "nvidia-a100")), ["fleet", str(RUN), "mixed.json"], 1),
    Hostile("a start time that is not a time", _edited("date.json", _set("run", "started", "yesterday")),
            ["compare", str(RUN), "date.json"], 1),
    Hostile("a driver version that is not a version", _edited("v.json", _set("run", "driver", "580\x1b[2J")),
            ["readme", "v.json"], 1),
    Hostile("an unpaired surrogate in a case id",
            _copy("s.json", RUN, lambda t: t.replace("256-cold]", "256-cold\\ud800]", 1)),
            ["baseline", "from-runs", "nvidia-h200.yaml", "s.json"], 1),
    Hostile("an in-memory SQLite history", lambda d: None,
            ["history", "ingest", str(RUN), "--history", "sqlite://"], 1),
    Hostile("a FIFO given to history ingest", lambda d: os.mkfifo(d / "fifo.json"),
            ["history", "ingest", "fifo.json", "--history", "h.sqlite"], 1, "refused"),
    Hostile("a folder named like a results file, with none under it, given to history ingest",
            lambda d: (d / "results.json").mkdir(), ["history", "ingest", "results.json", "--history", "h.sqlite"], 1),
    Hostile("a link to /dev/null given to history ingest", _link("null.json", "/dev/null"),
            ["history", "ingest", "null.json", "--history", "h.sqlite"], 1, "refused"),
    Hostile("links in a loop given to history ingest", _link_loop,
            ["history", "ingest", "a.json", "--history", "h.sqlite"], 1, "refused"),
    Hostile("a link to a file that is not there, given to history ingest", _link("run.json", "gone.json"),
            ["history", "ingest", "run.json", "--history", "h.sqlite"], 1, "refused"),
    Hostile("a 0-byte file given to history changes (left as it is: no database made of it)",
            _text("zero.sqlite", b""), ["history", "changes", "--history", "sqlite:///zero.sqlite"], 1),
    Hostile("another program's SQLite database given to history show (left byte for byte, not switched to WAL)",
            _other_database, ["history", "show", "gemm", "--history", "sqlite:///other.db"], 1),
    Hostile("history ingest of a path that is not there (no database left behind)", lambda d: None,
            ["history", "ingest", "nosuch", "--history", "h.sqlite"], 1),
    Hostile("a history with a page overwritten", _damaged_page,
            ["history", "changes", "--history", "sqlite:///h.sqlite"], 1),
    Hostile("a history whose figure was edited by hand into text", _edited_row,
            ["history", "show", "strided-fp32-1024x256x256x256-cold", "--history", "sqlite:///h.sqlite"], 1),
    Hostile("a results folder holding an A/B run (its ab.json and its sides' runs)", _ab_folder,
            ["history", "ingest", "results", "--history", "h.sqlite"], 0, "left out"),
    Hostile("an unreachable PostgreSQL URL with ?password= in its query", lambda d: None,
            ["history", "show", "gemm", "--history", "postgresql://u@127.0.0.1:1/db?password=hunter2"], 1),
    Hostile("a PostgreSQL password holding an unescaped @", lambda d: None,
            ["history", "changes", "--history", "postgresql://u:hun@ter2@127.0.0.1:1/db"], 1),
    Hostile("a malformed database URL (a port that is no number)", lambda d: None,
            ["history", "changes", "--history", "postgresql://u:hunter2@db:port/x"], 1),
    Hostile("runs whose baseline would pass the 2 MiB limit, over a good baseline", _runs_over_the_baseline_limit,
            ["baseline", "from-runs", "b/nvidia-h200.yaml", "r1.json", "r2.json"], 1),
    Hostile("H200 runs written into a file named for another GPU", lambda d: None,
            ["baseline", "from-runs", "nvidia-a100-sxm4-80gb.yaml", str(RUN)], 1),
    Hostile("an H200 baseline under another GPU's file name", _copy("nvidia-a100-sxm4-80gb.yaml", BASELINE),
            ["baseline", "check", "nvidia-a100-sxm4-80gb.yaml"], 1),
    Hostile("a case id with a backtick, HTML, an escape sequence and a line break", _edited(
        "evil.json", _case_id("` <img src=x onerror=alert(1)> `\x1b]0;title\x07\nforged")),
        ["compare", str(RUN), "evil.json", "--markdown"], 0, "onerror"),
    Hostile("kernel names that are malformed matplotlib mathtext (a dollar-sign formula cut short)",
            _edited("mt.json", _mathtext),
            ["plot", "mt.json", "--out", "plots"], 0, "roofline"),
    Hostile("a traced kernel whose symbol libstdc++'s demangler takes 27 s on (_Z1fI, 74 R, iEvv: x2.8 per two more)",
            _kernel_session('"_Z1fI" + "R" * 74 + "iEvv"'), KERNEL_SESSION, 0, "recorded kernel"),
    Hostile("a traced kernel whose mangled length is past Python's 4,300-digit limit (_Z and 4,301 digits)",
            _kernel_session('"_Z" + "1" * 4301'), KERNEL_SESSION, 0, "recorded kernel"),
    Hostile("a traced kernel whose symbol holds an unpaired surrogate (no UTF-8 encoding)",
            _kernel_session('"_Z\\ud800"'), KERNEL_SESSION, 0, "recorded kernel"),
    Hostile("a traced kernel of a 1 MB symbol (250,000 nested template arguments)",
            _kernel_session('"_ZN1a1bI" + "N1cI" * 250_000 + "iEvv"'), KERNEL_SESSION, 0, "recorded kernel"),
    Hostile("a traced kernel named by a 100 KB declaration with a run of const and & inside its parameters",
            _kernel_session('"void k<int>(int" + " const&" * 14_000 + ", float)"'), KERNEL_SESSION, 0,
            "recorded kernel"),
    Hostile("ab --threshold 0 (a usage error: not 2, which is ab's missing evidence)", lambda d: None,
            ["ab", "--base", "HEAD", "--threshold", "0"], 4),
    Hostile("ab --rounds-max 0", lambda d: None, ["ab", "--base", "HEAD", "--rounds-max", "0"], 4),
    Hostile("ab --head-env with no value", lambda d: None, ["ab", "--base", "HEAD", "--head-env", "KEY"], 4),
    Hostile("ab --out a folder that holds an earlier run's files", _used_out, ["ab", "--base", "HEAD", "--out", "out"],
            4),
    Hostile("ab --out a link to itself (a loop of links)", lambda d: (_repo(d, {"README": "a tree"}),
                                                                      _link("loop", "loop")(d)) and None,
            ["ab", "--base", "HEAD", "--out", "loop"], 4),
    Hostile("ab --out under a folder whose pytest.ini deselects every test, in a tree with no ini of its own",
            _ini_above_out, ["ab", "--base", "HEAD", "--out", "project/out", "--", "perf_tests", "-k", "gemm"], 0,
            "gpuperf ab: 1 SAME"),
    # --- issue 54: a figure that underflows or overflows, a history edited by hand, a password holding @ then ?,
    # --- a writing option in ab's selection, sampling options past their bound, an impossible figure published,
    # --- a large results file refused late
    Hostile("a figure of 5e-324 (the smallest float) given to fleet", _edited("tiny.json", _set_record(value=5e-324)),
            ["fleet", str(RUN), "tiny.json"], 0, "smallest slowdown caught"),
    Hostile("every figure 1e308 in a run given to fleet with a real one", _edited("big.json", _every_figure(1e308)),
            ["fleet", str(RUN), "big.json"], 0, "smallest slowdown caught"),
    Hostile("history ingest into a history whose schema_version holds 'abc'",
            _history_edited("UPDATE schema_version SET version = 'abc'"),
            ["history", "ingest", str(OTHER_RUN), "--history", "h.sqlite"], 1),
    Hostile("history ingest into a history whose runs table was dropped", _history_edited("DROP TABLE runs"),
            ["history", "ingest", str(OTHER_RUN), "--history", "h.sqlite"], 1),
    Hostile("history changes on a history whose records table was dropped", _history_edited("DROP TABLE records"),
            ["history", "changes", "--history", "sqlite:///h.sqlite"], 1),
    Hostile("a PostgreSQL password holding @ then ? (no part of it shown, nor taken for the host)", lambda d: None,
            ["history", "changes", "--history", "postgresql://u:s3cr@t?pass@127.0.0.1:1/gp"], 1),
    Hostile("ab with --update-baselines in its selection (it would rewrite the caller's baseline)", lambda d: None,
            ["ab", "--base", "HEAD", "--", "perf_tests", "--update-baselines"], 4),
    Hostile("pytest --min-sample-time 1e308 (an OverflowError in every case)", lambda d: None,
            _pytest("--min-sample-time", "1e308"), 4),
    Hostile("pytest --warmup-time 1e308", lambda d: None, _pytest("--warmup-time", "1e308"), 4),
    Hostile("pytest --warmup 1000000000000 (a hang)", lambda d: None, _pytest("--warmup", "1000000000000"), 4),
    Hostile("pytest --min-samples 1000000000000 (a hang)", lambda d: None, _pytest("--min-samples", "1000000000000"),
            4),
    Hostile("readme given a figure above the GPU's peak, status PASS", lambda d: (
        _edited("peak.json", _above_peak)(d), _text("R.md", "# results\n")(d)) and None,
        ["readme", "peak.json", "--page", "R.md"], 1),
    Hostile("a 30 MiB results file whose last figure is text (refused within the limit)", _large_run_bad_at_its_end,
            ["history", "ingest", "large.json", "--history", "h.sqlite"], 1, "refused"),
]


#: Hostile conditions that no single command in a scratch folder shows (a second writer, a signal, a browser, a
#: server, a mount): each row names the test that runs it end to end, and what it gets.
CONDITIONS = [
    ("a test that calls perf.check twice (a large and a small GEMM)", "tests/test_several_checks.py",
     "test_each_check_is_keyed_by_its_own_identity_and_a_slower_second_check_fails_the_gate",
     "each check keyed by its own identity (`<case id>`, `<case id>@2`) in the baseline, the gate, the results and "
     "the history: the slower GEMM is REGRESSED against its own entry, the gate fails"),
    ("an ingest that adds nothing racing one that adds runs to the same new history", "tests/test_history_race.py",
     "test_an_empty_ingest_racing_a_real_one_never_removes_its_runs",
     "only the file this process made is removed, only while no other writer has it open and it holds no run"),
    ("Ctrl-C or SIGTERM to history ingest, fleet, history page, bisect or ab", "tests/test_interrupts.py",
     "test_ab_stopped_removes_its_worktree_and_ends_both_sides",
     "exit 2, `gpuperf: error: interrupted (…)` in one line; no pool worker, git worktree or measuring process left"),
    ("a measuring command of bisect that never ends", "tests/test_interrupts.py",
     "test_bisect_measure_timeout_stops_the_command_and_what_it_started",
     "stopped with all it started after `--measure-timeout`; the commit cannot be measured"),
    ("a branch `fix<br>4000-GB/s-PASS<br><b>approved-by-lead</b>`, a CI job `<a href=…>`, markup in a kernel name",
     "tests/test_trend_browser.py", "test_tooltips_and_annotations_show_text_from_data_as_text_never_as_markup",
     "shown as text in the trend page's tooltips and kernel-change annotations (Chromium): no forged line, bold or "
     "link"),
    ("ci/gate.sh over a test that calls os._exit(0)", "tests/test_ci_wrappers.py",
     "test_gate_sh_fails_when_pytest_exited_0_without_results",
     "exit 1: pytest exited 0 but gpuperf wrote no results; the gate fails without evidence"),
    ("ci/gate.sh with --update-baselines, --results-dir or --junitxml", "tests/test_ci_wrappers.py",
     "test_gate_sh_refuses_a_writing_option", "exit 4 before anything runs, one line naming the option and why"),
    ("a history the user may read but not write", "tests/test_history_read_only.py",
     "test_reading_commands_read_a_history_they_cannot_write",
     "show, changes and page read it as it is; ingest says it can be read but not written here, with the fix"),
    ("$GITHUB_STEP_SUMMARY naming a folder, a FIFO nobody reads, /dev/full or a missing folder",
     "tests/test_step_summary_target.py", "test_a_session_says_why_the_job_summary_was_not_appended_and_passes",
     "the results are written; one line says why the job summary was not appended and where it is"),
    ("results written to a full disk", "tests/test_step_summary_target.py",
     "test_results_on_a_full_disk_are_refused_with_the_file_and_the_cause",
     "RESULTS NOT WRITTEN naming the file and that the disk is full, never a gpuperf defect"),
    ("a PostgreSQL history with schema_version 'abc', or its runs or records table dropped",
     "tests/test_history_tables_gone.py", "test_a_history_edited_by_hand_is_one_line_for_ingest_and_readers",
     "ingest, changes and show: one line, the history damaged or edited by hand, exit 1"),
    ("a password holding @ then ? through bisect and a pytest session's output and results files",
     "tests/test_history_targets.py", "test_a_pytest_session_prints_no_part_of_a_password_holding_at_then_query",
     "masked everywhere (`u:***@127.0.0.1:1/db`); the host is the one after the password"),
]


def render_conditions() -> list[str]:
    return ["", "## Conditions no single command shows", "",
            "Each is run end to end by the test it names (a second writer, a signal, Chromium, PostgreSQL, a "
            "mount).", "", "| condition | test | what it gets |", "| --- | --- | --- |",
            *(f"| {_cell(what)} | `{path}::{name}` | {_cell(gets)} |" for what, path, name, gets in CONDITIONS)]


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def run_hostile(case: Hostile, directory: Path) -> tuple[int, str, float]:
    """Exit code, stderr and CPU seconds of ``case`` run for real in ``directory``."""
    case.make(directory)
    argv = case.command if case.command[0] == sys.executable else [sys.executable, "-m", "gpuperf", *case.command]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("GIT_") and key not in ("CI", "GITHUB_STEP_SUMMARY", "GPUPERF_HISTORY")}
    env[NO_GPU_CHECK_ENV] = "1"  # ab's rows: the scratch tree's conftest stands in the GPU, as in test_ab.py
    done = subprocess.run(argv, cwd=directory, capture_output=True, text=True, timeout=60, preexec_fn=_limited,
                          env={**env, "PYTHONPATH": str(REPO)}, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if case.shown_line:
        shown = next((line for line in done.stdout.splitlines() if case.shown_line in line), "")
    elif case.command[:2] == ["baseline", "check"]:
        shown = done.stdout  # the file's own line; stderr only counts the files that failed
    elif case.exit_code:
        shown = done.stderr
        if shown.startswith("usage:"):  # argparse's usage lines, then its error line: the error line is the answer
            shown = shown.strip().splitlines()[-1]
        elif shown.startswith("ERROR: usage:"):  # pytest's: the line naming the argument, without the program
            shown = next(line for line in shown.splitlines() if ": error: " in line).partition(": ")[2]
    else:
        shown = next((line for line in done.stdout.splitlines() if "GPU models" in line), "")
    here = str(directory.resolve()) + "/"  # a path a command prints absolute (ab's --out), shown as given
    return done.returncode, shown.strip().replace(str(REPO) + "/", "").replace(here, ""), cpu


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(rows: list[tuple[Hostile, int, str]]) -> str:
    lines = ["# Hostile and damaged input: what each gets", "",
             "Generated by `python3 tests/test_hostile_input.py` and checked by `tests/test_hostile_input.py`, "
             "which runs every row for real (`python -m gpuperf`, or the case-table loader as collection runs it, "
             "in a subprocess under a 1.5 GiB address-space limit) and fails when the page and the code differ. "
             "Every row is refused or handled within 5 s of CPU; the fuzz suites (`tests/test_fuzz_*.py`) feed "
             "thousands of mutated inputs to the same loaders and commands. The limits are in "
             "`gpuperf/store/reading.py` (no anchors or aliases, nesting depth 32, regular files only, UTF-8 "
             "without a BOM) and per format: a baseline at most 2 MiB (`store/baseline.py`), a results file "
             "32 MiB (`store/results.py`), a case table 1 MiB. Text that a pull request's author controls (case ids, "
             "notes, kernel names, the branch) leaves through one rule per output format, `gpuperf/untrusted.py`: "
             "escaped and cut in the terminal, an unbreakable code span or escaped text in Markdown, OWASP's formula "
             "prefix on CSV text cells, autoescaped HTML; `tests/test_untrusted.py` feeds generated hostile strings "
             "(controls, bidi marks, surrogates, backticks, formula prefixes, a megabyte) through every writer.", "",
             "| input | command | exit | what it gets |", "| --- | --- | --- | --- |"]
    for case, code, message in rows:
        session = case.command[1:3] == ["-m", "pytest"]  # a pytest session, shown as one
        rest = case.command[3:]
        if session and rest[:2] == ["-p", "no:cacheprovider"]:
            rest = rest[2:]
        shown = " ".join(part.replace(str(REPO) + "/", "") for part in (["pytest", *rest] if session
                                                                        else case.command))
        if id(case.command) in LOADERS:
            shown = f"pytest perf_tests (collecting cases/{LOADERS[id(case.command)]}.yaml)"
        lines.append(f"| {_cell(case.what)} | `{_cell(shown)}` | {code} | {_cell(message)} |")
    return "\n".join(lines + render_conditions()) + "\n"


def generate(scratch: Path) -> tuple[str, list[tuple[str, float]]]:
    rows, cpu = [], []
    for index, case in enumerate(HOSTILE):
        directory = scratch / f"case{index}"
        directory.mkdir()
        code, message, seconds = run_hostile(case, directory)
        rows.append((case, code, message))
        cpu.append((case.what, seconds))
    return render(rows), cpu


def _kind(case: Hostile) -> str:
    """The command a row runs (``baseline check``, ``fleet``, the case-table loader, ...)."""
    first = case.command[0]
    return "load" if first == sys.executable else " ".join(case.command[:2]) if first in ("baseline", "history") \
        else first


#: The first row of each command: the fast tier's sample of the page (the whole page is the long tier's).
SAMPLE = sorted({_kind(case): index for index, case in reversed(list(enumerate(HOSTILE)))}.values())


@pytest.mark.long
def test_the_first_hostile_input_of_each_command_gets_what_the_page_says(tmp_path: Path) -> None:
    """Each command's first row of docs/hostile-input.md, run for real, gets exactly its row."""
    lines = PAGE.read_text().splitlines()[6:]
    assert len(SAMPLE) >= 8
    for index in SAMPLE:
        directory = tmp_path / f"case{index}"
        directory.mkdir()
        code, message, seconds = run_hostile(HOSTILE[index], directory)
        row = render([(HOSTILE[index], code, message)]).splitlines()[6]  # the row, after the title and header
        assert "Traceback" not in row and row == lines[index], (row, lines[index])
        assert seconds <= MAX_SECONDS, (HOSTILE[index].what, seconds)


@pytest.mark.long
def test_every_hostile_input_gets_what_the_page_says(tmp_path: Path) -> None:
    page, cpu = generate(tmp_path)
    for line in page.splitlines()[6:]:
        assert "Traceback" not in line, line
    for case, row in zip(HOSTILE, page.splitlines()[6:]):
        assert f"| {case.exit_code} |" in row, row
        assert row.split(" | ")[-1].strip(" |"), row  # every row gets a message
    slow = [(what, seconds) for what, seconds in cpu if seconds > MAX_SECONDS]
    assert not slow, slow
    assert PAGE.read_text() == page, "docs/hostile-input.md is out of date: python3 tests/test_hostile_input.py"


def test_each_condition_names_a_test_that_exists_and_the_page_lists_them() -> None:
    for _, path, name, _ in CONDITIONS:
        assert f"def {name}(" in (REPO / path).read_text(), (path, name)
    assert PAGE.read_text().endswith("\n".join(render_conditions()) + "\n")


def test_a_broken_pipe_exits_quietly() -> None:
    """``python -m gpuperf fleet … | head -1``: the reader goes away, the command stops without a traceback."""
    runs = sorted(str(p) for p in (REPO / "evidence" / "fleet").glob("*.json"))
    with subprocess.Popen([sys.executable, "-m", "gpuperf", "fleet", *runs], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.readline()
        process.stdout.close()
        stderr = process.stderr.read().decode()
        code = process.wait(timeout=60)
    assert stderr == "" and code in (0, 1), (code, stderr)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        text, seconds = generate(Path(scratch))
    PAGE.write_text(text)
    worst = max(seconds, key=lambda item: item[1])
    print(f"{PAGE}: {len(HOSTILE)} rows in {time.perf_counter() - started:.1f} s; most CPU: {worst[1]:.2f} s "
          f"({worst[0]})")
