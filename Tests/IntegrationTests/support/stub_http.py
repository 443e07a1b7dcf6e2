"""A STUB HTTP server for the far side these tests cannot run for real (a Kubernetes API
server, a resource server, an issuer with a feature Glewlwyd lacks): a real server on
127.0.0.1, in a thread of its own, that answers every GET through one function; over TLS
with a fresh self-signed certificate where the client insists (kubectl)."""
import http.server
import ssl
import subprocess
import threading


def bearer(request):
    """The bearer token of a request, or None: for the caller to fingerprint, never to keep."""
    auth = request.headers.get("Authorization", "")
    return auth[len("Bearer "):] if auth.startswith("Bearer ") else None


class StubHTTPServer:
    """Serves `answer(request) -> (content_type or None, body bytes)` for every GET.

    `url` is its base URL; with `tls_dir`, the scheme is https and `ca` is the file of the
    certificate (for 127.0.0.1) that a client is to trust. A context manager: it stops on
    leaving."""

    def __init__(self, answer, tls_dir=None):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                content_type, body = answer(self)
                self.send_response(200)
                if content_type:
                    self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.ca = None
        if tls_dir is not None:
            self.ca, key = f"{tls_dir}/ca.pem", f"{tls_dir}/key.pem"
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", self.ca,
                            "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                           check=True, capture_output=True)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self.ca, key)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if self.ca else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
