#!/usr/bin/env python3
"""Benchmark (issue 42, item 20): prefix caching on long prompts against chunked prefill on the same
trace, the Mooncake conversation trace (12,031 requests of 12,035 prompt tokens on average, each
with its blocks' hash ids), on one A100-80GB replica with the roofline:

    chunked-prefill, prefix-cached (order fcfs) and prefix-cached --set policy.order=lpm,
    with Qwen2.5-7B (a 128k context: every request is served, 9 million prompt blocks go through
    the cache) and Llama-3-8B (the default model: an 8k context rejects 45 % of the requests),
    with --log summary and with the default log (requests and timeline rows).

    python3 bench/prefix_cache.py [--sim PATH] [--trace JSONL] [--repeat N] [--models LIST]
                                  [--logs LIST]

Prints each command once, then per case the wall time, the CPU time (user + system) and the peak
memory (max RSS) of the `sim` process, the best of --repeat runs (default 5), and per model and log
how many times chunked prefill's wall time each prefix-cached run takes (the issue's target: at most
2). --sim PATH times another build (an older commit's, to compare).
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
POLICIES = [("chunked-prefill", []), ("prefix-cached", []), ("prefix-cached lpm", ["--set", "policy.order=lpm"])]


def run_once(cmd):
    """Wall time, CPU time and peak memory of one run of cmd (its own rusage, by wait4)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def remove_db(db):
    for s in ("", "-wal", "-shm"):
        if os.path.exists(db + s):
            os.remove(db + s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", default=os.path.join(ROOT, "build", "sim", "sim"))
    ap.add_argument("--trace", default=os.path.join(ROOT, "data", "traces", "mooncake-conversation.jsonl"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--models", default="qwen2.5-7b,llama-3-8b")
    ap.add_argument("--logs", default="summary,requests")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="servesim-prefix-")
    db = os.path.join(tmp, "r.db")
    try:
        print(f"{'model':<12} {'log':<9} {'policy':<18} {'wall s':>7} {'CPU s':>7} {'peak MB':>8} {'x chunked':>9}")
        for model in a.models.split(","):
            for log in a.logs.split(","):
                chunked = None
                for name, extra in POLICIES:
                    cmd = [a.sim, "--trace", a.trace, "--model", model, "--hardware", "a100-80gb",
                           "--policy", name.split()[0], "--log", log, "--db", db] + extra
                    best = None
                    for _ in range(a.repeat):
                        remove_db(db)
                        r = run_once(cmd)
                        best = r if best is None or r[0] < best[0] else best
                    remove_db(db)
                    chunked = best[0] if chunked is None else chunked
                    print(f"{model:<12} {log:<9} {name:<18} {best[0]:>7.2f} {best[1]:>7.2f} {best[2]:>8.0f} "
                          f"{best[0] / chunked:>9.2f}   $ {' '.join(cmd)}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
