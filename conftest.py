"""The suite's fixtures and options come from the gpuperf plugin (see gpuperf/plugin.py)."""

pytest_plugins = ["gpuperf.plugin"]
