#!/usr/bin/env python3
"""An MLLP receiver in TLS that the engine's tests did not write, on
Python's ssl module (OpenSSL's own server code, not common/tls): it
requires a client certificate from a given CA, answers every message AA
with MSA-2 = the MSH-10 it got, and records what it received.

  tls_mllp_receiver.py --cert C --key K [--client-ca CA.pem] --record FILE
                       [--close-after-ack]

Listens on an ephemeral port of 127.0.0.1 and ::1 (so "localhost"
reaches it whichever the resolver gives first) and prints the port on its
first line. Each message received is appended to FILE followed by 0x1c (a
byte a message cannot hold); each refused handshake is appended to
FILE.refused as one line with its reason. --close-after-ack: each
connection is closed after its first ACK, without a TLS close_notify (as
many receivers do). Runs until killed.
"""
import argparse
import socket
import ssl
import sys
import threading

VT, FS, CR = b"\x0b", b"\x1c", b"\r"


def field(segment, n, sep):
    parts = segment.split(sep)
    # MSH-1 is the separator itself: MSH-n is parts[n - 1].
    return parts[n - 1] if len(parts) >= n else b""


def ack_for(message):
    msh = message.split(CR)[0]
    if not msh.startswith(b"MSH") or len(msh) < 4:
        return None
    sep = msh[3:4]
    control = field(msh, 10, sep)
    return (b"MSH" + sep + b"^~\\&" + sep + b"RCV" + sep + b"FAC" + sep + b"SND" + sep + b"FAC"
            + sep + b"20260101000000" + sep + sep + b"ACK" + sep + b"ACK" + control + sep + b"P"
            + sep + b"2.5" + CR + b"MSA" + sep + b"AA" + sep + control + CR)


def serve(conn, ctx, record, lock, close_after_ack):
    tls = None
    try:
        conn.settimeout(10)
        # ssl closes the socket it wrapped when the handshake fails; a copy
        # keeps the connection open until the client has read our alert
        # (closing with its bytes unread would send a reset instead).
        keep = conn.dup()
        try:
            tls = ctx.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
            tls.do_handshake()
        except (ssl.SSLError, OSError) as e:
            with lock, open(record + ".refused", "a") as f:
                f.write(str(e).replace("\n", " ") + "\n")
            try:
                keep.settimeout(2)
                while keep.recv(4096):
                    pass
            except OSError:
                pass
            keep.close()
            return
        keep.close()
        buf = b""
        while True:
            try:
                data = tls.recv(65536)
            except (ssl.SSLError, OSError):
                return
            if not data:
                return
            buf += data
            while True:
                start = buf.find(VT)
                end = buf.find(FS + CR, start + 1)
                if start < 0 or end < 0:
                    break
                message = buf[start + 1:end]
                buf = buf[end + 2:]
                with lock, open(record, "ab") as f:
                    f.write(message + FS)
                ack = ack_for(message)
                if ack is not None:
                    tls.sendall(VT + ack + FS + CR)
                    if close_after_ack:
                        return
    finally:
        # close(), not unwrap(): the socket ends without a close_notify.
        (tls or conn).close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--client-ca")
    p.add_argument("--record", required=True)
    p.add_argument("--close-after-ack", action="store_true")
    a = p.parse_args()

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(a.cert, a.key)
    if a.client_ca:
        ctx.load_verify_locations(a.client_ca)
        ctx.verify_mode = ssl.CERT_REQUIRED

    servers = listen_on_loopback()
    print(servers[0].getsockname()[1], flush=True)
    lock = threading.Lock()

    def accept(server):
        while True:
            conn, _ = server.accept()
            threading.Thread(target=serve, args=(conn, ctx, a.record, lock, a.close_after_ack),
                             daemon=True).start()

    for s in servers[1:]:
        threading.Thread(target=accept, args=(s,), daemon=True).start()
    accept(servers[0])


def listen_on_loopback():
    """127.0.0.1 on an ephemeral port, and ::1 on the same port when the
    machine has it (loopback only: nothing else on the network reaches us)."""
    for _ in range(20):
        v4 = socket.create_server(("127.0.0.1", 0))
        try:
            v6 = socket.create_server(("::1", v4.getsockname()[1]), family=socket.AF_INET6)
            return [v4, v6]
        except OSError as e:
            if e.errno != 98:  # EADDRINUSE: try another port; else no IPv6
                return [v4]
            v4.close()
    return [socket.create_server(("127.0.0.1", 0))]


if __name__ == "__main__":
    sys.exit(main())
