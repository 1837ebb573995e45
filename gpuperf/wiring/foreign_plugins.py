"""What a measuring session does about other projects' pytest plugins that would cost it time for nothing.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import sys

import pytest


def leave_out_unused_hypothesis(config: pytest.Config) -> None:
    """Unregister Hypothesis's pytest plugin when no collected test imported Hypothesis: at the terminal summary the
    plugin imports the whole library (1.3 s on an H200 host, 3 % of the gate) to report on tests that did not run.
    A session that imported it (a test module, ``--hypothesis-profile``) keeps the plugin and its report."""
    if "hypothesis" in sys.modules:
        return
    plugin = config.pluginmanager.get_plugin("hypothesispytest")
    if plugin is not None:
        config.pluginmanager.unregister(plugin)
