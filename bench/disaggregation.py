#!/usr/bin/env python3
"""Disaggregated prefill and decode against colocated replicas (issue 14): the same trace on the
same number of GPUs, colocated (chunked prefill on every replica) and split into prefill and decode
pools of several sizes, printing throughput, TTFT, TPOT, each pool's utilization and the KV
transfers' wait (for the decode pool's blocks) and time (on the link).

    python3 bench/disaggregation.py [--sim PATH] [--trace FILE] [--model NAME] [--gpus N]
                                    [--time-scale F] [--hardware NAME]

Defaults: the Azure 2023 conversation trace at twice its rate (--time-scale 0.5), llama-2-7b, four
A100-80GB (DGX A100 network: 25 GB/s per GPU, 10 us per transfer).
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


def run(sim, args, db):
    cmd = [sim, *args, "--db", db, "--log", "summary", "--quiet"]
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
    with sqlite3.connect(db) as c:
        return dict(c.execute("SELECT name, value FROM metrics WHERE run_id = (SELECT max(id) FROM runs)"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sim", default=os.path.join(ROOT, "build", "sim", "sim"))
    ap.add_argument("--trace", default=os.path.join(TRACES, "azure-conv.csv"))
    ap.add_argument("--model", default="llama-2-7b")
    ap.add_argument("--hardware", default="a100-80gb")
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--time-scale", default="0.5")
    a = ap.parse_args()
    base = ["--trace", a.trace, "--model", a.model, "--hardware", a.hardware, "--policy", "chunked-prefill",
            "--max-num-batched-tokens", "2048", "--time-scale", a.time_scale]
    layouts = [("colocated", ["--replicas", str(a.gpus)])]
    for p in range(1, a.gpus):
        layouts.append((f"{p} prefill + {a.gpus - p} decode",
                        ["--prefill-replicas", str(p), "--decode-replicas", str(a.gpus - p)]))
    print(f"{os.path.basename(a.trace)} x {a.time_scale} in time, {a.model}, {a.gpus} x {a.hardware}, "
          f"--policy chunked-prefill --max-num-batched-tokens 2048")
    print(f"{'layout':<22} {'req/s':>6} {'TTFT mean':>10} {'p99':>8} {'TPOT mean':>10} {'p99':>8} "
          f"{'prefill':>8} {'decode':>7} {'KV wait':>8} {'KV move':>8} {'preempt':>8}")
    with tempfile.TemporaryDirectory(prefix="servesim-disagg-") as tmp:
        for i, (name, layout) in enumerate(layouts):
            m = run(a.sim, base + layout, os.path.join(tmp, f"{i}.db"))
            busy = lambda k: f"{100 * m[k]:>6.1f}%" if k in m else f"{'-':>7}"
            ms = lambda k: f"{1000 * m[k]:>6.1f}ms" if k in m else f"{'-':>8}"
            flag = " (overloaded)" if m.get("overloaded", 0) > 0 else ""
            print(f"{name:<22} {m['request_throughput']:>6.2f} {1000 * m['ttft_mean']:>8.1f}ms "
                  f"{1000 * m['ttft_p99']:>6.0f}ms {1000 * m['tpot_mean']:>8.2f}ms {1000 * m['tpot_p99']:>6.1f}ms "
                  f"{busy('prefill_utilization'):>8} {busy('decode_utilization'):>7} {ms('kv_transfer_wait_mean'):>8} "
                  f"{ms('kv_transfer_time_mean'):>8} {int(m['preemptions']):>8}{flag}")


if __name__ == "__main__":
    main()
