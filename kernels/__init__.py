"""The code under test: cuBLAS call wrappers (``blas_args``, ``cublas``, ``operands``) and custom CUDA kernels
(``custom_plan``: pure launch planning; ``custom``: NVRTC compilation and launching)."""
