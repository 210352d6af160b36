"""warren plugin in Python: tabular and text analysis.

Tools:
  csv_summary {path, delimiter?}  per-column count, empties, numeric min/max/mean,
                                  and the most common values, for a CSV under a granted
                                  directory (capabilities.fs)
  text_stats {text}               lines, words, characters and the most frequent words

Build: see build.sh (componentize-py, pinned in requirements.txt).
"""

import csv
import heapq  # noqa: F401 -- Counter.most_common imports it lazily; componentize-py bundles only what init imports
import json
import statistics
from collections import Counter

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.tool import ToolError_Failed, ToolError_InvalidInput, ToolSpec
from wit_world.imports.host_log import Level, log

CSV_SCHEMA = json.dumps({
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Guest path of the CSV file, e.g. /data/sales.csv"},
        "delimiter": {"type": "string", "minLength": 1, "maxLength": 1, "default": ","},
    },
    "required": ["path"],
    "additionalProperties": False,
})
TEXT_SCHEMA = json.dumps({
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
})
MAX_ROWS = 1_000_000


def invalid(message):
    return Err(ToolError_InvalidInput(message))


def failed(message):
    return Err(ToolError_Failed(message))


def number(value):
    try:
        return float(value)
    except ValueError:
        return None


def csv_summary(args):
    path = args.get("path")
    if not isinstance(path, str) or not path:
        raise invalid("`path` must be a non-empty string")
    delimiter = args.get("delimiter", ",")
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle, delimiter=delimiter))
    except PermissionError:
        raise failed(f"denied: {path} is not reachable with this profile's file capabilities")
    except FileNotFoundError:
        raise failed(f"{path}: no such file (is its directory granted in capabilities.fs?)")
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise failed(f"{path}: {error}")
    if not rows:
        return f"{path}: empty file"
    header, body = rows[0], rows[1:MAX_ROWS + 1]
    lines = [f"{path}: {len(body)} rows, {len(header)} columns"]
    for index, name in enumerate(header):
        cells = [row[index].strip() for row in body if index < len(row)]
        filled = [c for c in cells if c]
        numbers = [n for n in (number(c) for c in filled) if n is not None]
        line = f"- {name}: {len(filled)} values, {len(cells) - len(filled)} empty"
        if numbers and len(numbers) == len(filled):
            line += f", min {min(numbers):g}, max {max(numbers):g}, mean {statistics.fmean(numbers):.4g}"
        else:
            common = ", ".join(f"{value} ({count})" for value, count in Counter(filled).most_common(3))
            line += f", most common: {common}"
        lines.append(line)
    return "\n".join(lines)


def text_stats(args):
    text = args.get("text")
    if not isinstance(text, str):
        raise invalid("`text` must be a string")
    words = [w.strip(".,;:!?()[]\"'").lower() for w in text.split()]
    words = [w for w in words if w]
    top = ", ".join(f"{w} ({n})" for w, n in Counter(words).most_common(5))
    return f"{len(text.splitlines())} lines, {len(words)} words, {len(text)} characters; most frequent: {top}"


class Tool(exports.Tool):
    def list_tools(self):
        return [
            ToolSpec("csv_summary", "Summarise a CSV file: per column, counts, empties, numeric min/max/mean or the most common values.", CSV_SCHEMA),
            ToolSpec("text_stats", "Count lines, words and characters of a text and list its most frequent words.", TEXT_SCHEMA),
        ]

    def call_tool(self, name, arguments):
        try:
            args = json.loads(arguments)
        except json.JSONDecodeError as error:
            raise invalid(f"arguments are not valid JSON: {error}")
        if not isinstance(args, dict):
            raise invalid("arguments must be a JSON object")
        log(Level.DEBUG, f"python-data: {name}")
        if name == "csv_summary":
            return csv_summary(args)
        if name == "text_stats":
            return text_stats(args)
        raise invalid(f"unknown tool `{name}`")


# Warm-up, run once at build time: componentize-py snapshots the interpreter after this
# module is imported, so the work a first call does (lazy imports, caches) is done in
# the snapshot instead of in every fresh instance.
text_stats(json.loads('{"text": "warm up. Warm up!"}'))
