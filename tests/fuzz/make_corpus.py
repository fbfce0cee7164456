#!/usr/bin/env python3
"""Writes the starting corpora of the fuzz targets (tests/fuzz/corpus/<target>/)
but the frame target's, which tests/fuzz/make_frames.cpp writes (capnp).

    tests/fuzz/make_corpus.py          (from anywhere; rewrites the corpora)

The corpora are small on purpose (the whole corpus stays well under 200 KB):
real HL7 from tests/ and examples/, the MLLP and HTTP shapes the listeners
meet, the examples' interface.yaml files and cron expressions. The fuzzer
grows its own corpus from these in a temporary folder (scripts/fuzz.sh).
"""
import os
import pathlib

here = pathlib.Path(__file__).resolve().parent
root = here.parent.parent
corpus = here / "corpus"

VT, FS, CR = b"\x0b", b"\x1c", b"\r"


def frame(msg: bytes) -> bytes:
    return VT + msg + FS + CR


def write(target: str, name: str, data: bytes) -> None:
    d = corpus / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


# ---- HL7 (tests/common/hl7_test.cpp, examples/adt-feed, tests/intake) ----
ADT = (b"MSH|^~\\&|SENDAPP|SENDFAC|RECVAPP|RECVFAC|20260101120000||ADT^A01^ADT_A01|MSG00001|T|2.5.1\r"
       b"EVN|A01|20260101120000\r"
       b"PID|1||12345^^^HOSP^MR~67890^^^OTHER^MR||DOE^JOHN^Q||19700101|M\r"
       b"PID|2||second\r")
CUSTOM = b"MSH#@!*&#A#B#C#D#2026##ORU@R01#ID7#P#2.3\rPID#1##99@x&y\r"
NEWLINES = b"MSH|^~\\&|A|B|C|D|||ADT^A08|X1|P|2.5\r\nPID|1||777\nPV1|1|I\n"
ESCAPES = (b"MSH|^~\\&|A|B|C|D|||ADT^A01|X|P|2.5\r"
           b"NTE|1||a\\F\\b\\S\\c\\T\\d\\R\\e\\E\\f\\X41C3A9\\g\\H\\h\\.br\\i\r")
ENHANCED = b"MSH|^~\\&|A|B|C|D|||ADT^A01|X9|P|2.5|||AL|NE\rPID|1||1\r"
ACK = b"MSH|^~\\&|R|F|S|F|1||ACK|1|P|2.5\rMSA|AE|X1|bad~text^here\\F\\\r"
DEMO = (b"MSH|^~\\&|HIS|WARD|LAB|HOSP|202601011200||ADT^A01|MSG0001|P|2.5\r"
        b"PID|1||12345^^^H||Doe^John\r")
ORU = (b"MSH|^~\\&|LIS|LAB|EHR|HOSP|20260102083000||ORU^R01^ORU_R01|LAB4711|P|2.5.1|||||||8859/1\r"
       b"PID|1||55501^^^HOSP^MR||M\xfcller^J\xfcrgen||19610203|M\r"
       b"OBR|1|ORD1|FIL1|CBC^Complete blood count^L\r"
       b"OBX|1|NM|HGB^Hemoglobin^L||13.5|g/dL|12-16|N|||F\r"
       b"OBX|2|NM|WBC^Leukocytes^L||11.2|10*9/L|4-10|H|||F\r"
       b"OBX|3|ED|PDF^Report^L||^application^pdf^Base64^JVBERi0xLjQKJcfsj6IK|||||F\r")
BOM = b"\xef\xbb\xbf" + DEMO

hl7 = {
    "adt-a01": ADT, "custom-delimiters": CUSTOM, "newlines": NEWLINES, "escapes": ESCAPES,
    "enhanced": ENHANCED, "ack": ACK, "demo": DEMO, "oru-latin1": ORU, "bom": BOM,
    "framed": frame(DEMO),
}
for name, data in hl7.items():
    write("hl7", name, data)

# ---- MLLP streams ----
mllp = {
    "one": frame(DEMO),
    "two": frame(DEMO) + frame(ADT),
    "garbage-first": b"hello\r\n" + frame(NEWLINES),
    "no-cr-after-fs": VT + CUSTOM + FS + frame(ENHANCED),
    "no-msh": frame(b"PID|1||12345\r"),
    "bad-delimiters": frame(b"MSH||~\\&|A\r"),
    "unterminated": frame(DEMO) + VT + b"MSH|^~\\&|A|B|C|D|||ADT^A01|LAST|P|2.5\r",
    "oversized": frame(DEMO + b"NTE|1||" + b"x" * 9000 + b"\r") + frame(ESCAPES),
    "oru": frame(ORU),
}
for name, data in mllp.items():
    write("mllp", name, data)

# ---- HTTP requests ----
def post(path: bytes, body: bytes, extra: bytes = b"") -> bytes:
    return (b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/hl7-v2\r\n"
            + extra + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

http = {
    "post-hl7": post(b"/fuzz", DEMO),
    "post-json-close": post(b"/fuzz?src=lab", b'{"mrn":"12345","name":"Doe"}',
                            b"Content-Type: application/json\r\nConnection: close\r\n"),
    "chunked": (b"POST /fuzz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nTrailer: t\r\n\r\n"),
    "pipelined": (b"GET /fuzz?a=1 HTTP/1.1\r\nHost: x\r\n\r\n" + post(b"/fuzz", b"second")
                  + b"HEAD /fuzz HTTP/1.1\r\nHost: x\r\n\r\n"),
    "small-too-big": post(b"/small", b"x" * 40),
    "drop": post(b"/drop", b"{}"),
    "not-found": b"DELETE /nope HTTP/1.1\r\nHost: x\r\n\r\n",
    "expect-continue": post(b"/fuzz", b"body", b"Expect: 100-continue\r\n"),
    "http10": b"GET /fuzz HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /fuzz HTTP/1.0\r\n\r\n",
    "upgrade": b"GET /fuzz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    "malformed": b"POST /fuzz HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
    "big-head": b"GET /fuzz HTTP/1.1\r\nX-Long: " + b"a" * 5000 + b"\r\n\r\n",
}
for name, data in http.items():
    write("http", name, data)

# ---- interface.yaml: the examples', and more of the format ----
for p in sorted((root / "examples").glob("*/interfaces/*/interface.yaml")):
    write("config", "example-" + p.parent.name, p.read_bytes())
config = {
    "every-setting": b"""source:
  http: { listen: 127.0.0.1:8080, path: /lab, mode: queue }
format: json
ordering: { key: patient.id, partitions: 32 }
dedupe: { key: id }
durability: relaxed
timeout: 250ms
isolation: dedicated
workers: 2
retention: 1w
max_message_size: 512KB
dedicated_pools: { lab: 2 }
destinations:
  a:
    mllp: { host: lab.example, port: 2576, ack_timeout: 10s }
    transform: toHl7
    output: hl7v2
    retry: { max_attempts: 5 }
    rate_limit: { messages: 10, per: 1m, over: drop }
    save_output: true
  b:
    http: { url: "https://${env:FUZZ_HOST}/in", method: PUT, headers: { X-A: "${secret:LAB_TOKEN}" }, timeout: 3s }
  c:
    http: { api: lab-receiver, path: /results, method: POST }
""",
    "route-and-cron": b"""source:
  schedule: { cron: "*/15 8-17 * * mon-fri" }
format: text
destination:
  interface: adt-json
  transform: toJson
  output: json
""",
    "sftp-file": b"""source:
  file: { path: in/, pattern: "*.hl7", split: records, move_to: done/, poll: 2s }
format: hl7v2
destinations:
  remote:
    sftp: { host: sftp.example, port: 22, user: lab, password: "${secret:SFTP_PASSWORD}", path: /in }
  local:
    file: { path: out/, name: "{id}.hl7", mode: "0640" }
""",
    "errors": b"""source:
  mllp: { listen: 127.0.0.1:7700 }
format: csvv
ordering: { key: PID.3.1, partitions: 0 }
destination:
  file: { path: ../out/, name: "a/b" }
  retry: { max_attempts: -1 }
unknown_key: 1
""",
    "anchors": b"""base: &b { path: out/ }
source: { mllp: { listen: "[::1]:2575" } }
destination:
  file: *b
""",
}
for name, data in config.items():
    write("config", name, data)

# ---- cron ----
cron = {
    "every-5": b"*/5 * * * *", "workdays": b"*/15 8-17 * * mon-fri", "dom-or-dow": b"0 0 1,15 * mon",
    "leap-day": b"30 12 29 2 *", "yearly": b"@yearly", "hourly": b" @hourly ",
    "names": b"0 6 * JAN-mar,dec sat-sun", "dst": b"30 2 * * *", "steps": b"7/13 1-23/5 */3 */2 0-6/2",
    "bad": b"61 * * * *",
}
for name, data in cron.items():
    write("cron", name, data)

total = sum(f.stat().st_size for f in corpus.rglob("*") if f.is_file())
print(f"{corpus}: {total} bytes")
