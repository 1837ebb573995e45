"""The committed evidence of the H200 baseline, reproduced from the committed files by the commands the docs give:
``baseline from-runs`` over ``evidence/fleet/recording/`` (six runs on three GPUs) writes every committed entry again;
every ``evidence/fleet/gate/`` run (a full default gate on a GPU that did not record the baseline) passes ``compare``
against ``baselines/nvidia-h200.yaml`` with no regression and nothing unreliable, and ``fleet --baseline`` counts no
false alarm there; the validation runs of the previous baseline (``evidence/fleet/validation/``), judged against this
one, are what evidence/fleet.md says; and the slowdown runs are caught at 5 % (on cycles, same kernels) and pass at
2 %."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpuperf.cli import main
from gpuperf.store.baseline import load_baseline

REPO = Path(__file__).resolve().parent.parent
BASELINE = REPO / "baselines" / "nvidia-h200.yaml"
RECORDING = sorted((REPO / "evidence" / "fleet" / "recording").glob("*.json"))
#: The merge gate whose run failed (evidence/fleet.md): one batched GEMM came out unheld while the custom kernels'
#: modules compiled in the background, NOT_COMPARABLE with its entry (``test_the_red_merge_gate_is_what_the_docs_say``).
RED_MERGE_GATE = REPO / "evidence" / "ab" / "merge-gate" / "691a02b1" / "gate.json"
#: The gates of fresh GPUs that did not record the baseline: the validation runs, and the merge gates' (evidence/ab.md).
VALIDATION = sorted((REPO / "evidence" / "fleet" / "gate").glob("*.json")) + \
    sorted(path for path in (REPO / "evidence" / "ab" / "merge-gate").glob("*/gate.json") if path != RED_MERGE_GATE)
PREVIOUS_VALIDATION = sorted((REPO / "evidence" / "fleet" / "validation").glob("*.json"))
FLEET_DOC = REPO / "evidence" / "fleet.md"
SLOWDOWN = REPO / "evidence" / "fleet" / "slowdown"
STATUS = re.compile(r"\s(PASS|IMPROVED|REGRESSED|UNRELIABLE|ERROR|ANOMALY|NOT_COMPARABLE|only in A|only in B)(?:\s|$)")


def test_the_evidence_is_there() -> None:
    assert BASELINE.is_file()
    hosts = {uuid_of(run) for run in RECORDING}
    assert len(RECORDING) >= 6 and len(hosts) >= 3, "evidence/fleet/recording/: six runs on three GPUs at least"
    assert len(VALIDATION) >= 3, "evidence/fleet/gate/*.json: the gate runs that validate the committed baseline"
    assert not hosts & {uuid_of(run) for run in VALIDATION}, "a validation run's GPU recorded the baseline"
    assert sorted(SLOWDOWN.glob("*-slow-0.05.json")) and sorted(SLOWDOWN.glob("*-slow-0.02.json"))


def uuid_of(results: Path) -> str:
    return str(json.loads(results.read_text())["run"]["extra"]["uuid"])


@pytest.mark.long
def test_the_previous_baselines_validation_runs_pass_the_fleet_baseline(capsys: pytest.CaptureFixture[str]) -> None:
    """evidence/fleet.md: the previous baseline's validation runs (older code, no FP8 cases, hosts that are not the
    fleet's) all pass the fleet's baseline, as many as the page says."""
    red = [results.name for results in PREVIOUS_VALIDATION if main(["compare", str(BASELINE), str(results)])]
    capsys.readouterr()
    text = " ".join(FLEET_DOC.read_text(encoding="utf-8").split())
    claim = re.search(r"judged against the fleet's baseline, (\d+) of (\d+) pass", text)
    assert claim, "evidence/fleet.md gives no count of the previous validation runs judged against this baseline"
    assert red == [] and (int(claim[1]), int(claim[2])) == (len(PREVIOUS_VALIDATION), len(PREVIOUS_VALIDATION))


#: The fast tier compares the first run alone (the fleet check below reads every run); the long tier each one.
@pytest.mark.parametrize("results", [pytest.param(path, id=f"{path.parent.name}/{path.name}",
                                                  marks=[pytest.mark.long] if index else [])
                                     for index, path in enumerate(VALIDATION)])
def test_every_validation_run_passes_the_committed_baseline(results: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m gpuperf compare baselines/nvidia-h200.yaml FILE``, as the docs cite it: exit 0, no REGRESSED and
    no UNRELIABLE row, and every entry of the baseline compared (a validation run is a full default run)."""
    code = main(["compare", str(BASELINE), str(results)])
    out, err = capsys.readouterr()
    assert code == 0, out[-3000:] + err[-3000:]
    lines = out.splitlines()
    bad = [line for line in lines if re.search(r"\s(REGRESSED|UNRELIABLE)(\s|$)", line)]
    assert bad == [], "\n".join(bad)
    statuses = [match.group(1) for line in lines[1:-1] if (match := STATUS.search(line))]
    assert set(statuses) <= {"PASS", "IMPROVED"}, sorted(set(statuses))
    committed = load_baseline(BASELINE)
    assert committed is not None
    assert len(statuses) == len(committed.entries), lines[-1]
    assert lines[-1].startswith(f"{len(committed.entries)} compared: "), lines[-1]
    assert "regressed" not in lines[-1] and "unreliable" not in lines[-1]


@pytest.mark.long
def test_the_fleet_of_validation_runs_has_no_false_alarm_against_the_baseline(
        capsys: pytest.CaptureFixture[str]) -> None:
    runs = len(VALIDATION)
    assert main(["fleet", *map(str, VALIDATION), "--baseline", str(BASELINE)]) == 0
    out = capsys.readouterr().out
    assert f"false alarms over {runs * (runs - 1)} ordered run pairs" in out
    assert f"against the baseline 0 of {runs} runs red (0.0 %)" in out
    table = out[out.index("false alarms over"):]
    assert re.search(r"\bcycles\b", table), "no case judged on cycles in the false-alarm table"


def compare_lines(results: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["compare", str(BASELINE), str(results)])
    return code, capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("results", sorted(SLOWDOWN.glob("*-slow-0.05.json")), ids=lambda path: path.name)
def test_a_five_percent_slowdown_is_caught_on_cycles(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = compare_lines(results, capsys)
    assert code == 1
    compared = [line for line in lines if STATUS.search(line) and "only in A" not in line]
    assert len(compared) >= 5 and all(" REGRESSED " in line for line in compared), "\n".join(compared)
    assert all("at max clock" in line and "judged on cycles" in line and "same kernels" in line
               for line in compared), "\n".join(compared)
    for case in ("tf32-nn-4096x4096x4096", "fp64-nn-4096x4096x4096", "fp16-nn-8192x8192x8192"):
        assert any(case in line for line in compared), case


@pytest.mark.parametrize("results", sorted(SLOWDOWN.glob("*-slow-0.02.json")), ids=lambda path: path.name)
def test_a_two_percent_slowdown_passes(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = compare_lines(results, capsys)
    assert code == 0
    compared = [line for line in lines if STATUS.search(line) and "only in A" not in line]
    assert len(compared) >= 5 and all(STATUS.search(line).group(1) == "PASS" for line in compared), \
        "\n".join(compared)


# -- evidence/clock.md's check against independent clocks, from its committed file ----------------------------

CLOCK_DOC = REPO / "evidence" / "clock.md"
CLOCK_CHECK = REPO / "evidence" / "fleet" / "clock" / "5d7d9cff-clock-check.json"


def clock_check_cases() -> dict[str, dict[str, Any]]:
    import json

    return {str(case["case"]): case for case in json.loads(CLOCK_CHECK.read_text())}


def doc_case(label: str) -> str:
    """``FP16 8192³`` → ``fp16 8192x8192x8192``, as the check file names its cases."""
    precision, size = label.split()
    return f"{precision.lower()} {'x'.join([size.rstrip('³')] * 3)}"


def test_the_time_and_cycles_spreads_in_the_docs_are_the_committed_check_s() -> None:
    rows = re.findall(r"^\| (\w+ \d+³)(?: \(not capped\))? \| ([\d.]+) % \| ([\d.]+) % \| (\d+) MHz \|$",
                      CLOCK_DOC.read_text(), flags=re.MULTILINE)
    cases = clock_check_cases()
    assert len(rows) == len(cases) == 6
    for label, time_iqr, cycles_iqr, clock in rows:
        case = cases[doc_case(label)]
        assert f"{100 * float(case['time_rel_iqr']):.2f}" == time_iqr, label
        assert f"{100 * float(case['cycles_rel_iqr']):.2f}" == cycles_iqr, label
        assert f"{float(case['stamped_clock_mhz']):.0f}" == clock, label


def test_the_nsight_compute_cycles_in_the_docs_are_the_committed_check_s() -> None:
    rows = re.findall(r"^\| (\w+ \d+³) GEMM, Nsight Compute[^|]*\| ([\d,]+) cycles \| ([\d,]+) \| ([−+-][\d.]+) % \|$",
                      CLOCK_DOC.read_text(), flags=re.MULTILINE)
    cases = clock_check_cases()
    assert len(rows) == 2
    for label, suite, ncu, delta in rows:
        case = cases[doc_case(label)]
        suite_cycles, ncu_cycles = float(case["cycles_per_call"]), float(case["ncu"]["cycles"])
        assert f"{suite_cycles:,.0f}" == suite and f"{ncu_cycles:,.0f}" == ncu, label
        assert f"{100 * (suite_cycles / ncu_cycles - 1):+.2f}".replace("-", "−") == delta, label


# -- the validation gates' times and the shifted-baseline check, from their committed files ------------------

GATE_LOGS = sorted((REPO / "evidence" / "fleet" / "gate").glob("*-validation.log"))
SHIFTED_RUN = REPO / "evidence" / "shifted" / "0e8d49c2-shifted.json"


def test_the_validation_gates_times_in_the_docs_are_their_logs() -> None:
    """Each log is its run's: the GPU it names is the one its results.json records; the gate exited 0, and the
    pytest times evidence/fleet.md quotes for the gate and for ``-k gemv`` are the logs' own, in the order of the
    GPUs."""
    text = " ".join(FLEET_DOC.read_text(encoding="utf-8").split())
    claim = re.search(r"163 PASS, exit 0, in ([\d.]+) s, ([\d.]+) s and ([\d.]+) s of pytest time; "
                      r"`pytest perf_tests -k gemv` after it took ([\d.]+) s, ([\d.]+) s and ([\d.]+) s", text)
    assert claim and len(GATE_LOGS) == 3
    gates, gemvs = [], []
    for log in GATE_LOGS:
        content = log.read_text(encoding="utf-8")
        results = log.with_name(log.name.replace("-validation.log", "-gate.json"))
        assert uuid_of(results) in content, log.name
        assert "gate: rc=0 " in content, log.name
        gates += re.findall(r"^894 passed, 127 deselected in ([\d.]+)s", content, flags=re.MULTILINE)
        gemvs += re.findall(r"^118 passed, 903 deselected in ([\d.]+)s", content, flags=re.MULTILINE)
    assert list(claim.groups()) == gates + gemvs
    names = re.search(r"fresh H200s that did not record it, `(\w+)`, `(\w+)` and `(\w+)`", text)
    assert names and list(names.groups()) == [log.name.split("-")[0] for log in GATE_LOGS]


#: Each sealed 5 %/3 % check and the unshifted gate of the same call on the same GPU.
SHIFTED_CHECKS = [(SHIFTED_RUN, REPO / "evidence" / "fleet" / "gate" / "0e8d49c2-gate.json")] + [
    (folder / "shifted.json", folder / "gate.json")
    for folder in sorted((REPO / "evidence" / "ab" / "merge-gate").iterdir()) if (folder / "shifted.json").exists()]


@pytest.mark.long
@pytest.mark.parametrize(("shifted_run", "unshifted_run"), SHIFTED_CHECKS, ids=lambda path: path.parent.name)
def test_the_shifted_baseline_check_is_what_the_docs_say(shifted_run: Path, unshifted_run: Path,
                                                         tmp_path: Path) -> None:
    """The shifted copy made again from the committed baseline (``tools/gpu_host/shifted_baseline.py write``) and each
    committed gate run against it judged (``judge --unshifted``, with the same host's unshifted gate): the counts and
    the kinds of miss evidence/fleet.md's table gives for that GPU, which names every check committed."""
    import subprocess
    import sys

    tool = [sys.executable, str(REPO / "tools" / "gpu_host" / "shifted_baseline.py")]
    made = subprocess.run([*tool, "write", str(BASELINE), str(tmp_path)], capture_output=True, text=True,
                          check=False, cwd=REPO)
    assert made.returncode == 0, made.stderr
    judged = subprocess.run([*tool, "judge", str(tmp_path / BASELINE.name), str(shifted_run), "--unshifted",
                             str(unshifted_run)], capture_output=True, text=True, check=False, cwd=REPO)
    gpu = uuid_of(shifted_run).removeprefix("GPU-")[:8]
    assert uuid_of(unshifted_run).removeprefix("GPU-")[:8] == gpu
    caught = re.search(r"caught: (\d+) of (\d+); 3 % speed-ups raised as alarms: (\d+) of (\d+)", judged.stdout)
    kinds = re.search(r"of the (\d+) missed: (\d+) with a band wider than the shift, (\d+) out of reach on this "
                      r"host, (\d+) within reach", judged.stdout)
    assert caught and kinds, judged.stdout + judged.stderr
    missed, wider, off_host, noise = map(int, kinds.groups())
    assert missed == wider + off_host + noise == int(caught.group(2)) - int(caught.group(1))
    assert judged.returncode == (1 if missed or int(caught.group(3)) else 0)
    row = (f"| `{gpu}` | {caught.group(1)} of {caught.group(2)} | {caught.group(3)} of {caught.group(4)} | "
           f"{wider} | {off_host} | {noise} |")
    assert row in FLEET_DOC.read_text(encoding="utf-8"), row


@pytest.mark.long
def test_the_host_spreads_the_fleet_page_quotes_are_the_fleet_command_s(capsys: pytest.CaptureFixture[str]) -> None:
    """evidence/fleet.md's bound on the sealed check: two entries judged on time spread past 4.76 % across the fresh
    GPUs that gated this baseline, as ``python -m gpuperf fleet`` over their committed gates prints."""
    gates = sorted((REPO / "evidence" / "fleet" / "gate").glob("*-gate.json")) + \
        sorted((REPO / "evidence" / "ab" / "merge-gate").glob("*/gate.json"))
    assert main(["fleet", *map(str, gates)]) == 0
    lines = capsys.readouterr().out.splitlines()
    text = " ".join(FLEET_DOC.read_text(encoding="utf-8").split())
    for case, short in (("test_fp8_projection[llama3-70b-qkv-t1-bf16-cold]", "qkv-t1-bf16"),
                        ("test_gemm_perf[tf32-nn-8192x128x8192-cold]", "tf32-nn-8192x128x8192")):
        line = next(line for line in lines if line.startswith(case + " "))  # the spread table comes first
        spread = float(line.split()[4])
        assert spread > 4.76 and line.split()[-1] == "–", line  # judged on time: no figure at max clock
        assert f"`{short}` spreads {spread:.1f} %" in text or f"`{short}` {spread:.1f} %" in text, short


ALARM_RUN = REPO / "evidence" / "fleet" / "alarms" / "3d2eeeeb-gate.json"


def test_the_fourth_gpu_s_false_alarms_are_what_the_docs_say(capsys: pytest.CaptureFixture[str]) -> None:
    """evidence/fleet.md: a fourth fresh GPU's gate, red against the three-host baseline on four named cases, is green
    against the fleet's, which it joined; the readings the page gives are its results file's; its log holds its
    time."""
    code = main(["compare", str(BASELINE), str(ALARM_RUN)])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0 and lines[-1].startswith("163 compared: 163 pass"), lines[-1]
    text = " ".join(FLEET_DOC.read_text(encoding="utf-8").split())
    records = {r["case_id"].split("[")[1]: r for r in json.loads(ALARM_RUN.read_text())["records"]}
    for case, micro in (("llama3-70b-gate_up-t1-bf16-cold]", "239.4"), ("llama3-70b-gate_up-t1-e4m3-cold]", "121.4")):
        assert f"{records[case]['median_s'] * 1e6:.1f}" == micro and micro in text
    log = ALARM_RUN.with_name("3d2eeeeb-validation.log").read_text(encoding="utf-8")
    assert uuid_of(ALARM_RUN) in log and "4 failed, 890 passed, 127 deselected in 52.54s" in log
    assert "gated in 52.54 s of pytest time" in text


def test_the_red_merge_gate_is_what_the_docs_say(capsys: pytest.CaptureFixture[str]) -> None:
    """``691a02b1``'s gate: no regression, one case NOT_COMPARABLE (measured unheld against a held entry), which is
    what failed it, as evidence/fleet.md says."""
    code, lines = compare_lines(RED_MERGE_GATE, capsys)
    bad = [line for line in lines if re.search(r"\s(REGRESSED|UNRELIABLE)(\s|$)", line)]
    assert bad == []
    records = json.loads(RED_MERGE_GATE.read_text())["records"]
    odd = [r for r in records if r["status"] not in ("PASS", "IMPROVED")]
    assert [(r["status"], r["method"]) for r in odd] == [("NOT_COMPARABLE", "cupti-cold-unheld")]
    assert "strided-fp16-1024x256x256x256" in odd[0]["case_id"]
    fleet = " ".join(FLEET_DOC.read_text(encoding="utf-8").split())
    assert "`691a02b1`" in fleet and "162 of 163 measured" in fleet
