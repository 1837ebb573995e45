"""pytest wiring: options, hooks and fixtures that connect the layers above to a test run.

PYTEST_DONT_REWRITE
"""
