#!/usr/bin/env python3
"""Sends one HL7 message over MLLP in TLS and prints the answer: a sender
the engine's tests did not write, on Python's ssl module (OpenSSL's own
client code, not common/tls).

  tls_mllp_send.py --port P --ca CA.pem [--cert C --key K] [--host 127.0.0.1]
                   [--server-name localhost] [--tls 1.1|1.2|1.3] [--plain]
                   [--timeout 10] MESSAGE

MESSAGE: segments separated by '\\r' (or '|'-rich text with real CRs).
Prints the ACK with its CRs as newlines and exits 0; on a TLS failure prints
"tls: <reason>" and exits 2; when the connection ends without an answer
prints "closed" and exits 3.
"""
import argparse
import socket
import ssl
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ca")
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--server-name", default="localhost")
    p.add_argument("--tls", choices=["1.1", "1.2", "1.3"])
    p.add_argument("--plain", action="store_true", help="no TLS at all")
    p.add_argument("--timeout", type=float, default=10)
    p.add_argument("--source", help="bind to this local address first")
    p.add_argument("message")
    a = p.parse_args()

    msg = a.message.replace("\\r", "\r").encode("latin-1")
    raw = socket.create_connection((a.host, a.port), timeout=a.timeout,
                                   source_address=(a.source, 0) if a.source else None)
    conn = raw
    if not a.plain:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if a.ca:
            ctx.load_verify_locations(a.ca)
        if a.cert:
            ctx.load_cert_chain(a.cert, a.key)
        if a.tls:
            v = {"1.1": ssl.TLSVersion.TLSv1_1, "1.2": ssl.TLSVersion.TLSv1_2,
                 "1.3": ssl.TLSVersion.TLSv1_3}[a.tls]
            if a.tls == "1.1":
                ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
            ctx.minimum_version = v
            ctx.maximum_version = v
        try:
            conn = ctx.wrap_socket(raw, server_hostname=a.server_name)
        except (ssl.SSLError, OSError) as e:
            print("tls: %s" % e)
            return 2
    try:
        conn.sendall(b"\x0b" + msg + b"\x1c\r")
        buf = b""
        while b"\x1c\r" not in buf:
            chunk = conn.recv(65536)
            if not chunk:
                break
            buf += chunk
    except ssl.SSLError as e:
        print("tls: %s" % e)
        return 2
    except OSError as e:
        print("closed: %s" % e)
        return 3
    if b"\x1c\r" not in buf:
        print("closed")
        return 3
    body = buf[buf.index(b"\x0b") + 1:buf.index(b"\x1c")] if b"\x0b" in buf else buf
    print(body.decode("latin-1").replace("\r", "\n"))
    if hasattr(conn, "version") and callable(conn.version):
        print("version: %s" % conn.version(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
