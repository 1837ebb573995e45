"""What the test modules read: case tables and their schemas, float64 correctness checks.

PYTEST_DONT_REWRITE
"""
