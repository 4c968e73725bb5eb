#!/usr/bin/env python3
"""Runs a `sim search` on a Ray cluster: the probes of each round in parallel, as Ray tasks.

    python3 scripts/ray_search.py --address HOST:PORT|auto [--jobs N] [--sim PATH] [--retries N] \\
        -- SEARCH ARGS

SEARCH ARGS are those of `sim search` (--slo, --grid, run options, --db) but -j; for example

    python3 scripts/ray_search.py --address auto -- --trace pareto.toml --request-rate 20 \\
        --slo p99_ttft=2s --grid hardware=a100-80gb,h100-sxm --grid replicas=1,2,4,8 --db plan.db

How: the search itself runs here, as `sim search ... -j N --probes-external`: the same binary
chooses the same probes as a local search with -j N and gives the same answer. N, the probes of a
round, is --jobs, by default the cluster's CPUs. For each round it asks this driver to run the
round's configurations (a line on its stdout; runner/external_probes.h has the protocol); each
probe runs on a worker as `sim run --config FILE --db <a file of its own>`, in the folder this
driver was started in when the worker has it, and the task returns that small database; the search
merges each into its database, where the probe joins the search as a local probe does. A worker
that dies loses only its probe: Ray runs the task again (--retries); a probe whose task fails after
its retries is a failed probe, and the search goes on. Ctrl-C stops the search as it stops a local
one: the probes finished are kept and the table printed (exit 130).

Every node must have `sim` at the path given (--sim; default: the one this checkout built, or
`sim` on the PATH) and the workload's files at the same paths, as on a shared file system.
Ray comes from PyPI (`pip install ray`); scripts/install-deps.sh with RAY=1 puts it in .venv-ray.
"""
import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # importing ray_common leaves no scripts/__pycache__ in the checkout
from ray_common import KILL_ONCE, connect, default_sim, fail, program, refuse_flags, sim_path

PREFIX = "@@servesim-probes "  # runner/external_probes.h: kProbesLinePrefix


def probe_error(returncode, stderr):
    """What `sim run` said when it failed before its run began: its message without "sim: "."""
    lines = [x for x in stderr.strip().splitlines()
             if x.strip() and not x.startswith("sim: note:") and not x.startswith("sim: closing the run")]
    if not lines:
        return f"sim run exited with status {returncode} and wrote no run"
    text = "\n".join(lines)
    return text[len("sim: "):] if text.startswith("sim: ") else text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--address", required=True, help="the Ray cluster: HOST:PORT or auto")
    ap.add_argument("--jobs", "-j", type=int, default=0,
                    help="probes per round (the search's -j; default: the cluster's CPUs)")
    ap.add_argument("--sim", default=default_sim(), help="the sim binary, at this path on every node")
    ap.add_argument("--retries", type=int, default=3, help="times a task whose worker died runs again")
    ap.add_argument("search", nargs=argparse.REMAINDER, help="-- then the arguments of `sim search`")
    a = ap.parse_args()
    args = a.search[1:] if a.search[:1] == ["--"] else a.search
    refuse_flags(args, ("-j", "--jobs"), "is the driver's: give --jobs N before --")
    refuse_flags(args, ("--probes-external",), "is chosen by the driver; leave it out")
    if a.jobs < 0 or a.jobs > 1024:
        fail("--jobs: expected 1 to 1024")
    if a.retries < 0:
        fail("--retries: expected 0 or more")
    sim = sim_path(a.sim)

    # Stdout is the search's (its table and answer); what Ray prints (a worker that died, a task
    # retried) goes to stderr, from Python or not.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    ray, address = connect(a.address)
    jobs = a.jobs or max(1, int(ray.cluster_resources().get("CPU", 1)))
    cwd = os.getcwd()

    @ray.remote(max_retries=a.retries, retry_exceptions=True, num_cpus=1)
    def run_probe(point, config):
        kill = os.environ.get(KILL_ONCE, "")
        if kill and kill.split(":", 1)[0] == str(point):
            marker = os.path.join(kill.split(":", 1)[1], f"killed{point}")
            if not os.path.exists(marker):
                open(marker, "w").close()
                os._exit(1)  # the worker process dies mid-task, as a lost node's would
        tmp = tempfile.mkdtemp(prefix="servesim-ray-")
        try:
            path, db = os.path.join(tmp, "probe.toml"), os.path.join(tmp, "probe.db")
            with open(path, "w") as f:
                f.write(config)
            with open(os.path.join(tmp, "stderr"), "w+") as err:
                # Relative paths in the configuration are the driver's: run where it runs, if here too.
                run = subprocess.Popen([sim, "run", "--config", path, "--db", db, "--quiet"],
                                       cwd=cwd if os.path.isdir(cwd) else tmp, stdout=subprocess.DEVNULL, stderr=err)
                try:
                    while run.poll() is None:  # a cancel (KeyboardInterrupt) lands between the waits
                        time.sleep(0.05)
                except BaseException:
                    run.kill()
                    run.wait()
                    raise
                err.seek(0)
                stderr = err.read()
            runs = 0
            if os.path.exists(db):
                con = sqlite3.connect(db)
                try:
                    runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
                except sqlite3.Error:
                    runs = 0
                con.close()
            if runs == 0:  # it failed before its run began: the message says why
                return point, None, probe_error(run.returncode, stderr)
            with open(db, "rb") as f:
                return point, f.read(), None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    local = tempfile.mkdtemp(prefix="servesim-ray-search-")
    pending = []
    counts = {"probes": 0, "rounds": 0, "lost": 0}

    def run_round(request):
        """The answer to one round: each probe's database here, or its error."""
        for name in os.listdir(local):  # the last round's, merged by now
            os.remove(os.path.join(local, name))
        pending[:] = [run_probe.remote(p["point"], p["config"]) for p in request["probes"]]
        refs = list(pending)
        results = []
        while pending:
            done, pending[:] = ray.wait(pending, num_returns=len(pending), timeout=1.0)
        for ref, probe in zip(refs, request["probes"]):
            try:
                point, data, error = ray.get(ref)
            except Exception as e:  # noqa: BLE001 - the task failed after its retries
                counts["lost"] += 1
                message = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
                results.append({"point": probe["point"], "lost": True,
                                "error": f"its Ray task failed after {a.retries} retries: {message}"})
                continue
            if data is None:
                results.append({"point": point, "error": error})
                continue
            path = os.path.join(local, f"probe{point}.db")
            with open(path, "wb") as f:
                f.write(data)
            results.append({"point": point, "db": path})
        counts["probes"] += len(results)
        counts["rounds"] += 1
        return {"results": results}

    # Ctrl-C, SIGTERM and SIGHUP stop the search cleanly, even where SIGINT was inherited as
    # ignored (a job started with & from a script), as they stop `sim`.
    def stop(signum, frame):
        raise KeyboardInterrupt
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)

    search = subprocess.Popen([sim, "search", *args, "-j", str(jobs), "--probes-external"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    try:
        for line in search.stdout:
            if not line.startswith(PREFIX):
                out.write(line)  # the search's own output: the table, the answer
                out.flush()
                continue
            answer = run_round(json.loads(line[len(PREFIX):]))
            try:
                search.stdin.write(json.dumps(answer) + "\n")
                search.stdin.flush()
            except BrokenPipeError:
                break  # the search ended (a signal of its own): its status says how
    except KeyboardInterrupt:
        # The search stops as a local one does (it prints what it has) once its stdin closes.
        for ref in pending:
            ray.cancel(ref)  # KeyboardInterrupt in the task: its `sim run` is killed, its folder removed
        try:
            search.send_signal(signal.SIGINT)
        except ProcessLookupError:
            pass
    finally:
        try:
            search.stdin.close()
        except BrokenPipeError:
            pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while the search closes
    for line in search.stdout:
        if not line.startswith(PREFIX):
            out.write(line)
    out.flush()
    status = search.wait()
    shutil.rmtree(local, ignore_errors=True)
    if counts["rounds"]:  # (none when the search refused its arguments: its message says why)
        lost = f"; {counts['lost']} failed on Ray after their retries" if counts["lost"] else ""
        probes, rounds = counts["probes"], counts["rounds"]
        print(f"{program()}: {probes} probe{'s' * (probes != 1)} in {rounds} round{'s' * (rounds != 1)} ran on Ray "
              f"at {address}, "
              f"{jobs} per round (-j {jobs}){lost}", file=sys.stderr)
    sys.exit(status)

if __name__ == "__main__":
    main()
