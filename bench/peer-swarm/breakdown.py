#!/usr/bin/env python3
"""Where a profiled warren run's host CPU went: reads `perf script -F comm,tid,ip,sym`
output of a `perf record --call-graph dwarf` of the peer workload and prints the share
of samples by the task they ran in (a child agent, the coordinator, hyper's connection
tasks, the runtime's idle and I/O driver) and by what the task was doing (the sandboxed
call, building and sending a model request, parsing the streamed answer, ...).

Run with: bench/peer-swarm/run.sh --profile FILE WARREN PLUGINS_DIR (which records the
profile and calls this), or by hand: perf script -i FILE -F comm,tid,ip,sym | breakdown.py

A sample is put in the first class whose pattern matches any frame of its stack, in the
order below. Async stacks are deep and dwarf unwinding stops at 16 KiB of stack, so part
of the samples have no frame of the task that ran them ("unattributed task"); their
activity is still read from the frames they have.
"""
import collections
import re
import sys

# The task a sample ran in, from the outermost frames.
TASKS = [
    ("child agent", r"run_child"),
    ("coordinator", r"start_root"),
    ("hyper connection task", r"hyper::proto|hyper_util::client"),
    ("runtime idle, I/O driver", r"park|Driver::turn|mio::"),
]

# What it was doing.
ACTIVITIES = [
    ("start: loading plugins, the engine", r"CompileCache|ToolRegistry::load|plugin::.*compile|Sandbox::new|Host::load"),
    ("sandboxed tool call (wasmtime)", r"call_measured|wasmtime|warren::sandbox|warren::plugin"),
    ("model request: build, serialise, send", r"serialise|openai::request|RequestBuilder|execute_request|Client::execute|Client::request"),
    ("model answer: SSE, JSON, assembly", r"llm::sse|stream_event|Assembly|serde_json::de|openai::response"),
    ("model answer: reading body chunks", r"Transport::chunk|Response::chunk|body::chan|read_events"),
    ("model call, other", r"warren::llm::"),
    ("spawn and await tools", r"spawn_tool|Scheduler>::spawn|scheduler::wait"),
    ("progress lines", r"show_progress|warren::term"),
    ("run journal", r"warren::journal"),
    ("events, run state", r"warren::events|run_state|publish"),
    ("tracing spans", r"tracing"),
    ("allocator", r"malloc|free|_int_"),
]


def samples(lines):
    """Each sample's frames, innermost first."""
    frames = None
    for line in lines:
        if not line.strip():
            if frames is not None:
                yield frames
            frames = None
        elif not line[0].isspace():
            frames = []
        elif frames is not None:
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                frames.append(re.sub(r"\+0x[0-9a-f]+$", "", parts[1]))
    if frames is not None:
        yield frames


def classify(stack, classes, default):
    for name, pattern in classes:
        if re.search(pattern, stack):
            return name
    return default


def report(lines):
    """Prints the shares of the samples in `lines` (perf script's output)."""
    by_task, by_activity, total = collections.Counter(), collections.Counter(), 0
    for frames in samples(lines):
        stack = " | ".join(frames)
        total += 1
        by_task[classify(stack, TASKS, "unattributed task")] += 1
        by_activity[classify(stack, ACTIVITIES, "other (runtime, kernel, unattributed)")] += 1
    if not total:
        sys.exit("no samples: was the profile recorded with --call-graph dwarf?")
    print(f"{total} samples")
    for title, counts in (("by task", by_task), ("by activity", by_activity)):
        print(f"{title}:")
        for name, count in counts.most_common():
            print(f"  {100 * count / total:5.1f} %  {name}")


if __name__ == "__main__":
    report(sys.stdin)
