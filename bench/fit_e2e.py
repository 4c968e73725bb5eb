#!/usr/bin/env python3
"""Fits the default presets' end-to-end terms on the `fit` half of bench/data/published_e2e.csv.

Each parameter is a key of some shipped preset files (hardware or engine); the search is
coordinate descent over a grid, minimising the mean of the fit half's median |error| of
throughput, TTFT and ITL (bench/e2e_published.py). The held-out half is never read here: after
writing the chosen values into the presets, run bench/e2e_published.py for its error.

    python3 bench/fit_e2e.py --sim build-test/sim/sim [--passes 2]

Prints every trial and the best values; changes no file.
"""
import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "data"))

# name -> (folder, files, key, grid)
PARAMS = {
    "hopper.attention_efficiency": ("hardware", ["h100-sxm", "h200"], "attention_efficiency",
                                    [0.6, 0.7, 0.8, 0.9, 1.0]),
    "ampere.attention_efficiency": ("hardware", ["a100-80gb", "a100-40gb"], "attention_efficiency",
                                    [0.6, 0.7, 0.8, 0.9, 1.0]),
    "hopper.prefill_attention_efficiency": ("hardware", ["h100-sxm", "h200"], "prefill_attention_efficiency",
                                            [0.4, 0.5, 0.6, 0.7, 0.8]),
    "engine.step_us": ("engines", ["vllm-0.33"], "step_us", [0, 100, 200, 300, 500, 800]),
    "engine.sync_step_us": ("engines", ["vllm-0.33"], "sync_step_us", [0, 200, 400, 700, 1000, 1500]),
    "engine.request_us": ("engines", ["vllm-0.33"], "request_us", [1000, 2000, 4000, 6000, 10000]),
}


def patch(data, folder, name, key, value):
    path = os.path.join(data, folder, name + ".toml")
    lines, found = [], False
    for line in open(path):
        if line.split("=")[0].strip() == key and not line.lstrip().startswith("#"):
            line, found = f"{key} = {value}\n", True
        lines.append(line)
    if not found:
        # Before any table, so that the key stays at the top level.
        at = next((i for i, l in enumerate(lines) if l.startswith("[")), len(lines))
        lines.insert(at, f"{key} = {value}\n")
    open(path, "w").writelines(lines)


def objective(sim, values, work):
    data = os.path.join(work, "data")
    if os.path.exists(data):
        shutil.rmtree(data)
    os.makedirs(data)
    for folder in ("hardware", "engines"):
        shutil.copytree(os.path.join(DATA, folder), os.path.join(data, folder))
    os.symlink(os.path.join(DATA, "models"), os.path.join(data, "models"))
    for name, value in values.items():
        folder, files, key, _ = PARAMS[name]
        for f in files:
            patch(data, folder, f, key, value)
    rows = os.path.join(work, "rows.csv")
    env = dict(os.environ, SERVESIM_DATA=data)
    if os.path.exists(rows):
        os.remove(rows)
    subprocess.run([sys.executable, os.path.join(HERE, "e2e_published.py"), "--sim", sim, "--split", "fit",
                    "--rows", rows], env=env, capture_output=True, text=True)
    if not os.path.exists(rows):
        sys.exit("the bench wrote no rows: is " + sim + " built?")
    groups = {"throughput": [], "ttft": [], "itl": []}
    for r in csv.DictReader(open(rows)):
        g = "throughput" if r["metric"] in ("output_tok_s", "total_tok_s", "req_s") else \
            "ttft" if "ttft" in r["metric"] else "itl" if ("itl" in r["metric"] or "tpot" in r["metric"]) else None
        if g:
            groups[g].append(abs(float(r["error"])))
    meds = {g: statistics.median(v) for g, v in groups.items() if v}
    return statistics.mean(meds.values()), meds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sim", default="build-test/sim/sim")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--params", help="comma-separated subset of: " + ", ".join(PARAMS))
    args = ap.parse_args()
    sim = os.path.abspath(args.sim)
    names = args.params.split(",") if args.params else list(PARAMS)
    best = {}
    with tempfile.TemporaryDirectory() as work:
        score, meds = objective(sim, best, work)
        print(f"start: {score:.4f} {meds}")
        for _ in range(args.passes):
            for name in names:
                for v in PARAMS[name][3]:
                    trial = dict(best, **{name: v})
                    s, m = objective(sim, trial, work)
                    print(f"  {name} = {v}: {s:.4f} " + " ".join(f"{g} {100 * x:.1f}%" for g, x in m.items()))
                    if s < score:
                        score, best, meds = s, trial, m
        print(f"best: {score:.4f} {best} " + " ".join(f"{g} {100 * x:.1f}%" for g, x in meds.items()))


if __name__ == "__main__":
    main()
