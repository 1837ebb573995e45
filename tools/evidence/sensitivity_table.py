"""Render the A/B gate's sensitivity table (per case: the planted slowdown's measured Δ and verdict at each plant, the
smallest caught) from the ab.json of planted A/B runs.

    python3 tools/evidence/sensitivity_table.py AB_JSON...                      # print the Markdown section
    python3 tools/evidence/sensitivity_table.py AB_JSON... --page evidence/ab.md    # rewrite the page's section

Each AB_JSON is the ab.json of a ``python -m gpuperf ab`` run with ``--head-env GPUPERF_SLOWDOWN=F -- … -p
tools.gpu_host.slowdown`` (tools/gpu_host/ab_sensitivity_device.sh makes them on one GPU), one run per plant. The
section lies between ``gpuperf.ab.sensitivity``'s START and END markers. Exit 0 when done, 2 when the input or the page
is wrong (the message names the fix).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpuperf.ab.sensitivity import (END, START, PlantedRun, SensitivityError, planted_run,  # noqa: E402
                                    sensitivity_section)
from tools.evidence import page_section  # noqa: E402


def _planted(name: str) -> PlantedRun:
    try:
        document = json.loads(Path(name).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SensitivityError(f"{name}: not JSON ({exc.msg} at line {exc.lineno}): pass an ab.json") from None
    return planted_run(document, name)


def main(argv: list[str] | None = None) -> int:
    parser = page_section.parser("tools/evidence/sensitivity_table.py", __doc__)
    parser.add_argument("runs", nargs="+", metavar="AB_JSON", help="the ab.json of a planted A/B run")
    return page_section.run(parser, argv,
                            lambda args: sensitivity_section([_planted(name) for name in args.runs], args.runs),
                            (START, END), (SensitivityError,),
                            lambda args: f"sensitivity section rewritten from {len(args.runs)} runs")


if __name__ == "__main__":
    sys.exit(main())
