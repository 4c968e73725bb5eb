#!/usr/bin/env python3
"""Benchmark (issue 12): the HTML report of a run of a million requests must stay under 5 MB and
open in under 2 s.

    python3 bench/report_html.py [--sim PATH] [--requests N] [--keep DIR]

Makes the run of bench/run_1m.py's default case (a [generate] workload of N requests, chunked
prefill on the roofline, the database on with sim's default --log requests), writes its report with
`sim report --html`, and loads the page in headless Chromium the way tests/html_report_browser_test.py
does. Prints the run's and the report's wall time, the page's size, and how long Chromium took to
load and render it, beside Chromium's time for an empty page (its start-up); the difference is the
page's own cost. Fails when the page's self-check finds a chart that drew nothing or a script error.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
from html_report_browser_test import load  # noqa: E402
from replay_100k import ROOT  # noqa: E402
from run_1m import WORKLOAD  # noqa: E402

LIMIT_BYTES = 5 * 1024 * 1024
LIMIT_SECONDS = 2.0


def timed(cmd):
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", default=os.path.join(ROOT, "build", "sim", "sim"))
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--keep", metavar="DIR", help="leave the database and the page in DIR")
    a = ap.parse_args()
    if not os.path.exists(a.sim):
        sys.exit(f"no sim executable at {a.sim}; build first or pass --sim")
    if shutil.which("chromium") is None:
        sys.exit("no chromium on the PATH (scripts/install-deps.sh installs it)")
    tmp = a.keep or tempfile.mkdtemp(prefix="servesim-report-")
    os.makedirs(tmp, exist_ok=True)
    try:
        toml = os.path.join(tmp, "gen.toml")
        with open(toml, "w") as f:
            f.write(WORKLOAD.format(n=a.requests, rate=8.0, scale=50))
        db, page = os.path.join(tmp, "run.db"), os.path.join(tmp, "report.html")
        if os.path.exists(db):
            os.remove(db)
        run_s = timed([a.sim, "--trace", toml, "--policy", "chunked-prefill", "--db", db])
        report_s = timed([a.sim, "report", "--db", db, "--html", page])
        size = os.path.getsize(page)

        profile = os.path.join(tmp, "profile")
        empty = os.path.join(tmp, "empty.html")
        with open(empty, "w") as f:
            f.write('<!DOCTYPE html><pre id="servesim-selfcheck">{"charts_expected": 0, "charts_drawn": 0, '
                    '"failed": [], "errors": []}</pre>')
        load(empty, profile)  # the first start of a profile is slower: not counted
        baseline = min(load(empty, profile)[1] for _ in range(3))
        runs = [load(page, profile) for _ in range(3)]
        check = runs[0][0]
        browser = min(seconds for _, seconds in runs)

        print(f"requests            {a.requests:>12,}")
        print(f"sim run             {run_s:>12.2f} s")
        print(f"sim report --html   {report_s:>12.2f} s")
        print(f"page size           {size / 2**20:>12.2f} MiB  (limit {LIMIT_BYTES / 2**20:.0f} MiB)")
        print(f"chromium, page      {browser:>12.2f} s   (best of 3: start, load, render, dump)")
        print(f"chromium, empty     {baseline:>12.2f} s   (its start-up alone)")
        print(f"page's own cost     {browser - baseline:>12.2f} s   (limit {LIMIT_SECONDS:.1f} s)")
        print(f"self-check          {check}")
        ok = (size < LIMIT_BYTES and browser - baseline < LIMIT_SECONDS and not check["errors"]
              and check["charts_drawn"] == check["charts_expected"])
        return 0 if ok else 1
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
