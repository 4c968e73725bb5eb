#!/usr/bin/env python3
"""Benchmarks of the capacity-planning commands (issue 10), run on the Azure conversation trace.

    python3 bench/capacity_planning.py [--sim PATH] [--trace CSV] [--jobs 2] [--skip-processes]

1. `sim sweep`: 1,000 points (10 request rates x 10 replica counts x 10 token budgets) over the
   first 2,000 requests of the trace, roofline, Llama-3-8B on A100-80GB, chunked prefill, summaries
   logged. Target: under 60 s with -j 2 on a 2-core machine.
2. `sim search`: the largest rate of Llama-3-8B on one A100-80GB under p99 TTFT 2 s on the whole
   trace. Target: under 10 s.
3. Threads against processes: the first 100 points of (1) by `sim sweep -j N` (threads sharing
   the loaded trace) and by N parallel `sim run --log summary` processes (xargs -P N).

Each prints wall time, CPU time (user + system of the children) and peak memory (max RSS).
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

RATES = "2,4,6,8,10,12,14,16,18,20"
REPLICAS = "1,2,3,4,5,6,7,8,9,10"
BUDGETS = "512,1024,1536,2048,3072,4096,5120,6144,7168,8192"


def timed(cmd, **kw):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd) if isinstance(cmd, list) else cmd}\n{proc.stderr}")
    return wall, cpu, after.ru_maxrss / 1024, proc.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", default=os.path.join(ROOT, "build", "sim", "sim"))
    ap.add_argument("--trace", default=os.path.join(ROOT, "data", "traces", "azure-conv.csv"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--skip-processes", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="servesim-bench-")
    try:
        base = [a.sim, "--trace", a.trace, "--num-prompts", "2000", "--policy", "chunked-prefill",
                "--model", "llama-3-8b", "--hardware", "a100-80gb"]
        db = os.path.join(tmp, "sweep.db")
        wall, cpu, rss, out = timed([a.sim, "sweep", *base[1:], "--grid", f"request_rate={RATES}",
                                     "--grid", f"replicas={REPLICAS}", "--grid",
                                     f"max_num_batched_tokens={BUDGETS}", "-j", str(a.jobs), "--db", db])
        print(f"sweep  1000 points, -j {a.jobs}: wall {wall:.2f} s, CPU {cpu:.2f} s, peak {rss:.0f} MB, "
              f"database {os.path.getsize(db) / 1e6:.1f} MB")
        print("  " + out.strip().splitlines()[-1])

        db = os.path.join(tmp, "search.db")
        wall, cpu, rss, out = timed([a.sim, "search", "--trace", a.trace, "--model", "llama-3-8b",
                                     "--hardware", "a100-80gb", "--slo", "p99_ttft=2s", "-j", str(a.jobs),
                                     "--db", db])
        lines = out.strip().splitlines()
        print(f"search max rate, -j {a.jobs}: wall {wall:.2f} s, CPU {cpu:.2f} s, peak {rss:.0f} MB")
        print("  " + lines[-2] + "\n  " + lines[-1])

        if not a.skip_processes:
            rates, reps = RATES.split(","), REPLICAS.split(",")
            points = [(r, n) for r in rates for n in reps]  # 100 points, budget 512
            db = os.path.join(tmp, "threads.db")
            wall_t, cpu_t, _, _ = timed([a.sim, "sweep", *base[1:], "--grid", f"request_rate={RATES}",
                                         "--grid", f"replicas={REPLICAS}", "--max-num-batched-tokens", "512",
                                         "-j", str(a.jobs), "--db", db])
            db = os.path.join(tmp, "processes.db")
            lines = "\n".join(" ".join([*base, "--request-rate", r, "--replicas", n, "--max-num-batched-tokens",
                                        "512", "--log", "summary", "--db", db]) for r, n in points)
            script = os.path.join(tmp, "points.txt")
            with open(script, "w") as f:
                f.write(lines + "\n")
            wall_p, cpu_p, _, _ = timed(f"xargs -P {a.jobs} -L 1 sh -c '\"$0\" \"$@\" > /dev/null' < {script}",
                                        shell=True)
            print(f"100 points: threads (sim sweep -j {a.jobs}) wall {wall_t:.2f} s, CPU {cpu_t:.2f} s; "
                  f"processes (xargs -P {a.jobs} sim run) wall {wall_p:.2f} s, CPU {cpu_p:.2f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
