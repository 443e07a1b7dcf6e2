#!/usr/bin/env python3
"""An agent process: an MCP client of the official SDK (PyPI `mcp`) whose every request is
signed by authbroker (clients/python's BrokerMCPAuth), or, with --headers-command, whose
headers come from a command it runs first (as agents with a "headers helper" do). Lists
the server's tools, calls `whoami`, prints {"tools": [...], "whoami": {...}} as JSON.
Never sees a token file.

  mcp_agent.py SERVER_URL [--tool NAME] [--headers-command "authctl headers --resource URL"]
"""
import argparse
import asyncio
import json
import shlex
import subprocess

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from authbroker.mcp import BrokerMCPAuth


async def main():
    a = argparse.ArgumentParser()
    a.add_argument("url")
    a.add_argument("--tool", default="whoami")
    a.add_argument("--headers-command")
    args = a.parse_args()
    if args.headers_command:
        headers = json.loads(subprocess.run(shlex.split(args.headers_command), check=True, capture_output=True, text=True).stdout)
        client = httpx.AsyncClient(headers=headers)
    else:
        client = httpx.AsyncClient(auth=BrokerMCPAuth(args.url, wait_for_sign_in=60))
    async with client as http:
        async with streamable_http_client(args.url, http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = [t.name for t in (await session.list_tools()).tools]
                arguments = {"text": "hello"} if args.tool == "admin_echo" else {}
                result = await session.call_tool(args.tool, arguments)
                assert not result.isError, result
                text = result.content[0].text if result.content else "{}"
                value = text if args.tool == "admin_echo" else json.loads(text)
                print(json.dumps({"tools": tools, args.tool: value}))


asyncio.run(main())
