#!/usr/bin/env python3
"""The house's one-way flow, checked: every `#include "room/..."` of the project's sources is one
its room may make (docs/architecture.md). Data flows workloads -> the core -> policies and backends
-> recorder -> storage -> metrics -> reports; the command line and the runner stand above, and
configuration reading sits between them and the core.

    python3 tests/include_rules.py          # exit 1 and the offending lines when a rule is broken
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CORE = ["<core>"]  # the files directly in sim/ (not its sub-rooms, listed apart)
CONFIG = ["sim/config/"]
IO = ["sim/io/"]
PLUGIN_INTERFACES = ["policies/policy.h", "backends/backend.h", "routers/router.h"]

# room -> what its files may include (prefixes), besides their own room.
RULES = {
    "sim": PLUGIN_INTERFACES,  # the core: the interfaces plug-ins implement, nothing above it
    "sim/config": CORE,
    "sim/io": CORE,
    "policies": CORE + CONFIG,
    "routers": CORE + CONFIG + ["workloads/"],
    "workloads": CORE + CONFIG,
    "backends": CORE + CONFIG + IO + ["kernels/"],
    "kernels": CORE + CONFIG + ["backends/"],
    "analysis/metrics": CORE + CONFIG,
    "analysis/storage": CORE + CONFIG + ["analysis/metrics/"],
    "analysis/reports": CORE + CONFIG + IO + ["analysis/metrics/", "analysis/storage/", "backends/", "workloads/"],
    "analysis/calibration": CORE + CONFIG + IO + ["analysis/metrics/", "analysis/storage/", "analysis/reports/",
                                                  "backends/", "workloads/"],
    "runner": ["sim/", "policies/", "routers/", "workloads/", "backends/", "kernels/", "analysis/"],
    "cli": ["sim/", "policies/", "routers/", "workloads/", "backends/", "kernels/", "analysis/", "runner/"],
}


def room_of(path):
    """The most specific room a source path is in ("analysis/metrics", "sim/config", "sim")."""
    best = None
    for room in RULES:
        if path.startswith(room + "/") and (best is None or len(room) > len(best)):
            best = room
    return best


def allowed(room, included):
    if included.startswith(room + "/") and room_of(included) == room:
        return True
    for prefix in RULES[room]:
        if prefix == "<core>":  # the core's own files only, not its sub-rooms
            if included.startswith("sim/") and room_of(included) == "sim":
                return True
        elif included.startswith(prefix) or included == prefix:
            return True
    return False


def main():
    broken = []
    for room in RULES:
        for folder, _, files in os.walk(os.path.join(ROOT, room)):
            for name in sorted(files):
                if not re.search(r"\.(h|cc|cu|cuh)$", name):
                    continue
                path = os.path.relpath(os.path.join(folder, name), ROOT)
                if room_of(path) != room:
                    continue
                with open(os.path.join(ROOT, path), errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = re.match(r'\s*#include "([^"]+)"', line)
                        if not m or "/" not in m.group(1) or m.group(1).startswith("tests/"):
                            continue
                        if not allowed(room, m.group(1)):
                            broken.append(f"{path}:{number}: {room} may not include {m.group(1)}")
    for b in broken:
        print(b)
    print(f"include rules: {len(broken)} broken" if broken else "include rules: every include follows the flow")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
