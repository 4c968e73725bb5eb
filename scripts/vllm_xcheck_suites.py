#!/usr/bin/env python3
"""servesim's vLLM policies against vLLM's own V1 Scheduler: every suite, for the installed release.

Runs ../shared/tools/vllm_xcheck.py (the cross-check tool: vLLM's real Scheduler driven step by
step beside `sim --backend unit` on the same requests, every decision compared) with the suites
it has -- plain chunked prefill, with long_prefill_token_threshold, with prefix caching, with both
-- and adds the ones it lacks:
  priority             scheduling_policy = "priority", per-request priorities 0..3
  priority-prefix      the same with prefix caching and a threshold
  adaptive             long_prefill_token_threshold_adaptive = true
  tight-prefix         prefix caching with a KV cache barely larger than the largest request, so
                       that preemption under prefix caching is the rule
  hybrid-swa           vLLM's hybrid KV cache manager with full-attention and sliding-window
                       groups (1-2 of each, windows of 4 to 64 tokens) from one block pool: blocks
                       that leave the window are freed as the requests run (sim: kv.*_groups)
  hybrid-chunked       the same with chunked-local groups (Llama-4's layout with the hybrid manager)
  hybrid-mamba         full-attention groups beside 1-3 Mamba groups (MambaSpec, "none" mode as
                       without prefix caching: one state block per request; Qwen3-Next's layout)
  mla                  one MLA group (DeepSeek's latent cache: MLAAttentionSpec)
With --negative-control, the hybrid suites run the sim with the windowed groups laid out as full
attention (no window freeing): they must then fail.
The sim runs with `policy.vllm_version` set to the installed vLLM's release; suites whose switch
that release lacks are skipped (0.11.0: priority, adaptive).

Usage (a virtual environment with vLLM, CPU only; see ../shared/tools/README.md):
  VENV/bin/python scripts/vllm_xcheck_suites.py --sim build/sim/sim --cases 1000 --seed 7
Options: --cases N (per suite), --seed S, --only LIST (comma-separated suite names), --out FILE
(mismatch details), --xcheck PATH (the shared tool), --no-minimise, --sim-set KEY=VALUE
(diagnostic: an extra --set for every sim run, to see a suite fail without a behaviour).
Exit status 0 when every case of every suite matches, 1 otherwise.
"""
import argparse
import copy
import importlib.util
import inspect
import math
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_XCHECK = os.path.join(HERE, "..", "..", "shared", "tools", "vllm_xcheck.py")

# The case being run: run_vllm / run_sim are wrapped to set it, so that the vLLM constructors and
# the sim command see its extra settings ("priority_sched", "adaptive", request "priority").
CURRENT = {"case": None}
RELEASE = {"version": None}
SIM_SET = []  # --sim-set: extra `--set` overrides for every sim run (negative controls)
NEGATIVE = {"on": False}
XC = {"tool": None}  # the shared tool's module  # --negative-control: hybrid suites without the window's freeing


def load_xcheck(path):
    spec = importlib.util.spec_from_file_location("vllm_xcheck", path)
    xc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(xc)
    return xc


def with_signature(fn, like):
    fn.__signature__ = inspect.signature(like)  # the tool inspects the constructors' parameters
    return fn


def patch(xc):
    V = xc.vllm_import()
    sched_config, request = V["SchedulerConfig"], V["Request"]

    def scheduler_config(*a, **kw):
        case = CURRENT["case"] or {}
        if case.get("priority_sched"):
            kw["policy"] = "priority"
        if case.get("adaptive"):
            kw["long_prefill_token_threshold_adaptive"] = True
        return sched_config(*a, **kw)

    def make_request(*a, **kw):
        case = CURRENT["case"] or {}
        prio = {r["id"]: r.get("priority", 0) for r in case.get("requests", [])}
        if case.get("priority_sched"):
            kw["priority"] = prio[kw["request_id"]]
        return request(*a, **kw)

    kv_config = V["KVCacheConfig"]

    def make_kv_config(*a, **kw):
        """The case's KV groups (hybrid suites) in place of the tool's one full-attention group."""
        case = CURRENT["case"] or {}
        if case.get("kv_groups"):
            kw["kv_cache_groups"] = kv_groups_of(V, case)
        return kv_config(*a, **kw)

    V["KVCacheConfig"] = with_signature(make_kv_config, kv_config)
    scheduler = V["Scheduler"]

    def make_scheduler_obj(*a, **kw):
        """Mamba groups ("none" mode) have blocks of max_model_len tokens: the scheduler's block
        size is the groups' least common multiple, as vLLM's engine sets it."""
        case = CURRENT["case"] or {}
        if (case.get("kv_groups") or {}).get("kind") == "mamba" and "block_size" in kw:
            kw["block_size"] = math.lcm(kw["block_size"], xcheck_max_model_len())
            kw["hash_block_size"] = case["block_size"]
        return scheduler(*a, **kw)

    V["Scheduler"] = with_signature(make_scheduler_obj, scheduler)
    V["SchedulerConfig"] = with_signature(scheduler_config, sched_config)
    V["Request"] = with_signature(make_request, request)

    run_vllm, run_sim, sim_command = xc.run_vllm, xc.run_sim, xc.sim_command
    make_scheduler = xc.make_scheduler

    def make_scheduler_(case, *a, **kw):
        s = make_scheduler(case, *a, **kw)
        # Guard against a switch that did not reach vLLM.
        assert (s.policy.value == "priority") == bool(case.get("priority_sched")), s.policy
        assert getattr(s.scheduler_config, "long_prefill_token_threshold_adaptive",
                       False) == bool(case.get("adaptive"))
        return s

    def run_vllm_(case, *a, **kw):
        CURRENT["case"] = case
        return run_vllm(case, *a, **kw)

    def run_sim_(case, *a, **kw):
        CURRENT["case"] = case
        return run_sim(case, *a, **kw)

    def sim_command_(case, *a, **kw):
        cmd = sim_command(case, *a, **kw)
        cmd += ["--set", f"policy.vllm_version={RELEASE['version']}"]
        if case.get("priority_sched"):
            cmd += ["--set", "policy.scheduling_policy=priority"]
        if case.get("adaptive"):
            cmd += ["--set", "policy.long_prefill_token_threshold_adaptive=true"]
        for kv in SIM_SET:
            cmd += ["--set", kv]
        g = case.get("kv_groups")
        if g and g["kind"] == "mamba":
            cmd += ["--set", f"kv.full_groups={g['full']}",
                    "--set", f"kv.state_groups={0 if NEGATIVE['on'] else g['windowed']}"]
        elif g and g["kind"] != "mla":
            windowed = 0 if NEGATIVE["on"] else g["windowed"]
            cmd += ["--set", f"kv.full_groups={g['full'] + g['windowed'] - windowed}",
                    "--set", f"kv.windowed_groups={windowed}"]
            if windowed:
                cmd += ["--set", f"kv.window={g['window']}", "--set", f"kv.window_kind={g['kind']}"]
        return cmd

    def case_toml(case):
        lines = []
        for pid in sorted(case["prefixes"]):
            lines += ["[[prefix]]", f'id = "{pid}"', f"tokens = {case['prefixes'][pid]}", ""]
        for r in case["requests"]:
            lines += ["[[request]]", f'id = "{r["id"]}"', f"arrival = {r['arrival']}",
                      f"prompt_tokens = {r['own']}", f"output_tokens = {r['output']}",
                      f"max_tokens = {r['output']}"]
            if r["prefix"] is not None:
                lines.append(f'prefix = "{r["prefix"]}"')
            if "priority" in r:
                lines.append(f"priority = {r['priority']}")
            lines.append("")
        return "\n".join(lines)

    describe = xc.describe_case

    def describe_case(case):
        text = describe(case)
        extra = [k for k in ("priority_sched", "adaptive") if case.get(k)]
        if extra:
            text += "\n  " + ", ".join(extra) + "; priorities: " + ", ".join(
                f"{r['id']}={r.get('priority', 0)}" for r in case["requests"])
        return text

    xc.run_vllm, xc.run_sim, xc.sim_command = run_vllm_, run_sim_, sim_command_
    xc.make_scheduler = make_scheduler_
    xc.case_toml, xc.describe_case = case_toml, describe_case
    return V


def kv_groups_of(V, case):
    """vLLM KVCacheGroupSpecs for a hybrid case: full-attention groups, then windowed ones (or one
    MLA group). Specs as the model layers build them (one KV head of size 1 is enough here)."""
    from vllm.v1.kv_cache_interface import (ChunkedLocalAttentionSpec, MambaSpec,
                                            MLAAttentionSpec, SlidingWindowSpec)
    g, bs, dt = case["kv_groups"], case["block_size"], V["torch"].float32
    if g["kind"] == "mla":
        return [V["KVCacheGroupSpec"](["mla"], MLAAttentionSpec(
            block_size=bs, num_kv_heads=1, head_size=576, dtype=dt))]
    groups = [V["KVCacheGroupSpec"]([f"full{i}"], V["FullAttentionSpec"](
        block_size=bs, num_kv_heads=1, head_size=1, dtype=dt)) for i in range(g["full"])]
    if g["kind"] == "mamba":  # "none" mode: a block of max_model_len tokens, one per request
        return groups + [V["KVCacheGroupSpec"]([f"mamba{i}"], MambaSpec(
            block_size=xcheck_max_model_len(), shapes=((1,),), dtypes=(dt,), mamba_cache_mode="none"))
            for i in range(g["windowed"])]
    for i in range(g["windowed"]):
        if g["kind"] == "chunked":
            spec = ChunkedLocalAttentionSpec(block_size=bs, num_kv_heads=1, head_size=1, dtype=dt,
                                             attention_chunk_size=g["window"])
        else:
            spec = SlidingWindowSpec(block_size=bs, num_kv_heads=1, head_size=1, dtype=dt,
                                     sliding_window=g["window"])
        groups.append(V["KVCacheGroupSpec"]([f"win{i}"], spec))
    return groups


def xcheck_max_model_len():
    """The shared tool's max_model_len (its model config's)."""
    return XC["tool"].MAX_MODEL_LEN


def hybridize(rng, case, kind):
    """A case of the hybrid suites: its groups, and a pool that holds them (the drawn cache times
    the groups, so that tight and loose caches stay as likely as in the plain suite)."""
    full, windowed = (1, 0) if kind == "mla" else (rng.randint(1, 2), rng.randint(1, 2 if kind != "mamba" else 3))
    window = rng.choice([4, 8, 16, 24, 32, 48, 64]) if kind != "chunked" else rng.choice([16, 32, 64, 128])
    case["kv_groups"] = {"kind": kind, "full": full, "windowed": windowed, "window": window}
    if kind == "mamba":  # one block per request and Mamba group on top of the attention's
        case["num_blocks"] = (case["num_blocks"] - 1) * full + windowed * rng.randint(1, len(case["requests"])) + 1
    else:
        case["num_blocks"] = (case["num_blocks"] - 1) * (full + windowed) + 1
    case["name"] = f"{kind}-" + case["name"]


def tighten(rng, case):
    """A KV cache from 'the largest request barely fits' to 1.5 times that."""
    bs = case["block_size"]
    need = max(-(-(prompt_len(case, r) + r["output"] - 1) // bs) for r in case["requests"])
    case["num_blocks"] = need + rng.randint(0, need // 2) + 1  # + vLLM's null block
    return case


def prompt_len(case, r):
    return (case["prefixes"][r["prefix"]] if r["prefix"] is not None else 0) + r["own"]


def suites(xc, seed, n):
    """name -> (list of cases, needs priority, needs adaptive)."""
    def gen(s, prefix, threshold, extra=None):
        rng = random.Random(s)
        cases = []
        for i in range(n):
            c = xc.rand_case(rng, i, prefix_caching=prefix, threshold_mode=threshold)
            if extra:
                extra(rng, c)
            cases.append(c)
        return cases

    def priority(rng, c):
        c["priority_sched"] = True
        c["name"] = "prio-" + c["name"]
        for r in c["requests"]:
            r["priority"] = rng.randint(0, 3)
        if rng.random() < 0.5:
            tighten(rng, c)

    def adaptive(rng, c):
        c["adaptive"] = True
        c["name"] = "adapt-" + c["name"]

    def tight(rng, c):
        c["name"] = "tight-" + c["name"]
        tighten(rng, c)

    # The first four use the shared tool's own generators and seeds.
    return {
        "plain": (lambda: gen(seed, False, False), False, False),
        "threshold": (lambda: gen(seed * 1000 + 7, False, True), False, False),
        "prefix": (lambda: gen(seed * 1000 + 3, True, False), False, False),
        "prefix-threshold": (lambda: gen(seed * 1000 + 11, True, True), False, False),
        "priority": (lambda: gen(seed * 1000 + 13, False, True, priority), True, False),
        "priority-prefix": (lambda: gen(seed * 1000 + 17, True, True, priority), True, False),
        "adaptive": (lambda: gen(seed * 1000 + 19, True, True, adaptive), False, True),
        "tight-prefix": (lambda: gen(seed * 1000 + 23, True, False, tight), False, False),
        "hybrid-swa": (lambda: gen(seed * 1000 + 29, False, True, lambda r, c: hybridize(r, c, "sliding")),
                       False, False),
        "hybrid-chunked": (lambda: gen(seed * 1000 + 31, False, True, lambda r, c: hybridize(r, c, "chunked")),
                           False, False),
        "hybrid-mamba": (lambda: gen(seed * 1000 + 41, False, True, lambda r, c: hybridize(r, c, "mamba")),
                         False, False),
        "mla": (lambda: gen(seed * 1000 + 37, False, True, lambda r, c: hybridize(r, c, "mla")), False, False),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sim", default="sim")
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default="vllm-xcheck-suites.txt")
    ap.add_argument("--xcheck", default=DEFAULT_XCHECK)
    ap.add_argument("--no-minimise", action="store_true")
    ap.add_argument("--sim-set", action="append", default=[], metavar="KEY=VALUE",
                    help="diagnostic: an extra --set for every sim run, e.g. "
                         "policy.scheduling_policy=fcfs to see the suites fail without it")
    ap.add_argument("--negative-control", action="store_true",
                    help="the hybrid suites with the sim's windowed groups laid out as full attention: "
                         "they must fail (exit 0 only then)")
    args = ap.parse_args()
    SIM_SET.extend(args.sim_set)
    NEGATIVE["on"] = args.negative_control

    xc = load_xcheck(args.xcheck)
    XC["tool"] = xc
    V = patch(xc)
    version = V["vllm"].__version__
    RELEASE["version"] = version
    reserve = xc.has_reserve_full_isl()
    # What the tool's Runner reads from its arguments.
    targs = argparse.Namespace(sim=args.sim, kv_offset=-1, classify=False, out=args.out,
                               reserve_full_isl="on" if reserve else "off")
    runner = xc.Runner(targs)
    t0 = time.time()
    details = open(args.out, "w")

    def log(msg):
        print(msg, flush=True)
        details.write(msg + "\n")

    log(f"vLLM {version} (scheduler_reserve_full_isl {'on' if reserve else 'absent'}); sim "
        f"{args.sim} with policy.vllm_version={version}; {args.cases} cases per suite, seed "
        f"{args.seed}")
    xc.convention_check(runner, log)
    has_priority = version != "0.11.0"
    has_adaptive = "long_prefill_token_threshold_adaptive" in xc._params(V["SchedulerConfig"])
    only = set(filter(None, args.only.split(",")))
    all_ok = True
    total = [0, 0]
    for name, (make, needs_prio, needs_adapt) in suites(xc, args.seed, args.cases).items():
        if only and name not in only:
            continue
        if (needs_prio and not has_priority) or (needs_adapt and not has_adaptive):
            log(f"{name}: skipped (servesim does not mirror this switch for vLLM {version}; see 'sim list policies')")
            continue
        cases = make()
        m, n, fails = xc.run_suite(runner, cases, name, log, details, not args.no_minimise)
        total[0] += m
        total[1] += n
        all_ok = all_ok and m == n
    log(f"{total[0]}/{total[1]} cases match over all suites ({time.time() - t0:.0f} s; details in "
        f"{args.out})")
    details.close()
    if args.negative_control:
        return 0 if not all_ok else 1
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
