#!/usr/bin/env python3
"""Constructs the vLLM result files of this folder. They are NOT measurements: no GPU served them.

  make_constructed.py base OUT.json
      120 requests in the layout of `vllm bench serve --save-result --save-detailed` (vLLM 0.33):
      Poisson arrivals at 4 req/s as start_times, prompt and output lengths drawn (seed 7), and no
      latencies yet (ttft 0, no itls): the input of the next step.
  sim validate --vllm-result OUT.json --write-simulated SIM.json
      the simulator's replay of those requests, written in the same layout.
  make_constructed.py perturb SIM.json OUT.json
      SIM.json made to look measured: every TTFT and every gap multiplied by lognormal noise
      (sigma 0.15 and 0.10; TTFTs 15 % slower on average), the latency recomputed as ttft +
      sum(itls) (as vLLM's own plot does), and 4 requests marked failed as vLLM records a failure
      (error text, ttft 0, no itls, output_len 0, latency 0).
"""
import json
import math
import random
import sys


def base(out):
    rng = random.Random(7)
    n = 120
    t, starts, inputs, outputs = 100.0, [], [], []  # start_times are perf_counter() values
    for _ in range(n):
        t += rng.expovariate(4.0)
        starts.append(round(t, 6))
        inputs.append(max(4, min(4000, int(rng.lognormvariate(math.log(400), 0.8)))))
        outputs.append(max(1, min(1000, int(rng.lognormvariate(math.log(120), 0.9)))))
    result = {
        "date": "20250101-000000", "endpoint_type": "vllm", "backend": "vllm", "label": None,
        "model_id": "meta-llama/Llama-2-7b-hf", "tokenizer_id": "meta-llama/Llama-2-7b-hf",
        "num_prompts": n, "request_rate": 4.0, "burstiness": 1.0, "max_concurrency": None,
        "input_lens": inputs, "output_lens": outputs, "ttfts": [0.0] * n, "itls": [[] for _ in range(n)],
        "start_times": starts, "generated_texts": [""] * n, "errors": [""] * n,
    }
    with open(out, "w") as f:
        json.dump(result, f)


def perturb(sim_file, out):
    rng = random.Random(11)
    r = json.load(open(sim_file))
    n = len(r["ttfts"])
    for i in range(n):
        r["ttfts"][i] *= math.exp(rng.gauss(math.log(1.15), 0.15))
        r["itls"][i] = [g * math.exp(rng.gauss(0.0, 0.10)) for g in r["itls"][i]]
        r["latencies"][i] = r["ttfts"][i] + sum(r["itls"][i])
    for i in (17, 42, 77, 101):
        r["errors"][i] = "Traceback (most recent call last): aiohttp.ClientPayloadError (constructed)"
        r["ttfts"][i], r["itls"][i], r["output_lens"][i], r["latencies"][i] = 0.0, [], 0, 0.0
    ok = [i for i in range(n) if not r["errors"][i]]
    r["backend"] = r["endpoint_type"] = "vllm"
    r["completed"], r["failed"] = len(ok), n - len(ok)
    r["duration"] = max(r["start_times"][i] + r["latencies"][i] for i in ok) - min(r["start_times"])
    r["total_output_tokens"] = sum(r["output_lens"][i] for i in ok)
    r["output_throughput"] = r["total_output_tokens"] / r["duration"]
    for key in ("ttfts", "latencies", "start_times", "queue_times"):  # microseconds, as perf_counter
        r[key] = [round(v, 6) for v in r[key]]
    r["itls"] = [[round(g, 6) for g in gaps] for gaps in r["itls"]]
    with open(out, "w") as f:
        json.dump(r, f)


if __name__ == "__main__":
    {"base": lambda: base(sys.argv[2]), "perturb": lambda: perturb(sys.argv[2], sys.argv[3])}[sys.argv[1]]()
