"""Rebuild docs/trend-page.png and docs/trend-case.png: every committed run (each results file under evidence/),
ingested into a temporary history, drawn by ``python -m gpuperf history page`` and photographed in headless
Chromium.

    python tools/evidence/trend_screenshot.py                 # writes docs/trend-page.png and docs/trend-case.png
    python tools/evidence/trend_screenshot.py --no-screenshot --work /tmp/trend   # the history and the site only

Needs Debian's ``chromium`` (apt-get install -y chromium) and Playwright's Python package for the pictures;
no browser is downloaded. The history is a new SQLite file under ``--work`` (a temporary folder by default).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from gpuperf import cli  # noqa: E402
from gpuperf.trend.paths import page_name_of  # noqa: E402
from gpuperf.history.database import History, sqlite_url  # noqa: E402

#: What is ingested: every committed results file (the fleet's runs, its validation and gate runs, the sealed
#: check's runs against shifted baselines, the demos'); what is not one (an A/B record, a probe's output) is skipped.
RUNS = [REPO / "evidence"]
#: The case page photographed: a custom kernel whose default changed and whose baseline was re-recorded.
CASE = "perf_tests/test_custom.py::test_custom_perf[optimized-4096x4096x4096-cold]"
VIEWPORT = {"width": 1400, "height": 1000}


def build(work: Path) -> Path:
    """Ingest the committed runs into ``work/history.sqlite`` and write the site to ``work/site``."""
    database = work / "history.sqlite"
    if database.exists():
        database.unlink()
    with History(sqlite_url(database)) as history:
        report = history.ingest(RUNS)
    for path, _ in report.refused:  # e.g. evidence/fleet/clock/*-clock-check.json, a probe's output
        print(f"skipped {path.relative_to(REPO)}: not a results file")
    if not report.added:
        raise SystemExit(f"no results file among {', '.join(str(p) for p in RUNS)}")
    print(f"ingested {len(report.added)} runs ({len(report.present)} already present) into {database}")
    site = work / "site"
    code = cli.main(["history", "--history", str(database), "page", "--out", str(site)])
    if code:
        raise SystemExit(code)
    return site


def photograph(site: Path, out: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no chromium: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    shots = [(site / "index.html", out / "trend-page.png"),
             (site / page_name_of("nvidia-h200", CASE), out / "trend-case.png")]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True)
        page = browser.new_page(viewport=VIEWPORT)
        for source, target in shots:
            page.goto(source.resolve().as_uri(), wait_until="load")
            page.wait_for_function("window.trendScreenDrawn && window.trendScreenDrawn()", timeout=30_000)
            page.screenshot(path=str(target))
            print(f"wrote {target}")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=None, help="where the history and the site go (default: a "
                                                                "temporary folder)")
    parser.add_argument("--out", type=Path, default=REPO / "docs", help="where the PNGs go (default docs/)")
    parser.add_argument("--no-screenshot", action="store_true", help="build the history and the site only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuperf-trend-") as scratch:
        work = args.work or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        site = build(work)
        if not args.no_screenshot:
            photograph(site, args.out)


if __name__ == "__main__":
    main()
