#!/usr/bin/env python3
"""Diffs the keys of `sim report --format vllm-json` against those vLLM's `bench serve --save-result`
writes, read from an installed vLLM's benchmarks/serve.py (issue 12).

    python3 scripts/vllm_keys_diff.py VLLM_SERVE_PY OURS.json

VLLM_SERVE_PY: e.g. ~/.venvs/vllm/lib/python3.11/site-packages/vllm/benchmarks/serve.py.
OURS.json: `sim report --format vllm-json --metric-percentiles 99 > OURS.json`. vLLM's keys are the
setup keys (result_json[...]), the result dict of a generation benchmark without --save-detailed,
and mean/median/std/p99 of ttft, tpot, itl and e2el (--percentile-metrics ttft,tpot,itl,e2el).
Prints the keys missing from ours, the extra ones, and whether the order is vLLM's; exits 1 if any
is missing.
"""
import json
import re
import sys


def vllm_keys(src):
    keys = []
    for m in re.finditer(r'result_json\["(\w+)"\]\s*=', src):
        if m.group(1) not in keys:
            keys.append(m.group(1))
    block = src[src.index("if isinstance(metrics, BenchmarkMetrics):\n        result = {"):]
    block = block[:block.index("}")]
    for k in re.findall(r'"(\w+)":', block):
        if k not in keys:
            keys.append(k)
    # Dropped without --save-detailed; ramp-up keys only with --ramp-up-strategy.
    detailed = {"input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts", "errors",
                "server_queue_times", "server_ttfts"}
    keys = [k for k in keys if k not in detailed and not k.startswith("ramp_up")]
    for m in ["ttft", "tpot", "itl", "e2el"]:
        keys += [f"mean_{m}_ms", f"median_{m}_ms", f"std_{m}_ms", f"p99_{m}_ms"]
    return keys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    theirs = vllm_keys(open(sys.argv[1]).read())
    ours = list(json.load(open(sys.argv[2])).keys())
    missing = [k for k in theirs if k not in ours]
    print(f"vLLM's keys: {len(theirs)}; ours: {len(ours)}")
    print("missing from ours:", missing)
    print("extra in ours:", [k for k in ours if k not in theirs])
    print("in vLLM's order:", [k for k in ours if k in theirs] == theirs)
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
