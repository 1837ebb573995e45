"""Every operator of PyTorch's OpInfo database with a CUDA sample in a floating dtype, measured once as a user's
test would measure it: the largest sample through ``measure`` and ``perf.check``, with no stream code.

An operator gives a figure (GB/s: the bytes of its tensors read and written once), or the suite refuses it with one
line (no kernel, kernels off the measuring stream, …), or the test skips with why (no CUDA sample in a floating
dtype, the sample could not be built). ``tools/evidence/opinfo_sweep.py report`` counts each outcome.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

try:
    import torch
    from torch.testing._internal.common_methods_invocations import op_db
except ImportError as exc:  # collected, and skipped with the reason
    torch, op_db, MISSING = None, [], f"PyTorch's OpInfo database is not importable: {exc}"
else:
    MISSING = ""

from gpuperf.measure.metrics import Work
from gpuperf.vocabulary import Metric, Precision

#: Floating dtypes in the order a sample is taken in: float32 first (every kind of kernel has it), then the
#: half types, then float64.
DTYPES = ("float32", "bfloat16", "float16", "float64")
PRECISION = {"float32": Precision.FP32, "bfloat16": Precision.BF16, "float16": Precision.FP16,
             "float64": Precision.FP64}


def _key(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


#: ``$OPINFO_AFTER``: only the operators whose key sorts after it (a sweep that its time limit stopped goes on there).
AFTER = os.environ.get("OPINFO_AFTER", "")
OPS = {_key(op): op for op in op_db if _key(op) > AFTER}
pytestmark = pytest.mark.skipif(torch is None, reason=MISSING or "PyTorch is not installed")


def tensors(value: Any) -> Iterator[Any]:
    """Every tensor in a sample's input, arguments and keyword arguments (through lists, tuples and dicts)."""
    if torch is not None and isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors(item)


def tensor_bytes(values: Any) -> int:
    """Bytes of device memory the tensors occupy, each storage once (a broadcast view counts what it holds)."""
    seen: dict[int, int] = {}
    for tensor in tensors(values):
        if tensor.device.type != "cuda" or tensor.is_sparse or tensor.layout != torch.strided:
            continue
        logical = tensor.numel() * tensor.element_size()
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        seen[key] = max(seen.get(key, 0), min(logical, storage.nbytes()))
    return sum(seen.values())


def _dtype(op: Any) -> Any:
    supported = op.supported_dtypes("cuda")
    return next((getattr(torch, name) for name in DTYPES if getattr(torch, name) in supported), None)


def _largest_sample(op: Any, dtype: Any) -> Any:
    samples = list(op.sample_inputs("cuda", dtype, requires_grad=False))
    if not samples:
        return None
    return max(samples, key=lambda sample: tensor_bytes((sample.input, sample.args, sample.kwargs)))


@pytest.mark.perf
@pytest.mark.parametrize("key", sorted(OPS) or ["none"])
def test_opinfo(key: str, measure: Any, perf: Any) -> None:
    op = OPS[key]
    dtype = _dtype(op)
    if dtype is None:
        pytest.skip("no CUDA sample in a floating dtype")
    try:
        sample = _largest_sample(op, dtype)
    except Exception as exc:  # OpInfo's own sample generator failed on this device
        pytest.skip(f"no CUDA sample: the sample generator raised {type(exc).__name__}")
    if sample is None:
        pytest.skip("no CUDA sample")
    args = (sample.input, *sample.args)
    out = op(*args, **sample.kwargs)
    torch.cuda.synchronize()
    nbytes = tensor_bytes((args, sample.kwargs)) + tensor_bytes(out)
    if nbytes == 0:
        pytest.skip("its sample holds no tensor on the GPU")
    precision = PRECISION[str(dtype).removeprefix("torch.")]
    work = Work(flops=0.0, bytes=float(nbytes), precision=precision, metric=Metric.GBPS)
    perf.attach(opinfo=key, dtype=precision, sample_bytes=nbytes)
    perf.check(measure(lambda: op(*args, **sample.kwargs), work, label=f"{key} {precision}"))
