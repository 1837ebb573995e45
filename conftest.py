"""The suite's fixtures and options come from the gpuperf plugin (see gpuperf/wiring/plugin.py)."""

pytest_plugins = ["gpuperf.wiring.plugin"]
