"""tools/slowdown.py's shapes: the reduction grows by the fraction asked, the output (and so the grid) does not."""

from __future__ import annotations

import pytest

from tools.slowdown import gemm_shapes, gemv_shapes, longer


def test_the_reduction_grows_by_the_fraction_in_whole_aligned_steps() -> None:
    assert longer(1024, 0.05) == 1080 and longer(16384, 0.05) == 17208 and longer(8, 0.001) == 16


@pytest.mark.parametrize(("trans", "expected"), [(False, ((4096, 1080), 1080)), (True, ((4304, 1024), 4304))])
def test_a_gemv_reads_a_longer_reduction_into_the_same_output(trans: bool, expected: tuple) -> None:
    assert gemv_shapes(4096, 1024, trans, 0.05) == expected


def test_a_gemm_keeps_its_output_and_lengthens_k() -> None:
    assert gemm_shapes(4096, 4096, 4096, 0.05) == ((4096, 4304), (4304, 4096))
