"""Kernel records, pure: names, splitting a traced batch into calls, spans, identities and their changes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuperf.measure.kernel_records import (FLUSH_KERNEL, HOLD_KERNEL, Kernel, KernelActivity, call_kernels, demangle,
                                            describe_change, ncu_command, note_code, short_name, span_s, split_calls)
from gpuperf.measure.stream_check import stray_kernels
from test_kernel_names import FA3

CUTLASS = "_ZN7cutlass7Kernel2I42cutlass_80_simt_sgemm_128x32_8x5_nn_align1EEvNT_6ParamsE"
GEMVX = "_ZN8internal5gemvx6kernelIfLi7EEEvPT_i"


@pytest.mark.parametrize(("symbol", "name"), [
    (GEMVX, "gemvx::kernel"),  # a generic name keeps its namespace; template arguments and parameters go
    ("_Z17gemv2T_kernel_valIifEvT_T0_", "gemv2T_kernel_val"),
    ("_ZN8internal5gemvx6kernelIfLb0EEENSt9enable_ifIXntT0_EvE4typeEPT_i", "gemvx::kernel"),  # a return type goes
    (CUTLASS, "Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>"),  # a generic wrapper keeps what it wraps
    ("nvjet_sm90_tst_128x128_64x4_1x2_h_bz_coopA_NNT", "nvjet_sm90_tst_128x128_64x4_1x2_h_bz_coopA_NNT"),
    ("gpuperf_flush", "gpuperf_flush"),
    ("_Znot a symbol", "_Znot a symbol"),  # what cannot be demangled stays as it is
])
def test_short_names(symbol: str, name: str) -> None:
    assert short_name(symbol) == name


def activity(symbol: str, start_us: float, end_us: float, grid: tuple[int, int, int] = (8, 1, 1),
             stream: int = 13) -> KernelActivity:
    return KernelActivity(symbol, round(start_us * 1000), round(end_us * 1000), grid=grid, block=(128, 1, 1),
                          registers=40, shared_memory=1024, stream=stream)


NVJET = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNN"


def held_batch(*calls: list[KernelActivity]) -> list[KernelActivity]:
    """A traced batch on the measuring stream 13: a hold, then a flush before every call and one closing the last;
    each call's kernels are given relative to the end of its flush."""
    records, now = [activity(HOLD_KERNEL, 0, 100)], 100.0
    for call in calls:
        records.append(activity(FLUSH_KERNEL, now, now + 30))
        now += 30
        records += [KernelActivity(a.symbol, a.start_ns + round(now * 1000), a.end_ns + round(now * 1000),
                                   grid=a.grid, stream=a.stream) for a in call]
        joined = [a for a in call if a.stream == 13 or a.symbol != "tail"]  # "tail" is never joined back
        now = max([now] + [a.end_ns / 1000 + now for a in joined]) + 1
    records.append(activity(FLUSH_KERNEL, now, now + 30))
    return records


def test_kernels_on_the_measuring_stream_are_never_strays() -> None:
    assert stray_kernels(held_batch([activity("gemm", 0, 8)], [activity("gemm", 0, 8)]), 2) is None


def test_side_streams_forked_and_joined_inside_the_call_are_part_of_it() -> None:
    """The multi-stream batched case: sub-batches on streams 21-24 between the call's two separators."""
    call = [activity("batched", 1, 40, stream=21), activity("batched", 1, 42, stream=22)]
    assert stray_kernels(held_batch(call, call), 2) is None


def test_a_kernel_on_another_stream_that_ran_during_the_hold_is_named_with_its_stream() -> None:
    """PyTorch's own stream: torch.mm ran while the hold kept the measuring stream waiting."""
    records = held_batch([], []) + [activity(NVJET, 10, 60, stream=7), activity(NVJET, 61, 99, stream=7)]
    stray = stray_kernels(records, 2)
    assert stray is not None and stray.measuring_stream == 13 and len(stray.kernels) == 2
    line = stray.describe()
    assert line.startswith(f"fn launched 1 kernel a call on stream 7 ({NVJET}), not on the measuring stream 13")
    assert "\n" not in line and "stream.torch" in line and "join" in line


def test_a_side_stream_kernel_that_outlives_the_next_separator_is_a_stray() -> None:
    """Work forked onto a side stream and never joined: it is still running when the next flush starts."""
    records = held_batch([activity("gemm", 0, 8), activity("tail", 2, 35, stream=22)], [activity("gemm", 0, 8)])
    stray = stray_kernels(records, 2)
    assert stray is not None and [a.symbol for a in stray.kernels] == ["tail"]
    assert "1 kernel in 2 calls on stream 22 (tail)" in stray.describe()


def test_kernels_before_the_first_separator_or_after_the_last_are_strays() -> None:
    records = held_batch([activity("gemm", 0, 8)])
    last_end = max(a.end_ns for a in records) / 1000
    records += [activity("early", -50, -40, stream=5), activity("late", last_end + 1, last_end + 9, stream=5)]
    stray = stray_kernels(records, 1)
    assert stray is not None and [a.symbol for a in stray.kernels] == ["early", "late"]


def test_without_separators_nothing_can_be_judged() -> None:
    assert stray_kernels([activity("gemm", 0, 8, stream=7)], 1) is None


def test_a_launcher_s_code_joins_the_identity_unless_the_suite_noted_its_own() -> None:
    calls = [[activity("user_kernel", 0, 8), activity("suite_kernel", 8, 9)]]
    note_code("suite_kernel", "a" * 12)
    kernels = call_kernels(calls, {"user_kernel": "b" * 12, "suite_kernel": "c" * 12})
    assert [k.code for k in kernels] == ["b" * 12, "a" * 12]


def test_a_batch_splits_into_calls_at_the_separators_in_start_order() -> None:
    records = [activity("gemm", 50, 58), activity(FLUSH_KERNEL, 10, 45), activity(HOLD_KERNEL, 0, 9),
               activity("reduce", 59, 60), activity(FLUSH_KERNEL, 61, 90), activity("gemm", 95, 103),
               activity("reduce", 104, 105.5)]
    calls = split_calls(records)
    assert [[a.symbol for a in call] for call in calls] == [["gemm", "reduce"], ["gemm", "reduce"]]
    assert [span_s(call) for call in calls] == pytest.approx([10e-6, 10.5e-6])


def test_a_call_on_several_streams_spans_its_first_start_to_its_last_end() -> None:
    call = [activity("batched", 0, 40), activity("batched", 1, 42), activity("batched", 2, 41)]
    assert span_s(call) == pytest.approx(42e-6)


def test_the_identity_is_the_most_common_sequence_with_median_durations() -> None:
    calls = [[activity("gemm", 0, 8), activity("reduce", 8, 9)], [activity("gemm", 0, 10), activity("reduce", 10, 12)],
             [activity("other", 0, 30)], [activity("gemm", 0, 9), activity("reduce", 9, 10)]]
    kernels = call_kernels(calls)
    assert [k.name for k in kernels] == ["gemm", "reduce"]
    assert kernels[0].median_us == pytest.approx(9.0) and kernels[1].median_us == pytest.approx(1.0)
    assert kernels[0].grid == (8, 1, 1) and kernels[0].registers == 40 and kernels[0].shared_memory == 1024


def kernel(name: str, grid: tuple[int, int, int] = (8, 1, 1), median_us: float | None = 5.0,
           cluster: tuple[int, int, int] = (0, 0, 0)) -> Kernel:
    return Kernel(name=name, grid=grid, block=(128, 1, 1), cluster=cluster, registers=40, median_us=median_us)


@pytest.mark.parametrize(("recorded", "measured", "note"), [
    ([kernel("gemv2T_kernel_val")], [kernel("gemv2T_kernel_val")], "same kernels"),
    ([kernel("gemv2T_kernel_val")], [kernel("gemv2N_kernel")], "kernel changed: gemv2T_kernel_val → gemv2N_kernel"),
    ([kernel("gemm")], [kernel("gemm"), kernel("splitKreduce_kernel")],
     "kernel changed: gemm → gemm + splitKreduce_kernel"),
    ([kernel("gemm", grid=(8, 1, 1))], [kernel("gemm", grid=(16, 1, 1))],
     "same kernels; launch changed: gemm grid 8x1x1 → 16x1x1"),
    ([kernel("nvjet", cluster=(2, 1, 1))], [kernel("nvjet", cluster=(1, 2, 1))],
     "same kernels; launch changed: nvjet cluster 2x1x1 → 1x2x1"),
    ([], [kernel("gemm")], ""),  # an entry recorded without kernel records: nothing to say
])
def test_describe_change(recorded: list[Kernel], measured: list[Kernel], note: str) -> None:
    assert describe_change(recorded, measured) == note


def test_kernels_round_trip_through_their_dict_form() -> None:
    original = Kernel("Kernel2<x>", (4, 2, 1), (256, 1, 1), (2, 1, 1), 96, 49152, 12.3456)
    assert Kernel.from_dict(original.to_dict()) == Kernel("Kernel2<x>", (4, 2, 1), (256, 1, 1), (2, 1, 1), 96,
                                                           49152, 12.35)
    assert "cluster" not in kernel("k").to_dict()  # no cluster: the field is left out


@pytest.mark.parametrize(("data", "message"), [
    ({"grid": [1, 1, 1]}, "needs a non-empty name"),
    ({"name": "k", "grid": [1, 1]}, "grid must be three non-negative integers"),
    ({"name": "k", "registers": -1}, "registers must be a non-negative integer"),
    ({"name": "k", "median_us": "fast"}, "median_us must be a non-negative number"),
])
def test_a_malformed_kernel_is_refused_naming_the_field(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Kernel.from_dict(data)


def test_a_wrapper_s_pattern_finds_what_it_wraps_in_the_demangled_name() -> None:
    """ncu matches the demangled name, where namespaces and guards stand between a wrapper and what it wraps."""
    pattern = kernel(short_name(FA3)).pattern
    assert pattern == "device_kernel<.*FlashAttnFwdSm90" and re.search(pattern, FA3)
    assert re.search(kernel("Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>").pattern, demangle(CUTLASS))
    assert kernel("gemvx::kernel").pattern == "gemvx::kernel"


def test_the_profiling_command_targets_the_call_s_longest_kernel() -> None:
    kernels = [kernel("Kernel2<cutlass_80_simt_sgemm>", median_us=40.0), kernel("splitKreduce_kernel", median_us=2.0)]
    command = ncu_command(kernels, "perf_tests/test_gemm.py::test_gemm_perf[fp32-nn-4096x4096x4096]")
    assert command.startswith("ncu --kernel-name-base demangled --kernel-name 'regex:Kernel2<.*cutlass_80_simt_sgemm' "
                              "--launch-skip 1 --launch-count 1 --set full ")
    assert command.endswith("'perf_tests/test_gemm.py::test_gemm_perf[fp32-nn-4096x4096x4096]' -p no:cacheprovider")
    assert ncu_command([], "x") == ""


# --- names of every form (the committed corpus of real symbols: tests/test_kernel_names.py) ------------------

LAYER_NORM = ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::Half, float>(int, float, "
              "c10::Half const*, c10::Half const*, c10::Half const*, float*, float*, c10::Half*)")
GELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::gelu_kernel_impl("
        "at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, "
        "at::native::(anonymous namespace)::gelu_kernel_impl(at::TensorIteratorBase&)::{lambda()#1}::operator()() "
        "const::{lambda(float)#1}, std::array<char*, 2ul>)")


@pytest.mark.parametrize(("symbol", "name"), [
    (LAYER_NORM, "vectorized_layer_norm_kernel"),  # an anonymous namespace's parentheses are no parameter list
    (GELU, "vectorized_elementwise_kernel"),  # lambdas and operator() inside template arguments
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>(float*, float const*, "
     "int, int, int, bool const*, int, bool)", "softmax_warp_forward"),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<"
     "float, float, float, at::native::MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<"
     "float, float, float, at::native::MulFunctor<float> > const&)::{lambda(int)#1}>(int, {lambda(int)#1})",
     "elementwise_kernel"),
    ("void cub::CUB_200200_900_NS::DeviceRadixSortOnesweepKernel<cub::CUB_200200_900_NS::DeviceRadixSortPolicy<"
     "long, long, int>::Policy900, false, long>(int*, int*, long*)", "DeviceRadixSortOnesweepKernel"),
    ("void f<(int)3>(int (*)(float))", "f"),  # a function type among the parameters
    ("void x::y<z>::kernel<float>(float*)", "y::kernel"),  # a generic name keeps its (template) scope's name
    ("void a::operator<<(int)", "operator<<"),  # an operator's brackets are part of its name
    ("triton_poi_fused_add_gelu_0", "triton_poi_fused_add_gelu_0"),  # extern "C": Triton, Inductor
    ("", "<unnamed kernel>"),  # a record with no name: a stable placeholder, never ''
    ("  ", "<unnamed kernel>"),
])
def test_short_names_of_every_form(symbol: str, name: str) -> None:
    assert short_name(symbol) == name


def test_two_symbols_that_share_a_short_name_are_two_kernels() -> None:
    add = GELU.replace("gelu_kernel_impl", "add_kernel_impl")
    assert short_name(add) == short_name(GELU)
    calls = [[activity(GELU, 0, 10)], [activity(GELU, 20, 30)]]
    other = [[activity(add, 0, 10)], [activity(add, 20, 30)]]
    recorded, measured = call_kernels(calls), call_kernels(other)
    assert recorded[0].symbol != measured[0].symbol
    change = describe_change(recorded, measured)
    assert change.startswith("kernel changed: vectorized_elementwise_kernel …gelu_kernel_impl… → "
                             "…add_kernel_impl… (same short name, another symbol ")
    assert describe_change(recorded, call_kernels(calls)) == "same kernels"
    assert Kernel.from_dict(recorded[0].to_dict()) == recorded[0]


def test_a_kernel_without_its_symbol_digest_is_compared_by_the_rest() -> None:
    """An entry recorded before the suite kept symbol digests: nothing to compare, no change claimed."""
    measured = call_kernels([[activity(GELU, 0, 10)]])
    old = Kernel.from_dict({k: v for k, v in measured[0].to_dict().items() if k != "symbol"})
    assert describe_change((old,), measured) == "same kernels"
    with pytest.raises(ValueError, match="symbol must be 12 hex digits"):
        Kernel.from_dict({**measured[0].to_dict(), "symbol": "xyz"})


def test_a_changed_config_is_named_with_the_code_change(tmp_path: Path) -> None:
    """A Triton kernel's compile options come from its cache group's metadata file; a change of code says whether
    the configuration (and the launch) changed with it."""
    from gpuperf.measure.launchers import triton_config

    metadata = tmp_path / "k.json"
    metadata.write_text('{"num_warps": 8, "num_stages": 1, "num_ctas": 1, "maxnreg": null, "shared": 0}')
    assert triton_config({"k.json": str(metadata), "k.cubin": "x"}) == "num_warps=8 num_stages=1 num_ctas=1"
    assert triton_config({"__grp__k.json": str(metadata)}) == "" and triton_config(None) == ""
    before = Kernel("triton_poi_fused_add_gelu_0", (262144, 1, 1), (128, 1, 1), code="65ddfd67e7ad",
                    config="num_warps=4 num_stages=1")
    after = Kernel("triton_poi_fused_add_gelu_0", (65536, 1, 1), (256, 1, 1), code="cd9b810deff6",
                   config="num_warps=8 num_stages=1")
    assert describe_change((before,), (after,)) == (
        "kernel changed: triton_poi_fused_add_gelu_0 code 65ddfd67e7ad → cd9b810deff6 (same name, other code: "
        "config num_warps=4 num_stages=1 → num_warps=8 num_stages=1; grid 262144x1x1 → 65536x1x1; "
        "block 128x1x1 → 256x1x1)")
    same = Kernel(after.name, before.grid, before.block, code="cd9b810deff6", config=before.config)
    assert describe_change((before,), (same,)).endswith(
        "(same name, other code: same config num_warps=4 num_stages=1: its source or constants changed)")
    assert Kernel.from_dict(after.to_dict()) == after
    with pytest.raises(ValueError, match="config must be one printable line"):
        Kernel.from_dict({**after.to_dict(), "config": "a\nb"})
