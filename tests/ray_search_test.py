#!/usr/bin/env python3
"""The Ray search (scripts/ray_search.py) against the local one: starts a Ray head and one more node
on 127.0.0.1 (a CPU each), runs a cheapest-configuration search through them with one worker
killed mid-task (its probe is retried) and a largest-rate search with --jobs 3, and compares each
with `sim search` run here with the same -j: the same probes, verdicts, errors, metrics and answer,
and the same printed table. Then a probe whose task fails without retries (a failed probe, and the
search goes on), Ctrl-C (the search stops, exit 130, its probes kept), the refusals (an unreachable
cluster, -j among the search's arguments, no Ray), and stops Ray.

    tests/ray_search_test.py SIM [PYTHON]

PYTHON (default: .venv-ray/bin/python, else this one) must import ray; without it the test is
skipped (exit 77).
"""
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = 77


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def probes(db):
    """{point: (status, error, values, metrics)} of the one search in db, and its answer."""
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    (sweep_id, answer, keys), = con.execute("SELECT id, answer, keys FROM sweeps")
    out = {}
    for row in con.execute("SELECT * FROM sweep_points WHERE sweep_id = ? ORDER BY point", (sweep_id,)):
        metrics = dict(con.execute("SELECT name, value FROM metrics WHERE run_id = ?", (row["run_id"],))) \
            if row["run_id"] else {}
        values = tuple(row[k] for k in keys.split(","))
        out[row["point"]] = (row["status"], row["error"], values, metrics)
    linked = con.execute("SELECT count(*) FROM runs WHERE sweep_id IS NOT ?", (sweep_id,)).fetchone()[0]
    con.close()
    assert linked == 0, f"{linked} runs of {db} are not linked to its search"
    return out, answer


def without_timing(text):
    return [x for x in text.splitlines() if " probes in " not in x]


def same_search(local, remote, what):
    a, a_answer = probes(local)
    b, b_answer = probes(remote)
    assert a_answer == b_answer, (what, a_answer, b_answer)
    assert sorted(a) == sorted(b), (what, sorted(a), sorted(b))
    for p in a:
        assert a[p] == b[p], (what, p, a[p], b[p])
    return a, a_answer


def main():
    sim = os.path.abspath(sys.argv[1])
    python = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, ".venv-ray", "bin", "python")
    if not os.access(python, os.X_OK):
        python = sys.executable
    python = os.path.abspath(python)
    if subprocess.run([python, "-c", "import ray"], capture_output=True).returncode != 0:
        print(f"skipped: {python} cannot import ray (RAY=1 scripts/install-deps.sh installs it)")
        return SKIP
    ray_bin = os.path.join(os.path.dirname(python), "ray")
    tmp = tempfile.mkdtemp(prefix="servesim-ray-search-test-")
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", PATH=os.path.dirname(python) + ":" + os.environ["PATH"])
    port = free_port()
    address = f"127.0.0.1:{port}"
    driver = [python, os.path.join(ROOT, "scripts", "ray_search.py"), "--sim", sim]
    base = ["--trace", "pareto.toml", "--num-prompts", "150", "--slo", "p99_ttft=2s"]
    # tp 3 cannot run the default model: those probes fail, with the reason, on Ray as here.
    cheapest = [*base, "--request-rate", "8", "--grid", "tp=3,1", "--grid", "replicas=1,2,3,4"]
    max_rate = [*base, "--start-rate", "2", "--precision", "0.05"]
    try:
        # Refusals: nothing is written.
        never = os.path.join(tmp, "never.db")
        bad = subprocess.run([*driver, "--address", f"127.0.0.1:{free_port()}", "--", *max_rate, "--db", never],
                             capture_output=True, text=True, env=env, timeout=60)
        assert bad.returncode == 2 and "unreachable" in bad.stderr, bad.stderr
        jobs = subprocess.run([*driver, "--address", address, "--", *max_rate, "-j", "4", "--db", never],
                              capture_output=True, text=True, env=env, timeout=60)
        assert jobs.returncode == 2 and "-j is the driver's: give --jobs N before --" in jobs.stderr, jobs.stderr
        if subprocess.run(["python3", "-c", "import ray"], capture_output=True).returncode != 0:
            missing = subprocess.run(["python3", *driver[1:], "--address", "auto", "--", *max_rate, "--db", never],
                                     capture_output=True, text=True, timeout=60)
            assert missing.returncode == 2 and "Ray is not installed" in missing.stderr, missing.stderr
        assert not os.path.exists(never)

        subprocess.run([ray_bin, "start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                        "--disable-usage-stats", f"--temp-dir={tmp}/ray"], check=True, capture_output=True, env=env)
        subprocess.run([ray_bin, "start", f"--address={address}", "--num-cpus=1", "--disable-usage-stats"],
                       check=True, capture_output=True, env=env)

        # Cheapest: -j is the cluster's CPUs (2); probe 1's worker dies once and its task runs again.
        local = subprocess.run([sim, "search", *cheapest, "-j", "2", "--db", "local1.db"], capture_output=True,
                               text=True, cwd=tmp)
        assert local.returncode == 0, local.stdout + local.stderr
        ran = subprocess.run([*driver, "--address", address, "--", *cheapest, "--db", "ray1.db"], capture_output=True,
                             text=True, env=dict(env, SERVESIM_RAY_KILL_ONCE=f"1:{tmp}"), cwd=tmp, timeout=600)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert os.path.exists(os.path.join(tmp, "killed1")), "the fault was not injected"
        assert "2 per round (-j 2)" in ran.stderr, ran.stderr
        assert without_timing(ran.stdout) == without_timing(local.stdout), (ran.stdout, local.stdout)
        points, answer = same_search(os.path.join(tmp, "local1.db"), os.path.join(tmp, "ray1.db"), "cheapest")
        assert answer.startswith("cheapest: tp=1"), answer
        assert any(s == "failed" and "cannot share evenly" in (e or "") for s, e, _, _ in points.values()), points

        # Largest rate, --jobs 3: rounds of three probes.
        local = subprocess.run([sim, "search", *max_rate, "-j", "3", "--db", "local2.db"], capture_output=True,
                               text=True, cwd=tmp)
        assert local.returncode == 0, local.stdout + local.stderr
        ran = subprocess.run([*driver, "--address", address, "--jobs", "3", "--", *max_rate, "--db", "ray2.db"],
                             capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "3 per round (-j 3)" in ran.stderr, ran.stderr
        assert without_timing(ran.stdout) == without_timing(local.stdout), (ran.stdout, local.stdout)
        points, answer = same_search(os.path.join(tmp, "local2.db"), os.path.join(tmp, "ray2.db"), "max rate")
        assert answer.startswith("max request_rate"), answer

        # A task that fails after its retries (none here): an interrupted probe (not a miss of its
        # configuration), and the search stops unanswered (exit 1) rather than bisect on it.
        os.makedirs(os.path.join(tmp, "once"))
        ran = subprocess.run([*driver, "--address", address, "--retries", "0", "--", *max_rate, "--db", "lost.db"],
                             capture_output=True, text=True, env=dict(env, SERVESIM_RAY_KILL_ONCE=f"0:{tmp}/once"),
                             cwd=tmp, timeout=600)
        assert ran.returncode == 1, ran.stdout + ran.stderr
        assert "1 failed on Ray after their retries" in ran.stderr, ran.stderr
        lost, answer = probes(os.path.join(tmp, "lost.db"))
        assert lost[0][0] == "interrupted" and lost[0][1].startswith("its Ray task failed after 0 retries"), lost[0]
        assert len(lost) == 1 and answer.startswith("not answered: the probes could not be run (probe 0 was not run "
                                                    "to its end"), (len(lost), answer)

        # Ctrl-C (SIGINT to the driver's process group, as a terminal sends it) once a probe is in;
        # a probe of 2,000,000 requests takes seconds, so the search is still running.
        slow = ["--trace", "pareto.toml", "--num-prompts", "2000000", "--slo", "p99_ttft=2s"]
        search = subprocess.Popen([*driver, "--address", address, "--", *slow, "--db", "stopped.db"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp,
                                  start_new_session=True)
        target = os.path.join(tmp, "stopped.db")
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                con = sqlite3.connect(f"file:{target}?mode=ro", uri=True)
                n = con.execute("SELECT count(*) FROM sweep_points").fetchone()[0]
                con.close()
                if n >= 1:
                    break
            except sqlite3.Error:
                pass
            time.sleep(0.1)
        os.killpg(search.pid, signal.SIGINT)
        out, err = search.communicate(timeout=120)
        assert search.returncode == 130, (search.returncode, out, err)
        assert "Answer: interrupted" in out, out
        con = sqlite3.connect(target)
        status, = con.execute("SELECT status FROM sweeps").fetchone()
        kept = con.execute("SELECT count(*) FROM sweep_points WHERE status = 'done'").fetchone()[0]
        con.close()
        assert status == "interrupted" and kept >= 1, (status, kept)
        assert "miss: interrupted" in out, out
        print("ok: the Ray searches equal the local ones (probe 1's worker killed once and retried); a lost task "
              "is a failed probe; Ctrl-C stops the search with its probes kept")
        return 0
    finally:
        subprocess.run([ray_bin, "stop", "--force"], capture_output=True, env=env)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
