"""Persistent formats: every file gpuperf reads back or keeps, behind one reader and one atomic writer each.

PYTEST_DONT_REWRITE
"""
