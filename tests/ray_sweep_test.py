#!/usr/bin/env python3
"""The Ray sweep (scripts/ray_sweep.py) against the local one: starts a Ray head and one more node
on 127.0.0.1, runs a sweep through them with one worker killed mid-task (its point is retried),
compares every point's status and metrics with `sim sweep -j 2`, checks that an unreachable
cluster is refused before anything is written, and stops Ray.

    tests/ray_sweep_test.py SIM [PYTHON]

PYTHON (default: .venv-ray/bin/python, else this one) must import ray; without it the test is
skipped (exit 77).
"""
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = 77


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rows(db):
    con = sqlite3.connect(db)
    out = {}
    for point, status, error, run in con.execute("SELECT point, status, error, run_id FROM sweep_points ORDER BY point"):
        metrics = dict(con.execute("SELECT name, value FROM metrics WHERE run_id = ?", (run,))) if run else {}
        out[point] = (status, error, metrics)
    names = [r[0] for r in con.execute("SELECT name FROM runs ORDER BY name")]
    con.close()
    return out, names


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
    tmp = tempfile.mkdtemp(prefix="servesim-ray-test-")
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", PATH=os.path.dirname(python) + ":" + os.environ["PATH"])
    port = free_port()
    address = f"127.0.0.1:{port}"
    driver = [python, os.path.join(ROOT, "scripts", "ray_sweep.py"), "--sim", sim]
    sweep = ["--trace", "pareto.toml", "--num-prompts", "150", "--grid", "replicas=1,2",
             "--grid", "tp=1,3", "--grid", "request_rate=4,16", "--goodput", "ttft:1000"]
    try:
        # An unreachable cluster: refused at once, and nothing is written.
        bad = subprocess.run([*driver, "--address", f"127.0.0.1:{free_port()}", "--", *sweep, "--db",
                              os.path.join(tmp, "never.db")], capture_output=True, text=True, env=env, timeout=60)
        assert bad.returncode == 2, bad.stderr
        assert "unreachable" in bad.stderr, bad.stderr
        assert not os.path.exists(os.path.join(tmp, "never.db"))

        # Without Ray: refused before anything runs (when a Python without ray is at hand).
        if subprocess.run(["python3", "-c", "import ray"], capture_output=True).returncode != 0:
            missing = subprocess.run(["python3", *driver[1:], "--address", "auto", "--", *sweep, "--db",
                                      os.path.join(tmp, "never.db")], capture_output=True, text=True, timeout=60)
            assert missing.returncode == 2 and "Ray is not installed" in missing.stderr, missing.stderr
            assert not os.path.exists(os.path.join(tmp, "never.db"))

        subprocess.run([ray_bin, "start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                        "--disable-usage-stats", f"--temp-dir={tmp}/ray"], check=True, capture_output=True, env=env)
        subprocess.run([ray_bin, "start", f"--address={address}", "--num-cpus=1", "--disable-usage-stats"],
                       check=True, capture_output=True, env=env)

        local = os.path.join(tmp, "local.db")
        subprocess.run([sim, "sweep", *sweep, "-j", "2", "--db", local], check=True, capture_output=True, cwd=tmp)
        remote = os.path.join(tmp, "ray.db")
        kill_env = dict(env, SERVESIM_RAY_KILL_ONCE=f"5:{tmp}")
        ran = subprocess.run([*driver, "--address", address, "--", *sweep, "--db", remote], capture_output=True,
                             text=True, env=kill_env, cwd=tmp, timeout=600)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert os.path.exists(os.path.join(tmp, "killed5")), "the fault was not injected"
        a, a_names = rows(local)
        b, b_names = rows(remote)
        assert len(a) == 8 and sorted(a) == sorted(b), (sorted(a), sorted(b))
        for p in a:
            assert a[p][0] == b[p][0], (p, a[p][0], b[p][0])
            assert a[p][1] == b[p][1], (p, a[p][1], b[p][1])
            assert a[p][2] == b[p][2], (p, a[p][2], b[p][2])
        assert a_names == b_names
        con = sqlite3.connect(remote)
        assert con.execute("SELECT count(*) FROM sweeps").fetchone()[0] == 1
        # An interrupted driver's work is kept: with two points' rows gone, a second run of the
        # same command runs just those two.
        con.execute("DELETE FROM sweep_points WHERE point IN (1, 6)")
        con.commit()
        runs_before = con.execute("SELECT count(*) FROM runs").fetchone()[0]
        con.close()
        again = subprocess.run([*driver, "--address", address, "--", *sweep, "--db", remote], capture_output=True,
                               text=True, env=env, cwd=tmp, timeout=600)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "running the other 2" in again.stderr, again.stderr
        con = sqlite3.connect(remote)
        assert con.execute("SELECT count(*) FROM sweep_points").fetchone()[0] == 8
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == runs_before + 1  # point 6 fails (tp 3)
        con.close()
        print(f"ok: 8 points on Ray equal the local sweep's (point 5's worker killed once and retried)")
        return 0
    finally:
        subprocess.run([ray_bin, "stop", "--force"], capture_output=True, env=env)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
