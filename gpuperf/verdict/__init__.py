"""From a measurement to a verdict: baselines, anomaly rules, the gate, evidence accounting.

PYTEST_DONT_REWRITE
"""
