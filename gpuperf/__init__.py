"""gpuperf: a pytest performance-regression suite for cuBLAS and custom CUDA kernels.

PYTEST_DONT_REWRITE
"""

__version__ = "0.1.0"
