"""The OpInfo sweep's committed evidence (evidence/opinfo/, written on an H200 by tools/gpu_host/opinfo_device.sh) gives
the report evidence/opinfo-sweep.md again, and the ten operators' figures agree with torch.profiler's as the page
says."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVIDENCE = ROOT / "evidence" / "opinfo"
PARTS = [EVIDENCE / "sweep-1.tar.gz", EVIDENCE / "sweep-2.tar.gz"]
sys.path.insert(0, str(ROOT / "tools" / "evidence"))

import opinfo_sweep  # noqa: E402


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "tools" / "evidence" / "opinfo_sweep.py"), *args],
                          capture_output=True, text=True, check=False, cwd=ROOT)


def test_the_report_is_written_again_from_the_committed_parts() -> None:
    made = _tool("report", *map(str, PARTS), "--context", str(EVIDENCE / "gpu.txt"), "--trace",
                 str(EVIDENCE / "operators-compare.md"))
    assert made.returncode == 0, made.stderr
    assert made.stdout == (ROOT / "evidence" / "opinfo-sweep.md").read_text()


def test_every_operator_has_one_outcome_and_no_session_crashed() -> None:
    parts = [opinfo_sweep.read_part(path) for path in PARTS]
    keys = [outcome.key for part in parts for outcome in part.outcomes]
    assert len(keys) == len(set(keys)) > 650
    assert all(part.exit_code in (0, 1, opinfo_sweep.STOPPED_BY_LIMIT) for part in parts)
    assert parts[-1].exit_code in (0, 1)  # the last part ran to its end
    for outcome in (o for part in parts for o in part.outcomes):
        assert outcome.kind in ("measured", "refused", "skipped", "failed")
        if outcome.kind == "measured":
            assert outcome.figure is not None and outcome.figure > 0 and outcome.kernels
        else:
            assert outcome.reason and "\n" not in outcome.reason
    measured = {o.key: o for part in parts for o in part.outcomes if o.kind == "measured"}
    assert {"nn.functional.layer_norm", "softmax", "log_softmax", "sort", "nonzero"} <= set(measured)


def test_kernels_of_anonymous_namespaces_are_named_and_their_figures_taken() -> None:
    """layer_norm (fp16 16384×8192) and softmax (fp32 4096×393216): ``void at::native::(anonymous namespace)::…``
    kernels, which once ended the session; now named and measured like any other."""
    import json

    records = {r["case_id"].rsplit("[", 1)[1].split("-")[0]: r
               for r in json.loads((EVIDENCE / "operators-results.json").read_text())["records"]}
    assert [k["name"] for k in records["layer_norm"]["kernels"]] == ["vectorized_layer_norm_kernel"]
    assert [k["name"] for k in records["softmax"]["kernels"]] == ["cunn_SoftMaxForward"]
    assert all(records[name]["value"] > 0 for name in ("layer_norm", "softmax"))


def test_the_ten_operators_agree_with_torch_profiler_within_two_per_cent() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu_host" / "profiler_check.py"), "compare",
                           "--limit", "2",
                           str(EVIDENCE / "operators-results.json"), str(EVIDENCE / "operators-profile.json")],
                          capture_output=True, text=True, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == (EVIDENCE / "operators-compare.md").read_text()
    for name in ("layer_norm", "softmax", "add", "sum", "index_add", "sort", "conv2d", "mm", "sdpa",
                 "compiled_gelu"):
        assert f"test_operator_perf[{name}-cold]" in done.stdout


def test_the_report_tool_refuses_bad_input_with_one_line(tmp_path: Path) -> None:
    missing = _tool("report", str(tmp_path / "none.tar.gz"))
    assert missing.returncode == 1 and missing.stderr.startswith("opinfo_sweep.py: ")
    assert len(missing.stderr.strip().splitlines()) == 1
    empty = tmp_path / "empty.tar.gz"
    with tarfile.open(empty, "w:gz"):
        pass
    broken = _tool("report", str(empty))
    assert broken.returncode == 1 and len(broken.stderr.strip().splitlines()) == 1 and "Traceback" not in broken.stderr
