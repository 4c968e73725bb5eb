#!/usr/bin/env python3
"""The roofline against every shape Vidur profiled on real A100s and H100s (issue 13).

    python3 bench/roofline_vs_vidur.py [--sim PATH] [--all-tp] [--json OUT]

For every profile under data/measured/vidur/compute/ whose model we ship (data/models) it runs
`sim validate --measured DIR --hardware H --model M --tp N --format json` with the shipped hardware
file of that GPU, and prints the MAPE and the bias (mean signed error: > 0 the roofline is too slow)
by kind of shape: prefill and decode (the layers with attention: Llama-2-7B on A100 only) and
linear-only (the layers' linear projections, norms and activation, every mlp.csv row). Then the
spot shapes of the issue's first look, from the Llama-2-7B A100 profile.

tp is 1 unless the model's 16-bit weights do not fit in 90 % of one GPU (vLLM's default
gpu_memory_utilization): then the smallest of 2, 4, 8 that fits (Llama-3-70B: 2). The profile's rows
of that degree are per-GPU times without the all-reduce. --all-tp also prints every other degree.
We ship no Llama-2-70B model file; its profiles are priced with llama-3-70b, whose layers have the
same shapes (the reader checks the four that mlp.csv records), and only their layers are compared.
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VIDUR = os.path.join(ROOT, "data", "measured", "vidur", "compute")

# (GPU folder, Vidur's model folder, the model preset whose layers it profiled)
PROFILES = [
    ("a100", "Llama-2-7b-hf", "llama-2-7b"),
    ("a100", "Meta-Llama-3-8B", "llama-3-8b"),
    ("a100", "Llama-2-70b-hf", "llama-3-70b"),  # same layer shapes; we ship no Llama-2-70B
    ("a100", "Meta-Llama-3-70B", "llama-3-70b"),
    ("h100", "Llama-2-7b-hf", "llama-2-7b"),
    ("h100", "Llama-2-70b-hf", "llama-3-70b"),
]
# The shipped hardware file of each of Vidur's GPUs (A100 80 GB and H100 80 GB, SXM in DGX nodes).
HARDWARE = {"a100": "a100-80gb", "h100": "h100-sxm"}
KINDS = ["prefill", "decode", "linear-only"]
# Spot shapes of the Llama-2-7B A100 profile: decode batch 32 and prefill 2,048 of the first look.
SPOTS = ["decode batch 1 over 1024", "decode batch 8 over 1024", "decode batch 32 over 512",
         "decode batch 32 over 1024", "decode batch 32 over 2048", "decode batch 128 over 1024",
         "prefill 512 over 0", "prefill 2048 over 0", "prefill 2048 over 1024"]


def gib_memory(hardware):
    with open(os.path.join(ROOT, "data", "hardware", hardware + ".toml")) as f:
        for line in f:
            if line.startswith("memory_gib"):
                return float(line.split("=")[1].split("#")[0])
    raise SystemExit(f"{hardware}: no memory_gib")


def weight_bytes(model):
    """16-bit weights of a dense Llama: embedding, LM head, and per layer QKV, O, gate/up/down, norms."""
    with open(os.path.join(ROOT, "data", "models", model + ".json")) as f:
        c = json.load(f)
    h, inter, layers = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    hd = h // c["num_attention_heads"]
    q, kv = c["num_attention_heads"] * hd, c.get("num_key_value_heads", c["num_attention_heads"]) * hd
    per_layer = h * (q + 2 * kv) + q * h + 3 * h * inter + 2 * h
    tied = c.get("tie_word_embeddings", False)
    return 2 * (c["vocab_size"] * h * (1 if tied else 2) + layers * per_layer + h)


def serving_tp(model, hardware):
    memory = 0.9 * gib_memory(hardware) * 2**30
    for tp in (1, 2, 4, 8):
        if weight_bytes(model) / tp <= memory:
            return tp
    return 8


def profile_tps(folder):
    with open(os.path.join(folder, "mlp.csv")) as f:
        header = f.readline().strip().split(",")
        col = header.index("num_tensor_parallel_workers")
        return sorted({int(line.split(",")[col]) for line in f if line.strip()})


def validate(sim, folder, hardware, model, tp):
    cmd = [sim, "validate", "--measured", folder, "--hardware", hardware, "--model", model,
           "--tp", str(tp), "--format", "json"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr}{p.stdout}")
    return json.loads(p.stdout)


def calibrate_held_out(sim, gpu):
    """`sim calibrate` of the GPU's hardware file on all its profiles at once (each at its serving tp):
    the MAPE on a random half held out of the fit, before and after, overall, by kind and by profile."""
    hardware = HARDWARE[gpu]
    cmd = [sim, "calibrate", "--hardware", hardware, "--bootstrap", "0", "--out", os.devnull]
    for g, folder_name, model in PROFILES:
        if g != gpu:
            continue
        cmd += ["--measured", os.path.join(VIDUR, gpu, "meta-llama", folder_name), "--model", model,
                "--tp", str(serving_tp(model, hardware))]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr}{p.stdout}")
    out = {"by_kind": {}, "by_profile": {}}
    for line in p.stdout.splitlines():
        m = re.match(r"Held-out: .* MAPE on the other (\d+) iterations: ([\d.]+) % before, ([\d.]+) % after", line)
        if m:
            out["all"] = (int(m.group(1)), float(m.group(2)), float(m.group(3)))
        if line.startswith("Held-out by kind:"):
            for kind, n, before, after in re.findall(r"([\w-]+) \((\d+)\) ([\d.]+) % -> ([\d.]+) %", line):
                out["by_kind"][kind] = (int(n), float(before), float(after))
        m = re.match(r"\s+\S+/([^/ ]+) .*held out \((\d+)\): ([\d.]+) % -> ([\d.]+) %", line)
        if m:
            out["by_profile"][m.group(1)] = (int(m.group(2)), float(m.group(3)), float(m.group(4)))
    if "all" not in out:
        raise SystemExit(f"{' '.join(cmd)}: no held-out line in\n{p.stdout}")
    return out


def pct(x, signed=False):
    return "" if x is None else (f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sim", default=os.path.join(ROOT, "build", "sim", "sim"))
    ap.add_argument("--all-tp", action="store_true", help="also every other tp of each mlp.csv")
    ap.add_argument("--json", help="write every result (each shape too) to this file")
    a = ap.parse_args()
    if not os.path.exists(a.sim):
        raise SystemExit(f"{a.sim}: not found; build it (cmake --build build --target sim) or give --sim")

    rows, results = [], []
    for gpu, folder_name, model in PROFILES:
        folder = os.path.join(VIDUR, gpu, "meta-llama", folder_name)
        hardware = HARDWARE[gpu]
        tp0 = serving_tp(model, hardware)
        for tp in (profile_tps(folder) if a.all_tp else [tp0]):
            r = validate(a.sim, folder, hardware, model, tp)
            results.append(r)
            rows.append((gpu, folder_name, hardware, model, tp, r))

    head = (f"{'profile':<24} {'hardware':<10} {'tp':>2} {'shapes':>6} {'MAPE':>7} "
            + " ".join(f"{k:>11}" for k in KINDS) + "   bias: " + " ".join(f"{k:>11}" for k in KINDS))
    print("MAPE by kind of shape (bias: mean signed error, > 0 the roofline is too slow)")
    print(head)
    print("-" * len(head))
    for gpu, folder_name, hardware, model, tp, r in rows:
        by = r["by_kind"]
        mape = " ".join(f"{pct(by[k]['mape']) if k in by else '-':>11}" for k in KINDS)
        bias = " ".join(f"{pct(by[k]['bias'], True) if k in by else '-':>11}" for k in KINDS)
        print(f"{gpu + '/' + folder_name:<24} {hardware:<10} {tp:>2} {r['all']['count']:>6} "
              f"{pct(r['all']['mape']):>7} {mape}   bias: {bias}")
    print("Llama-2-70b-hf is priced as llama-3-70b (the same layers); every tp > 1 row is per GPU, no all-reduce.")

    spot = next((r for g, f, _, _, tp, r in rows if g == "a100" and f == "Llama-2-7b-hf" and tp == 1), None)
    if spot:
        shapes = {s["label"]: s for s in spot["shapes"]}
        print("\nSpot shapes, Llama-2-7B on A100 (a100-80gb), the layers only:")
        print(f"{'shape':<28} {'measured ms':>12} {'roofline ms':>12} {'error':>8}")
        for label in SPOTS:
            s = shapes.get(label)
            if s:
                print(f"{label:<28} {s['measured_ms']:>12.3f} {s['predicted_ms']:>12.3f} {pct(s['error'], True):>8}")
        print("\nBy size band:")
        for band, b in spot["by_band"].items():
            print(f"  {band:<26} {b['count']:>5} shapes  MAPE {pct(b['mape']):>7}  bias {pct(b['bias'], True):>7}")

    print("\nCalibrated on a random half, MAPE on the other half (held out), before -> after: one fit of each")
    print("GPU's hardware file to all its profiles at once (sim calibrate --measured ... --measured ..., seed 1)")
    print(f"{'GPU':<6} {'held-out shapes':>15} {'all':>16} " + " ".join(f"{k:>16}" for k in KINDS))
    calibrated = {}
    for gpu in HARDWARE:
        c = calibrate_held_out(a.sim, gpu)
        calibrated[gpu] = c
        cells = " ".join(f"{c['by_kind'][k][1]:>6.1f}% -> {c['by_kind'][k][2]:>4.1f}%" if k in c["by_kind"] else f"{'-':>16}"
                         for k in KINDS)
        print(f"{gpu:<6} {c['all'][0]:>15} {c['all'][1]:>6.1f}% -> {c['all'][2]:>4.1f}% {cells}")
    print("By profile (its shapes among the held-out half):")
    for gpu, c in calibrated.items():
        for name, (n, before, after) in c["by_profile"].items():
            print(f"  {gpu + '/' + name:<24} {n:>5} shapes  {before:>5.1f}% -> {after:>4.1f}%")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
