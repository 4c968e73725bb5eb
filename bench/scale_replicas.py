#!/usr/bin/env python3
"""Benchmark (issue 14, goal 4): many requests over many replicas, and the cost per request as the
replicas grow.

    python3 bench/scale_replicas.py [--sim PATH] [--requests N] [--replicas R] [--threads N] [--sweep]

The case: N generated requests (default 10,000,000) over R replicas (default 1,000), Poisson arrivals
at 4 requests/s per replica (about 60 % of what one Llama-3-8B replica on an A100-80GB serves with
these lengths), lognormal prompts (median 500 tokens, at most 8,000), Pareto outputs (shape 1.5,
scale 50, at most 2,000), chunked prefill, the roofline (the defaults), --log summary. Prints the
wall time, the CPU time, the peak memory (max RSS) and the microseconds of CPU per request. The goal:
10 M requests over 1,000 replicas in under 2 minutes on a 2-core machine.

sim splits the replicas over as many threads as the machine runs at once unless --threads says
otherwise (--threads 1 keeps them on one).

--sweep instead runs 200,000 requests at 4 requests/s per replica on 1, 10, 100, 1,000 and 4,000
replicas: the CPU per request should not grow with the replicas.
"""
import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from replay_100k import ROOT, db_megabytes, run_once  # noqa: E402
from run_1m import WORKLOAD  # noqa: E402  (the same generated workload)



def case(sim, tmp, n, replicas, threads):
    toml = os.path.join(tmp, f"w{n}_{replicas}.toml")
    with open(toml, "w") as f:
        f.write(WORKLOAD.format(n=n, rate=4.0 * replicas, scale=50))
    db = os.path.join(tmp, "s.db")
    wall, cpu, rss = run_once([sim, "--trace", toml, "--replicas", str(replicas), "--policy", "chunked-prefill",
                               "--db", db, "--log", "summary", "--quiet"]
                              + ([] if threads is None else ["--threads", str(threads)]))
    db_megabytes(db)
    print(f"{n:>10} {replicas:>8} {wall:>8.2f} {cpu:>8.2f} {rss:>8.0f} {1e6 * cpu / n:>10.2f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sim", default=os.path.join(ROOT, "build", "sim", "sim"))
    ap.add_argument("--requests", type=int, default=10_000_000)
    ap.add_argument("--replicas", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=None, help="--threads passed to sim (default: sim's)")
    ap.add_argument("--sweep", action="store_true", help="the CPU per request on 1 to 4,000 replicas")
    a = ap.parse_args()
    print(f"{'requests':>10} {'replicas':>8} {'wall s':>8} {'CPU s':>8} {'peak MB':>8} {'CPU us/req':>10}")
    with tempfile.TemporaryDirectory(prefix="servesim-scale-") as tmp:
        if a.sweep:
            for replicas in (1, 10, 100, 1000, 4000):
                case(a.sim, tmp, 200_000, replicas, a.threads)
        else:
            case(a.sim, tmp, a.requests, a.replicas, a.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
