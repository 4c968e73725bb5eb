#!/usr/bin/env python3
"""The golden guard: a corpus of `sim` commands whose every printed byte and every database row
must stay as recorded. It guards refactoring (moving rooms, splitting functions): behaviour must
not change. A change that means to change behaviour records the corpus again and says so.

    python3 tests/golden/golden.py SIM            # compare with tests/golden/expected/
    python3 tests/golden/golden.py SIM --update   # record it again (review the diff!)
    python3 tests/golden/golden.py SIM --show CASE  # a case's every row, to see what changed

Each case runs in a fresh folder. What is the run's own rather than its inputs' is replaced before
comparing: start and finish times, wall seconds, host, pid, uid, the version, the project's and the
case folder's paths, and the wall times printed beside counts ("12 probes in 0.55 s"). The HTML
report is compared by the hash of its normalised text.
"""
import difflib
import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXPECTED = os.path.join(HERE, "expected")

PARETO = ["--trace", "pareto.toml", "--num-prompts", "300"]
AZURE = ["--trace", "azure-conv.csv", "--num-prompts", "500"]
MOONCAKE = ["--trace", "mooncake-conversation.jsonl", "--num-prompts", "300", "--model", "qwen2.5-7b"]

PD_TOML = """trace = "pareto.toml"
num_prompts = 300
[[replicas]]
role = "prefill"
count = 1
hardware = "h100-sxm"
tp = 2
[[replicas]]
role = "decode"
count = 2
hardware = "h100-sxm"
tp = 1
"""
MIXED_TOML = """trace = "pareto.toml"
num_prompts = 300
[[replicas]]
count = 2
hardware = "h100-sxm"
[[replicas]]
count = 2
hardware = "l4"
"""
SWEEP_TOML = """name = "grid"
[fixed]
trace = "pareto.toml"
num_prompts = 200
[grid]
request_rate = [4, 8]
"hardware,tp" = [["a100-80gb", 1], ["h100-sxm", 2]]
"""

# (name, [sim arguments, ...]): a case is one or more commands into one folder and database.
CASES = [
    ("seed-toy-static", [["--backend", "unit", "--policy", "static", "--max-num-seqs", "3", "--trace", "seed-toy.toml"]]),
    ("seed-toy-continuous", [["--backend", "unit", "--policy", "continuous", "--max-num-seqs", "3", "--trace",
                              "seed-toy.toml"]]),
    ("static-batch", [["--backend", "unit", "--policy", "static", "--set", "policy.max_wait=inf", "--set",
                       "policy.release=batch", "--max-num-seqs", "3", "--trace", "seed-toy.toml"]]),
    ("continuous", [["--policy", "continuous", *PARETO, "--log", "iterations"]]),
    ("continuous-max", [["--policy", "continuous", "--set", "policy.kv_reserve=max", *PARETO]]),
    ("chunked-prefill", [["--policy", "chunked-prefill", "--max-num-batched-tokens", "512", *PARETO,
                          "--log", "iterations"]]),
    ("prefix-cached-fcfs", [["--policy", "prefix-cached", "--trace", "shared-prefix.toml", "--num-prompts", "300"]]),
    ("prefix-cached-lpm", [["--policy", "prefix-cached", "--set", "policy.order=lpm", "--trace",
                            "multiturn.toml"]]),
    ("prefix-cached-mooncake", [["--policy", "prefix-cached", *MOONCAKE]]),
    ("prefix-cached-azure", [["--policy", "prefix-cached", *AZURE]]),
    ("priority", [["--policy", "chunked-prefill", "--trace", "priority.toml", "--set",
                   "policy.scheduling_policy=priority"]]),
    ("azure-t4-qwen", [["--policy", "chunked-prefill", *AZURE, "--hardware", "t4", "--model", "qwen2.5-0.5b"]]),
    ("azure-h100-70b-tp4-fp8", [["--policy", "chunked-prefill", *AZURE, "--hardware", "h100-sxm", "--model",
                                 "llama-3-70b", "--tp", "4", "--kv-cache-dtype", "fp8"]]),
    ("tight-kv-preemption", [["--policy", "chunked-prefill", *PARETO, "--set", "kv.blocks=200"]]),
    ("load-controls", [["--policy", "chunked-prefill", *PARETO, "--request-rate", "12", "--burstiness", "0.5",
                        "--max-concurrency", "16", "--goodput", "ttft:500", "tpot:50"]]),
    ("rate-scale-node", [["--policy", "chunked-prefill", *AZURE, "--rate-scale", "3", "--replicas", "3", "--tp", "4",
                          "--hardware", "h100-sxm", "--price-by", "node"]]),
    *[(f"router-{r}", [["--policy", "prefix-cached", "--trace", "multiturn.toml", "--replicas", "4", "--router", r]])
      for r in ("round-robin", "random", "least-outstanding", "least-kv", "power-of-two", "prefix-aware")],
    ("split-threads", [["--policy", "chunked-prefill", *AZURE, "--replicas", "4", "--threads", "2"]]),
    ("pd-flags", [["--policy", "chunked-prefill", *PARETO, "--prefill-replicas", "1", "--decode-replicas", "2",
                   "--hardware", "h100-sxm"]]),
    ("pd-groups", [["--config", "pd.toml", "--policy", "chunked-prefill"]]),
    ("mixed-groups", [["--config", "mixed.toml", "--policy", "chunked-prefill"]]),
    ("sweep-file", [["sweep", "plan.toml", "-j", "1"], ["report", "--sweep", "--format", "csv"]]),
    ("search-max-rate", [["search", *PARETO, "--slo", "p99_ttft=1s", "--precision", "0.05", "-j", "1"]]),
    ("search-cheapest", [["search", *PARETO, "--request-rate", "20", "--slo", "p99_ttft=300ms", "--grid",
                          "tp=2,1", "--grid", "replicas=1,2,3,4,5,6,7,8", "-j", "1"],
                         ["report", "--sweep"]]),
    ("seeds", [["--seeds", "3", *PARETO, "-j", "1"]]),
    ("bootstrap", [["--trace", "seed-toy.toml", "--bootstrap", "50"]]),
    ("model-uncertainty", [["--trace", "pareto.toml", "--num-prompts", "200", "--hardware", "a100-80gb-vidur",
                            "--model-uncertainty", "5", "-j", "1"]]),
    ("reports", [["--policy", "continuous", *PARETO], ["--policy", "chunked-prefill", *PARETO],
                 ["report", "--format", "json"], ["report", "--run", "1", "--format", "csv"],
                 ["report", "--format", "vllm-json"], ["list", "runs"], ["compare", "1", "2"],
                 ["report", "--metric-percentiles", "25,50,99.9"], ["report", "--html", "page.html"]]),
    ("bad-input", [["--trace", "nosuch.toml"], ["--policy", "nosuch", "--trace", "pareto.toml"],
                   ["sweep", "--trace", "pareto.toml", "--grid", "request_rate=1,1e300"]]),
]

FILES = {"pd.toml": PD_TOML, "mixed.toml": MIXED_TOML, "plan.toml": SWEEP_TOML}

SHOW = "--show" in sys.argv  # print every row instead of the hashes (to see what changed)

# Columns that are the run's own (when and where it ran), not its inputs'.
VOLATILE = {"started_at", "finished_at", "wall_seconds", "host", "pid", "uid", "version", "resumed_at"}


def normalise(text, folder):
    text = text.replace(folder, "$CASE").replace(ROOT, "$PROJECT")
    text = re.sub(r"(\d+(?:\.\d+)?) s with (\d+) jobs?", r"T s with \2 jobs", text)
    text = re.sub(r"in \d+(?:\.\d+)? s\b", "in T s", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z?", "TIME", text)
    text = re.sub(r'"date": ?"[^"]*"', '"date": "DATE"', text)
    for key in ("wall_seconds", "pid"):
        text = re.sub(rf'"{key}": ?[0-9.e+-]+', f'"{key}": X', text)
    for key in ("uid", "host", "version"):
        text = re.sub(rf'"{key}": ?"[^"]*"', f'"{key}": "X"', text)
    text = re.sub(r"process \d+ on \S+", "process PID on HOST", text)
    return text


def dump_database(path, folder):
    if not os.path.exists(path):
        return "(no database)\n"
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    out = []
    for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
        cols = [c[1] for c in con.execute(f"PRAGMA table_info({table})")]
        keep = [c for c in cols if c not in VOLATILE]
        order = ", ".join(f'"{c}"' for c in keep)
        rows = ["|".join("NULL" if v is None else repr(v) if isinstance(v, float) else str(v) for v in row)
                for row in con.execute(f'SELECT {order} FROM "{table}" ORDER BY {order}')]
        text = normalise("\n".join(rows), folder)
        if SHOW:
            out.append(f"== {table} ({', '.join(keep)})\n{text}")
        else:  # rows are many: their count and a hash, the printed output in full
            out.append(f"{table} ({', '.join(keep)}): {len(rows)} rows, sha256 "
                       f"{hashlib.sha256(text.encode()).hexdigest()}")
    con.close()
    return "\n".join(out) + "\n"


def run_case(sim, name, commands):
    folder = tempfile.mkdtemp(prefix=f"servesim-golden-{name}-")
    try:
        for file, text in FILES.items():
            with open(os.path.join(folder, file), "w") as f:
                f.write(text)
        out = []
        for args in commands:
            r = subprocess.run([sim, *args], cwd=folder, capture_output=True, text=True, timeout=600)
            out.append(f"$ sim {' '.join(args)}\n{r.stdout}{r.stderr}(exit {r.returncode})\n")
        page = os.path.join(folder, "page.html")
        if os.path.exists(page):
            with open(page) as f:
                digest = hashlib.sha256(normalise(f.read(), folder).encode()).hexdigest()
            out.append(f"page.html sha256 {digest}\n")
        out.append(dump_database(os.path.join(folder, "sim.db"), folder))
        return normalise("".join(out), folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sim, update = os.path.abspath(sys.argv[1]), "--update" in sys.argv[2:]
    only = [a for a in sys.argv[2:] if not a.startswith("--")]
    os.makedirs(EXPECTED, exist_ok=True)
    failed = []
    for name, commands in CASES:
        if only and name not in only:
            continue
        got = run_case(sim, name, commands)
        if SHOW:
            sys.stdout.write(got)
            continue
        path = os.path.join(EXPECTED, name + ".txt")
        if update:
            with open(path, "w") as f:
                f.write(got)
            continue
        want = open(path).read() if os.path.exists(path) else "(not recorded)\n"
        if got != want:
            failed.append(name)
            diff = difflib.unified_diff(want.splitlines(True), got.splitlines(True), f"expected/{name}.txt", "now")
            sys.stdout.writelines(list(diff)[:80])
    if update or SHOW:
        if update:
            print(f"recorded {len(CASES)} cases into {EXPECTED}")
        return 0
    print(f"golden: {len(CASES) - len(failed)} of {len(CASES)} cases as recorded" +
          (f"; differ: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
