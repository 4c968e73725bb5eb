#!/usr/bin/env python3
"""Benchmark: 1,000,000 generated requests through `continuous` with the unit backend.

Prints the wall time, simulated requests per second and the peak memory (max RSS) of the `sim`
process, which includes loading the workload, simulating and writing every row to SQLite.

    python3 bench/run_1m.py [--sim PATH] [--requests N] [--keep]

The workload: Poisson arrivals at 3.5 requests per iteration (about 85 % of what 256 slots
serve), prompts lognormal (median 500, sigma 1, at most 8,192), outputs Pareto (shape 1.5,
scale 20, at most 2,048); max_num_seqs 256.
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

WORKLOAD = """[generate]
requests = {n}
seed = 1
[generate.arrival]
process = "poisson"
rate = 3.5
[generate.prompt_tokens]
dist = "lognormal"
median = 500.0
sigma = 1.0
max = 8192
[generate.output_tokens]
dist = "pareto"
shape = 1.5
scale = 20
max = 2048
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    default_sim = shutil.which("sim") or os.path.join(here, "..", "build", "sim", "sim")
    ap.add_argument("--sim", default=default_sim, help="the sim executable (default: %(default)s)")
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    if not os.path.exists(args.sim):
        print(f"no sim executable at {args.sim}; build first or pass --sim", file=sys.stderr)
        return 2

    tmp = tempfile.mkdtemp(prefix="servesim-bench-")
    try:
        wl = os.path.join(tmp, "bench.toml")
        with open(wl, "w") as f:
            f.write(WORKLOAD.format(n=args.requests))
        db = os.path.join(tmp, "bench.db")
        cmd = [args.sim, "--backend", "unit", "--policy", "continuous", "--trace", wl,
               "--db", db, "--max-num-seqs", "256"]
        start = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wall = time.perf_counter() - start
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        if proc.returncode != 0:
            print(proc.stdout)
            print(f"sim exited with {proc.returncode}", file=sys.stderr)
            return 1
        iterations = subprocess.run(
            ["sqlite3", db, "SELECT count(*) FROM iterations"], stdout=subprocess.PIPE,
            text=True).stdout.strip() if shutil.which("sqlite3") else "?"
        print(f"requests:            {args.requests:,}")
        print(f"iterations:          {iterations}")
        print(f"wall time:           {wall:.2f} s")
        print(f"simulated req/s:     {args.requests / wall:,.0f}")
        print(f"peak memory (RSS):   {peak_kib / 1024:.0f} MiB")
        print(f"database size:       {os.path.getsize(db) / 2**20:.0f} MiB")
        return 0
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    sys.exit(main())
