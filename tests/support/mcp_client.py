"""Drive `slice mcp` with the official MCP Python SDK (PyPI package `mcp`): a real client this
project did not write. Used by tests/mcp_e2e.rs and to measure docs/agents.md.

Usage: mcp_client.py SLICE_BINARY [CWD] < session.json > results.json

session.json is a list of calls, {"tool": NAME, "arguments": {...}}. The client connects,
lists the tools, makes every call in one session, pings the server at the end (it must still
be serving after every error), and prints one JSON object:
{"server": {...}, "instructions": str, "tools": [{"name", "description", "input_schema"}],
 "results": [{"tool", "is_error", "text"} or {"tool", "protocol_error"}], "alive": bool}
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError


async def main() -> None:
    slice_bin = sys.argv[1]
    cwd = sys.argv[2] if len(sys.argv) > 2 else None
    calls = json.load(sys.stdin)
    params = StdioServerParameters(command=slice_bin, args=["mcp"], cwd=cwd)
    out = {"results": []}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out["server"] = {"name": init.server_info.name, "version": init.server_info.version}
            out["protocol_version"] = str(init.protocol_version)
            out["instructions"] = init.instructions
            tools = await session.list_tools()
            out["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in tools.tools
            ]
            for call in calls:
                try:
                    r = await session.call_tool(call["tool"], call.get("arguments", {}))
                    text = "".join(c.text for c in r.content if getattr(c, "type", None) == "text")
                    out["results"].append({"tool": call["tool"], "is_error": bool(r.is_error), "text": text})
                except MCPError as e:
                    out["results"].append({"tool": call["tool"], "protocol_error": str(e)})
            await session.send_ping()
            out["alive"] = True
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
