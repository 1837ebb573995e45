"""Installing gpuperf: the command every hint prints (``command.py``) and the CUDA libraries its extras bring as
wheels (``wheel_libraries.py``).

PYTEST_DONT_REWRITE
"""
