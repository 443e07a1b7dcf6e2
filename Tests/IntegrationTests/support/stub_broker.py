"""A STUB authbrokerd for the client library's own tests (clients/python): JSON-RPC 2.0,
one JSON text per line, on a real Unix socket, many connections at once; and a STUB
resource server on 127.0.0.1 that answers through one function, for the 401 and 403
challenges a real API or MCP server sends. Neither is the real daemon: its answers are
the ones docs/protocol.md documents, made up here."""
import http.server
import json
import os
import socketserver
import tempfile
import threading
import time


class Reply(Exception):
    """Raised by a STUB daemon's method: the JSON-RPC error answer it stands for."""

    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.error = {"code": code, "message": message, **({"data": data} if data is not None else {})}


class StubBroker:
    """A STUB daemon that serves tokens as authbrokerd does, as far as the auth classes see.

    `known`: the resources token.get serves without discovery; `discoverable`: resource ->
    {"issuer", "trusted"} that discovery.resolve finds (and token.get then serves, or
    answers -32011 for an untrusted issuer). Tokens are `tok-<n>` (`dpop`: bound, with a
    proof per dpop.proof); token.reject makes the next token.get serve a new one. `calls`
    holds every (method, params) in order. `on` maps a method to a function
    (params -> result) that overrides it."""

    def __init__(self, known=(), discoverable=None, dpop=False):
        self.known = set(known)
        self.discoverable = dict(discoverable or {})
        self.dpop = dpop
        self.calls = []
        self.on = {}
        self._serial = 1
        self._lock = threading.Lock()
        self.dir = tempfile.mkdtemp(prefix="ab-stub-")
        self.path = os.path.join(self.dir, "sock")
        stub = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                for line in self.rfile:
                    request = json.loads(line)
                    answer = {"jsonrpc": "2.0", "id": request.get("id")}
                    try:
                        answer["result"] = stub.answer(request["method"], request.get("params") or {})
                    except Reply as e:
                        answer["error"] = e.error
                    self.wfile.write(json.dumps(answer).encode() + b"\n")

        self.server = socketserver.ThreadingUnixStreamServer(self.path, Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        os.remove(self.path)
        os.rmdir(self.dir)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def methods(self):
        return [m for m, _ in self.calls]

    def token(self, scopes=None):
        """The token the next token.get for `scopes` serves: `tok-<n>`, then `-a+b` for scopes
        a and b (so that the STUB resource server can tell which scopes it carries)."""
        return f"tok-{self._serial}" + ("-" + "+".join(sorted(scopes)) if scopes else "")

    def answer(self, method, params):
        with self._lock:
            self.calls.append((method, params))
        if method in self.on:
            return self.on[method](params)
        if method in ("token.get", "dpop.proof"):
            return self._token(method, params)
        if method == "token.reject":
            with self._lock:
                dropped = (params.get("access_token") or "").split("-")[:2] == ["tok", str(self._serial)]
                self._serial += dropped
            return {"dropped": dropped}
        if method == "discovery.resolve":
            found = self.discoverable.get(params["resource"])
            if found is None:
                raise Reply(-32004, f"the metadata of {params['resource']} could not be fetched")
            self.known.add(params["resource"])
            return {"resource": params["resource"], "provider": "found", "issuer": found["issuer"],
                    "resource_host": "127.0.0.1", "issuer_host": "auth.example.test",
                    "trusted": found["trusted"], "signed_in": True, "configured": False}
        raise Reply(-32601, f'there is no method "{method}": see docs/protocol.md')

    def _token(self, method, params):
        resource = params.get("resource")
        if resource is not None and resource not in self.known:  # None: the provider's default audience
            raise Reply(-32602, f"invalid params for {method}: no provider lists the resource {resource}")
        found = self.discoverable.get(resource)
        if found and not found["trusted"]:
            raise Reply(-32011, f"the authorization server of {resource} is not trusted yet: run "
                                f"`authctl login --resource {resource}`",
                        {"resource": resource, "issuer": found["issuer"], "resource_host": "127.0.0.1",
                         "issuer_host": "auth.example.test", "provider": "found"})
        scopes = params.get("scopes")
        result = {"access_token": self.token(scopes), "token_type": "DPoP" if self.dpop else "Bearer",
                  "expires_at": int(time.time()) + 3600, "provider": "found" if found else "stub",
                  "resource": resource, "scope": " ".join(sorted(scopes)) if scopes else "read"}
        if method == "dpop.proof":
            result["proof"] = f"proof-{len(self.calls)}-{params.get('nonce') or ''}"
        return result


class StubResource:
    """A STUB resource server: every request (any method) is answered by
    `answer(request) -> (status, headers dict, body bytes)`; `request` has `method`,
    `path`, `headers` and `body`. `log` holds (method, path, Authorization, DPoP, status)."""

    def __init__(self, answer):
        self.log = []
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle_one(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.body = self.rfile.read(length) if length else b""
                status, headers, body = answer(self)
                stub.log.append((self.command, self.path, self.headers.get("Authorization"),
                                 self.headers.get("DPoP"), status))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = handle_one

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def statuses(self):
        return [e[4] for e in self.log]

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
