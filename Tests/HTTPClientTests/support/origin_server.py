#!/usr/bin/env python3
"""A test origin server for HTTPClientTests: answers each path with one canned behaviour
(well-formed and malformed HTTP alike), over plain TCP or, with --cert/--key, TLS.
Listens on 127.0.0.1 with an ephemeral port, which it prints on stdout's first line.
It never prints request contents."""
import argparse
import socket
import socketserver
import ssl
import sys
import threading
import time


def read_request(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return head, rest


def answer(status, headers, body):
    lines = [b"HTTP/1.1 " + status]
    lines += headers
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


# Chunk sizes that are not plain hex digits; each would parse with a lenient integer reader.
SIGNED_CHUNKS = {
    "/chunk-minus": (b"-1", b""),
    "/chunk-plus": (b"+5e", b"a" * 0x5E),
    "/chunk-0x": (b"0x5", b"aaaaa"),
    "/chunk-space": (b"5 5", b"a" * 0x55),
}


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        sock = self.request
        if self.server.tls is not None:
            try:
                sock = self.server.tls.wrap_socket(sock, server_side=True)
            except (ssl.SSLError, OSError):
                return
        try:
            self.serve(sock)
        except OSError:
            pass
        finally:
            try:
                sock.close()
            except OSError:
                pass

    def serve(self, sock):
        if self.server.eager:
            # Answers before reading anything, as a plain HTTP server does to a TLS hello.
            sock.sendall(answer(b"400 Bad Request", [b"Content-Length: 0", b"Connection: close"], b""))
            return
        request = read_request(sock)
        if request is None:
            return
        head, body = request
        target = head.split(b"\r\n")[0].split(b" ")[1].decode()
        path, _, query = target.partition("?")
        size = int(query.partition("n=")[2] or "0") if "n=" in query else 0
        if path == "/echo":
            echoed = head + b"\r\n\r\n" + body
            sock.sendall(answer(b"200 OK", [b"Content-Length: %d" % len(echoed)], echoed))
        elif path == "/chunked":
            sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"7;ext=1\r\nhello, \r\n5\r\nworld\r\n0\r\nX-Trailer: t\r\n\r\n")
        elif path == "/close":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end")
            if isinstance(sock, ssl.SSLSocket):
                sock = sock.unwrap()  # close_notify: the body's end is certain
        elif path == "/closecut":
            # Over TLS: the connection ends without close_notify, as a cut-short body would.
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the e")
        elif path in SIGNED_CHUNKS:
            size, data = SIGNED_CHUNKS[path]
            sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + size + b"\r\n" + data
                         + b"\r\n0\r\n\r\n")
        elif path == "/interim":
            sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            sock.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n")
            sock.sendall(answer(b"200 OK", [b"Content-Length: 5"], b"final"))
        elif path == "/headers":
            sock.sendall(answer(b"200 OK", [b"X-Mixed-Case: A", b"Set-Thing: 1", b"set-thing: 2",
                                            b"Content-Length: 0"], b""))
        elif path == "/redirect":
            sock.sendall(answer(b"302 Found", [b"Location: /echo", b"Content-Length: 0"], b""))
        elif path == "/big":
            sock.sendall(answer(b"200 OK", [b"Content-Length: %d" % size], b"a" * size))
        elif path == "/bigchunked":
            sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            sent = 0
            while sent < size:
                part = min(4096, size - sent)
                sock.sendall(b"%x\r\n" % part + b"a" * part + b"\r\n")
                sent += part
            sock.sendall(b"0\r\n\r\n")
        elif path == "/bigclose":
            sock.sendall(b"HTTP/1.1 200 OK\r\n\r\n" + b"a" * size)
        elif path == "/bighead":
            # One header field that never ends (70 KiB and counting), then a small body.
            sock.sendall(b"HTTP/1.1 200 OK\r\nX-Filler: " + b"a" * (70 * 1024) + b"\r\nContent-Length: 2\r\n\r\nok")
        elif path == "/garbage":
            sock.sendall(b"SSH-2.0-OpenSSH_9.6\r\nnot an answer at all\r\n\r\n")
        elif path == "/truncated":
            sock.sendall(answer(b"200 OK", [b"Content-Length: 100"], b"only ten.."))
        elif path == "/late":
            # Reads the request, answers 1.5 s later (a provider that stalled with it).
            time.sleep(1.5)
            sock.sendall(answer(b"200 OK", [b"Content-Length: 4"], b"late"))
        elif path == "/hang":
            while not self.server.stopping.is_set():
                time.sleep(0.05)
        else:
            sock.sendall(answer(b"404 Not Found", [b"Content-Length: 0"], b""))


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--eager", action="store_true", help="answer 400 at once, without reading")
    args = parser.parse_args()
    server = Server(("127.0.0.1", 0), Handler)
    server.stopping = threading.Event()
    server.tls = None
    server.eager = args.eager
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
        server.tls = context
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # Ends when the test closes stdin (or dies).
    sys.stdin.read()
    server.stopping.set()


if __name__ == "__main__":
    main()
