"""How a number is taken: timing loop, statistics, the device and its clocks, peaks, work counts.

PYTEST_DONT_REWRITE
"""
