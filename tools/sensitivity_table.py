"""Render the A/B gate's sensitivity table (per case: the planted slowdown's measured Δ and verdict at each plant, the
smallest caught) from the ab.json of planted A/B runs.

    python3 tools/sensitivity_table.py AB_JSON...                      # print the Markdown section
    python3 tools/sensitivity_table.py AB_JSON... --page docs/ab.md    # rewrite the page's section

Each AB_JSON is the ab.json of a ``python -m gpuperf ab`` run with ``--head-env GPUPERF_SLOWDOWN=F -- … -p
tools.slowdown`` (tools/ab_sensitivity_device.sh makes them on one GPU), one run per plant. The section lies between
``gpuperf.ab.sensitivity``'s START and END markers. Exit 0 when done, 2 when the input or the page is wrong (the
message names the fix).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuperf.ab.sensitivity import (SensitivityError, planted_run, replace_sensitivity_section,  # noqa: E402
                                    sensitivity_section)
from gpuperf.output.readme import ReadmeError  # noqa: E402
from gpuperf.store.atomic import write_atomically  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/sensitivity_table.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="AB_JSON", help="the ab.json of a planted A/B run")
    parser.add_argument("--page", help="rewrite this page's generated section instead of printing it")
    args = parser.parse_args(argv)
    try:
        runs = []
        for name in args.runs:
            try:
                document = json.loads(Path(name).read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise SensitivityError(f"{name}: not JSON ({exc.msg} at line {exc.lineno}): pass an ab.json") from None
            runs.append(planted_run(document, name))
        section = sensitivity_section(runs, args.runs)
        if args.page is None:
            print(section)
            return 0
        page = Path(args.page)
        write_atomically(page, replace_sensitivity_section(page.read_text(encoding="utf-8"), section))
    except (SensitivityError, ReadmeError, OSError) as exc:
        print(f"tools/sensitivity_table.py: {exc}", file=sys.stderr)
        return 2
    print(f"{args.page}: sensitivity section rewritten from {len(args.runs)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
