"""What people read: the terminal table, results files, the README section, plots, diffs.

PYTEST_DONT_REWRITE
"""
