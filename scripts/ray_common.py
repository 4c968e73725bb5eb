"""What the Ray drivers (ray_sweep.py, ray_search.py) share: messages and exit statuses, where `sim`
is, and joining the cluster. Code that runs inside a Ray task stays in the driver's own file: a
task is shipped to the workers by value, and this module is not on their path."""
import os
import shutil
import socket
import sys
import tempfile

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
HERE = os.path.dirname(os.path.abspath(__file__))
# Fault injection for the tests of retries: the worker that runs point (or probe) K dies once, K
# and a marker folder in SERVESIM_RAY_KILL_ONCE="K:FOLDER".
KILL_ONCE = "SERVESIM_RAY_KILL_ONCE"


def program():
    return os.path.splitext(os.path.basename(sys.argv[0]))[0]


def fail(message, code=EXIT_BAD_INPUT):
    print(f"{program()}: {message}", file=sys.stderr)
    sys.exit(code)


def default_sim():
    built = os.path.join(os.path.dirname(HERE), "build", "sim", "sim")
    if os.access(built, os.X_OK):
        return built
    return shutil.which("sim") or "sim"


def sim_path(given):
    """The sim binary as the workers must find it: absolute when it is a file here."""
    return os.path.abspath(given) if os.path.exists(given) else given


def refuse_flags(args, flags, why):
    for flag in flags:
        if any(x == flag or x.startswith(flag + "=") or (flag == "-j" and x.startswith("-j")) for x in args):
            fail(f"{flag} {why}")


def import_ray():
    try:
        import ray
    except ImportError:
        fail("Ray is not installed: `pip install ray` (or RAY=1 scripts/install-deps.sh, then run "
             "this with .venv-ray/bin/python)")
    return ray


def resolve_address(address):
    """HOST:PORT of the Ray cluster's GCS, checked to answer (ray.init would wait minutes)."""
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS", "")
        if not address:
            try:
                with open(os.path.join(tempfile.gettempdir(), "ray", "ray_current_cluster")) as f:
                    address = f.read().strip()
            except OSError:
                fail("--address auto: no Ray cluster is running on this machine (start one with "
                     "`ray start --head`, or give --address HOST:PORT)")
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        fail(f"--address {address}: expected HOST:PORT (the head's GCS, 6379 by default) or auto")
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
    except OSError as e:
        fail(f"Ray is unreachable at {address}: {e}")
    return address


def connect(address):
    """Imports Ray and joins the cluster at `address` (HOST:PORT or auto); returns (ray, address)."""
    ray = import_ray()
    address = resolve_address(address)
    kill_once = os.environ.get(KILL_ONCE, "")
    runtime_env = {"env_vars": {KILL_ONCE: kill_once}} if kill_once else None
    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR", runtime_env=runtime_env)
    except Exception as e:  # noqa: BLE001 - any failure to join is the same answer to the user
        fail(f"cannot join the Ray cluster at {address}: {e}")
    return ray, address
