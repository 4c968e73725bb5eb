#!/usr/bin/env python3
"""Decode-step times of Hugging Face transformers on the same shapes as bench_decode.

Random-initialised bf16 models built from data/models/*.json, a KV cache of random tensors at
each context length, and the median time of one decode step (batch x 1 new token).
Prints "skipped: no torch" when torch or transformers is missing.
Usage: hf_decode_bench.py MODEL.json...
"""
import json
import sys
import time

try:
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache
except Exception:  # noqa: BLE001 - any import failure means there is nothing to measure
    print("skipped: no torch")
    sys.exit(0)


def bench(path):
    cfg_dict = json.load(open(path))
    name = path.rsplit("/", 1)[-1].removesuffix(".json")
    cfg = AutoConfig.for_model(cfg_dict.pop("model_type"), **cfg_dict)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16).eval()
    layers, kv = cfg.num_hidden_layers, cfg.num_key_value_heads
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    free = torch.cuda.mem_get_info()[0]
    for batch in (1, 8, 64, 256):
        for ctx in (128, 1024, 4096):
            kv_bytes = 2 * layers * batch * kv * ctx * hd * 2
            if kv_bytes * 1.3 > free - 4e9:
                print(f"{name:14s} hf-decode {batch:5d} {ctx:6d}  skipped: KV needs {kv_bytes / 1e9:.1f} GB")
                continue
            cache = DynamicCache()
            for layer in range(layers):
                k = torch.randn(batch, kv, ctx - 1, hd, device="cuda", dtype=torch.bfloat16)
                cache.update(k, torch.randn_like(k), layer)
            ids = torch.randint(0, cfg.vocab_size, (batch, 1), device="cuda")
            pos = torch.full((batch, 1), ctx - 1, device="cuda", dtype=torch.long)
            times = []
            with torch.inference_mode():
                for i in range(7):
                    torch.cuda.synchronize()
                    start = time.perf_counter()
                    model(input_ids=ids, position_ids=pos, past_key_values=cache, use_cache=True)
                    torch.cuda.synchronize()
                    times.append(time.perf_counter() - start)
                    cache.crop(ctx - 1)  # back to the same context for the next repetition
            del cache
            torch.cuda.empty_cache()
            ms = sorted(times[2:])[len(times[2:]) // 2] * 1e3
            print(f"{name:14s} hf-decode {batch:5d} {ctx:6d} {ms:9.3f}", flush=True)
    del model
    torch.cuda.empty_cache()


def main():
    print(f"# torch {torch.__version__}, transformers {transformers.__version__}")
    print(f"{'model':14s} {'step':9s} {'batch':>5s} {'ctx':>6s} {'ms':>9s}")
    for path in sys.argv[1:]:
        bench(path)


if __name__ == "__main__":
    main()
