"""The commands of ``python -m gpuperf``, one module a command (``history`` and ``baseline`` with their
subcommands), each adding its own parser to the front door's (``gpuperf/cli.py``); what they share (``CliError``, the
exit codes, the parser, the extras) is ``common.py``.

PYTEST_DONT_REWRITE
"""
