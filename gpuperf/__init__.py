"""gpuperf: a pytest performance-regression suite for cuBLAS and custom CUDA kernels."""

__version__ = "0.1.0"
