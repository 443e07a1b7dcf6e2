"""One connection to authbrokerd: JSON-RPC 2.0, one JSON text per line, on a Unix socket
(docs/protocol.md). Standard library only."""
import json
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Optional

from . import errors

#: How long a call waits for its answer unless told otherwise: a cold start and one refresh
#: at a provider fit in it (each bounded by the daemon's own 10 s timeouts).
DEFAULT_TIMEOUT = 15.0
#: The longest answer line accepted; a real one is a few kilobytes.
MAX_RESPONSE_BYTES = 1 << 20
#: How much longer than its `wait_for_sign_in` a waiting call waits for the daemon's answer.
SIGN_IN_GRACE = 30.0


def socket_path():
    """`$AUTHBROKER_SOCKET`, else `$XDG_RUNTIME_DIR/authbroker/socket`."""
    explicit = os.environ.get("AUTHBROKER_SOCKET")
    if explicit:
        return explicit
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if not runtime:
        raise errors.NoSocketPath(
            "neither AUTHBROKER_SOCKET nor XDG_RUNTIME_DIR is set, so authbrokerd's socket cannot be found")
    return os.path.join(runtime, "authbroker", "socket")


@dataclass(frozen=True)
class Token:
    """A `token.get` (or `dpop.proof`) answer. Its `repr` never shows the token or proof."""

    access_token: str = field(repr=False)
    token_type: str
    expires_at: int
    provider: str
    account: Optional[str] = None
    scope: Optional[str] = None
    resource: Optional[str] = None
    #: A DPoP proof for one request (`dpop.proof` only).
    proof: Optional[str] = field(default=None, repr=False)

    @property
    def authorization(self):
        """The `Authorization` header's value: `Bearer …`, or `DPoP …` for a bound token."""
        return f"{self.token_type} {self.access_token}"

    @property
    def dpop_bound(self):
        return self.token_type.lower() == "dpop"

    @classmethod
    def from_result(cls, result):
        try:
            return cls(access_token=result["access_token"], token_type=result["token_type"],
                       expires_at=int(result["expires_at"]), provider=result["provider"],
                       account=result.get("account"), scope=result.get("scope"),
                       resource=result.get("resource"), proof=result.get("proof"))
        except (KeyError, TypeError, ValueError) as e:
            raise errors.BadResponse(f"authbrokerd answered something unexpected: the token answer lacks {e}") from None


def _drop_none(params):
    return {k: v for k, v in params.items() if v is not None}


def token_params(resource=None, scopes=None, provider=None, account=None, min_ttl=None,
                 params=None, wait_for_sign_in=None):
    """The `token.get` params; what is None is left out."""
    return _drop_none({"resource": resource, "scopes": list(scopes) if scopes is not None else None,
                       "provider": provider, "account": account, "min_ttl": min_ttl,
                       "params": params, "wait_for_sign_in": wait_for_sign_in})


class Broker:
    """A connection to authbrokerd.

    Calls block until the daemon answers or `timeout` seconds pass
    (:class:`~authbroker.errors.BrokerTimeout`). One connection carries many calls, one at
    a time (a lock makes it safe to share between threads). Before anything is sent, the
    socket's server must run as this process's user (SO_PEERCRED), else
    :class:`~authbroker.errors.WrongServer`.

        with Broker() as broker:
            token = broker.token(resource="https://api.example.com")
    """

    def __init__(self, path=None, timeout=DEFAULT_TIMEOUT):
        self.path = path or socket_path()
        self.timeout = timeout
        self._lock = threading.Lock()
        self._sock = None
        self._buffer = b""
        self._next_id = 1
        self._connect()

    def _connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout if self.timeout else None)
            sock.connect(self.path)
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            raise errors.DaemonNotRunning(_not_running(self.path), self.path) from None
        except socket.timeout:
            sock.close()
            raise errors.BrokerTimeout(f"authbrokerd did not accept the connection on {self.path} "
                                       f"within {_seconds(self.timeout)}", "connect", self.timeout) from None
        except OSError as e:
            sock.close()
            raise errors.CannotConnect(f"cannot connect to authbrokerd on {self.path}: "
                                       f"{e.strerror or e}", self.path) from None
        # Who serves the socket: the kernel's answer, not the file's owner (a socket can be
        # bound in a folder of ours by someone else, or forwarded).
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _, uid, _ = struct.unpack("3i", creds)
        me = os.geteuid()
        if uid != me:
            sock.close()
            raise errors.WrongServer(
                f"the socket {self.path} is served by uid {uid}, not by you (uid {me}), so nothing was sent",
                self.path, uid)
        self._sock = sock

    def close(self):
        """Closes the connection; later calls fail with ConnectionLost."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._buffer = b""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- Calls ------------------------------------------------------------------------

    def call(self, method, params=None, timeout=None):
        """Calls `method` and returns its `result`; raises the typed error of an error answer.

        `timeout` (seconds) overrides the connection's; 0 or None on both waits forever."""
        with self._lock:
            return self._call(method, params, self.timeout if timeout is None else timeout)

    def _call(self, method, params, timeout):
        if self._sock is None:
            raise errors.ConnectionLost(f"the connection to authbrokerd on {self.path} is closed; open a new one")
        request_id = self._next_id
        self._next_id += 1
        request = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            request["params"] = params
        line = json.dumps(request, separators=(",", ":")).encode() + b"\n"
        deadline = time.monotonic() + timeout if timeout else None
        try:
            self._sock.settimeout(timeout if timeout else None)
            self._sock.sendall(line)
            while True:
                answer = self._read_line(method, deadline, timeout)
                result = self._decode(answer, request_id, method)
                if result is not _SKIP:
                    return result
        except (errors.ConnectionLost, errors.BadResponse):
            # After a transport failure no later answer can be trusted to be ours.
            self.close()
            raise
        except OSError as e:
            self.close()
            raise errors.ConnectionLost(f"the connection to authbrokerd on {self.path} failed during "
                                        f"{method}: {e.strerror or e}") from None

    def _read_line(self, method, deadline, timeout):
        scanned = 0
        while True:
            newline = self._buffer.find(b"\n", scanned)
            if newline >= 0:
                if newline > MAX_RESPONSE_BYTES:
                    raise errors.BadResponse(f"authbrokerd answered something unexpected: a response line is longer "
                                             f"than {MAX_RESPONSE_BYTES} bytes")
                line, self._buffer = self._buffer[:newline], self._buffer[newline + 1:]
                return line
            scanned = len(self._buffer)
            if scanned > MAX_RESPONSE_BYTES:
                raise errors.BadResponse(f"authbrokerd answered something unexpected: a response line is longer "
                                         f"than {MAX_RESPONSE_BYTES} bytes")
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise errors.BrokerTimeout(f"authbrokerd did not answer {method} within {_seconds(timeout)}",
                                               method, timeout)
                self._sock.settimeout(left)
            try:
                chunk = self._sock.recv(65536)
            except socket.timeout:
                # The connection stays usable: the late answer is skipped by its id.
                raise errors.BrokerTimeout(f"authbrokerd did not answer {method} within {_seconds(timeout)}",
                                           method, timeout) from None
            if not chunk:
                raise errors.ConnectionLost(f"authbrokerd closed the connection on {self.path} before answering {method}")
            self._buffer += chunk

    def _decode(self, line, request_id, method):
        if not line.strip():
            return _SKIP
        try:
            answer = json.loads(line)
        except ValueError:
            raise errors.BadResponse(f"authbrokerd answered something unexpected: the answer to {method} "
                                     "is not a JSON-RPC response (not valid JSON)") from None
        if not isinstance(answer, dict):
            raise errors.BadResponse(f"authbrokerd answered something unexpected: the answer to {method} "
                                     "is not a JSON-RPC response (not an object)")
        if isinstance(answer.get("method"), str) and "result" not in answer and "error" not in answer:
            return _SKIP  # a notification (an event, on a subscribed connection), no answer
        answer_id = answer.get("id")
        if isinstance(answer_id, int) and not isinstance(answer_id, bool) and 1 <= answer_id < request_id:
            return _SKIP  # a late answer to a call that timed out
        if "error" in answer and answer["error"] is not None:
            # JSON-RPC answers a request it could not read with id null: only ours is outstanding.
            if answer_id is not None and answer_id != request_id:
                raise errors.BadResponse(f"authbrokerd answered something unexpected: an error answer carries "
                                         f"id {json.dumps(answer_id)} instead of {request_id}")
            raise errors.rpc_error(answer["error"])
        if answer_id != request_id:
            raise errors.BadResponse(f"authbrokerd answered something unexpected: the answer to request "
                                     f"{request_id} carries id {json.dumps(answer_id)}")
        if "result" not in answer:
            raise errors.BadResponse(f"authbrokerd answered something unexpected: the answer to {method} "
                                     "has neither result nor error")
        return answer["result"]

    # -- The methods ------------------------------------------------------------------

    def token(self, resource=None, *, scopes=None, provider=None, account=None, min_ttl=None,
              params=None, wait_for_sign_in=None, timeout=None):
        """`token.get`: a :class:`Token` for `resource`.

        With `wait_for_sign_in` (seconds) an account that needs a sign-in does not raise
        LoginRequired at once: the daemon starts (or joins) its one browser sign-in,
        announces it with a desktop notification, and answers once the user is signed in
        (docs/sign-in.md). The call then waits that long, plus a little."""
        p = token_params(resource, scopes, provider, account, min_ttl, params, wait_for_sign_in)
        if wait_for_sign_in is not None and timeout is None:
            timeout = wait_for_sign_in + SIGN_IN_GRACE
        return Token.from_result(self.call("token.get", p, timeout))

    def dpop_proof(self, htm, htu, resource=None, *, nonce=None, scopes=None, provider=None,
                   account=None, min_ttl=None, params=None, wait_for_sign_in=None, timeout=None):
        """`dpop.proof`: the token and a fresh DPoP proof (RFC 9449) for one request
        `htm` `htu`; send `Authorization: DPoP <token>` and `DPoP: <proof>`."""
        p = token_params(resource, scopes, provider, account, min_ttl, params, wait_for_sign_in)
        p.update(_drop_none({"htm": htm, "htu": htu, "nonce": nonce}))
        if wait_for_sign_in is not None and timeout is None:
            timeout = wait_for_sign_in + SIGN_IN_GRACE
        return Token.from_result(self.call("dpop.proof", p, timeout))

    def reject_token(self, access_token, timeout=None):
        """`token.reject`: an API refused this token (HTTP 401); the daemon drops it, and the
        next `token()` for its key refreshes. Returns whether it was still cached."""
        return bool(self.call("token.reject", {"access_token": access_token}, timeout).get("dropped"))

    def resolve(self, resource, resource_metadata=None, timeout=None):
        """`discovery.resolve`: what the metadata of `resource` (at `resource_metadata`, the
        URL a 401 named, else its well-known URL; RFC 9728) says: `provider`, `issuer`, their
        hosts, `trusted` and `signed_in`. Nothing is sent to the authorization server. A
        server that is not trusted yet is trusted by the user alone (`authctl login
        --resource URL`): this library has no call for `discovery.trust`."""
        result = self.call("discovery.resolve", _drop_none({"resource": resource,
                                                            "resource_metadata": resource_metadata}), timeout)
        if not isinstance(result, dict) or not isinstance(result.get("provider"), str):
            raise errors.BadResponse("authbrokerd answered something unexpected: the discovery.resolve answer "
                                     "lacks 'provider'")
        if result.get("resource") != resource:
            raise errors.BadResponse(f"authbrokerd answered something unexpected: discovery.resolve for {resource} "
                                     f"answered for another resource")
        return result

    def start_sign_in(self, provider=None, *, join=True, timeout=None):
        """`login.start` with `join`: the provider's browser sign-in in progress, or a new
        one announced by a notification. The answer has `authorization_url` to show and
        `notified` (whether a notification shows it already)."""
        return self.call("login.start", _drop_none({"provider": provider, "join": join}), timeout)

    def accounts(self, timeout=None):
        """`account.list`: the accounts, with `provider`, `subject`, `state`, `display_name`."""
        return self.call("account.list", None, timeout)["accounts"]

    def status(self, timeout=None):
        """`daemon.status`: version, uptime, providers, accounts, counters (never a token)."""
        return self.call("daemon.status", None, timeout)


_SKIP = object()


def _not_running(path):
    """Why nothing answers on `path`, and what to do. In an ssh session the daemon runs on
    the machine the user came from: a forward is missing, and starting one here is not the
    advice (docs/integrations.md, "Over ssh")."""
    if os.environ.get("SSH_CONNECTION"):
        return (f"nothing answers on {path}, and this is an ssh session: authbrokerd runs on the machine you "
                f"connect from, so check that this ssh connection forwards its socket here (`ssh -R "
                f"{path}:/run/user/UID/authbroker/socket …`, or RemoteForward in ~/.ssh/config) and that the "
                f"folder of {path} exists on this host (docs/integrations.md, \"Over ssh\")")
    return f"authbrokerd is not running on {path}: start it with `systemctl --user start authbroker.socket`"


def _seconds(timeout):
    if timeout is None:
        return "the time allowed"
    if timeout < 1:
        return f"{round(timeout * 1000)} ms"
    return f"{timeout:g} s"


def get_token(resource=None, *, scopes=None, provider=None, account=None, min_ttl=None, params=None,
              wait_for_sign_in=None, on_sign_in=None, timeout=DEFAULT_TIMEOUT, path=None):
    """An access token for `resource` from the user's authbrokerd: a :class:`Token`.

        import authbroker
        token = authbroker.get_token("https://api.example.com")
        headers = {"Authorization": token.authorization}

    With `wait_for_sign_in` (seconds), an account that needs a sign-in waits for it
    instead of raising LoginRequired; `on_sign_in(answer)` is then called first with the
    `login.start` answer (its `authorization_url` is the page to open; `notified` says
    whether a desktop notification shows it already), as `authctl --wait-for-sign-in`
    prints the page."""
    with Broker(path, timeout) as broker:
        kw = dict(scopes=scopes, provider=provider, account=account, min_ttl=min_ttl, params=params)
        if wait_for_sign_in is None:
            return broker.token(resource, **kw)
        try:
            return broker.token(resource, **kw)
        except errors.LoginRequired as e:
            if on_sign_in is not None:
                on_sign_in(broker.start_sign_in(provider or e.provider))
        return broker.token(resource, wait_for_sign_in=wait_for_sign_in, **kw)
