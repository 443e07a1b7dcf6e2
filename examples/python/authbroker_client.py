#!/usr/bin/env python3
"""A client for authbrokerd in Python, standard library only (docs/integrations.md).

As a module:

    from authbroker_client import Broker
    token = Broker().token(resource="https://api.example.com")["access_token"]

As a command, it prints the token for a resource, like `authctl token`:

    python3 authbroker_client.py --resource https://api.example.com

The protocol (docs/protocol.md): JSON-RPC 2.0, one JSON text per line, on the Unix socket
$AUTHBROKER_SOCKET, else $XDG_RUNTIME_DIR/authbroker/socket.
"""
import argparse
import itertools
import json
import os
import socket
import struct
import sys


class BrokerError(Exception):
    """An error answer from authbrokerd: `code` is the JSON-RPC code (docs/protocol.md)."""

    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.code = code
        self.data = data


def socket_path():
    explicit = os.environ.get("AUTHBROKER_SOCKET")
    if explicit:
        return explicit
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if not runtime:
        raise BrokerError(None, "neither AUTHBROKER_SOCKET nor XDG_RUNTIME_DIR is set: set one to reach authbrokerd")
    return os.path.join(runtime, "authbroker", "socket")


class Broker:
    """One connection to authbrokerd; several calls may go over it."""

    def __init__(self, path=None, timeout=30):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        path = path or socket_path()
        self._sock.connect(path)
        # Who serves the socket, as the kernel reports it (SO_PEERCRED: pid, uid, gid): a
        # token request must never go to another user's program squatting on the path.
        _, uid, _ = struct.unpack("3i", self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        if uid != os.geteuid():
            self._sock.close()
            raise BrokerError(None, f"{path} is served by uid {uid}, not by you (uid {os.geteuid()}): "
                                    "not asking it for tokens; check AUTHBROKER_SOCKET and who runs authbrokerd")
        self._reader = self._sock.makefile("rb")
        self._ids = itertools.count(1)

    def call(self, method, params=None):
        request = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params:
            request["params"] = params
        self._sock.sendall(json.dumps(request).encode() + b"\n")
        while True:
            line = self._reader.readline()
            if not line:
                raise BrokerError(None, f"authbrokerd closed the connection without answering {method}: "
                                        "its log says why (journalctl --user -u authbroker.service)")
            answer = json.loads(line)
            # On a connection that subscribed (events.subscribe), event notifications come
            # between the answers: they carry a method and no id.
            if "id" in answer or "method" not in answer:
                break
        if "error" in answer:
            e = answer["error"]
            raise BrokerError(e.get("code"), e.get("message"), e.get("data"))
        return answer["result"]

    def token(self, resource=None, scopes=None, provider=None, min_ttl=None, wait_for_sign_in=None):
        """token.get: access_token, token_type, expires_at (Unix seconds), scope, resource, provider.

        With wait_for_sign_in (seconds), an account that needs a sign-in does not raise
        BrokerError -32001: the daemon starts (or joins) its one pending browser sign-in,
        shows a desktop notification, and answers once the user has signed in."""
        params = {k: v for k, v in
                  {"resource": resource, "scopes": scopes, "provider": provider, "min_ttl": min_ttl,
                   "wait_for_sign_in": wait_for_sign_in}.items()
                  if v is not None}
        if wait_for_sign_in is None:
            return self.call("token.get", params)
        previous = self._sock.gettimeout()
        self._sock.settimeout(wait_for_sign_in + 30)
        try:
            return self.call("token.get", params)
        finally:
            self._sock.settimeout(previous)

    def close(self):
        self._reader.close()
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def main():
    parser = argparse.ArgumentParser(description="Print an access token from authbrokerd.")
    parser.add_argument("--resource")
    parser.add_argument("--scope", action="append")
    parser.add_argument("--provider")
    args = parser.parse_args()
    try:
        with Broker() as broker:
            answer = broker.token(resource=args.resource, scopes=args.scope, provider=args.provider)
    except BrokerError as e:
        print(f"authbroker_client: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"authbroker_client: cannot reach authbrokerd: {e.strerror or e}: "
              "start it with `systemctl --user start authbroker.socket`", file=sys.stderr)
        return 3
    print(answer["access_token"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
