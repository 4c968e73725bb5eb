#!/usr/bin/env python3
"""Benchmark (issue 11, goal 1): the 100,000-request Azure conversation replay that Vidur's speed is
measured on, through `sim`, in the four cases of the issue:

    Llama-2-7B on one A100-80GB per replica, --max-num-seqs 128, roofline;
    continuous batching with --max-num-batched-tokens 4096, and chunked prefill at 512;
    on 1 and on 8 replicas.

    python3 bench/replay_100k.py [--sim PATH] [--trace CSV] [--log WHAT] [--threads N] [--repeat N]
                                 [--set K=V ...]

(--set leap=false runs every iteration one by one, to see what leaping over repeating decode
iterations saves; the results are the same. --sim build-pgo/sim/sim times the profile-guided build
of scripts/build-pgo.sh. sim splits the eight replicas over as many threads as the machine runs at
once unless --threads says otherwise: --threads 1 keeps them on one.)

Prints, per case, the wall time, the CPU time (user + system) and the peak memory (max RSS) of the
`sim` process, the best of --repeat runs (default 3), the database's size, and how many times
faster than Vidur that is; then, per policy, how many times one replica's wall time eight replicas
take (the issue's goal 3: at most 1.5). Vidur (PyPI 0.0.26) took 151 s for the same replay on this
2-core machine (issue 11; --vidur-seconds to give another figure), so 1,000x is about 0.15 s.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CASES = [("continuous", "4096", 1), ("continuous", "4096", 8), ("chunked-prefill", "512", 1),
         ("chunked-prefill", "512", 8)]


def run_once(cmd):
    """Wall time, CPU time and peak memory of one run of cmd (its own rusage, by wait4)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def db_megabytes(db):
    """The size of a database and its write-ahead log, in MB; removes them."""
    size = sum(os.path.getsize(db + s) for s in ("", "-wal") if os.path.exists(db + s)) / 1e6
    for s in ("", "-wal", "-shm"):
        if os.path.exists(db + s):
            os.remove(db + s)
    return size


def passed_on(a):
    """The --log, --threads and --set arguments given to the benchmark, for sim."""
    extra = ["--log", a.log] if a.log else []
    if a.threads is not None:
        extra += ["--threads", str(a.threads)]
    for kv in a.set:
        extra += ["--set", kv]
    return extra


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", default=os.path.join(ROOT, "build", "sim", "sim"))
    ap.add_argument("--trace", default=os.path.join(ROOT, "bench", "data", "azure-conv-100k.csv"))
    ap.add_argument("--log", default=None, help="--log level passed to sim (default: sim's)")
    ap.add_argument("--threads", type=int, default=None, help="--threads passed to sim (default: sim's)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], metavar="K=V", help="passed to sim's --set")
    ap.add_argument("--vidur-seconds", type=float, default=151.0,
                    help="Vidur's wall time for the same replay on this machine (default 151)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="servesim-replay-")
    try:
        print(f"{'policy':<16} {'budget':>6} {'replicas':>8} {'wall s':>8} {'CPU s':>8} {'peak MB':>8} {'db MB':>8} "
              f"{'x Vidur':>8}")
        walls = {}
        for policy, budget, replicas in CASES:
            best = None
            for i in range(a.repeat):
                db = os.path.join(tmp, f"r{i}.db")
                cmd = [a.sim, "--trace", a.trace, "--model", "llama-2-7b", "--hardware", "a100-80gb",
                       "--policy", policy, "--max-num-seqs", "128", "--max-num-batched-tokens", budget,
                       "--replicas", str(replicas), "--db", db]
                cmd += passed_on(a)
                wall, cpu, rss = run_once(cmd)
                size = db_megabytes(db)
                if best is None or wall < best[0]:
                    best = (wall, cpu, rss, size)
            print(f"{policy:<16} {budget:>6} {replicas:>8} {best[0]:>8.2f} {best[1]:>8.2f} {best[2]:>8.0f} "
                  f"{best[3]:>8.1f} {a.vidur_seconds / best[0]:>8.0f}")
            walls[(policy, replicas)] = best[0]
        # Issue 11's goal 3: 8 replicas cost at most 1.5 times one replica on the same trace.
        for policy in dict.fromkeys(p for p, _, _ in CASES):
            print(f"{policy}: 8 replicas / 1 replica = {walls[(policy, 8)] / walls[(policy, 1)]:.2f} x wall")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
