"""Short names on a corpus no one here wrote: 4,581 kernel symbols that PyTorch's, cuBLAS's and cuDNN's CUDA
libraries hold (gathered on an H200 by tools/gpu_host/kernel_symbols.py: ``cuobjdump -symbols`` of each library's sm_90
cubins, the ``STO_ENTRY`` functions, as CUPTI names them), and on any text at all."""

from __future__ import annotations

import gzip
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuperf.measure.kernel_names import UNNAMED_KERNEL, demangle, short_name, symbol_digest
from gpuperf.measure.kernel_records import KernelActivity, call_kernels, describe_change

CORPUS = Path(__file__).parent / "data" / "kernel-symbols.tsv.gz"


@pytest.fixture(scope="module")
def corpus() -> list[tuple[str, str]]:
    rows = [line.split("\t", 1) for line in gzip.open(CORPUS, "rt").read().splitlines()]
    return [(library, symbol) for library, symbol in rows]


def test_the_corpus_is_real_symbols_of_the_three_libraries(corpus: list[tuple[str, str]]) -> None:
    libraries = {library for library, _ in corpus}
    assert len(corpus) >= 1000 and len({symbol for _, symbol in corpus}) == len(corpus)
    for family in ("libtorch_cuda", "libcublas", "libcudnn"):
        assert any(library.startswith(family) for library in libraries), family
    assert sum(symbol.startswith("_Z") for _, symbol in corpus) > 0.9 * len(corpus)  # C++ kernels, mangled
    assert any("(anonymous namespace)" in demangle(symbol) for _, symbol in corpus)
    assert any("{lambda(" in demangle(symbol) for _, symbol in corpus)


@pytest.mark.long
def test_every_symbol_gets_a_short_name_that_is_a_name(corpus: list[tuple[str, str]]) -> None:
    """Non-empty, not the whole declaration: no parameter list, no return type, no unread mangling."""
    wrong = []
    for library, symbol in corpus:
        name = short_name(symbol)
        if (not name or name == UNNAMED_KERNEL or name.startswith(("_Z", "void ", "::")) or name.endswith("::")
                or "(" in name.split("<", 1)[0] or " " in name.split("<", 1)[0]):
            wrong.append(f"{library}: {symbol[:80]} → {name[:80]!r}")
    assert not wrong, f"{len(wrong)} of {len(corpus)}:\n" + "\n".join(wrong[:20])


def test_symbols_that_share_a_short_name_keep_distinct_identities(corpus: list[tuple[str, str]]) -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for _, symbol in corpus:
        by_name[short_name(symbol)].append(symbol)
    shared = {name: symbols for name, symbols in by_name.items() if len(symbols) > 1}
    assert len(shared) > 50  # e.g. vectorized_elementwise_kernel: one name, a kernel per operator and dtype
    for name, symbols in shared.items():
        assert len({symbol_digest(symbol) for symbol in symbols}) == len(symbols), name
    first, second = by_name["vectorized_elementwise_kernel"][:2]
    recorded = call_kernels([[KernelActivity(first, 0, 1000)]])
    measured = call_kernels([[KernelActivity(second, 0, 1000)]])
    assert describe_change(recorded, measured).startswith("kernel changed: vectorized_elementwise_kernel symbol ")


def test_names_the_demangler_gives_up_on_are_read_from_the_mangling(corpus: list[tuple[str, str]]) -> None:
    given_up = [symbol for _, symbol in corpus if symbol.startswith("_Z") and demangle(symbol) == symbol]
    assert given_up, "the corpus holds CUTLASS symbols libstdc++'s demangler cannot read"
    assert {short_name(symbol) for symbol in given_up} >= {"Kernel<ImplicitGemmConvolution>",
                                                          "device_kernel<enable_3x_kernel_for_sm9x>"}


@given(st.text(max_size=300))
def test_any_text_gets_a_non_empty_short_name(text: str) -> None:
    assert short_name(text)


@given(st.lists(st.sampled_from(["void ", "a", "::", "<", ">", "(", ")", "{lambda(int)#1}", "(anonymous namespace)",
                                 "operator()", "operator<", ", ", " const", "Kernel2", "_ZN", "7cutlass", "I", "E"]),
                max_size=40))
def test_any_declaration_shaped_text_gets_a_non_empty_short_name(parts: list[str]) -> None:
    assert short_name("".join(parts))
