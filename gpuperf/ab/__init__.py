"""The A/B gate (``python -m gpuperf ab``): the head against its base on one GPU, in turns, judged on paired
rounds. From the pure parts up: ``messages`` (what a side and the coordinator say), ``paired`` (the rule),
``schedule`` (whose turn it is), ``report`` (the table, ``summary.md``, ``ab.json``), ``side`` (a pytest process's
end: a plugin whose only tie to the measuring session is the turn protocol, ``wiring/turns.py``) and
``coordinator`` (the run: worktrees, both sides' processes, the outputs and exit code).

PYTEST_DONT_REWRITE
"""
