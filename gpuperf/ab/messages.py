"""What a side of an A/B run and its coordinator say to each other: JSON lines on a Unix socket whose path the
coordinator passes in ``$GPUPERF_AB_SOCKET``, the side's name in ``$GPUPERF_AB_SIDE``, the run's threshold in
``$GPUPERF_AB_THRESHOLD``, and in a confirming pass the cases it is to measure in ``$GPUPERF_AB_ONLY``. The side
(``side.py``) says which suite tests it collected (``hello``), asks before each suite test (``start``), reports each
checked figure (``round``: answered ``again`` or ``done``) and says when it is finished (``end``); the coordinator
(``coordinator.py``) answers as the schedule (``schedule.py``) decides.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

SOCKET_ENV = "GPUPERF_AB_SOCKET"
SIDE_ENV = "GPUPERF_AB_SIDE"
#: The run's threshold (a fraction), which each side samples its rounds to.
THRESHOLD_ENV = "GPUPERF_AB_THRESHOLD"
#: A confirming pass's cases (a JSON list of case ids): its sides run only the tests of those.
ONLY_ENV = "GPUPERF_AB_ONLY"

# Requests (side → coordinator) and answers (coordinator → side).
HELLO, START, ROUND, END = "hello", "start", "round", "end"
GO, AGAIN, DONE = "go", "again", "done"

#: Set (to anything) where the sides stand a GPU in themselves (the harness's own tests: a conftest's synthetic GPU),
#: so ``coordinator.run`` does not ask this machine for one before they start.
NO_GPU_CHECK_ENV = "GPUPERF_AB_NO_GPU_CHECK"
