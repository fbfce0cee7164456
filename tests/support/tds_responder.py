#!/usr/bin/python3
"""A SQL Server stand-in for the engine's tests: it speaks enough TDS 7.4
(what SQL Server 2019 speaks) for FreeTDS's ODBC driver to connect, run
statements with bound parameters and read typed result sets, where no SQL
Server can run. Standard library only.

  tds_responder.py --user U --password P [--database D] [--tls CERT KEY]
                   [--record FILE]

Listens on an ephemeral port of 127.0.0.1, prints the port on its first
line, serves each connection on a thread, runs until killed.

Login: U/P right gives LOGINACK (TDS 7.4), wrong gives error 18456 and the
connection is closed. The database is D (or "master") when the client names
none; with --database, a client naming another one gets error 4060.
TLS (--tls): PRELOGIN answers ENCRYPT_ON to a client asking ON or REQUIRED,
ENCRYPT_OFF to one saying OFF (then only LOGIN7 is encrypted) and
NOT_SUP to one saying NOT_SUP; the handshake runs inside TDS PRELOGIN
packets and TLS records flow bare after it, as SQL Server does (TLS 1.2).
Without --tls it answers ENCRYPT_NOT_SUP.

What a statement (batch text, or @stmt of sp_executesql / sp_prepexec /
sp_prepare) gets, by the first rule that matches, case-insensitively:
  drop_connection  the socket is closed at once, no answer
  waitfor          nothing for 30 s (then DONE); an ATTENTION gets DONE_ATTN
  raise_error      error 50000, state 1, class 16,
                   "the responder's error: <statement>"
  all_types        one result set of 24 columns, one per SQL Server type
                   (see col_all_types()), row 1 values, row 2 all NULL
  echo_params      one row, a column per parameter received (named without
                   '@'), with the type and the value as received
  two_results      two result sets: int a = 1, then int b = 2
  UPDATE/INSERT/DELETE (first word)   DONE with row count 3
  SET/USE (first word)                just DONE (USE changes the database)
  anything else    one result set, int column "one" = 1
--record FILE appends one JSON line per request:
  {"kind": "login", "user", "database", "app", "encrypted": LOGIN7 came in TLS}
  {"kind": "batch"|"rpc", "sql", "params": [{"name", "type", "value"}]}
  ("rpc" also has "proc" and "declaration", the @params text; "params"
  are the statement's own parameters, not @stmt/@params, named from the
  declaration when FreeTDS sends them unnamed, as it does; binary values
  are lowercase hex, dates ISO text, decimal and money exact text) and
  {"kind": "transaction", "request": "begin"|"commit"|"rollback"} for the
  transaction-manager requests (what SQLEndTran and autocommit off send).
Nothing is sent by FreeTDS's ODBC driver at connect but LOGIN7.
"""
import argparse
import datetime
import json
import re
import socket
import ssl
import struct
import sys
import threading
import time

# TDS packet types
BATCH, RPC, REPLY, ATTENTION, TRANSACTION, LOGIN7, PRELOGIN = 1, 3, 4, 6, 14, 16, 18
EOM = 0x01
ENCRYPT_OFF, ENCRYPT_ON, ENCRYPT_NOT_SUP, ENCRYPT_REQ = 0, 1, 2, 3
DONE_MORE, DONE_ERROR, DONE_COUNT, DONE_ATTN = 0x01, 0x02, 0x10, 0x20
TDS74 = 0x74000004
SERVER_NAME = "TDSRESPONDER"
# SQL_Latin1_General_CP1_CI_AS: LCID 0x0409, flags 0xD0, sort id 52 (cp1252)
COLLATION = bytes([0x09, 0x04, 0xD0, 0x00, 0x34])


def u8(v):
    return struct.pack("<B", v)


def u16(v):
    return struct.pack("<H", v)


def u32(v):
    return struct.pack("<I", v)


def ucs2(s):
    return s.encode("utf-16-le")


def b_varchar(s):
    b = ucs2(s)
    return u8(len(b) // 2) + b


def us_varchar(s):
    b = ucs2(s)
    return u16(len(b) // 2) + b


# ---------------------------------------------------------------- tokens

def token_done(status=0, count=0, cmd=0, token=0xFD):
    return u8(token) + struct.pack("<HHQ", status, cmd, count)


def token_message(token, number, state, klass, text, proc=""):
    body = (struct.pack("<iBB", number, state, klass) + us_varchar(text)
            + b_varchar(SERVER_NAME) + b_varchar(proc) + u32(1))
    return u8(token) + u16(len(body)) + body


def token_error(number, state, klass, text):
    return token_message(0xAA, number, state, klass, text)


def token_info(number, state, klass, text):
    return token_message(0xAB, number, state, klass, text)


def token_envchange(kind, new, old):
    if isinstance(new, str):
        body = u8(kind) + b_varchar(new) + b_varchar(old)
    else:  # B_VARBYTE values (collation, transaction descriptor)
        body = u8(kind) + u8(len(new)) + new + u8(len(old)) + old
    return b"\xE3" + u16(len(body)) + body


def token_loginack(version):
    body = (u8(1) + struct.pack(">I", version) + b_varchar("Microsoft SQL Server")
            + bytes([15, 0, 0x07, 0xD0]))  # 15.0.2000 (SQL Server 2019)
    return b"\xAD" + u16(len(body)) + body


# ---------------------------------------------------------------- types
# A column is (name, TYPE_INFO bytes, value bytes); a NULL value is the
# type's NULL encoding.

def plp(data, chunk=8000):
    if data is None:
        return b"\xFF" * 8
    out = struct.pack("<Q", len(data))
    for i in range(0, len(data), chunk):
        out += u32(len(data[i:i + chunk])) + data[i:i + chunk]
    return out + u32(0)


def v_intn(n, v):
    return b"\x00" if v is None else u8(n) + v.to_bytes(n, "little", signed=n != 1)


def v_bytes1(b):
    return b"\x00" if b is None else u8(len(b)) + b


def v_bytes2(b):
    return b"\xFF\xFF" if b is None else u16(len(b)) + b


DEC_LEN = [(9, 5), (19, 9), (28, 13), (38, 17)]


def dec_size(precision):
    return next(size for p, size in DEC_LEN if precision <= p)


def enc_decimal(text, precision, scale):
    neg = text.startswith("-")
    whole, _, frac = text.lstrip("-").partition(".")
    n = int(whole + (frac + "0" * scale)[:scale])
    size = dec_size(precision)
    return u8(size) + u8(0 if neg else 1) + n.to_bytes(size - 1, "little")


def enc_money8(text):
    whole, _, frac = text.lstrip("-").partition(".")
    n = int(whole + (frac + "0000")[:4]) * (-1 if text.startswith("-") else 1)
    return u8(8) + struct.pack("<iI", n >> 32, n & 0xFFFFFFFF)


def days_since(d, epoch):
    return (d - epoch).days


DATE0 = datetime.date(1, 1, 1)
DATE1900 = datetime.date(1900, 1, 1)


def enc_time(seconds, fraction7, scale):
    units = (seconds * 10 ** 7 + fraction7) // 10 ** (7 - scale)
    n = 3 if scale <= 2 else 4 if scale <= 4 else 5
    return units.to_bytes(n, "little")


def enc_date(d):
    return days_since(d, DATE0).to_bytes(3, "little")


def guid_bytes(text):
    h = bytes.fromhex(text.replace("-", ""))
    return h[3::-1] + h[5:3:-1] + h[7:5:-1] + h[8:]


def col_all_types():
    day = datetime.date(2024, 1, 2)
    secs = 3 * 3600 + 4 * 60 + 5
    utc = datetime.datetime(2024, 1, 2, 3, 4, 5) - datetime.timedelta(minutes=330)
    utc_secs = utc.hour * 3600 + utc.minute * 60 + utc.second
    # (name, TYPE_INFO, row-1 value, NULL value)
    return [
        ("i", b"\x26\x04", v_intn(4, 42), b"\x00"),
        ("bi", b"\x26\x08", v_intn(8, 9007199254740993), b"\x00"),
        ("si", b"\x26\x02", v_intn(2, -7), b"\x00"),
        ("ti", b"\x26\x01", v_intn(1, 255), b"\x00"),
        ("b", b"\x68\x01", b"\x01\x01", b"\x00"),
        ("dec", b"\x6A" + bytes([dec_size(10), 10, 2]), enc_decimal("12345.67", 10, 2), b"\x00"),
        ("num", b"\x6C" + bytes([dec_size(38), 38, 0]),
         enc_decimal("12345678901234567890123456789", 38, 0), b"\x00"),
        ("m", b"\x6E\x08", enc_money8("922337203685477.5807"), b"\x00"),
        ("sm", b"\x6E\x04", u8(4) + struct.pack("<i", -35000), b"\x00"),
        ("f", b"\x6D\x08", u8(8) + struct.pack("<d", 1.5e300), b"\x00"),
        ("r", b"\x6D\x04", u8(4) + struct.pack("<f", 0.25), b"\x00"),
        ("d", b"\x28", v_bytes1(enc_date(day)), b"\x00"),
        ("t", b"\x29\x07", v_bytes1(enc_time(secs, 1234567, 7)), b"\x00"),
        # datetime keeps 1/300 s ticks: 37 ticks = .12333 s, read as .123
        ("dt", b"\x6F\x08", u8(8) + struct.pack("<iI", days_since(day, DATE1900), secs * 300 + 37),
         b"\x00"),
        ("dt2", b"\x2A\x07", v_bytes1(enc_time(secs, 1234567, 7) + enc_date(day)), b"\x00"),
        ("sdt", b"\x6F\x04", u8(4) + struct.pack("<HH", days_since(day, DATE1900), 3 * 60 + 4),
         b"\x00"),
        ("dto", b"\x2B\x07", v_bytes1(enc_time(utc_secs, 1234567, 7) + enc_date(utc.date())
                                      + struct.pack("<h", 330)), b"\x00"),
        ("c", b"\xAF" + u16(3) + COLLATION, v_bytes2(b"abc"), v_bytes2(None)),
        ("vc", b"\xA7" + u16(10) + COLLATION, v_bytes2("héllo".encode("cp1252")), v_bytes2(None)),
        ("nvc", b"\xE7" + u16(40) + COLLATION, v_bytes2(ucs2("Grüße €")), v_bytes2(None)),
        ("nvmax", b"\xE7\xFF\xFF" + COLLATION, plp(ucs2("x" * 10000)), plp(None)),
        ("vb", b"\xA5" + u16(4), v_bytes2(bytes.fromhex("0A0B0C0D")), v_bytes2(None)),
        ("g", b"\x24\x10", v_bytes1(guid_bytes("6F9619FF-8B86-D011-B42D-00C04FC964FF")), b"\x00"),
        ("", b"\x26\x04", v_intn(4, 7), b"\x00"),
    ]


def colmetadata(cols):
    out = b"\x81" + u16(len(cols))
    for name, typeinfo in cols:
        out += u32(0) + u16(0x0001) + typeinfo + b_varchar(name)  # nullable
    return out


def result_set(cols, rows):
    """cols: [(name, TYPE_INFO)], rows: [[value bytes]]."""
    return colmetadata(cols) + b"".join(b"\xD1" + b"".join(r) for r in rows)


def int_result(name, v):
    return result_set([(name, b"\x26\x04")], [[v_intn(4, v)]])


# ---------------------------------------------------------------- parsing

class Reader:
    def __init__(self, data, pos=0):
        self.data, self.pos = data, pos

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ValueError("truncated")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u8(self):
        return self.take(1)[0]

    def u16(self):
        return struct.unpack("<H", self.take(2))[0]

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def at_end(self):
        return self.pos >= len(self.data)


FIXED = {0x1F: (0, "null"), 0x30: (1, "tinyint"), 0x32: (1, "bit"), 0x34: (2, "smallint"),
         0x38: (4, "int"), 0x3A: (4, "smalldatetime"), 0x3B: (4, "real"), 0x3C: (8, "money"),
         0x3D: (8, "datetime"), 0x3E: (8, "float"), 0x7A: (4, "smallmoney"), 0x7F: (8, "bigint")}
BYTELEN = {0x24: "uniqueidentifier", 0x26: "intn", 0x68: "bitn", 0x6D: "floatn", 0x6E: "moneyn",
           0x6F: "datetimen", 0x6A: "decimal", 0x6C: "numeric", 0x37: "decimal", 0x3F: "numeric",
           0x25: "varbinary", 0x2D: "binary", 0x2F: "char", 0x27: "varchar"}
SCALED = {0x29: "time", 0x2A: "datetime2", 0x2B: "datetimeoffset"}
USHORT = {0xA5: "varbinary", 0xAD: "binary", 0xA7: "varchar", 0xAF: "char",
          0xE7: "nvarchar", 0xEF: "nchar"}
LONG = {0x22: "image", 0x23: "text", 0x63: "ntext"}
CODEPAGES = {0x0419: "cp1251", 0x0411: "cp932", 0x0804: "cp936", 0x0412: "cp949",
             0x0404: "cp950", 0x0408: "cp1253", 0x041F: "cp1254", 0x040D: "cp1255",
             0x0401: "cp1256", 0x0405: "cp1250", 0x0415: "cp1250", 0x041E: "cp874"}


def codepage(collation):
    lcid = int.from_bytes(collation[:4], "little") & 0xFFFFF
    if collation[4] in (0, 52, 51, 53, 54, 55, 56):  # Windows or cp1252 SQL collations
        return CODEPAGES.get(lcid & 0xFFFF, "cp1252")
    return "cp1252"


def read_typeinfo(r):
    """A TYPE_INFO: a dict with its raw bytes, a readable type name and what
    reading its value needs."""
    start = r.pos
    t = r.u8()
    ti = {"tag": t}
    if t in FIXED:
        ti["size"], ti["name"] = FIXED[t]
    elif t in BYTELEN:
        ti["maxlen"] = r.u8()
        if t in (0x6A, 0x6C, 0x37, 0x3F):
            ti["prec"], ti["scale"] = r.u8(), r.u8()
            ti["name"] = "%s(%d,%d)" % (BYTELEN[t], ti["prec"], ti["scale"])
        elif t == 0x26:
            ti["name"] = {1: "tinyint", 2: "smallint", 4: "int",
                          8: "bigint"}.get(ti["maxlen"], "intn")
        elif t == 0x6D:
            ti["name"] = "real" if ti["maxlen"] == 4 else "float"
        elif t == 0x6E:
            ti["name"] = "smallmoney" if ti["maxlen"] == 4 else "money"
        elif t == 0x6F:
            ti["name"] = "smalldatetime" if ti["maxlen"] == 4 else "datetime"
        elif t == 0x68:
            ti["name"] = "bit"
        else:
            ti["name"] = BYTELEN[t]
    elif t == 0x28:
        ti["name"] = "date"
    elif t in SCALED:
        ti["scale"] = r.u8()
        ti["name"] = "%s(%d)" % (SCALED[t], ti["scale"])
    elif t in USHORT:
        ti["maxlen"] = r.u16()
        if t in (0xA7, 0xAF, 0xE7, 0xEF):
            ti["collation"] = r.take(5)
        wide = t in (0xE7, 0xEF)
        size = "max" if ti["maxlen"] == 0xFFFF else str(ti["maxlen"] // (2 if wide else 1))
        ti["name"] = "%s(%s)" % (USHORT[t], size)
        ti["plp"] = ti["maxlen"] == 0xFFFF
    elif t in LONG:
        ti["maxlen"] = r.u32()
        if t != 0x22:
            ti["collation"] = r.take(5)
        ti["name"] = LONG[t]
    elif t == 0xF1:  # xml
        if r.u8():
            for _ in range(2):
                r.take(r.u8() * 2)
            r.take(r.u16() * 2)
        ti["name"], ti["plp"] = "xml", True
    elif t == 0x62:  # sql_variant
        ti["maxlen"] = r.u32()
        ti["name"] = "sql_variant"
    else:
        raise ValueError("type 0x%02X not understood" % t)
    ti["raw"] = r.data[start:r.pos]
    return ti


def read_plp(r):
    total = r.take(8)
    if total == b"\xFF" * 8:
        return None
    out = b""
    while True:
        n = r.u32()
        if n == 0:
            return out
        out += r.take(n)


def read_value(r, ti):
    """The value's bytes as they would appear in a ROW (None for NULL)."""
    t = ti["tag"]
    if t in FIXED:
        return r.take(ti["size"]) if t != 0x1F else None
    if t in BYTELEN or t == 0x28 or t in SCALED:
        n = r.u8()
        return r.take(n) if n else None
    if ti.get("plp"):
        return read_plp(r)
    if t in USHORT:
        n = r.u16()
        return None if n == 0xFFFF else r.take(n)
    if t in LONG or t == 0x62:
        n = r.u32()
        return None if n == 0xFFFFFFFF else r.take(n)
    raise ValueError("type 0x%02X not understood" % t)


def dec_time(b, scale):
    units = int.from_bytes(b, "little") * 10 ** (7 - scale)
    secs, frac = divmod(units, 10 ** 7)
    text = "%02d:%02d:%02d" % (secs // 3600, secs // 60 % 60, secs % 60)
    return text + ("." + ("%07d" % frac)[:scale] if scale else "")


def dec_date(b):
    return DATE0 + datetime.timedelta(days=int.from_bytes(b, "little"))


def exact(n, places):
    sign = "-" if n < 0 else ""
    n = abs(n)
    if not places:
        return sign + str(n)
    return "%s%d.%0*d" % (sign, n // 10 ** places, places, n % 10 ** places)


def decode(ti, b):
    """A JSON-friendly reading of a value."""
    if b is None:
        return None
    t = ti["tag"]
    name = ti["name"]
    if t in (0x30, 0x34, 0x38, 0x7F, 0x26):
        return int.from_bytes(b, "little", signed=len(b) != 1)
    if t in (0x32, 0x68):
        return bool(b[0])
    if t in (0x3B, 0x3E, 0x6D):
        return struct.unpack("<f" if len(b) == 4 else "<d", b)[0]
    if t in (0x3C, 0x7A, 0x6E):
        if len(b) == 4:
            return exact(struct.unpack("<i", b)[0], 4)
        hi, lo = struct.unpack("<iI", b)
        return exact((hi << 32) | lo, 4)
    if t in (0x3A, 0x3D, 0x6F):
        if len(b) == 4:
            days, mins = struct.unpack("<HH", b)
            when = datetime.datetime(1900, 1, 1) + datetime.timedelta(days=days, minutes=mins)
            return when.strftime("%Y-%m-%d %H:%M:%S")
        days, ticks = struct.unpack("<iI", b)
        ms = (ticks * 10 + 1) // 3
        when = datetime.datetime(1900, 1, 1) + datetime.timedelta(days=days, milliseconds=ms)
        return when.strftime("%Y-%m-%d %H:%M:%S.") + "%03d" % (when.microsecond // 1000)
    if t in (0x6A, 0x6C, 0x37, 0x3F):
        n = int.from_bytes(b[1:], "little")
        return exact(n if b[0] else -n, ti["scale"])
    if t == 0x24:
        h = (b[3::-1] + b[5:3:-1] + b[7:5:-1] + b[8:]).hex().upper()
        return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])
    if t == 0x28:
        return dec_date(b).isoformat()
    if t in SCALED:
        s = ti["scale"]
        tlen = 3 if s <= 2 else 4 if s <= 4 else 5
        if t == 0x29:
            return dec_time(b, s)
        if t == 0x2A:
            return dec_date(b[tlen:]).isoformat() + " " + dec_time(b[:tlen], s)
        offset = struct.unpack("<h", b[tlen + 3:])[0]
        units = int.from_bytes(b[:tlen], "little") * 10 ** (7 - s)
        utc = datetime.datetime.combine(dec_date(b[tlen:tlen + 3]), datetime.time())
        local = utc + datetime.timedelta(microseconds=units // 10, minutes=offset)
        day_units = units + offset * 60 * 10 ** 7
        local_units = day_units % (86400 * 10 ** 7) // 10 ** (7 - s)
        sign = "-" if offset < 0 else "+"
        return "%s %s %s%02d:%02d" % (local.date().isoformat(),
                                      dec_time(local_units.to_bytes(5, "little"), s),
                                      sign, abs(offset) // 60, abs(offset) % 60)
    if t in (0xE7, 0xEF, 0x63) or name == "xml":
        return b.decode("utf-16-le", "replace")
    if t in (0xA7, 0xAF, 0x23, 0x2F, 0x27):
        return b.decode(codepage(ti.get("collation", COLLATION)), "replace")
    return b.hex()


def echo_column(ti, b):
    """TYPE_INFO and ROW bytes that give back a parameter as received."""
    t = ti["tag"]
    if t == 0x1F:
        return b"\x26\x04", b"\x00"
    if t in LONG:  # text/ntext/image come back as their (max) successors
        new = ({0x22: b"\xA5", 0x23: b"\xA7", 0x63: b"\xE7"}[t] + b"\xFF\xFF"
               + ti.get("collation", b""))
        return new, plp(b)
    if t == 0x62:
        return b"\x62" + u32(ti["maxlen"]), b"\xFF\xFF\xFF\xFF" if b is None else u32(len(b)) + b
    if t in FIXED:
        return ti["raw"], b
    if t in BYTELEN or t == 0x28 or t in SCALED:
        return ti["raw"], v_bytes1(b)
    if ti.get("plp"):
        return ti["raw"], plp(b)
    return ti["raw"], v_bytes2(b)


def read_params(r):
    params = []
    while not r.at_end():
        if r.data[r.pos] in (0x80, 0xFF, 0xFE):  # another RPC in the same batch: not served
            break
        name = r.take(r.u8() * 2).decode("utf-16-le")
        status = r.u8()
        ti = read_typeinfo(r)
        b = read_value(r, ti)
        params.append({"name": name, "status": status, "ti": ti, "bytes": b})
    return params


def name_unnamed(params, declaration):
    """FreeTDS sends sp_executesql's parameters without their names (SQL
    Server takes them in order): name them from the @params declaration."""
    names = re.findall(r"@\w+", declaration or "")
    for p, name in zip(params, names):
        if not p["name"]:
            p["name"] = name


def skip_all_headers(data):
    if len(data) >= 4:
        total = struct.unpack("<I", data[:4])[0]
        if 4 <= total <= len(data) and (total == 4 or (
                total >= 10 and struct.unpack("<I", data[4:8])[0] <= total - 4)):
            return total
    return 0


def parse_login7(data):
    fields = {}
    names = ["host", "user", "password", "app", "server", "ext", "library", "language", "database"]
    for i, name in enumerate(names):
        off, n = struct.unpack("<HH", data[36 + 4 * i:40 + 4 * i])
        raw = data[off:off + 2 * n]
        if name == "password":
            raw = bytes((((c ^ 0xA5) << 4) & 0xF0) | ((c ^ 0xA5) >> 4) for c in raw)
        fields[name] = raw.decode("utf-16-le", "replace")
    fields["version"] = struct.unpack("<I", data[4:8])[0]
    fields["packet_size"] = struct.unpack("<I", data[8:12])[0]
    return fields


# ---------------------------------------------------------------- connection

class Closed(Exception):
    pass


class Connection:
    def __init__(self, sock, args, record):
        self.sock, self.args, self.record = sock, args, record
        self.tls = None  # (SSLObject, incoming BIO, outgoing BIO) once bare TLS flows
        self.buf = b""
        self.packet_size = 4096
        self.database = args.database or "master"
        self.prepared = {}
        self.transaction = 0  # the descriptor of the open transaction, 0 if none
        self.transactions = 0

    # -- bytes in and out, bare or through TLS
    def fill(self):
        if self.tls:
            obj, inc, _ = self.tls
            while True:
                try:
                    data = obj.read(65536)
                    if not data:
                        raise Closed()
                    break
                except ssl.SSLWantReadError:
                    raw = self.sock.recv(65536)
                    if not raw:
                        raise Closed()
                    inc.write(raw)
                except ssl.SSLError:
                    raise Closed()
        else:
            data = self.sock.recv(65536)
            if not data:
                raise Closed()
        self.buf += data

    def recv_exact(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send_bytes(self, data):
        if self.tls:
            obj, _, out = self.tls
            obj.write(data)
            self.sock.sendall(out.read())
        else:
            self.sock.sendall(data)

    def read_packet(self):
        head = self.recv_exact(8)
        ptype, status, length = struct.unpack(">BBH", head[:4])
        if length < 8:
            raise Closed()
        return ptype, status, self.recv_exact(length - 8)

    def read_message(self):
        """The next whole message (packets up to EOM): (type, payload)."""
        payload = b""
        while True:
            ptype, status, data = self.read_packet()
            payload += data
            if status & 0x02:  # the client dropped this message part way
                payload = b""
                continue
            if status & EOM:
                return ptype, payload

    def send_message(self, ptype, payload):
        room = self.packet_size - 8
        chunks = [payload[i:i + room] for i in range(0, len(payload), room)] or [b""]
        out = b""
        for i, chunk in enumerate(chunks):
            last = i == len(chunks) - 1
            out += struct.pack(">BBHHBB", ptype, EOM if last else 0, len(chunk) + 8, 0,
                               (i + 1) % 256, 0) + chunk
        self.send_bytes(out)

    def reply(self, tokens):
        self.send_message(REPLY, tokens)

    def log(self, entry):
        if self.record is None:
            return
        path, lock = self.record
        with lock, open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")

    # -- the conversation
    def serve(self):
        try:
            if not self.prelogin_and_login():
                return
            while True:
                ptype, payload = self.read_message()
                if ptype == BATCH:
                    self.batch(payload)
                elif ptype == RPC:
                    self.rpc(payload)
                elif ptype == ATTENTION:
                    self.reply(token_done(DONE_ATTN))
                elif ptype == TRANSACTION:
                    self.transaction_request(payload)
                else:
                    self.reply(token_error(4002, 1, 16, "The incoming tabular data stream "
                                           "(TDS) protocol stream is incorrect.")
                               + token_done(DONE_ERROR))
        except (Closed, OSError, ValueError, struct.error, ssl.SSLError):
            pass
        finally:
            try:
                self.sock.close()
            except OSError:
                pass

    def prelogin_and_login(self):
        ptype, payload = self.read_message()
        if ptype != PRELOGIN:
            return False
        asked = ENCRYPT_NOT_SUP
        pos = 0
        while pos < len(payload) and payload[pos] != 0xFF:
            opt, off, n = struct.unpack(">BHH", payload[pos:pos + 5])
            if opt == 1 and n >= 1:
                asked = payload[off]
            pos += 5
        ctx = self.args.tls_context
        if ctx is None:
            answer = ENCRYPT_NOT_SUP
        elif asked in (ENCRYPT_ON, ENCRYPT_REQ):
            answer = ENCRYPT_ON
        elif asked == ENCRYPT_OFF:
            answer = ENCRYPT_OFF
        else:
            answer = ENCRYPT_NOT_SUP
        options = [(0, bytes([15, 0, 0x07, 0xD0, 0, 0])), (1, bytes([answer])), (2, b"\x00"),
                   (3, b""), (4, b"\x00")]
        offset = 5 * len(options) + 1
        head, body = b"", b""
        for opt, data in options:
            head += struct.pack(">BHH", opt, offset + len(body), len(data))
            body += data
        self.reply(head + b"\xFF" + body)
        encrypted = False
        if answer in (ENCRYPT_ON, ENCRYPT_OFF):
            if asked == ENCRYPT_NOT_SUP or not self.handshake(ctx):
                return False
            encrypted = True
        ptype, payload = self.read_message()
        if answer == ENCRYPT_OFF:
            self.tls = None  # only LOGIN7 travels encrypted
        if ptype != LOGIN7:
            return False
        login = parse_login7(payload)
        self.log({"kind": "login", "user": login["user"], "database": login["database"],
                  "app": login["app"], "encrypted": encrypted})
        if login["user"] != self.args.user or login["password"] != self.args.password:
            self.reply(token_error(18456, 1, 14, "Login failed for user '%s'." % login["user"])
                       + token_done(DONE_ERROR))
            return False
        if login["database"]:
            if self.args.database and login["database"].lower() != self.args.database.lower():
                self.reply(token_error(4060, 1, 11, 'Cannot open database "%s" requested by the '
                                       "login. The login failed." % login["database"])
                           + token_error(18456, 1, 14,
                                         "Login failed for user '%s'." % login["user"])
                           + token_done(DONE_ERROR))
                return False
            self.database = login["database"]
        size = login["packet_size"] or 4096
        size = max(512, min(size, 32767))
        version = min(login["version"], TDS74) if login["version"] >= 0x72000000 else TDS74
        tokens = (token_envchange(1, self.database, "master")
                  + token_info(5701, 2, 0, "Changed database context to '%s'." % self.database)
                  + token_envchange(7, COLLATION, b"")
                  + token_envchange(2, "us_english", "")
                  + token_info(5703, 1, 0, "Changed language setting to us_english.")
                  + token_loginack(version)
                  + token_envchange(4, str(size), "4096")
                  + token_done())
        self.reply(tokens)
        self.packet_size = size
        return True

    def handshake(self, ctx):
        inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = ctx.wrap_bio(inc, out, server_side=True)
        while True:
            try:
                obj.do_handshake()
                done = True
            except ssl.SSLWantReadError:
                done = False
            except ssl.SSLError:
                data = out.read()
                if data:
                    self.send_message(PRELOGIN, data)
                return False
            data = out.read()
            if data:
                self.send_message(PRELOGIN, data)
            if done:
                break
            _, _, payload = self.read_packet()
            inc.write(payload)
        self.tls = (obj, inc, out)
        return True

    # -- requests
    def batch(self, payload):
        sql = payload[skip_all_headers(payload):].decode("utf-16-le", "replace")
        self.log({"kind": "batch", "sql": sql, "params": []})
        self.answer(sql, [], rpc=False)

    def rpc(self, payload):
        r = Reader(payload, skip_all_headers(payload))
        n = r.u16()
        if n == 0xFFFF:
            proc_id = r.u16()
            proc = {10: "sp_executesql", 11: "sp_prepare", 12: "sp_execute", 13: "sp_prepexec",
                    15: "sp_unprepare"}.get(proc_id, "proc#%d" % proc_id)
        else:
            proc = r.take(2 * n).decode("utf-16-le")
        r.u16()  # option flags
        params = read_params(r)
        name = proc.lower().split(".")[-1]
        sql, own, out_handle, decl = None, params, None, None
        values = [decode(p["ti"], p["bytes"]) for p in params]
        if name == "sp_executesql":
            sql = values[0] if params else ""
            own = params[2:]
            decl = values[1] if len(values) > 1 else None
            name_unnamed(own, decl)
        elif name in ("sp_prepexec", "sp_prepare"):
            handle = len(self.prepared) + 1
            decl = values[1] if len(values) > 1 else None
            self.prepared[handle] = (values[2] if len(values) > 2 else "", decl)
            out_handle = handle
            sql, own = self.prepared[handle][0], params[3:]
            name_unnamed(own, decl)
        elif name == "sp_execute":
            sql, decl = self.prepared.get(values[0] if values else None, ("", None))
            own = params[1:]
            name_unnamed(own, decl)
        entry = {"kind": "rpc", "proc": proc, "sql": sql, "declaration": decl,
                 "params": [{"name": p["name"], "type": p["ti"]["name"],
                             "value": decode(p["ti"], p["bytes"])} for p in own]}
        self.log(entry)
        tail = b"\x79" + struct.pack("<i", 0)  # RETURNSTATUS 0
        if out_handle is not None:
            tail += (b"\xAC" + u16(0) + b_varchar(params[0]["name"]) + u8(1) + u32(0) + u16(0x0001)
                     + b"\x26\x04" + v_intn(4, out_handle))
        if name == "sp_prepare" or (sql is None):
            self.reply(tail + token_done(0, 0, 0, 0xFE))
            return
        self.answer(sql, own, rpc=True, tail=tail)

    def answer(self, sql, params, rpc, tail=b""):
        low = sql.lower()
        words = low.split()
        first = words[0] if words else ""
        done = 0xFF if rpc else 0xFD  # DONEINPROC inside a procedure

        def finish(tokens, status=0, count=0):
            if rpc:  # DONEINPROC, RETURNSTATUS (and RETURNVALUE), DONEPROC
                self.reply(tokens + token_done(status | DONE_MORE, count, 0xC1, 0xFF)
                           + tail + token_done(0, 0, 0xE0, 0xFE))
            else:
                self.reply(tokens + token_done(status, count, 0xC1))

        if "drop_connection" in low:
            self.sock.shutdown(socket.SHUT_RDWR)
            raise Closed()
        if "waitfor" in low:
            self.wait_for_attention(rpc, tail)
            return
        if "raise_error" in low:
            if rpc:
                self.reply(token_error(50000, 1, 16, "the responder's error: " + sql)
                           + token_done(DONE_ERROR | DONE_MORE, 0, 0xE0, 0xFF)
                           + tail + token_done(DONE_ERROR, 0, 0xE0, 0xFE))
            else:
                self.reply(token_error(50000, 1, 16, "the responder's error: " + sql)
                           + token_done(DONE_ERROR, 0, 0xC1))
            return
        if "all_types" in low:
            cols = col_all_types()
            finish(result_set([(c[0], c[1]) for c in cols], [[c[2] for c in cols],
                                                            [c[3] for c in cols]]), DONE_COUNT, 2)
            return
        if "echo_params" in low and not params:
            finish(b"")
            return
        if "echo_params" in low:
            cols, row = [], []
            for p in params:
                ti, b = echo_column(p["ti"], p["bytes"])
                cols.append((p["name"].lstrip("@"), ti))
                row.append(b)
            finish(result_set(cols, [row]), DONE_COUNT, 1)
            return
        if "two_results" in low:
            first_set = int_result("a", 1) + token_done(DONE_MORE | DONE_COUNT, 1, 0xC1, done)
            finish(first_set + int_result("b", 2), DONE_COUNT, 1)
            return
        if first in ("update", "insert", "delete"):
            if rpc:
                self.reply(token_done(DONE_COUNT | DONE_MORE, 3, 0xC5, 0xFF) + tail
                           + token_done(0, 0, 0xE0, 0xFE))
            else:
                self.reply(token_done(DONE_COUNT, 3, 0xC5))
            return
        if first == "use" and len(words) > 1:
            db = sql.split()[1].strip("[];")
            old, self.database = self.database, db
            self.reply(token_envchange(1, db, old)
                       + token_info(5701, 1, 0, "Changed database context to '%s'." % db)
                       + token_done(0, 0, 0xE2))
            return
        if first == "set":
            finish(b"")
            return
        finish(int_result("one", 1), DONE_COUNT, 1)

    def wait_for_attention(self, rpc, tail):
        deadline = time.monotonic() + 30
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise socket.timeout()
                self.sock.settimeout(left)
                ptype, _ = self.read_message()
                if ptype == ATTENTION:
                    self.sock.settimeout(None)
                    self.reply(token_done(DONE_ATTN))
                    return
        except socket.timeout:
            self.sock.settimeout(None)
            if rpc:
                self.reply(tail + token_done(0, 0, 0xE0, 0xFE))
            else:
                self.reply(token_done(0, 0, 0xC1))

    def transaction_request(self, payload):
        r = Reader(payload, skip_all_headers(payload))
        request = r.u16()
        kind = {5: "begin", 7: "commit", 8: "rollback",
                9: "save"}.get(request, "request#%d" % request)
        again = False
        try:
            if kind in ("commit", "rollback"):
                r.take(r.u8() * 2)  # transaction name
                again = bool(r.u8() & 1)  # "and begin another"
        except ValueError:
            pass
        entry = {"kind": "transaction", "request": kind}
        if again:
            entry["begin_another"] = True
        self.log(entry)
        tokens = b""
        old = struct.pack("<Q", self.transaction) if self.transaction else b""
        if kind in ("commit", "rollback") and old:
            tokens = token_envchange(9 if kind == "commit" else 10, b"", old)
            self.transaction = 0
        if kind == "begin" or again:
            self.transactions += 1
            self.transaction = self.transactions
            tokens += token_envchange(8, struct.pack("<Q", self.transaction), b"")
        self.reply(tokens + token_done())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--database")
    p.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    p.add_argument("--record")
    a = p.parse_args()
    a.tls_context = None
    if a.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2  # as SQL Server 2019
        ctx.load_cert_chain(a.tls[0], a.tls[1])
        a.tls_context = ctx
    record = (a.record, threading.Lock()) if a.record else None

    server = socket.create_server(("127.0.0.1", 0))
    print(server.getsockname()[1], flush=True)
    while True:
        conn, _ = server.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=Connection(conn, a, record).serve, daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
