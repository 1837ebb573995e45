"""The pytest options a wrapper's selection may not hold: those that write where the wrapper decides.

``python -m gpuperf ab … -- SELECTION`` runs the selection in the caller's checkout (the head side) and in a
worktree; ``ci/gate.sh ARGS`` runs it as the merge gate. An option among them that writes a file would write past
the wrapper: ``--update-baselines`` would rewrite the caller's committed baseline with the very regression the run
caught, ``--results-dir`` and ``--junitxml`` would move the files the wrapper reads, ``--history`` would append
where the wrapper's own ``--history`` decides. Each is refused before anything runs, with the fix.

``python -m gpuperf.wiring.selection_guard WRAPPER [ALLOWED…] -- ARGS…`` is the check for the shell wrappers in
``ci/``: exit 4 with one line when ``ARGS`` hold a writing option, else 0.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

#: Each writing option of pytest and the plugin, and what it would do inside a wrapper.
WRITING_OPTIONS = {
    "--update-baselines": "would rewrite baselines/<gpu>.yaml in the tree it runs in (the caller's checkout) "
                          "with what this run measured; record baselines with pytest perf_tests --update-baselines "
                          "(or ci/update-baselines.sh) on their own",
    "--results-dir": "would move the results the wrapper reads; the wrapper chooses where they go (ab: --out, "
                     "ci/gate.sh: $GPUPERF_RESULTS)",
    "--history": "would append where the wrapper decides; pass it as the wrapper's own --history",
    "--junitxml": "would write over the report the wrapper writes (ci/gate.sh: junit.xml beside the results); "
                  "leave it out",
    "--junit-xml": "would write over the report the wrapper writes (ci/gate.sh: junit.xml beside the results); "
                   "leave it out",
}
#: The exit code of a refused selection: pytest's and ab's usage error.
EXIT_USAGE = 4


def writing_options(selection: Sequence[str], allowed: Sequence[str] = ()) -> list[str]:
    """The writing options (``WRITING_OPTIONS``, but ``allowed``) among ``selection``, as ``--name`` or
    ``--name=value`` (pytest takes no abbreviation of a long option); what follows a ``--`` is not looked at."""
    found = []
    for word in selection:
        if word == "--":
            break
        name = word.partition("=")[0]
        if name in WRITING_OPTIONS and name not in allowed and name not in found:
            found.append(name)
    return found


def refusal(wrapper: str, selection: Sequence[str], allowed: Sequence[str] = ()) -> str:
    """The one line refusing ``selection`` in ``wrapper`` (``""`` when it holds no writing option)."""
    found = writing_options(selection, allowed)
    if not found:
        return ""
    return f"{wrapper}: " + "; ".join(f"{name} in the pytest selection {WRITING_OPTIONS[name]}" for name in found)


def main(argv: Sequence[str]) -> int:
    words = list(argv)
    split = words.index("--") if "--" in words else len(words)
    wrapper, *allowed = words[:split] or ["gpuperf"]
    message = refusal(wrapper, words[split + 1:], allowed)
    if message:
        print(message, file=sys.stderr)
        return EXIT_USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
