#!/usr/bin/python3
"""An SMTP server the engine's tests did not write: Debian's aiosmtpd
(python3-aiosmtpd, so run with Debian's /usr/bin/python3).

  smtp_server.py --dir FOLDER [--starttls CERT KEY] [--implicit-tls CERT KEY]
                 [--auth USER:PASSWORD]

Each message received is saved in FOLDER as N.eml (the DATA as received,
dot-stuffing undone) beside N.json ({"from", "to", "tls", "auth"}: the
envelope, whether the session was under TLS and who signed in), the .json
written last, by rename, so a reader never sees half a message. With
--starttls it offers STARTTLS; with --implicit-tls the whole connection is
TLS (smtps); with --auth it offers AUTH PLAIN/LOGIN (also without TLS) and
refuses mail until the client signs in with USER:PASSWORD. Listens on an
ephemeral port of 127.0.0.1, prints the port on its first line, runs until
killed.
"""
import argparse
import asyncio
import itertools
import json
import logging
import os
import socket
import ssl
import sys
import warnings

from aiosmtpd.smtp import SMTP, AuthResult


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--starttls", nargs=2, metavar=("CERT", "KEY"))
    p.add_argument("--implicit-tls", nargs=2, metavar=("CERT", "KEY"))
    p.add_argument("--auth")
    a = p.parse_args()
    # AUTH without TLS is what a test asks for; the tests' stderr stays theirs.
    warnings.simplefilter("ignore")
    logging.getLogger("mail.log").setLevel(logging.CRITICAL)
    counter = itertools.count(1)

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            n = next(counter)
            base = os.path.join(a.dir, str(n))
            with open(base + ".eml", "wb") as f:
                f.write(envelope.original_content or b"")
            meta = {
                "from": envelope.mail_from,
                "to": envelope.rcpt_tos,
                "tls": server.transport.get_extra_info("ssl_object") is not None,
                "auth": (session.auth_data.login.decode()
                         if session.authenticated and session.auth_data else None),
            }
            with open(base + ".tmp", "w") as f:
                json.dump(meta, f)
            os.rename(base + ".tmp", base + ".json")
            return "250 OK"

    user = password = None
    if a.auth:
        user, password = a.auth.split(":", 1)

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = (auth_data.login.decode() == user and auth_data.password.decode() == password)
        return AuthResult(success=ok, handled=False, auth_data=auth_data)

    def context(pair):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(pair[0], pair[1])
        return ctx

    def factory():
        kw = {}
        if a.starttls:
            kw["tls_context"] = context(a.starttls)
        if a.auth:
            kw.update(authenticator=authenticator, auth_required=True, auth_require_tls=False)
        return SMTP(Handler(), hostname="test-smtp", decode_data=False, **kw)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    ssl_ctx = context(a.implicit_tls) if a.implicit_tls else None
    loop.run_until_complete(loop.create_server(factory, sock=sock, ssl=ssl_ctx))
    print(sock.getsockname()[1], flush=True)
    loop.run_forever()


if __name__ == "__main__":
    sys.exit(main())
