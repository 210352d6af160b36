#!/usr/bin/env python3
"""Runs the peer workload under the OpenAI Agents SDK and under warren, and prints each
client's host CPU time per sub-agent, its peak RSS and the CPU ratio.

Run with: bench/peer-swarm/run.sh [--unstreamed] WARREN_BINARY PLUGINS_DIR
(run.sh makes the SDK's virtual environment, then runs this with --python).

The workload: a coordinator spawns FAN sub-agents at once, ROUNDS times; each sub-agent
reads one file and answers. Both clients talk to server.py, one server process each,
started fresh. Only the client process is measured, through wait4's resource usage
(user + system CPU, maximum RSS), not the server. warren runs as `warren run` with the
defaults a user gets: its run journal on and plain progress lines (stdout and stderr go
to a file). With --unstreamed warren's model table gets `stream = false`, so both
clients get each answer as one JSON body, as the SDK asks for it.

With --journal-cost N the SDK is left out: warren runs N times with its run journal on
and N times with --no-journal, in pairs whose order alternates (on, off, then off, on:
neither is always first), and the medians and their ratio are printed (what the
journal costs; see docs/benchmarks.md), with each side's quartiles and a bootstrap
interval of the ratio, as one run's CPU time varies by several per cent.

With --profile FILE the SDK is left out too: warren runs once under `perf record`
(4,000 samples a second, dwarf call graphs) into FILE, and breakdown.py prints where its
CPU went, by task and by activity (perf comes from Debian's linux-perf package).
"""

import argparse
import os
import random
import statistics
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FAN = 100
ROUNDS = 10


class Server:
    """server.py in its own process, for one client's run."""

    def __init__(self, workdir, style):
        self.port_file = os.path.join(workdir, f"{style}.port")
        if os.path.exists(self.port_file):
            os.remove(self.port_file)  # an earlier run's server's port
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "server.py"), "--style", style,
             "--fan", str(FAN), "--rounds", str(ROUNDS), "--port-file", self.port_file])

    def port(self):
        for _ in range(200):
            if os.path.exists(self.port_file):
                with open(self.port_file) as f:
                    return f.read().strip()
            if self.process.poll() is not None:
                sys.exit(f"server.py exited with status {self.process.returncode}")
            time.sleep(0.05)
        sys.exit("server.py did not start listening within 10 s")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.wait()


def perf_record(perf_data, argv):
    """argv under `perf record` into perf_data (4,000 samples a second, dwarf call graphs)."""
    return ["perf", "record", "-q", "-F", "4000", "--call-graph", "dwarf,16384",
            "-o", perf_data, "--", *argv]


def print_breakdown(perf_data):
    """Prints breakdown.py's table of perf_data, streaming `perf script` into it."""
    import breakdown
    script = subprocess.Popen(["perf", "script", "-i", perf_data, "-F", "comm,tid,ip,sym"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    breakdown.report(script.stdout)
    if script.wait() != 0:
        sys.exit(f"perf script -i {perf_data} failed (exit {script.returncode})")


def measure(argv, output, cwd, env=None):
    """Runs argv to completion with stdout and stderr in `output`; returns (CPU seconds,
    peak RSS in KiB, exit status)."""
    with open(output, "w") as out:
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss, child.returncode


def warren_config(port, plugins, unstreamed):
    stream = "stream = false\n" if unstreamed else ""
    return f"""[models.default]
provider = "openai"
base_url = "http://127.0.0.1:{port}/v1"
model = "peer-model"
api_key_env = "WARREN_PEER_KEY"
{stream}
[plugins]
dir = "{plugins}"

[defaults]
max_concurrent = {FAN}

[profiles.main]
tools = ["*"]
max_turns = 20
[profiles.main.capabilities]
fs = [{{ host = "docs", guest = "/docs", mode = "ro" }}]

[profiles.researcher]
description = "Reads one document"
tools = ["read_file"]
[profiles.researcher.capabilities]
fs = [{{ host = "docs", guest = "/docs", mode = "ro" }}]
"""


def bootstrap_ratio(on, off, rounds=2000):
    """The 5th and 95th percentiles of median(on) / median(off) over resamples of
    each side (a fixed seed, so a run's figures can be checked)."""
    rng = random.Random(7)
    ratios = sorted(
        statistics.median(rng.choices(on, k=len(on))) / statistics.median(rng.choices(off, k=len(off)))
        for _ in range(rounds))
    return ratios[rounds * 5 // 100], ratios[rounds * 95 // 100]


def finished(output, who):
    """Exits, naming the output's last lines, unless the run saw every sub-agent."""
    with open(output) as f:
        text = f.read()
    if f"DONE {FAN * ROUNDS}" not in text:
        tail = "\n".join(text.strip().splitlines()[-5:])
        sys.exit(f"{who} run incomplete (no `DONE {FAN * ROUNDS}`); its last lines:\n{tail}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="the Python with openai-agents installed")
    parser.add_argument("--unstreamed", action="store_true", help="warren's model gets stream = false")
    alone = parser.add_mutually_exclusive_group()
    alone.add_argument("--journal-cost", type=int, metavar="N",
                       help="warren only: N runs with the journal on and N with --no-journal")
    alone.add_argument("--profile", metavar="FILE",
                       help="warren only, once, under perf record into FILE; prints where its CPU went")
    parser.add_argument("warren", help="the warren binary (a release build)")
    parser.add_argument("plugins", help="a directory holding files.wasm (only that file is used)")
    args = parser.parse_args()
    if args.profile and shutil.which("perf") is None:
        sys.exit("--profile needs perf (apt-get install linux-perf)")
    warren = os.path.abspath(args.warren)
    files = os.path.join(os.path.abspath(args.plugins), "files.wasm")
    if not os.path.isfile(files):
        sys.exit(f"{args.plugins} holds no files.wasm (scripts/build-plugins builds it into "
                 "target/wasm/wasm32-wasip2/release/)")
    n = FAN * ROUNDS
    with tempfile.TemporaryDirectory(prefix="warren-peer-swarm-") as work:
        plugins = os.path.join(work, "plugins")
        os.mkdir(plugins)
        shutil.copy(files, plugins)
        docs = os.path.join(work, "docs")
        os.mkdir(docs)
        for k in (1, 2, 3):
            with open(os.path.join(docs, f"topic{k}.txt"), "w") as f:
                f.write(f"code word w{k}\n")

        def run_warren(extra):
            with Server(work, "warren") as server:
                config = os.path.join(work, "warren.toml")
                with open(config, "w") as f:
                    f.write(warren_config(server.port(), plugins, args.unstreamed))
                env = dict(os.environ, WARREN_PEER_KEY="sk-peer-bench")
                out = os.path.join(work, "warren.out")
                argv = [warren, "run", "--config", config, "--profile", "main", *extra, "gather"]
                if args.profile:
                    argv = perf_record(os.path.abspath(args.profile), argv)
                measured = measure(argv, out, work, env)
            finished(out, "warren")
            return measured

        if args.profile:
            cpu, rss, _ = run_warren([])
            print_breakdown(os.path.abspath(args.profile))
            print(f"warren under perf: {cpu * 1000 / n:.3f} ms of host CPU per sub-agent "
                  f"(sampling included), peak RSS {rss / 1024:.0f} MiB")
            return

        if args.journal_cost:
            on, off = [], []
            for i in range(args.journal_cost):
                for journaled in ((True, False) if i % 2 == 0 else (False, True)):
                    if journaled:
                        on.append(run_warren([]))
                    else:
                        off.append(run_warren(["--no-journal"]))
            cpu_on = statistics.median(m[0] for m in on) * 1000 / n
            cpu_off = statistics.median(m[0] for m in off) * 1000 / n
            rss_on = statistics.median(m[1] for m in on) / 1024
            rss_off = statistics.median(m[1] for m in off) / 1024
            print(f"journal on: {cpu_on:.3f} ms per sub-agent, {rss_on:.0f} MiB; "
                  f"off: {cpu_off:.3f} ms, {rss_off:.0f} MiB (medians of {args.journal_cost})")
            if args.journal_cost >= 4:
                for name, runs in (("on", on), ("off", off)):
                    q1, q2, q3 = (q * 1000 / n for q in statistics.quantiles([m[0] for m in runs], n=4))
                    print(f"journal {name}: quartiles {q1:.3f} {q2:.3f} {q3:.3f} ms per sub-agent")
                low, high = bootstrap_ratio([m[0] for m in on], [m[0] for m in off])
                print(f"journal cost: 90 % bootstrap interval of the CPU ratio {low:.3f}x to {high:.3f}x")
            print(f"journal cost: CPU {cpu_on / max(cpu_off, 1e-9):.3f}x, "
                  f"peak RSS {rss_on / max(rss_off, 1e-9):.3f}x")
            return

        with Server(work, "sdk") as server:
            sdk_out = os.path.join(work, "sdk.out")
            sdk = measure([args.python, os.path.join(HERE, "peer_sdk.py"), server.port(), docs],
                          sdk_out, work)
        finished(sdk_out, "OpenAI Agents SDK")

        ours = run_warren([])

    ours_ms, sdk_ms = ours[0] * 1000 / n, sdk[0] * 1000 / n
    print(f"host CPU per sub-agent: warren {ours_ms:.3f} ms, OpenAI Agents SDK {sdk_ms:.3f} ms "
          f"({sdk_ms / max(ours_ms, 1e-6):.1f}x less)")
    print(f"peak RSS: warren {ours[1] / 1024:.0f} MiB, OpenAI Agents SDK {sdk[1] / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
