#!/usr/bin/env python3
"""`sim report --html` in a real browser: makes real runs with `sim` into a temporary database (one
run; two runs compared; runs of different workloads; a sweep; a sweep of many configurations up to
overload; a max-rate and a cheapest-configuration search; a --backend cpu run of the tiny model; a
failed run), writes each kind of report, loads each in headless Chromium and asserts that the
page's self-check found every chart drawn and no script error, that legends stay capped and that
overloaded points are drawn on a clipped axis' edge. Saves a screenshot of each page.

    python3 tests/html_report_browser_test.py SIM SCREENSHOT_DIR

Exit status 77 (ctest's skip) when `chromium` is not on the PATH.
"""
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data")
SELFCHECK = re.compile(r'<pre id="servesim-selfcheck"[^>]*>(.*?)</pre>', re.S)


def chromium_args(profile):
    return ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--hide-scrollbars", f"--user-data-dir={profile}", "--virtual-time-budget=10000"]


def load(page, profile, screenshot=None, window="1400,5000"):
    """Loads page in headless Chromium: (self-check dict, seconds the browser process took)."""
    url = "file://" + os.path.abspath(page)
    start = time.monotonic()
    dom = subprocess.run(chromium_args(profile) + ["--dump-dom", url], capture_output=True, text=True,
                         timeout=120)
    seconds = time.monotonic() - start
    if dom.returncode != 0:
        raise AssertionError(f"chromium failed on {page}: {dom.stderr[-2000:]}")
    found = SELFCHECK.findall(dom.stdout)
    if not found or not found[-1].strip():
        raise AssertionError(f"{page}: no self-check result in the page (did its script run?)")
    check = json.loads(html.unescape(found[-1]))
    if screenshot:
        subprocess.run(chromium_args(profile) + [f"--screenshot={screenshot}", f"--window-size={window}", url],
                       capture_output=True, timeout=120, check=True)
    return check, seconds


def sim(binary, *args, cwd, expect=0):
    p = subprocess.run([binary, *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    if p.returncode != expect:
        raise AssertionError(f"sim {' '.join(args)}: exit {p.returncode}, expected {expect}\n{p.stdout}{p.stderr}")
    return p.stdout + p.stderr


TINY_WORKLOAD = """[generate]
requests = 12
seed = 3
[generate.arrival]
process = "poisson"
rate = 2000.0
[generate.prompt_tokens]
dist = "uniform"
min = 4
max = 40
[generate.output_tokens]
dist = "uniform"
min = 1
max = 12
"""


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, shots = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if shutil.which("chromium") is None:
        print("skipped: no chromium on the PATH (scripts/install-deps.sh installs it)")
        return 77
    os.makedirs(shots, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="servesim-html-")
    try:
        w = lambda name: os.path.join(DATA, "workloads", name)
        with open(os.path.join(tmp, "tiny.toml"), "w") as f:
            f.write(TINY_WORKLOAD)
        # Runs 1-2: one workload, two policies; run 3 another workload, rejecting half its requests (too
        # little KV memory); run 4 the cpu engine; run 5 fails.
        sim(binary, "--policy", "chunked-prefill", "--trace", w("multiturn.toml"), "--replicas", "2",
            "--log", "iterations", "--name", "chunked", cwd=tmp)
        sim(binary, "--policy", "continuous", "--trace", w("multiturn.toml"), "--replicas", "2", "--name",
            "continuous", cwd=tmp)
        sim(binary, "--policy", "continuous", "--trace", w("pareto.toml"), "--set", "kv.blocks=40", cwd=tmp)  # rejects
        sim(binary, "--backend", "cpu", "--model", os.path.join(DATA, "models", "tiny.json"), "--policy",
            "chunked-prefill", "--trace", "tiny.toml", "--max-num-seqs", "4", "--max-num-batched-tokens", "128",
            "--set", "kv.blocks=40", "--block-size", "4", "--set", "max_tokens=16", cwd=tmp)
        # A device a million times too slow: an iteration ends past the simulation horizon, and the
        # run is recorded as failed with what it logged until then.
        with open(os.path.join(DATA, "hardware", "a100-80gb.toml")) as f:
            slow = re.sub(r"(?m)^memory_bandwidth_gbs = \S+", "memory_bandwidth_gbs = 0.001", f.read())
        with open(os.path.join(tmp, "slow.toml"), "w") as f:
            f.write(re.sub(r"(?m)^fp16_tflops = \S+", "fp16_tflops = 1e-6", slow))
        sim(binary, "--hardware", "slow.toml", "--trace", w("pareto.toml"), cwd=tmp, expect=2)
        sim(binary, "sweep", "--trace", w("pareto.toml"), "--grid", "replicas=1,2", "--grid",
            "request_rate=2,4,8", "--goodput", "ttft:2000", "-j", "2", "--db", "sweep.db", cwd=tmp)
        # 12 configurations (a legend to cap) up to overload (an axis to clip).
        sim(binary, "sweep", "--trace", w("pareto.toml"), "--num-prompts", "200", "--log", "summary",
            "--grid", "replicas=1,2,3,4", "--grid", "max_num_seqs=16,64,256", "--grid",
            "request_rate=2,8,32,128,512", "--goodput", "ttft:2000", "-j", "2", "--db", "overload.db", cwd=tmp)
        sim(binary, "search", "--trace", w("pareto.toml"), "--num-prompts", "300", "--slo", "p99_ttft=1s",
            "--precision", "0.05", "-j", "2", "--db", "max_rate.db", cwd=tmp)
        sim(binary, "search", "--trace", w("pareto.toml"), "--num-prompts", "300", "--request-rate", "12",
            "--slo", "p99_ttft=1s", "--grid", "hardware=t4,a100-80gb,h100-sxm", "--grid", "tp=1,2", "--grid",
            "replicas=1,2,3,4,6,8", "--minimize", "cost_per_hour", "-j", "2", "--db", "cheapest.db", cwd=tmp)

        reports = {
            "single": (["--run", "1"], None),
            "compare": (["--run", "1", "--run", "2"], None),
            "workloads": (["--run", "2", "--run", "3"], "different workloads"),
            "rejected": (["--run", "3"], "Rejected requests by reason"),
            "cpu": (["--run", "4"], None),
            "sweep": (["--sweep", "--db", "sweep.db"], None),
            "sweep_overloaded": (["--sweep", "--db", "overload.db"], "Largest request_rate each configuration"),
            "search_max_rate": (["--sweep", "--db", "max_rate.db"], "the largest rate that passed"),
            "search_cheapest": (["--sweep", "--db", "cheapest.db"], "Best row per configuration"),
            "failed": (["--run", "5"], "This run failed: iteration"),
        }
        profile = os.path.join(tmp, "profile")
        failures = []
        for name, (args, must_say) in reports.items():
            page = os.path.join(tmp, name + ".html")
            sim(binary, "report", *args, "--html", page, cwd=tmp)
            with open(page) as f:
                text = f.read()
            check, seconds = load(page, profile, os.path.join(shots, f"report_{name}.png"))
            print(f"{name:10} {len(text) / 1024:8.0f} KiB {seconds:6.2f} s  {json.dumps(check)}")
            expected = check.get("charts_expected", -1)
            if name != "failed" and expected < 3:
                failures.append(f"{name}: only {expected} charts")
            if check.get("charts_drawn") != expected or check.get("failed") or check.get("errors"):
                failures.append(f"{name}: {check}")
            if must_say and must_say not in text:
                failures.append(f"{name}: the page does not say '{must_say}'")
            # At most 10 configurations, "+N more" and the dashed SLO lines.
            if check.get("legend_items_max", 0) > 12:
                failures.append(f"{name}: a legend of {check['legend_items_max']} entries")
            if name == "sweep_overloaded" and check.get("clipped_points", 0) == 0:
                failures.append(f"{name}: no point drawn on a clipped axis' edge")
        if failures:
            print("FAILED:\n  " + "\n  ".join(failures))
            return 1
        print(f"all pages drew every chart; screenshots in {shots}")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
