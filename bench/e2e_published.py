#!/usr/bin/env python3
"""Prices published end-to-end serving measurements with servesim and reports the error.

Every row of bench/data/published_e2e.csv (sources in bench/data/README.md) is a number someone
measured on a real engine: output throughput of an offline run, or mean/median TTFT and ITL at a
fixed request rate or concurrency. This script builds the same workload (fixed prompt and output
lengths, the same number of prompts, all at once / Poisson at the rate / closed loop at the
concurrency), runs `sim run` with the row's GPU, model, tensor parallelism and precisions, and
compares. It prints the median |error| and the bias of throughput, TTFT and ITL, for the `fit` half
(the rows any default was tuned on) and the `holdout` half (never used to choose anything), and
exits 1 when a held-out median |error| is above --goal (default 10 %).

    python3 bench/e2e_published.py --sim build-test/sim/sim [--split holdout] [--rows out.csv]

Rows are skipped, and counted, when servesim cannot run them as published: lengths not given
(ShareGPT samples), or a layout it does not model (see --help of the options below).
"""
import argparse
import collections
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "published_e2e.csv")

# metric column -> (servesim metric, scale, group)
METRICS = {
    "output_tok_s": ("output_throughput", 1, "throughput"),
    "total_tok_s": ("total_token_throughput", 1, "throughput"),
    "req_s": ("request_throughput", 1, "throughput"),
    "mean_ttft_ms": ("ttft_mean", 1e3, "ttft"),
    "median_ttft_ms": ("ttft_p50", 1e3, "ttft"),
    "mean_itl_ms": ("itl_mean", 1e3, "itl"),
    "median_itl_ms": ("itl_p50", 1e3, "itl"),
    "mean_tpot_ms": ("tpot_mean", 1e3, "itl"),
    "median_tpot_ms": ("tpot_p50", 1e3, "itl"),
    "mean_e2el_ms": ("e2el_mean", 1e3, "e2el"),
}

LARGE_GPUS = {"h100-sxm", "h200", "b200", "gb200", "b300", "h20", "mi300x", "mi325x", "mi355x"}


def engine_limits(row):
    """max_num_seqs, max_num_batched_tokens: the row's, else vLLM 0.33's defaults for the GPU and the
    usage (engine/arg_utils.py: offline = LLM class, else the API server)."""
    offline = row["load"] == "offline"
    if row["gpu"] in LARGE_GPUS:
        seqs, tokens = 1024, 16384 if offline else 8192
    else:
        seqs, tokens = 256, 8192 if offline else 2048
    if row["engine"] == "trtllm" and offline:
        # trtllm-bench sizes its engine by a heuristic from the KV memory, up to thousands of
        # sequences (its max_batch_size default is 2048) at max_num_tokens 8192-16384.
        seqs, tokens = 2048, 16384
    if row["max_num_seqs"]:
        seqs = int(row["max_num_seqs"])
    if policy(row) == "continuous":  # a whole prompt per context step: the budget holds the longest
        tokens = max(tokens, int(float(row["input_len"])))
    return seqs, tokens


def num_prompts(row):
    if row["num_prompts"]:
        return int(row["num_prompts"])
    if row["load"] == "offline" and row["max_num_seqs"]:
        return int(row["max_num_seqs"])  # one static batch (TensorRT-LLM 0.9's gptSessionBenchmark)
    if row["load"] == "concurrency":
        return max((20 if steady_state(row) else 10) * int(float(row["load_value"])), 20)
    return 1000


def kv_dtype(row):
    """The KV cache's precision: the row's; "auto" on TensorRT-LLM (and NIM's TensorRT-LLM profiles)
    with an FP8 checkpoint is FP8 (ModelOpt FP8 checkpoints carry kv_cache_quant_algo FP8, which
    TensorRT-LLM applies by default); on vLLM, "auto" is the model's dtype."""
    if row["kv_dtype"] not in ("", "auto"):
        return row["kv_dtype"]
    if row["engine"] in ("trtllm", "other") and row["dtype"] in ("fp8", "fp4"):
        return "fp8"
    return "auto"


def skip_reason(row):
    if not row["input_len"] or not row["output_len"]:
        return "lengths not published (dataset samples)"
    if int(row.get("pp") or 1) > 1:
        return "pipeline parallelism"
    return None


def run_key(row):
    return tuple(row[k] for k in ("gpu", "model", "tp", "dp", "ep", "dtype", "kv_dtype", "load", "load_value", "num_prompts",
                                  "input_len", "output_len", "max_num_seqs", "engine"))


def workload(row, path):
    n = num_prompts(row)
    lines = ["[generate]", f"requests = {n}", "seed = 1", "[generate.arrival]"]
    if row["load"] == "rate":
        lines += ['process = "poisson"', f"rate = {float(row['load_value'])}"]
    else:
        lines += ['process = "all-at-once"']
    lines += ["[generate.prompt_tokens]", 'dist = "fixed"', f"value = {int(float(row['input_len']))}",
              "[generate.output_tokens]", 'dist = "fixed"', f"value = {max(1, int(float(row['output_len'])))}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def async_scheduling(row):
    """vLLM turned async scheduling on by default after 0.11 (vllm-project/vllm#27614, the Q4 2025
    roadmap's "async scheduling on by default"); rows measured on an older vLLM ran without it."""
    if row["engine"] != "vllm":
        return True
    try:
        major, minor = (int(x) for x in row["engine_version"].split(".")[:2])
    except ValueError:
        return True
    return (major, minor) >= (0, 12)


def policy(row):
    """vLLM's V1 scheduler chunks prompts (chunked-prefill); TensorRT-LLM's (and NIM's TensorRT-LLM
    profiles') does not by default (enable_chunked_context / enable_chunked_prefill false): it runs a
    whole prompt in one context step within max_num_tokens, which servesim's continuous policy does."""
    return "continuous" if row["engine"] in ("trtllm", "other") else "chunked-prefill"


def no_server(row):
    """Whether the measurement had no API server in front of the engine: offline runs (vLLM's LLM
    class, trtllm-bench) and TensorRT-LLM 0.9's gptSessionBenchmark first-token latencies."""
    return row["load"] == "offline" or "gptSessionBenchmark" in row["notes"]


def engine_file(work, data_dir):
    """The default engine preset without its per-request (API server) costs, for no_server rows."""
    src = os.path.join(data_dir, "engines", "vllm-0.33.toml")
    dst = os.path.join(work, "engine-no-server.toml")
    if not os.path.exists(dst):
        with open(src) as f, open(dst, "w") as out:
            for line in f:
                if line.startswith("request_us") or line.startswith("request_per_prompt_token_us"):
                    line = line.split("=")[0] + "= 0\n"
                out.write(line)
    return dst


def simulate(sim, row, work, extra):
    trace = os.path.join(work, "w.toml")
    db = os.path.join(work, "r.db")
    workload(row, trace)
    if os.path.exists(db):
        os.remove(db)
    seqs, tokens = engine_limits(row)
    dp, tp = int(row.get("dp") or 1), int(row["tp"])
    cmd = [sim, "run", "--trace", trace, "--model", row["model"], "--hardware", row["gpu"], "--tp", str(tp // dp),
           "--policy", policy(row), "--max-num-seqs", str(seqs), "--max-num-batched-tokens", str(tokens),
           "--db", db, "--log", "summary", "-q"]
    if dp > 1:  # attention data-parallel over the row's GPUs (tp counts them all)
        cmd += ["--data-parallel-size", str(dp)]
    if int(row.get("ep") or 1) > 1:
        cmd += ["--enable-expert-parallel"]
    if row["dtype"] in ("fp8", "fp4"):
        cmd += ["--dtype", row["dtype"]]
    if kv_dtype(row) == "fp8":
        cmd += ["--kv-cache-dtype", "fp8"]
    if row["load"] == "concurrency":
        cmd += ["--max-concurrency", str(int(float(row["load_value"])))]
    if steady_state(row):
        cmd[cmd.index("summary")] = "requests"
    if no_server(row):
        cmd += ["--engine", engine_file(work, os.environ.get("SERVESIM_DATA", os.path.join(HERE, "..", "data")))]
    elif not async_scheduling(row):
        cmd += ["--engine", "vllm-0.11"]  # the engine version measured: no async scheduling, its server
    cmd += extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
    r = subprocess.run([sim, "report", "--db", db, "--format", "json"], capture_output=True, text=True, check=True)
    metrics = json.loads(r.stdout)["metrics"]
    if steady_state(row):
        metrics.update(steady_latencies(db, int(float(row["load_value"]))))
    return metrics, None


def steady_state(row):
    """NVIDIA NIM's benchmarks run genai-perf, which measures in windows once the load is stable:
    the first wave of `concurrency` requests, all sent at once into an idle server, is not in its
    numbers. vllm bench serve counts every request."""
    return row["load"] == "concurrency" and row["engine_version"].startswith("NIM")


def steady_latencies(db, concurrency):
    """Mean TTFT and inter-token latency of the requests after the first `concurrency` sent."""
    import sqlite3
    con = sqlite3.connect(db)
    rows = con.execute("SELECT first_token - arrival, finished - first_token, output_tokens FROM requests "
                       "WHERE status = 'finished' ORDER BY arrival, id").fetchall()[concurrency:]
    con.close()
    if not rows:
        return {}
    gaps = sum(r[2] - 1 for r in rows if r[2] > 1)
    return {"ttft_mean": sum(r[0] for r in rows) / len(rows),
            "itl_mean": sum(r[1] for r in rows if r[2] > 1) / gaps if gaps else 0}


def summarize(results, goal):
    print(f"{'split':8} {'group':11} {'rows':>5} {'median|err|':>12} {'bias':>8}  worst")
    failed = False
    for split in ("fit", "holdout"):
        for group in ("throughput", "ttft", "itl", "e2el", "all"):
            errs = [(e, rid) for (s, g, e, rid) in results if s == split and (group == "all" or g == group)]
            if not errs:
                continue
            abs_errs = [abs(e) for e, _ in errs]
            med = statistics.median(abs_errs)
            bias = statistics.median([e for e, _ in errs])
            worst = max(errs, key=lambda x: abs(x[0]))
            print(f"{split:8} {group:11} {len(errs):5d} {100 * med:11.1f}% {100 * bias:+7.1f}%  {worst[1]} "
                  f"{100 * worst[0]:+.0f}%")
            if split == "holdout" and group in ("throughput", "ttft", "itl") and med > goal:
                failed = True
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sim", default="build-test/sim/sim")
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--split", choices=["fit", "holdout", "all"], default="all")
    ap.add_argument("--rows", help="write every priced row (published, simulated, error) to this CSV")
    ap.add_argument("--goal", type=float, default=0.10, help="held-out median |error| goal per group")
    ap.add_argument("--only", help="price only rows whose id, model or gpu contains this")
    ap.add_argument("--set", action="append", default=[], help="extra `sim run` option, e.g. --set=--engine=none")
    args = ap.parse_args()

    rows = list(csv.DictReader(open(args.data)))
    if args.split != "all":
        rows = [r for r in rows if r["split"] == args.split]
    if args.only:
        rows = [r for r in rows if args.only in r["id"] or args.only in r["model"] or args.only in r["gpu"]]
    skipped = collections.Counter()
    runs = collections.OrderedDict()
    for r in rows:
        why = skip_reason(r)
        if why:
            skipped[why] += 1
            continue
        runs.setdefault(run_key(r), []).append(r)
    extra = [a for s in args.set for a in s.split("=", 1)] if args.set else []
    results, out_rows = [], []
    with tempfile.TemporaryDirectory() as work:
        for key, group in runs.items():
            metrics, err = simulate(args.sim, group[0], work, extra)
            for r in group:
                if metrics is None:
                    skipped["sim refused: " + err[:80]] += 1
                    continue
                name, scale, g = METRICS[r["metric"]]
                if name not in metrics:
                    skipped["sim gave no " + name] += 1
                    continue
                simulated = metrics[name] * scale
                published = float(r["value"])
                e = (simulated - published) / published
                results.append((r["split"], g, e, r["id"]))
                out_rows.append({"id": r["id"], "split": r["split"], "engine": r["engine"], "gpu": r["gpu"],
                                 "model": r["model"], "tp": r["tp"], "dtype": r["dtype"], "load": r["load"],
                                 "load_value": r["load_value"], "input_len": r["input_len"],
                                 "output_len": r["output_len"], "metric": r["metric"], "published": published,
                                 "simulated": round(simulated, 4), "error": round(e, 4)})
    if args.rows:
        with open(args.rows, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(out_rows[0].keys()))
            w.writeheader()
            w.writerows(out_rows)
    failed = summarize(results, args.goal)
    for why, n in skipped.most_common():
        print(f"skipped {n}: {why}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
