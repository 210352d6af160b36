"""warren's built-in `run_python` tool: runs the Python code a model writes.

Each call runs in a fresh instance of this component (the host never reuses one), under
the calling agent's capabilities: its granted directories at their guest paths, its
network hosts, its environment variables, fuel, wall time, memory and output size. The
interpreter is snapshotted at build time after the imports below, so the standard
library modules agents use for data and text cost nothing per call.

The result is one JSON object: `stdout`, `stderr` (each cut with a marker past its cap),
`value` (the last expression's value, as JSON when it can be, else its repr) and, when
the code raised, `error` {type, message, traceback} with the traceback's frames in the
model's code only.

Build: see build.sh (componentize-py, pinned in plugins/python-data/requirements.txt).
"""

# The modules offered to the model's code: imported here, so they are in the snapshot
# (componentize-py bundles only what the build imports) and cost no import per call.
import ast
import base64
import binascii
import bisect
import builtins
import calendar
import cmath
import codecs
import collections
import collections.abc
import colorsys
import contextlib
import copy
import csv
import dataclasses
import datetime
import decimal
import difflib
import enum
import fnmatch
import fractions
import functools
import glob
import gzip
import hashlib
import heapq
import hmac
import html
import html.parser
import io
import ipaddress
import itertools
import json
import keyword
import linecache
import locale
import math
import numbers
import operator
import os
import os.path
import pathlib
import pprint
import random
import re
import reprlib
import secrets
import shlex
import statistics
import string
import struct
import sys
import textwrap
import time
import tomllib
import traceback
import types
import typing
import unicodedata
import urllib.parse
import uuid
import zlib
import zoneinfo

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.tool import ToolError_InvalidInput, ToolSpec

# What one call may return, per part. The whole result also stays within the profile's
# `max_output_kb`, which the host enforces.
MAX_STDOUT = 32 * 1024
MAX_STDERR = 8 * 1024
MAX_VALUE = 8 * 1024
MAX_TRACEBACK = 4 * 1024
MAX_CODE = 1024 * 1024
MAX_STDIN = 1024 * 1024
MAX_FILES = 32
MAX_FILE_BYTES = 1024 * 1024
CODE_NAME = "<code>"

SCHEMA = json.dumps({
    "type": "object",
    "properties": {
        "code": {"type": "string", "maxLength": MAX_CODE, "description": "Python 3 source to run as a script. The value of a final expression is returned."},
        "stdin": {"type": "string", "maxLength": MAX_STDIN, "description": "Text the code reads from sys.stdin"},
        "files": {
            "type": "array",
            "items": {"type": "string"},
            "maxItems": MAX_FILES,
            "description": "Guest paths of text files to read before the code runs, given to it as the dict `files` (path -> text)",
        },
    },
    "required": ["code"],
    "additionalProperties": False,
})

DESCRIPTION = (
    "Run Python 3 code in a fresh sandbox and return its stdout, stderr, the value of its last "
    "expression and any exception with its traceback. The standard library for data and text is "
    "there (json, csv, re, math, statistics, decimal, fractions, datetime, collections, itertools, "
    "functools, textwrap, difflib, hashlib, base64, pathlib, ...); files are only the directories "
    "this agent is granted, at their guest paths (e.g. /project read-only, /scratch writable); no "
    "network unless granted, no threads or subprocesses. Nothing persists between calls: pass "
    "data in `stdin`, `files` or files under a writable directory."
)


class Capped(io.TextIOBase):
    """A text stream keeping at most `cap` characters and counting the rest."""

    def __init__(self, cap):
        self.cap = cap
        self.parts = []
        self.kept = 0
        self.dropped = 0

    def writable(self):
        return True

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        room = self.cap - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(room, len(text))
        if len(text) > room:
            self.dropped += len(text) - max(room, 0)
        return len(text)

    def text(self):
        kept = "".join(self.parts)
        if self.dropped:
            kept += f"\n[... {self.dropped} more characters cut: output is capped at {self.cap}]"
        return kept


def cut(text, cap):
    if len(text) <= cap:
        return text
    return text[:cap] + f" [... {len(text) - cap} more characters cut]"


def as_value(value):
    """The last expression's value: JSON when it is JSON-shaped and small, else repr."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        if len(text) <= MAX_VALUE:
            return value
    except (TypeError, ValueError, RecursionError):
        pass
    try:
        return {"repr": cut(reprlib.Repr(maxstring=MAX_VALUE, maxother=MAX_VALUE).repr(value), MAX_VALUE)}
    except Exception as error:  # a __repr__ that raises
        return {"repr": f"<unrepresentable {type(value).__name__}: {type(error).__name__}>"}


def error_of(error):
    """Type, message and the traceback's frames in the model's code, bounded."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == CODE_NAME]
    lines = traceback.format_list(frames[-20:])
    if isinstance(error, SyntaxError) and error.filename == CODE_NAME:
        lines += traceback.format_exception_only(error)
    trace = cut("Traceback (most recent call last, in the code):\n" + "".join(lines), MAX_TRACEBACK)
    kind = type(error).__name__
    message = str(error)
    if isinstance(error, MemoryError):
        message = message or "out of memory: the sandbox's memory limit (limits.memory_mb) was reached"
    if isinstance(error, RecursionError):
        message += f" (sys.getrecursionlimit() is {sys.getrecursionlimit()})"
    return {"type": kind, "message": cut(message, MAX_TRACEBACK), "traceback": trace}


def read_files(paths):
    files = {}
    for path in paths:
        if not isinstance(path, str):
            raise Err(ToolError_InvalidInput("`files` must be a list of guest paths"))
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                files[path] = handle.read(MAX_FILE_BYTES + 1)
        except OSError as error:
            raise Err(ToolError_InvalidInput(f"`files`: cannot read {path}: {error.strerror or error} (only this agent's granted directories are visible)"))
        if len(files[path]) > MAX_FILE_BYTES:
            raise Err(ToolError_InvalidInput(f"`files`: {path} is larger than {MAX_FILE_BYTES} characters; open it from the code instead"))
    return files


def run(code, stdin, files):
    """Runs `code` as `__main__` and returns the result object."""
    stdout, stderr = Capped(MAX_STDOUT), Capped(MAX_STDERR)
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(stdin), stdout, stderr
    # A fresh seed from the host's random source for this call: never the snapshot's.
    random.seed(os.urandom(32))
    namespace = {"__name__": "__main__", "__builtins__": builtins, "files": files}
    # Tracebacks quote the model's own lines.
    linecache.cache[CODE_NAME] = (len(code), None, code.splitlines(True), CODE_NAME)
    result = {}
    try:
        tree = ast.parse(code, CODE_NAME, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, CODE_NAME, "exec"), namespace)
        if last is not None:
            value = eval(compile(last, CODE_NAME, "eval"), namespace)
            if value is not None:
                result["value"] = as_value(value)
    except SystemExit as exit:
        if exit.code not in (None, 0):
            result["exit_code"] = exit.code if isinstance(exit.code, int) else 1
            if not isinstance(exit.code, int):
                print(exit.code, file=stderr)
    except BaseException as error:  # the model's code may raise anything: report it
        result["error"] = error_of(error)
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    result["stdout"] = stdout.text()
    result["stderr"] = stderr.text()
    return result


class Tool(exports.Tool):
    def list_tools(self):
        return [ToolSpec("run_python", DESCRIPTION, SCHEMA)]

    def call_tool(self, name, arguments):
        if name != "run_python":
            raise Err(ToolError_InvalidInput(f"unknown tool `{name}`"))
        try:
            args = json.loads(arguments)
        except json.JSONDecodeError as error:
            raise Err(ToolError_InvalidInput(f"arguments are not valid JSON: {error}"))
        code = args.get("code") if isinstance(args, dict) else None
        if not isinstance(code, str) or len(code) > MAX_CODE:
            raise Err(ToolError_InvalidInput(f"`code` must be a string of Python source of at most {MAX_CODE} characters"))
        stdin = args.get("stdin", "")
        if not isinstance(stdin, str) or len(stdin) > MAX_STDIN:
            raise Err(ToolError_InvalidInput(f"`stdin` must be a string of at most {MAX_STDIN} characters"))
        paths = args.get("files", [])
        if not isinstance(paths, list) or len(paths) > MAX_FILES:
            raise Err(ToolError_InvalidInput(f"`files` must be a list of at most {MAX_FILES} guest paths"))
        return json.dumps(run(code, stdin, read_files(paths)), ensure_ascii=False, separators=(",", ":"))


# Warm-up at build time: the snapshot then holds what a first call would do lazily
# (the compiler's and json's caches, the regular expressions the modules compile).
run("import json, re\nx = [i * i for i in range(10)]\nprint(json.dumps({'s': sum(x)}))\nre.findall(r'\\d+', 'a1b22')", "", {})
run("1/0", "", {})
