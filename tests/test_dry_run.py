"""``--dry-run`` end to end, on a user's project made from examples/own-kernels as the docs say (its files copied,
no conftest): what a planted mistake reads as in the dry run is what it reads as on a GPU.

The "GPU run" here is the simulated GPU of the plugin's own tests (``test_plugin.FAKE_DEVICE``, with a timer
that gives 40 TFLOPS to every call and the host stand-in of CuPy for the operands): it records the project's
baseline through ``--update-baselines`` (in the test's temporary folder), and each planted mistake is run both ways
and compared, line for line and by exit code.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from test_plugin import FAKE_DEVICE
from tools.gpu_host.dry_run_parity import failure_lines as failure_lines_of

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "own-kernels"
TEST_FILE = "perf_tests/test_own_sgemm.py"

#: The simulated GPU: the plugin's fake device, CuPy's host stand-in for the operands, 40 TFLOPS for every call.
SIMULATED_GPU = '''
import sys

from gpuperf.wiring import host_cupy

sys.modules["cupy"] = host_cupy.module()  # operands on the host: this machine has no GPU
''' + FAKE_DEVICE + '''

from gpuperf.measure.measurement import Measurement
from gpuperf.wiring.fixtures import Measurer


class FortyTflops:
    def measure(self, fn, work, operands=(), flush="cold", label="", prefer_method="", band=None, repeat=False):
        seconds = work.flops / 40e12
        return Measurement(samples_s=tuple(seconds * f for f in (0.999, 1.0, 1.001) * 4), work=work, flush=flush,
                           method="synthetic", label=label)


@pytest.fixture
def measure(flush_mode):
    return Measurer(FortyTflops(), flush_mode)
'''


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """examples/own-kernels copied as a user would, its baseline recorded on the simulated GPU."""
    for name in ("CI", "GITHUB_STEP_SUMMARY", "GPUPERF_HISTORY"):
        monkeypatch.delenv(name, raising=False)
    for path in EXAMPLE.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            target = pytester.path / path.relative_to(EXAMPLE)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    monkeypatch.syspath_prepend(str(pytester.path))  # the ini's pythonpath, for the in-process runs
    on_gpu(pytester, "--update-baselines").assert_outcomes(passed=2)
    assert (pytester.path / "baselines" / "fake-gpu.yaml").is_file()
    return pytester


def on_gpu(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A run on the simulated GPU (its conftest exists only for this run: the project has none)."""
    conftest = pytester.path / "conftest.py"
    conftest.write_text(SIMULATED_GPU)
    try:
        return pytester.runpytest("-p", "no:cacheprovider", "--results-dir", "none", "--history", "none", "-m",
                                  "perf", *args)
    finally:
        conftest.unlink()
        for module in ("conftest", "own_sgemm"):
            __import__("sys").modules.pop(module, None)


def dry(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "--dry-run", *args)


def failure_lines(result: pytest.RunResult) -> list[str]:
    """The lines that say why (the rule the GPU host's side-by-side run uses too), from pytest's output."""
    return failure_lines_of(result.stdout.str())


def plant(pytester: pytest.Pytester, path: str, old: str, new: str) -> None:
    file = pytester.path / path
    text = file.read_text()
    assert old in text, f"{old!r} is not in {path}: the example changed"
    file.write_text(text.replace(old, new))


def test_the_unplanted_project_passes_the_dry_run_in_gate_mode(project: pytest.Pytester) -> None:
    baselines = {path.name: path.read_bytes() for path in (project.path / "baselines").iterdir()}
    result = dry(project, "--gate")
    assert result.ret == 0
    result.assert_outcomes(passed=2, skipped=3)
    result.stdout.fnmatch_lines(["gpuperf: DRY RUN (--dry-run): no GPU used, your kernels are not launched*",
                                 "*test_own_sgemm_perf[[]2048x2048x2048-cold[]]*DRY_RUN*dry run: not launched*",
                                 "*GPU 0 (fake-gpu): 2 of 2 baselined cases checked without a GPU (dry run)*",
                                 "*dry run: this test does not measure*"])
    assert not (project.path / "results").exists()  # no results files, no history
    assert {path.name: path.read_bytes() for path in (project.path / "baselines").iterdir()} == baselines


@pytest.mark.long
def test_a_wrong_keyword_fails_as_on_the_gpu(project: pytest.Pytester) -> None:
    plant(project, TEST_FILE, "operands=(a_dev, b_dev, c))", "operands=(a_dev, b_dev, c), flop_per_element=2)")
    gpu, dry_run = on_gpu(project), dry(project)
    assert (gpu.ret, dry_run.ret) == (1, 1)
    assert failure_lines(dry_run) == failure_lines(gpu)
    assert any("unexpected keyword argument 'flop_per_element'" in line for line in failure_lines(dry_run))


@pytest.mark.long
def test_a_missing_baseline_entry_fails_the_gate_as_on_the_gpu(project: pytest.Pytester) -> None:
    plant(project, "cases/gemm.yaml", "[2048x2048x2048, 4096x1024x2048]",
          "[2048x2048x2048, 4096x1024x2048, 1024x1024x1024]")
    gpu, dry_run = on_gpu(project, "--gate"), dry(project, "--gate")
    assert (gpu.ret, dry_run.ret) == (1, 1)
    assert failure_lines(dry_run) == failure_lines(gpu)
    assert any("no baseline for this case on fake-gpu" in line and "1024x1024x1024" in line
               for line in failure_lines(dry_run))


@pytest.mark.long
def test_a_case_table_typo_fails_as_on_the_gpu(project: pytest.Pytester) -> None:
    plant(project, "cases/gemm.yaml", "[2048x2048x2048, 4096x1024x2048]", "[2048x2048x2048, 4096x1024x20x48]")
    gpu, dry_run = on_gpu(project), dry(project)
    assert gpu.ret == dry_run.ret == pytest.ExitCode.INTERRUPTED  # a collection error
    assert failure_lines(dry_run) == failure_lines(gpu)
    assert any("4096x1024x20x48" in line for line in failure_lines(dry_run))


@pytest.mark.long
def test_a_stale_entry_fails_the_gate_as_on_the_gpu(project: pytest.Pytester) -> None:
    plant(project, "cases/gemm.yaml", "[2048x2048x2048, 4096x1024x2048]", "[2048x2048x2048]")
    gpu, dry_run = on_gpu(project, "--gate"), dry(project, "--gate")
    assert (gpu.ret, dry_run.ret) == (1, 1)
    assert failure_lines(dry_run) == failure_lines(gpu)
    assert any("1 stale baseline entry" in line for line in failure_lines(dry_run))


def test_a_dry_run_records_nothing(project: pytest.Pytester) -> None:
    result = dry(project, "--update-baselines")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--dry-run measures nothing, so it cannot record baselines*"])


def test_a_dry_run_draws_large_operands_as_one_value_with_their_shape_and_dtype() -> None:
    import numpy

    from gpuperf.suite.accuracy import random_operand
    from gpuperf.wiring.dry_run import STAND_IN_DRAW, StandInRng

    stand_in = StandInRng(numpy.random.default_rng(7))
    operand = random_operand(stand_in, (2048, 2048))
    assert operand.shape == (2048, 2048) and operand.dtype == numpy.float32 and not (operand == 0).any()
    assert len(numpy.unique(operand)) == 1 and operand.flags.writeable
    small, real = StandInRng(numpy.random.default_rng(7)), numpy.random.default_rng(7)
    assert numpy.array_equal(small.uniform(-1, 1, size=(3, 5)), real.uniform(-1, 1, size=(3, 5)))  # small: real
    assert stand_in.random(size=STAND_IN_DRAW, dtype=numpy.float32).dtype == numpy.float32


def test_the_cupy_stand_in_gives_host_arrays_and_kernels_that_launch_nothing() -> None:
    import numpy

    from gpuperf.wiring import host_cupy

    cupy = host_cupy.module()
    c = cupy.full((4, 3), cupy.nan, dtype=cupy.float32)
    assert isinstance(c, numpy.ndarray) and c.dtype == numpy.float32 and numpy.isnan(c).all()
    assert cupy.asnumpy(cupy.asarray([1, 2])).tolist() == [1, 2]
    with pytest.raises(ValueError):  # NumPy's own checks stand: a shape that does not chain fails
        cupy.matmul(cupy.ones((2, 3)), cupy.ones((2, 3)))
    kernel = cupy.RawKernel("extern \"C\" __global__ void k() {}", "k")
    kernel.compile()
    assert kernel((1,), (1,), (c,)) is None and numpy.isnan(c).all()  # launched nothing
    to_bits = cupy.ElementwiseKernel("float32 x", "uint16 y", "y = 0;", "to_bits")
    bits = to_bits(c)
    assert bits.shape == (4, 3) and bits.dtype == numpy.uint16  # its output's shape and dtype, as CuPy gives
    fill = cupy.ElementwiseKernel("uint64 seed", "T y", "y = 1;", "fill")
    assert fill(numpy.uint64(1), c) is c
    with cupy.cuda.Stream(non_blocking=True) as stream:
        stream.synchronize()


@pytest.mark.long
def test_the_framework_example_runs_dry_where_pytorch_is_installed(pytester: pytest.Pytester,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/framework-kernels on a CPU: PyTorch's CUDA tensors made on meta, torch.cuda's streams and graphs
    stand-ins, a torch.compile'd op and Triton's launches behind measure never called; every perf test reaches its
    baseline entry (the example's H200 baseline), the correctness tests skip with the reason."""
    pytest.importorskip("torch", reason="PyTorch is not installed: the example's tests skip without it")
    example = EXAMPLE.parent / "framework-kernels"
    for path in example.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            target = pytester.path / path.relative_to(example)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    monkeypatch.delenv("CI", raising=False)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--dry-run", "--gate")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["gpuperf: DRY RUN (--dry-run)*", "*GPU 0 (nvidia-h200): 9 of 9 baselined cases "
                                 "checked without a GPU (dry run)*"])
