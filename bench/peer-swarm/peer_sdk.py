#!/usr/bin/env python3
"""The peer benchmark's workload on the OpenAI Agents SDK (the version in requirements.txt).

Run with: python peer_sdk.py PORT DOCS_DIR

A coordinator agent has one tool, `spawn_agent`: a researcher agent offered as a tool
(the SDK's agents-as-tools). The server at 127.0.0.1:PORT (server.py --style sdk)
scripts every reply: the coordinator asks for its researchers in rounds, each
researcher calls `read_file` once and answers, and the coordinator ends with
`DONE N`. The `read_file` tool reads DOCS_DIR as `/docs`, unsandboxed: the SDK has no
sandbox, so warren's side does more work per call, not less. Tracing is off and the
client does not retry, so the run measures the agent loop alone.
"""

import asyncio
import os
import sys

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI


def main():
    port, docs = sys.argv[1], sys.argv[2]
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-peer-bench", max_retries=0)
    model = OpenAIChatCompletionsModel(model="peer-model", openai_client=client)

    @function_tool
    def read_file(path: str) -> str:
        """Reads a text file under /docs."""
        relative = os.path.relpath(path, "/docs")
        if relative.startswith(".."):
            raise ValueError(f"{path} is outside /docs")
        with open(os.path.join(docs, relative)) as f:
            return f.read()

    researcher = Agent(
        name="researcher",
        instructions="Answer the task from the documents.",
        tools=[read_file],
        model=model,
    )
    coordinator = Agent(
        name="main",
        instructions="Spawn researchers for the tasks and report what they found.",
        tools=[researcher.as_tool(tool_name="spawn_agent", tool_description="Run a researcher on one task.")],
        model=model,
    )
    asyncio.run(gather(coordinator))


async def gather(coordinator):
    # The result is printed and dropped inside the run: kept alive past asyncio.run,
    # the whole history it holds adds about 10 MiB to the peak while the loop shuts down.
    result = await Runner.run(coordinator, "gather", max_turns=100)
    print(result.final_output)


if __name__ == "__main__":
    main()
