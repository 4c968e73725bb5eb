#!/usr/bin/env python3
"""Runs a `sim sweep` on a Ray cluster: every point a Ray task, every row back in one database.

    python3 scripts/ray_sweep.py --address HOST:PORT|auto [--sim PATH] [--retries N] -- SWEEP ARGS

SWEEP ARGS are those of `sim sweep` (a sweep file, --grid, run options, --db); for example

    python3 scripts/ray_sweep.py --address auto -- --trace pareto.toml \\
        --grid replicas=1,2,4,8 --grid request_rate=2,4,8,16 --db plan.db

How: the sweep is first checked here (`sim sweep ... --dry-run`: a bad key or value fails before
anything runs, and nothing is written). Then point p of N runs on a worker as
`sim sweep ... --shard p/N --db <a file of its own>`, the same binary and the same sweep
definition as a local sweep, and the task returns that small database (summaries only, unless
--log says otherwise). The driver merges each into the target (`sim merge`), where the points join
one sweep. A worker that dies loses only its point: Ray runs the task again (--retries). Points
finished before an interruption stay in the target, and running the driver again with the same
arguments runs only the points the target lacks.

Every node must have `sim` at the path given (--sim; default: the one this checkout built, or
`sim` on the PATH) and the workload's files at the same paths, as on a shared file system.
Ray comes from PyPI (`pip install ray`); scripts/install-deps.sh with RAY=1 puts it in .venv-ray.
"""
import argparse
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # importing ray_common leaves no scripts/__pycache__ in the checkout
from ray_common import KILL_ONCE, connect, default_sim, fail, refuse_flags, sim_path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--address", required=True, help="the Ray cluster: HOST:PORT or auto")
    ap.add_argument("--sim", default=default_sim(), help="the sim binary, at this path on every node")
    ap.add_argument("--retries", type=int, default=3, help="times a task whose worker died runs again")
    ap.add_argument("--batch", type=int, default=64, help="merge finished points this many at a time")
    ap.add_argument("sweep", nargs=argparse.REMAINDER, help="-- then the arguments of `sim sweep`")
    a = ap.parse_args()
    args = a.sweep[1:] if a.sweep[:1] == ["--"] else a.sweep
    refuse_flags(args, ("--shard", "--resume", "-j", "--jobs", "--dry-run"), "is chosen by the driver; leave it out")
    sim = sim_path(a.sim)

    # 1. The sweep, checked locally: nothing runs and nothing is written if it is bad.
    check = subprocess.run([sim, "sweep", *args, "--dry-run"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    if check.returncode != 0:
        sys.stderr.write(check.stderr)
        sys.exit(check.returncode)
    plan = json.loads(check.stdout)
    points, target = plan["points"], plan["db"]
    # Points of this very sweep already in the target (an earlier, interrupted run of the driver)
    # are not run again: done ones, and failed ones (their configuration cannot change).
    settled = set()
    if os.path.exists(target):
        try:
            con = sqlite3.connect(f"file:{target}?mode=ro", uri=True)
            settled = {p for (p,) in con.execute(
                "SELECT p.point FROM sweep_points p JOIN sweeps s ON s.id = p.sweep_id WHERE s.kind = 'sweep' "
                "AND s.spec = ? AND p.status IN ('done', 'failed')", (plan["spec"],))}
            con.close()
        except sqlite3.Error:
            settled = set()  # not a servesim database yet: sim merge will say so
    todo = [p for p in range(points) if p not in settled]
    if settled:
        print(f"{len(settled)} of {points} points are in {target} already; running the other {len(todo)}",
              file=sys.stderr)

    # 2. Ray, before any point runs.
    ray, address = connect(a.address)

    # The worker's db path must not be in args: drop --db and give its own.
    worker_args, skip = [], False
    for x in args:
        if skip:
            skip = False
            continue
        if x == "--db":
            skip = True
            continue
        if x.startswith("--db="):
            continue
        worker_args.append(x)

    @ray.remote(max_retries=a.retries, retry_exceptions=True, num_cpus=1)
    def run_point(p):
        kill = os.environ.get(KILL_ONCE, "")
        if kill and kill.split(":", 1)[0] == str(p):
            marker = os.path.join(kill.split(":", 1)[1], f"killed{p}")
            if not os.path.exists(marker):
                open(marker, "w").close()
                os._exit(1)  # the worker process dies mid-task, as a lost node's would
        tmp = tempfile.mkdtemp(prefix="servesim-ray-")
        try:
            db = os.path.join(tmp, "point.db")
            r = subprocess.run([sim, "sweep", *worker_args, "--shard", f"{p}/{points}", "-j", "1",
                                "--db", db], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"point {p} on {socket.gethostname()}: {r.stderr.strip()}")
            with open(db, "rb") as f:
                return p, f.read()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    pending = [run_point.remote(p) for p in todo]
    local = tempfile.mkdtemp(prefix="servesim-ray-driver-")
    finished, failed, batch = 0, [], []

    def merge(files):
        r = subprocess.run([sim, "merge", *files, "--into", target], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            fail(f"merging into {target}: {r.stderr.strip()}", 1)
        for f in files:
            os.remove(f)

    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=min(len(pending), a.batch), timeout=1.0)
            for ref in done:
                try:
                    p, data = ray.get(ref)
                except Exception as e:  # noqa: BLE001 - the task failed after its retries
                    failed.append(str(e).strip().splitlines()[-1])
                    continue
                path = os.path.join(local, f"point{p}.db")
                with open(path, "wb") as f:
                    f.write(data)
                batch.append(path)
                finished += 1
            if len(batch) >= a.batch or (not pending and batch):
                merge(batch)
                batch = []
            print(f"\r{finished}/{len(todo)} points", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    except KeyboardInterrupt:
        if batch:
            merge(batch)
        fail(f"interrupted: {finished} of {points} points are in {target}", 130)
    finally:
        shutil.rmtree(local, ignore_errors=True)
    report = subprocess.run([sim, "report", "--sweep", "--db", target], text=True)
    for message in failed:
        print(f"ray_sweep: a point failed on its worker: {message}", file=sys.stderr)
    print(f"{finished} of {len(todo)} points ran on Ray at {address}"
          f"{f' ({len(settled)} were done already)' if settled else ''}; rows in {target}")
    sys.exit(1 if failed else report.returncode)


if __name__ == "__main__":
    main()
