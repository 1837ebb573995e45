"""``python -m gpuperf``: the command line lives in ``gpuperf.cli``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import sys

from gpuperf.cli import main

if __name__ == "__main__":
    sys.exit(main())
