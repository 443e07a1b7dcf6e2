#!/usr/bin/env python3
"""A STUB http proxy for HTTPClientTests (a real proxy cannot be made to tunnel to
loopback-only test servers in a controlled way): CONNECT host:port opens a tunnel and
relays bytes both ways; an absolute-form request is answered by the stub itself with its
request line as the body, so the test sees what the client sent. With --require-auth
USER:PASS it answers 407 unless Proxy-Authorization carries exactly those credentials.
Prints its port on stdout's first line; never prints request contents or credentials."""
import argparse
import base64
import socket
import socketserver
import sys
import threading


def relay(source, target):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, target):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        sock = self.request
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return
            data += chunk
        head = data.partition(b"\r\n\r\n")[0]
        lines = head.split(b"\r\n")
        method, target, _ = lines[0].split(b" ", 2)
        fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            fields[name.strip().lower()] = value.strip()
        if self.server.expected is not None and fields.get(b"proxy-authorization") != self.server.expected:
            sock.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                         b"Proxy-Authenticate: Basic realm=\"stub\"\r\nContent-Length: 0\r\n\r\n")
            return
        if method == b"CONNECT":
            host, _, port = target.decode().rpartition(":")
            try:
                upstream = socket.create_connection((host.strip("[]"), int(port)))
            except OSError:
                sock.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            sock.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            threading.Thread(target=relay, args=(upstream, sock), daemon=True).start()
            relay(sock, upstream)
        else:
            body = lines[0]
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--require-auth")
    args = parser.parse_args()
    server = Server(("127.0.0.1", 0), Handler)
    server.expected = None
    if args.require_auth:
        server.expected = b"Basic " + base64.b64encode(args.require_auth.encode())
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()


if __name__ == "__main__":
    main()
