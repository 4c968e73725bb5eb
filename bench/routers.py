#!/usr/bin/env python3
"""Routers side by side (issue 14): the same trace on 8 replicas through round robin,
least-outstanding and prefix-aware (and prefix-aware with a tighter balance threshold), with the
prefix-cached policy, printing throughput, prefix-cache hit rate, TTFT and TPOT of each.

    python3 bench/routers.py [--sim PATH] [--trace FILE] [--model NAME] [--replicas N]

Defaults: the Azure 2023 conversation trace (lengths only: no prompt content, so nothing to share)
with llama-2-7b, then the Mooncake conversation trace (block hashes of the prompts: shared prefixes)
with mistral-7b (32k context: Mooncake's prompts are long).
"""
import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TRACES = os.path.join(ROOT, "data", "traces")
ROUTERS = [["round-robin"], ["least-outstanding"], ["prefix-aware"],
           ["prefix-aware", "--set", "router.balance_abs_threshold=4"]]
METRICS = ["request_throughput", "prefix_hit_rate", "ttft_mean", "ttft_p99", "tpot_mean", "tpot_p99"]


def run(sim, trace, model, replicas, router, db):
    cmd = [sim, "--trace", trace, "--model", model, "--policy", "prefix-cached", "--replicas", str(replicas),
           "--router", *router, "--db", db, "--log", "summary", "--quiet"]
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
    with sqlite3.connect(db) as c:
        return dict(c.execute("SELECT name, value FROM metrics WHERE run_id = (SELECT max(id) FROM runs)"))


def table(sim, trace, model, replicas, tmp):
    print(f"{os.path.basename(trace)}, {model}, {replicas} replicas, --policy prefix-cached")
    print(f"{'router':<52} {'req/s':>6} {'prefix hits':>11} {'TTFT mean':>10} {'p99':>8} {'TPOT mean':>10} {'p99':>7}")
    for i, router in enumerate(ROUTERS):
        m = run(sim, trace, model, replicas, router, os.path.join(tmp, f"{i}-{os.path.basename(trace)}.db"))
        print(f"{' '.join(router):<52} {m['request_throughput']:>6.2f} {100 * m.get('prefix_hit_rate', 0):>10.1f}% "
              f"{1000 * m['ttft_mean']:>8.1f}ms {1000 * m['ttft_p99']:>6.0f}ms {1000 * m['tpot_mean']:>8.2f}ms "
              f"{1000 * m['tpot_p99']:>5.1f}ms")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sim", default=os.path.join(ROOT, "build", "sim", "sim"))
    ap.add_argument("--trace", help="one trace instead of the two defaults (then give --model)")
    ap.add_argument("--model", default="llama-2-7b")
    ap.add_argument("--replicas", type=int, default=8)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="servesim-routers-") as tmp:
        if a.trace:
            table(a.sim, a.trace, a.model, a.replicas, tmp)
        else:
            table(a.sim, os.path.join(TRACES, "azure-conv.csv"), "llama-2-7b", a.replicas, tmp)
            table(a.sim, os.path.join(TRACES, "mooncake-conversation.jsonl"), "mistral-7b", a.replicas, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
