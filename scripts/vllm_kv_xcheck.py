#!/usr/bin/env python3
"""vLLM's KV cache layout for a Hugging Face config.json, computed with vLLM's own planner, and an
optional comparison with servesim's `sim memory`.

Run with the Python of a vLLM 0.33 install (CPU only is enough):

  VENV/bin/python scripts/vllm_kv_xcheck.py CONFIG.json|DIR [--tp N] [--kv-cache-dtype auto|fp8]
        [--block-size auto|N] [--max-model-len L] [--mem 10GiB --mem 40GiB ...]
        [--sim build-rel/sim/sim [--negative-control]]

What is vLLM's and what is set up here:
  * The per-layer KVCacheSpec objects are built as the model's attention / MLA / chunked-local /
    GDN layers build them in get_kv_cache_spec() (the layers themselves need a GPU to construct),
    with vLLM's own ModelConfig (head size, KV heads per TP rank, dtype, layer_types, no_rope_layers)
    and vLLM's own Mamba state shape / dtype calculators.
  * The attention backend is the one vLLM picks on an H100 (see --gpu): it only matters through its
    supported kernel block sizes, which decide the default block size (FlashAttention: multiples
    of 16; FlashMLA: 64) and the hybrid Mamba block size (Platform._align_hybrid_block_size, called
    here with that backend's block sizes).
  * Grouping, page unification, num_blocks and concurrency are vLLM's functions, unchanged:
    get_global_kv_cache_groups, get_kv_cache_configs, generate_scheduler_kv_cache_config,
    get_max_concurrency_for_kv_cache_config. The layout is LBNHC, the one resolved on CUDA when no
    backend declares a layout preference.
  * Sliding-window and chunked-local groups reserve for the tokens in flight:
    max_in_flight_tokens = concurrent batches (2 with async scheduling) * max_num_batched_tokens
    (8192 for the API server on an H100/H200; 16384 for the LLM class or on >=160 GiB GPUs).

Output: one JSON object per (config, memory) on stdout, or with --sim the differences; exit 1 when
any differ (with --negative-control: exit 0 only when the deliberate perturbation is caught).
"""
import argparse
import contextlib
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

GIB = 1 << 30
LAYER_NAME = "model.layers.{}.attn"

# Kernel block sizes of the backend vLLM selects per GPU generation (vllm/platforms/cuda.py
# priorities; the sizes are the backends' get_supported_kernel_block_sizes()).
#   key: (gpu, use_mla, quantized kv) -> (backend name, sizes; ("multiple", n) = MultipleOf(n))
BACKENDS = {
    ("hopper", False, False): ("FLASH_ATTN", [("multiple", 16)]),
    ("hopper", False, True): ("FLASH_ATTN", [("multiple", 16)]),
    ("hopper", True, False): ("FLASH_ATTN_MLA", [("multiple", 16)]),
    ("hopper", True, True): ("FLASHMLA", [64]),  # FLASH_ATTN_MLA takes no fp8 KV
    ("blackwell", False, False): ("FLASHINFER", [16, 32, 64]),
    ("blackwell", False, True): ("FLASHINFER", [16, 32, 64]),
    ("blackwell", True, False): ("FLASHINFER_MLA", [32, 64]),
    ("blackwell", True, True): ("FLASHINFER_MLA", [32, 64]),
}


def parse_bytes(text):
    """'10GiB', '10G', '1.5gib' or a plain byte count -> int bytes."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*(gib|g|gb)?\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"bad memory size {text!r}")
    return int(float(m.group(1)) * GIB) if m.group(2) else int(m.group(1))


def quiet_vllm():
    """Silence vLLM's loggers below ERROR (the planner warns about padding layers)."""
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("vllm"):
            logging.getLogger(name).setLevel(logging.ERROR)


def stub_backend(name, sizes):
    """An AttentionBackend stand-in exposing only what KV planning reads: the kernel block sizes
    and an identity customize_spec (FlashAttention / FlashMLA do not repack dense K/V pages)."""
    from vllm.v1.attention.backend import MultipleOf

    declared = [MultipleOf(n) if isinstance(s, tuple) else s
                for s in sizes for n in ([s[1]] if isinstance(s, tuple) else [None])]

    class Backend:
        @staticmethod
        def get_name():
            return name

        @staticmethod
        def get_supported_kernel_block_sizes(kv_cache_spec=None):
            return list(declared)

        @classmethod
        def supports_block_size(cls, block_size):
            return any(block_size % s.base == 0 if isinstance(s, MultipleOf) else block_size == s
                       for s in declared)

        @classmethod
        def get_preferred_block_size(cls, default_block_size):
            if cls.supports_block_size(default_block_size):
                return default_block_size
            return min(s.base if isinstance(s, MultipleOf) else s for s in declared)

        @classmethod
        def customize_spec(cls, spec):
            return spec

        @staticmethod
        def is_ssm():
            return False

    return Backend


def model_config_capped(folder, max_model_len):
    """vLLM's ModelConfig at `max_model_len`, or at the model's own limit when that is lower (as a
    user would run it: vLLM refuses a longer one)."""
    from vllm.config import ModelConfig
    try:
        return ModelConfig(model=folder, skip_tokenizer_init=True, max_model_len=max_model_len,
                           seed=0)
    except ValueError as e:
        if "greater than the derived max_model_len" not in str(e):
            raise
        return ModelConfig(model=folder, skip_tokenizer_init=True, seed=0)


def tp_refused(config_path, tp):
    """True when `tp` does not divide the model's attention heads (vLLM refuses to start)."""
    with open(config_path) as f:
        config = json.load(f)
    text = config.get("text_config") or config
    heads = text.get("num_attention_heads") or config.get("num_attention_heads") or 1
    return heads % tp != 0


def make_vllm_config(config_path, args):
    """A VllmConfig for the model in `config_path` (the file is copied as config.json into a
    scratch folder; no tokenizer, no weights)."""
    from vllm.config import (CacheConfig, DeviceConfig, ModelConfig, ParallelConfig,
                             SchedulerConfig, VllmConfig)
    scratch = tempfile.mkdtemp(prefix="vllm-kvx-")
    shutil.copy(config_path, os.path.join(scratch, "config.json"))
    model_config = model_config_capped(scratch, args.max_model_len)
    cache_config = CacheConfig(
        block_size=None if args.block_size == "auto" else int(args.block_size),
        cache_dtype=args.kv_cache_dtype, enable_prefix_caching=not args.no_prefix_caching)
    scheduler_config = SchedulerConfig(
        max_num_batched_tokens=args.max_num_batched_tokens, max_num_seqs=1024,
        max_model_len=model_config.max_model_len, is_encoder_decoder=False,
        enable_chunked_prefill=True)
    with contextlib.redirect_stdout(io.StringIO()):
        vllm_config = VllmConfig(model_config=model_config, cache_config=cache_config,
                                 parallel_config=ParallelConfig(tensor_parallel_size=1),
                                 scheduler_config=scheduler_config,
                                 device_config=DeviceConfig(device="cpu"))
    # The TP degree only enters through the KV heads / state shapes per rank; setting it after
    # construction keeps the CPU platform from trying to start TP workers.
    vllm_config.parallel_config.tensor_parallel_size = args.tp
    vllm_config.scheduler_config.async_scheduling = args.concurrent_batches > 1
    vllm_config.scheduler_config.max_num_batched_tokens = args.max_num_batched_tokens
    vllm_config.cache_config.kv_cache_layout = "LBNHC"
    # VllmConfig's GPU rule for the hybrid manager (the CPU platform always turns it off):
    # off for chunked local attention unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE.
    vllm_config.scheduler_config.disable_hybrid_kv_cache_manager = args.disable_hma or (
        model_config.attention_chunk_size is not None and not args.chunked_local_hma)
    return vllm_config


def select_backend(vllm_config, args):
    """The attention backend stand-in for this model and GPU generation."""
    from vllm.v1.kv_cache_interface import is_quantized_kv_cache
    key = (args.gpu, vllm_config.model_config.use_mla,
           is_quantized_kv_cache(vllm_config.cache_config.cache_dtype))
    return stub_backend(*BACKENDS[key])


def resolve_block_size(vllm_config, backend, args):
    """Returns the Mamba prefill checkpoint alignment (None when none). Platform.update_block_size_for_backend: the backend's preferred block size unless one is
    given, then for hybrid (attention + Mamba) models the Mamba alignment, run as vLLM's own
    Platform._align_hybrid_block_size with the backend stand-in."""
    from unittest import mock

    from vllm.platforms.interface import Platform
    cache_config = vllm_config.cache_config
    if not cache_config.user_specified_block_size:
        cache_config.block_size = backend.get_preferred_block_size(cache_config.block_size)
    if not vllm_config.model_config.is_hybrid:
        return None
    set_mamba_cache_mode(vllm_config)
    align = 64 if (args.gdn_prefill == "flashinfer"
                   and cache_config.mamba_cache_mode == "align") else None
    with mock.patch.object(Platform, "_find_non_ssm_backends",
                           classmethod(lambda cls, vc: [backend])), \
         mock.patch("vllm.model_executor.layers.mamba.abstract."
                    "get_mamba_prefill_checkpoint_alignment", lambda vc: align):
        Platform._align_hybrid_block_size(vllm_config, backend)
    return align


def set_mamba_cache_mode(vllm_config):
    """MambaModelConfig.verify_and_update_config (prefix caching on -> 'align' mode)."""
    from vllm.model_executor.models.config import MambaModelConfig
    MambaModelConfig.verify_and_update_config(vllm_config)


def layer_kinds(model_config):
    """Per decoder layer: 'full', 'sliding', 'chunked', 'mla' or 'mamba', as the model files
    decide (gpt_oss.py: even layers slide; llama4.py: RoPE layers are chunked-local, the
    no_rope_layers[i] == 0 layers global; qwen3_next.py: layer_types 'linear_attention' is GDN;
    otherwise layer_types 'sliding_attention', or the model-wide sliding_window for all layers)."""
    text = model_config.hf_text_config
    n = text.num_hidden_layers
    arch = model_config.architecture
    layer_types = getattr(text, "layer_types", None)
    if model_config.use_mla:
        return ["mla"] * n
    if arch.startswith("GptOss"):
        return ["sliding" if i % 2 == 0 else "full" for i in range(n)]
    if arch.startswith("Llama4") and getattr(text, "attention_chunk_size", None):
        return ["full" if text.no_rope_layers[i] == 0 else "chunked" for i in range(n)]
    if model_config.is_hybrid:
        return ["mamba" if t == "linear_attention" else "full" for t in layer_types]
    if layer_types is not None and not all(t == "sliding_attention" for t in layer_types):
        return ["sliding" if t == "sliding_attention" else "full" for t in layer_types]
    return ["sliding" if model_config.get_sliding_window() else "full"] * n


def attention_spec(kind, vllm_config):
    """The spec Attention / MLAAttention / ChunkedLocalAttention.get_kv_cache_spec returns."""
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1.kv_cache_interface import (ChunkedLocalAttentionSpec, FullAttentionSpec,
                                            MLAAttentionSpec, SlidingWindowSpec,
                                            get_kv_quant_mode)
    mc, cc = vllm_config.model_config, vllm_config.cache_config
    dtype = kv_cache_dtype_str_to_dtype(cc.cache_dtype, mc)
    quant = get_kv_quant_mode(cc.cache_dtype)
    if kind == "mla":
        return MLAAttentionSpec(
            block_size=cc.block_size, num_kv_heads=1, max_tp_shards=1,
            head_size=mc.get_head_size(), dtype=dtype, cache_dtype_str=cc.cache_dtype,
            kv_quant_mode=quant,
            state_content_bytes={"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}.get(cc.cache_dtype))
    common = dict(block_size=cc.block_size,
                  num_kv_heads=mc.get_num_kv_heads(vllm_config.parallel_config),
                  head_size=mc.get_head_size(), dtype=dtype, kv_quant_mode=quant)
    text = mc.hf_text_config
    if kind == "sliding":
        # Attention.get_kv_cache_spec keeps the primary block size whenever the backend runs it.
        return SlidingWindowSpec(**common, sliding_window=text.sliding_window)
    if kind == "chunked":
        return ChunkedLocalAttentionSpec(**common,
                                         attention_chunk_size=text.attention_chunk_size)
    return FullAttentionSpec(**common)


def mamba_spec(vllm_config, align):
    """MambaBase.get_kv_cache_spec for a GDN layer, shapes and dtypes from the model class's
    own calculators (get_mamba_state_shape_from_config / get_mamba_state_dtype_from_config)."""
    from dataclasses import replace

    from vllm.model_executor.models import ModelRegistry
    from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum
    from vllm.v1.kv_cache_interface import MambaSpec
    mc, cc = vllm_config.model_config, vllm_config.cache_config
    model_cls, _ = ModelRegistry.resolve_model_cls(mc.architecture, model_config=mc)
    spec = MambaSpec(
        shapes=tuple(model_cls.get_mamba_state_shape_from_config(vllm_config)),
        dtypes=model_cls.get_mamba_state_dtype_from_config(vllm_config),
        block_size=cc.mamba_block_size, page_size_padded=cc.mamba_page_size_padded,
        mamba_type=MambaAttentionBackendEnum.GDN_ATTN, mamba_cache_mode=cc.mamba_cache_mode,
        num_speculative_blocks=vllm_config.num_speculative_tokens)
    if align is not None:  # FlashInfer GDN prefill exports one prefill checkpoint per request
        spec = replace(spec, num_prefill_checkpoint_blocks=1,
                       prefill_checkpoint_alignment=cc.mamba_block_size)
    return spec


def build_specs(vllm_config, align):
    """{layer name: KVCacheSpec} for one TP rank (all ranks hold the same specs)."""
    kinds = layer_kinds(vllm_config.model_config)
    specs = {}
    for i, kind in enumerate(kinds):
        specs[LAYER_NAME.format(i)] = (mamba_spec(vllm_config, align) if kind == "mamba"
                                       else attention_spec(kind, vllm_config))
    return specs


def group_kind(spec):
    """servesim's name for a group's spec type."""
    from vllm.v1.kv_cache_interface import (ChunkedLocalAttentionSpec, MambaSpec,
                                            MLAAttentionSpec, SlidingWindowSpec)
    for cls, kind in ((MLAAttentionSpec, "mla"), (SlidingWindowSpec, "sliding_window"),
                      (ChunkedLocalAttentionSpec, "chunked_local"), (MambaSpec, "mamba")):
        if isinstance(spec, cls):
            return kind
    return "full_attention"


def describe_group(group):
    """One output group: kind, layer indices, block size, page size and window / chunk."""
    spec = group.kv_cache_spec
    return {
        "kind": group_kind(spec),
        "layers": [int(re.search(r"\d+", n).group()) for n in group.layer_names],
        "block_size": spec.block_size,
        "page_size_bytes": spec.page_size_bytes,
        "sliding_window": getattr(spec, "sliding_window", None),
        "attention_chunk_size": getattr(spec, "attention_chunk_size", None),
    }


def plan(vllm_config, specs, available):
    """vLLM's planner for one rank's specs and `available` bytes: (scheduler KVCacheConfig,
    max concurrency at max_model_len)."""
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs
    from vllm.v1.core.kv_cache_utils import (generate_scheduler_kv_cache_config,
                                             get_max_concurrency_for_kv_cache_config)
    groups = get_global_kv_cache_groups(vllm_config, [dict(specs)])
    configs = get_kv_cache_configs(vllm_config, [dict(specs)], [available], groups)
    sched = generate_scheduler_kv_cache_config(configs)
    return sched, get_max_concurrency_for_kv_cache_config(vllm_config, sched)


def vllm_answer(config_path, args, available):
    """The JSON answer (dict) of vLLM for one config and one available-memory size."""
    vllm_config = make_vllm_config(config_path, args)
    backend = select_backend(vllm_config, args)
    align = resolve_block_size(vllm_config, backend, args)
    specs = build_specs(vllm_config, align)
    out = {"model": os.path.splitext(os.path.basename(config_path))[0], "tp": args.tp,
           "available_bytes": available, "kv_cache_dtype": args.kv_cache_dtype,
           "block_size": vllm_config.cache_config.block_size,
           "max_model_len": vllm_config.model_config.max_model_len,
           "backend": backend.get_name(),
           "max_in_flight_tokens": vllm_config.max_in_flight_tokens}
    try:
        sched, concurrency = plan(vllm_config, specs, available)
    except ValueError as e:  # not enough memory for one max_model_len request
        out["error"] = str(e).split(". Try")[0]
        return out
    mml = vllm_config.model_config.max_model_len
    out.update(groups=[describe_group(g) for g in sched.kv_cache_groups],
               num_blocks=sched.num_blocks,
               max_concurrency={"tokens": mml, "value": concurrency},
               kv_cache_tokens=int(concurrency * mml))
    return out


def run_sim(sim, config_path, args, available, block_size, max_model_len):
    """servesim's answer from `SIM memory ... --format json`."""
    cmd = [sim, "memory", "--model", config_path, "--tp", str(args.tp),
           "--kv-cache-memory-bytes", str(available), "--kv-cache-dtype", args.kv_cache_dtype,
           "--block-size", str(block_size), "--max-model-len", str(max_model_len),
           "--format", "json"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()}"}
    return json.loads(done.stdout)


def differences(want, got):
    """Every field of vLLM's answer that servesim's answer does not match (list of strings)."""
    if "error" in want or "error" in got:
        same = ("error" in want) == ("error" in got)
        return [] if same else [f"error: vLLM {want.get('error')!r} sim {got.get('error')!r}"]
    diffs = []
    for key in ("num_blocks",):
        if want[key] != got.get(key):
            diffs.append(f"{key}: vLLM {want[key]} sim {got.get(key)}")
    wc, gc = want["max_concurrency"]["value"], (got.get("max_concurrency") or {}).get("value")
    if gc is None or abs(wc - gc) > 1e-9 * max(1.0, abs(wc)):
        diffs.append(f"max_concurrency.value: vLLM {wc} sim {gc}")
    wg, gg = want["groups"], got.get("groups") or []
    if len(wg) != len(gg):
        diffs.append(f"groups: vLLM {len(wg)} sim {len(gg)}")
    for i, (a, b) in enumerate(zip(wg, gg)):
        for key in ("kind", "layers", "block_size", "page_size_bytes"):
            if a[key] != b.get(key):
                diffs.append(f"groups[{i}].{key}: vLLM {a[key]} sim {b.get(key)}")
    return diffs


def perturb(answer):
    """The negative control: servesim's answer with one block more than it said."""
    bad = json.loads(json.dumps(answer))
    if "num_blocks" in bad:
        bad["num_blocks"] += 1
    else:
        bad["error"] = None
        bad.pop("error")
        bad["num_blocks"] = 1
    return bad


def config_paths(target):
    """A config file, or every *.json in a folder (README-like files skipped)."""
    if os.path.isdir(target):
        return sorted(os.path.join(target, f) for f in os.listdir(target)
                      if f.endswith(".json"))
    return [target]


def parse_args(argv):
    """Command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("config", help="config.json, or a folder of them")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--kv-cache-dtype", default="auto")
    p.add_argument("--block-size", default="auto", help="'auto' (vLLM's pick) or tokens")
    p.add_argument("--max-model-len", type=int, default=8192)
    p.add_argument("--mem", type=parse_bytes, action="append",
                   help="available KV memory per GPU: bytes or e.g. 10GiB (repeatable)")
    p.add_argument("--max-num-batched-tokens", type=int, default=8192)
    p.add_argument("--concurrent-batches", type=int, default=2,
                   help="2 with async scheduling (vLLM's GPU default), else PP size")
    p.add_argument("--gpu", choices=("hopper", "blackwell"), default="hopper")
    p.add_argument("--gdn-prefill", choices=("flashinfer", "triton"), default="flashinfer",
                   help="GDN prefill kernel (flashinfer: vLLM's default on Hopper)")
    p.add_argument("--no-prefix-caching", action="store_true")
    p.add_argument("--disable-hma", action="store_true",
                   help="--disable-hybrid-kv-cache-manager")
    p.add_argument("--chunked-local-hma", action="store_true",
                   help="as VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1")
    p.add_argument("--sim", help="servesim binary: compare with `SIM memory`")
    p.add_argument("--negative-control", action="store_true",
                   help="perturb the sim's answer; succeed only if the mismatch is caught")
    args = p.parse_args(argv)
    args.mem = args.mem or [10 * GIB, 40 * GIB]
    return args


def main(argv=None):
    """Print vLLM's answers, or compare them with servesim's; see the module docstring."""
    args = parse_args(argv)
    import vllm  # noqa: F401  (import first, then silence its loggers)
    quiet_vllm()
    failures = caught = 0
    for path in config_paths(args.config):
        if tp_refused(path, args.tp):
            print(f"{os.path.basename(path)} tp={args.tp}: skipped (tp does not divide the heads)")
            continue
        for available in args.mem:
            want = vllm_answer(path, args, available)
            if not args.sim:
                print(json.dumps(want))
                continue
            got = run_sim(args.sim, path, args, available, want["block_size"],
                          want["max_model_len"])
            if args.negative_control:
                got = perturb(got)
            diffs = differences(want, got)
            tag = f"{want['model']} tp={args.tp} mem={available}"
            print(f"{tag}: " + ("match" if not diffs else "MISMATCH\n  " + "\n  ".join(diffs)))
            failures += bool(diffs)
            caught += bool(diffs)
    if args.negative_control:
        return 0 if args.sim and caught and failures == caught else 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
