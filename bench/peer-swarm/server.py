#!/usr/bin/env python3
"""A scripted OpenAI-compatible chat-completions server for the peer benchmark.

Run with: python3 server.py --port-file FILE [--style warren|sdk] [--fan 100] [--rounds 10]

A request that offers a `spawn_agent` tool is the coordinator's: for --rounds turns it
asks for --fan sub-agents at once, in warren's form ({"profile", "task"}) or in the
Agents SDK's agents-as-tools form ({"input"}); warren's coordinator then awaits them
all; last it answers `DONE N`, N the number of distinct sub-agent answers it has seen.
Any other request is a sub-agent's: it reads the file its task names, then answers with
the task's number and the file's text. Each reply depends on the request alone, so
concurrent agents are served independently.

A request with "stream": true gets Server-Sent Events as providers send them: HTTP/1.1
chunked transfer encoding, one chunk per event, text and tool arguments cut into
pieces of CHUNK characters. Otherwise the answer is one JSON body. Standard library
only; the port it listens on (127.0.0.1, chosen by the kernel) goes to --port-file.
"""

import argparse
import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Characters of text or of tool-call arguments per streamed event.
CHUNK = 4

# Sent as every response's usage; the figures do not matter to the benchmark.
USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}


def task(number):
    """The task of sub-agent `number`; three files, read in turn."""
    return f"Task {number}: find the code word in /docs/topic{number % 3 + 1}.txt and report it."


def text_of(content):
    """A message's content as text (a string, or a list of parts)."""
    if isinstance(content, str):
        return content
    return json.dumps(content)


class Script:
    """What the coordinator and each sub-agent say, from the request alone."""

    def __init__(self, style, fan, rounds):
        self.style = style
        self.fan = fan
        self.rounds = rounds
        self.ids = 0
        self.lock = threading.Lock()

    def call_id(self):
        with self.lock:
            self.ids += 1
            return f"call_{self.ids:08x}"

    def reply(self, body):
        """(text, [(tool name, arguments)]) for one request."""
        messages = body.get("messages", [])
        tools = [t.get("function", {}).get("name") for t in body.get("tools") or []]
        if "spawn_agent" in tools:
            return self.coordinator(messages)
        return self.sub_agent(messages)

    def coordinator(self, messages):
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        if turn < self.rounds:
            numbers = range(turn * self.fan, (turn + 1) * self.fan)
            if self.style == "sdk":
                return None, [("spawn_agent", {"input": task(n)}) for n in numbers]
            return None, [("spawn_agent", {"profile": "researcher", "task": task(n)}) for n in numbers]
        if turn == self.rounds and self.style == "warren":
            return None, [("await_agents", {"job_ids": "*"})]
        seen = set()
        for m in messages:
            if m.get("role") != "assistant":
                seen.update(re.findall(r"FOUND\[(\d+)\]", text_of(m.get("content"))))
        return f"DONE {len(seen)}", []

    def sub_agent(self, messages):
        asked = " ".join(text_of(m.get("content")) for m in messages if m.get("role") == "user")
        found = re.search(r"Task (\d+): find the code word in (/docs/\S+\.txt)", asked)
        number, path = found.groups() if found else ("0", "/docs/topic1.txt")
        results = [text_of(m.get("content")) for m in messages if m.get("role") == "tool"]
        if not results:
            return None, [("read_file", {"path": path})]
        return f"FOUND[{number}]: {results[-1].strip()[:200]}", []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    script = None

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        if not self.path.endswith("/chat/completions"):
            return self.send_json(404, {"error": {"message": f"no such endpoint: {self.path}"}})
        text, calls = self.script.reply(body)
        calls = [(self.script.call_id(), name, json.dumps(args)) for name, args in calls]
        if body.get("stream"):
            self.stream(body, text, calls)
        else:
            self.whole(body, text, calls)

    def send_json(self, status, value):
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def whole(self, body, text, calls):
        message = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = [
                {"id": id, "type": "function", "function": {"name": name, "arguments": args}}
                for id, name, args in calls
            ]
        finish = "tool_calls" if calls else "stop"
        self.send_json(200, {
            "id": "chatcmpl-peer", "object": "chat.completion", "model": body.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": USAGE,
        })

    def stream(self, body, text, calls):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        head = {"id": "chatcmpl-peer", "object": "chat.completion.chunk", "model": body.get("model")}

        def event(delta, finish=None):
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            self.event(json.dumps({**head, "choices": [choice]}))

        event({"role": "assistant", "content": ""})
        for at in range(0, len(text or ""), CHUNK):
            event({"content": text[at:at + CHUNK]})
        for index, (id, name, args) in enumerate(calls):
            start = {"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}
            event({"tool_calls": [start]})
            for at in range(0, len(args), CHUNK):
                event({"tool_calls": [{"index": index, "function": {"arguments": args[at:at + CHUNK]}}]})
        event({}, "tool_calls" if calls else "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            self.event(json.dumps({**head, "choices": [], "usage": USAGE}))
        self.event("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def event(self, data):
        frame = f"data: {data}\n\n".encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
        self.wfile.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--style", choices=["warren", "sdk"], default="warren")
    parser.add_argument("--fan", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    Handler.script = Script(args.style, args.fan, args.rounds)
    ThreadingHTTPServer.request_queue_size = 1024
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(args.port_file + ".part", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(args.port_file + ".part", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
