#!/usr/bin/env python3
"""An HTTPS server the engine's tests did not write: Python's http.server
wrapped in its ssl module (OpenSSL's own server code, not common/tls).

  https_receiver.py --cert C --key K [--client-ca CA.pem] --record FILE

Requires a client certificate of CA.pem when given. Answers every request
200 with "ok <subject CN of the client certificate>" and appends its
method, path, that CN and body to FILE ("POST /in engine\\n<body>\\n"). Listens on an
ephemeral port of 127.0.0.1 and prints the port on its first line; runs
until killed.
"""
import argparse
import http.server
import ssl
import sys
import threading


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--client-ca")
    p.add_argument("--record", required=True)
    a = p.parse_args()
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            cn = ""
            cert = self.connection.getpeercert()
            for rdn in (cert or {}).get("subject", ()):
                for k, v in rdn:
                    if k == "commonName":
                        cn = v
            with lock, open(a.record, "ab") as f:
                f.write(f"{self.command} {self.path} {cn}\n".encode() + body + b"\n")
            out = f"ok {cn}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        do_GET = do_POST = do_PUT = answer

        def log_message(self, *args):
            pass

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(a.cert, a.key)
    if a.client_ca:
        ctx.load_verify_locations(a.client_ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
