"""``gpuperf.verdict.accounting``: N of M baselined cases measured per GPU, NOT MEASURED with a reason, stale entries."""

from __future__ import annotations

from pathlib import Path

from gpuperf.verdict.accounting import CollectedTests, SelectedCase, account, merge_collected, owned_keys, stale_entries
from gpuperf.store.baseline import BaselineFile, Entry
from gpuperf.store.records import Record
from gpuperf.vocabulary import Status

GEMM = "perf_tests/test_gemm.py::test_gemm_perf[fp32-nn-4096x4096x4096-cold]"
GEMV = "perf_tests/test_gemv.py::test_gemv_perf[fp32-opN-16384x16384-cold]"
CUSTOM = "perf_tests/test_custom.py::test_custom_perf[wmma-4096x4096x4096-cold]"
LT = "perf_tests/test_cublaslt.py::test_cublaslt_heuristic_vs_best[fp16-4096x4096x4096-cold]"


def entry(flush: str = "cold") -> Entry:
    return Entry(metric="TFLOPS", value=1.0, unit="TFLOPS", flush=flush)


BASELINE = BaselineFile(Path("nvidia-h200.yaml"), {"slug": "nvidia-h200"}, {
    GEMM: entry(), GEMV: entry(), CUSTOM: entry(), f"{CUSTOM}#vs_cublas": entry(), LT: entry()})


def record(case_id: str, status: str, nodeid: str | None = None, note: str = "", gpu_index: int = 0) -> Record:
    return Record(case_id=case_id, nodeid=nodeid or case_id.split("#")[0], family="gemm", params={},
                  metric="TFLOPS", value=1.0, unit="TFLOPS", status=status, note=note, gpu_index=gpu_index)


def test_a_test_owns_its_entry_and_its_ratio_entries() -> None:
    assert owned_keys(CUSTOM, BASELINE) == [CUSTOM, f"{CUSTOM}#vs_cublas"]
    assert owned_keys("perf_tests/test_custom.py::test_custom_perf[wmma-4096x4096x4096", BASELINE) == []


def test_every_baselined_case_without_a_verdict_is_listed_with_its_reason() -> None:
    selected = [SelectedCase(GEMM, GEMM, 0), SelectedCase(GEMV, GEMV, 0), SelectedCase(CUSTOM, CUSTOM, 0),
                SelectedCase(LT, LT, 0, "skipped: nvmath-python is not installed"),
                SelectedCase("perf_tests/test_new.py::test_new", "perf_tests/test_new.py::test_new", 0)]
    records = [record(GEMM, Status.PASS), record(GEMV, Status.UNRELIABLE, note="noisy: spread 9 %"),
               record(CUSTOM, Status.REGRESSED), record(f"{CUSTOM}#vs_cublas", Status.NOT_COMPARABLE)]
    [gpu] = account(selected, records, {0: "nvidia-h200"}, {"nvidia-h200": BASELINE}, {})
    assert (gpu.baselined, gpu.measured) == (5, 2)  # the new test has no entry: not counted
    assert not gpu.complete
    assert gpu.summary() == "GPU 0 (nvidia-h200): 2 of 5 baselined cases measured"
    reasons = {u.key: u.reason for u in gpu.not_measured}
    assert reasons == {GEMV: "UNRELIABLE: noisy: spread 9 %", f"{CUSTOM}#vs_cublas": Status.NOT_COMPARABLE,
                       LT: "skipped: nvmath-python is not installed"}


def test_a_case_run_on_two_gpus_is_counted_on_each() -> None:
    node0, node1 = GEMM.replace("-cold]", "-cold-gpu0]"), GEMM.replace("-cold]", "-cold-gpu1]")
    selected = [SelectedCase(node0, GEMM, 0), SelectedCase(node1, GEMM, 1, "error in setup: CUDA error")]
    records = [record(GEMM, Status.PASS, nodeid=node0, gpu_index=0)]
    accounts = account(selected, records, {0: "nvidia-h200", 1: "nvidia-h200"}, {"nvidia-h200": BASELINE}, {})
    assert [(a.gpu_index, a.measured, a.baselined) for a in accounts] == [(0, 1, 1), (1, 0, 1)]
    assert accounts[1].not_measured[0].reason == "error in setup: CUDA error"


def test_one_node_id_on_every_gpu_is_counted_per_gpu() -> None:
    """xdist --dist each: every worker runs the same test id on its own GPU; one GPU's verdict must not
    stand in for another's missing one."""
    selected = [SelectedCase(GEMM, GEMM, 0, "skipped: UNRELIABLE"), SelectedCase(GEMM, GEMM, 1)]
    records = [record(GEMM, Status.UNRELIABLE, gpu_index=0), record(GEMM, Status.PASS, gpu_index=1)]
    accounts = account(selected, records, {0: "nvidia-h200", 1: "nvidia-h200"}, {"nvidia-h200": BASELINE}, {})
    assert [(a.gpu_index, a.measured, a.baselined) for a in accounts] == [(0, 0, 1), (1, 1, 1)]


def test_a_gpu_that_could_not_be_queried_has_no_account() -> None:
    [gpu] = account([SelectedCase(GEMM, GEMM, 3)], [], {}, {}, {3: "GPU 3 does not exist"})
    assert not gpu.complete and gpu.summary() == "GPU 3: no baselined case could be measured: GPU 3 does not exist"


def test_stale_entries_are_those_no_collected_test_produces() -> None:
    collected = CollectedTests(case_ids=frozenset({GEMM, CUSTOM}), whole_files=frozenset(
        {"perf_tests/test_gemm.py", "perf_tests/test_gemv.py", "perf_tests/test_custom.py"}), flush_modes=("cold",))
    assert stale_entries(BASELINE, collected) == [GEMV]  # the cuBLASLt file was not collected: unknown


def test_files_collected_in_part_skipped_or_of_another_flush_mode_tell_nothing() -> None:
    partial = CollectedTests(case_ids=frozenset({GEMM}), whole_files=frozenset({"perf_tests/test_gemm.py"}),
                             flush_modes=("cold",))
    assert stale_entries(BASELINE, partial) == []
    skipped = CollectedTests(whole_files=frozenset({"perf_tests/test_gemv.py"}), flush_modes=("cold",),
                             skipped_files={"perf_tests/test_gemv.py": "no CuPy"})
    assert stale_entries(BASELINE, skipped) == []
    hot = CollectedTests(whole_files=frozenset({"perf_tests/test_gemv.py"}), flush_modes=("hot",))
    assert stale_entries(BASELINE, hot) == []


def test_workers_collections_merge() -> None:
    merged = merge_collected([CollectedTests(frozenset({GEMM}), frozenset({"a.py"}), ("cold",)),
                              CollectedTests(frozenset({GEMV}), frozenset({"b.py"}), ("cold",), {"c.py": "why"})])
    assert merged.case_ids == {GEMM, GEMV} and merged.whole_files == {"a.py", "b.py"}
    assert merged.flush_modes == ("cold",) and merged.skipped_files == {"c.py": "why"}
