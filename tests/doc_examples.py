#!/usr/bin/env python3
"""The documentation's examples, run: every marked shell block of README.md and docs/*.md.

    python3 tests/doc_examples.py PATH/TO/sim [--only FILE[:LINE]] [--verbose]

How a block is marked (Markdown that renders as usual on GitHub):

  ```sh doctest                 a shell block to run: the whole block is one bash script, run with
  sim --trace pareto.toml ...   `set -e -o pipefail`, so every command in it must succeed
  ```

  ```console doctest            a transcript: the lines that start with "$ " (and their
  $ sim list policies           lines that complete them: after a trailing backslash or inside an
                                open quote) are the script; every
  static                        other non-empty line is output that must appear, in this order, as
  ...                           a line of what the script prints (stdout and stderr together; runs
  ```                           of spaces count as one). A line that starts with "..." stands for
                                any lines. Wall-clock times are not compared: a number followed
                                by " s" (as in "4 probes in 0.43 s") matches any number, and
                                so do the folders before a shipped file's data/workloads/,
                                data/traces/, data/hardware/ or data/models/ (the installed
                                share/servesim/ too): where the checkout is does not matter.

  The info string may add `exit=N` (the script's exit status must be N, not 0).

  Expected output for an `sh doctest` block: HTML comments on the lines just above its fence,
  invisible when rendered, each a text that the block's output must contain:

  <!-- expect: Answer: cheapest: replicas=2 -->
  ```sh doctest
  ...
  ```

A fence with no `doctest` in its info string is not run: the long examples (a whole trace on
many replicas, Ray, vLLM) and the ones that need things the test machine may not have.

Each block runs in a fresh temporary directory with the given `sim` first on the PATH and
SERVESIM_DOC_ROOT naming the repository. The directory holds links named data, tests, scripts and
bench to the repository's folders, so a path relative to the repository's root
(`data/measured/...`, `tests/data/vllm/...`) works as it does for a user there, and the files a
block writes (sim.db, report.html) land in the temporary directory. The shipped workloads and
traces are found by name (pareto.toml, azure-conv.csv) as for any user.

Exit status 0 when every block passes, 1 otherwise (each failure printed with its file, line,
script, status and output), 2 on bad usage or a malformed marker.
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINKS = ["data", "tests", "scripts", "bench"]
FENCE = re.compile(r"^(```+)\s*(\S*)\s*(.*)$")
EXPECT = re.compile(r"^\s*<!--\s*expect:\s*(.*?)\s*-->\s*$")
TIMEOUT_S = 60


class Block:
    def __init__(self, path, line, kind, options, body, expects):
        self.path, self.line, self.kind, self.options = path, line, kind, options
        self.body, self.expects = body, expects
        self.status = 0
        for opt in options:
            if opt.startswith("exit="):
                self.status = int(opt[len("exit="):])
            elif opt != "doctest":
                raise ValueError(f"{self.where()}: unknown doctest option '{opt}'")

    def where(self):
        return f"{os.path.relpath(self.path, ROOT)}:{self.line}"

    def script_and_output(self):
        if self.kind == "sh":
            return "\n".join(self.body), []
        script, output, command = [], [], None
        for text in self.body:
            if command is not None:  # the command so far is incomplete: this line belongs to it
                command.append(text)
            elif text.startswith("$ "):
                command = [text[2:]]
            else:
                if text.strip():
                    output.append(text)
                continue
            if complete("\n".join(command)):
                script.append("\n".join(command))
                command = None
        if command is not None:
            raise ValueError(f"{self.where()}: the last command of the transcript is incomplete")
        return "\n".join(script), output


def complete(command):
    """Whether a transcript's command is whole: no trailing backslash, no quote left open."""
    if command.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(command)
    except ValueError:  # "No closing quotation"
        return False
    return True


def documents():
    docs = [os.path.join(ROOT, "README.md")]
    folder = os.path.join(ROOT, "docs")
    docs += sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".md"))
    return docs


def blocks_of(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    found, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        ticks, lang, rest = m.group(1), m.group(2), m.group(3).split()
        end = i + 1
        while end < len(lines) and not lines[end].startswith(ticks):
            end += 1
        if "doctest" in rest:
            if lang not in ("sh", "console"):
                raise ValueError(f"{os.path.relpath(path, ROOT)}:{i + 1}: a doctest block is `sh` or `console`, not `{lang}`")
            expects, k = [], i - 1
            while k >= 0 and EXPECT.match(lines[k]):
                expects.insert(0, EXPECT.match(lines[k]).group(1))
                k -= 1
            found.append(Block(path, i + 1, lang, rest, lines[i + 1:end], expects))
        i = end + 1
    return found


WALL_CLOCK = re.compile(r"\b\d+(\.\d+)? s\b")
DATA_PATH = re.compile(r"\S*?\bdata/(workloads|traces|hardware|models)/")


def squeeze(text):
    """A line as compared: runs of spaces as one, every "N s" (a duration) as "# s", and a shipped
    file's path from its data folder on ("/usr/local/share/servesim/..." and
    "/home/me/servesim/data/..." both as "data/...")."""
    text = " ".join(text.split()).replace("/share/servesim/", "/data/")
    return WALL_CLOCK.sub("# s", DATA_PATH.sub(r"data/\1/", text))


def check_transcript(expected, actual):
    """Every expected line, in order, among the actual lines; "..." skips any. The first missing line, or None."""
    got = [squeeze(a) for a in actual.split("\n")]
    at = 0
    for e in expected:
        want = squeeze(e)
        if want.startswith("..."):
            continue
        while at < len(got) and got[at] != want:
            at += 1
        if at == len(got):
            return e
        at += 1
    return None


def run(block, sim_dir):
    script, transcript = block.script_and_output()
    with tempfile.TemporaryDirectory(prefix="servesim-doctest-") as tmp:
        for name in LINKS:
            os.symlink(os.path.join(ROOT, name), os.path.join(tmp, name))
        env = dict(os.environ)
        env["PATH"] = sim_dir + os.pathsep + env.get("PATH", "")
        env["SERVESIM_DOC_ROOT"] = ROOT
        env.pop("SERVESIM_DATA", None)
        started = time.monotonic()
        try:
            p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=tmp, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=TIMEOUT_S)
            status, output = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            out = e.stdout or ""
            status, output = f"timeout after {TIMEOUT_S} s", out.decode(errors="replace") if isinstance(out, bytes) else out
        seconds = time.monotonic() - started
    problems = []
    if status != block.status:
        problems.append(f"exit status {status}, expected {block.status}")
    for text in block.expects:
        if text not in output:
            problems.append(f"output lacks: {text}")
    missing = check_transcript(transcript, output) if transcript else None
    if missing is not None:
        problems.append(f"output lacks the line (in order): {missing.strip()}")
    return problems, output, script, seconds


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    verbose = "--verbose" in argv
    only = None
    if "--only" in argv:
        i = argv.index("--only")
        if i + 1 >= len(argv):
            print(__doc__)
            return 2
        only = argv[i + 1]
        args = [a for a in args if a != only]
    if len(args) != 1:
        print(__doc__)
        return 2
    sim = os.path.abspath(args[0])
    if not (os.path.isfile(sim) and os.access(sim, os.X_OK)):
        print(f"doc_examples: {sim}: not an executable file")
        return 2
    sim_dir = os.path.join(tempfile.mkdtemp(prefix="servesim-doctest-bin-"), "bin")
    os.makedirs(sim_dir)
    os.symlink(sim, os.path.join(sim_dir, "sim"))  # `sim` on the PATH, whatever the binary's name
    try:
        blocks = [b for d in documents() for b in blocks_of(d)]
    except ValueError as e:
        print(f"doc_examples: {e}")
        return 2
    if only:
        blocks = [b for b in blocks if b.where() == only or b.where().startswith(only + ":")]
    failures, started = 0, time.monotonic()
    for b in blocks:
        problems, output, script, seconds = run(b, sim_dir)
        if problems:
            failures += 1
            print(f"FAIL {b.where()} ({seconds:.2f} s): " + "; ".join(problems))
            print("  script:\n" + "\n".join("    " + s for s in script.split("\n")))
            print("  output:\n" + "\n".join("    " + s for s in output.rstrip("\n").split("\n")[-40:]))
        elif verbose:
            print(f"ok   {b.where()} ({seconds:.2f} s)")
    total = time.monotonic() - started
    print(f"doc_examples: {len(blocks) - failures} of {len(blocks)} marked blocks ran as documented "
          f"({total:.1f} s)")
    return 1 if failures or not blocks else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
