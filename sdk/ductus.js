// The "ductus" module: what interface code imports. It runs inside the
// confined worker's V8 isolate; the only way out is the native bridge the
// worker installs as globalThis.__ductus_native, which this module captures
// and removes before any interface code runs.
//
// Formats decode the payload for the transform and encode its result;
// services (db, fetch, env, secret, api) are requests to the supervisor,
// which decides what each interface may reach. Under `ductus test` the
// services are answered by mocks instead.

const native = globalThis.__ductus_native;
delete globalThis.__ductus_native;

// The contract's constants, from the worker (proto/worker.capnp).
const TRANSIENT = native.transientMarker;
const { output: OUTPUT, filtered: FILTERED, quarantine: QUARANTINE, transient: TRANSIENT_K } =
  native.outcomeKinds;

// ---- outcomes -------------------------------------------------------------

class Kill {
  constructor(reason) { this.reason = String(reason ?? "killed"); }
}

class QuarantineError extends Error {
  constructor(reason) { super(String(reason)); this.name = "Quarantine"; }
}

/** Drop the message on purpose: the message is filtered with this reason. */
export function kill(reason) { return new Kill(reason); }

/** `throw quarantine("why")`: the message is quarantined with the reason. */
export function quarantine(reason) { return new QuarantineError(reason); }

/** `throw transient("why")`: the message waits and is retried. */
export function transient(reason) { return new Error(`${TRANSIENT} ${reason}`); }

// ---- console --------------------------------------------------------------

function show(v) {
  if (typeof v === "string") return v;
  if (v instanceof Error) return v.stack || String(v);
  try { return JSON.stringify(v); } catch { return String(v); }
}
const logAt = (level) => (...args) => native.log(level, args.map(show).join(" "));
globalThis.console = {
  log: logAt("info"), info: logAt("info"), debug: logAt("debug"),
  warn: logAt("warn"), error: logAt("error"),
};

// ---- hl7v2 ----------------------------------------------------------------

// Decodes HL7 escapes in a leaf value. \Xhh\ and formatting escapes (\.br\)
// are kept as written: they have no single-character meaning.
function unescapeHl7(s, d) {
  if (s.indexOf(d.esc) < 0) return s;
  let out = "";
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (c === d.esc) {
      const end = s.indexOf(d.esc, i + 1);
      if (end > i) {
        const code = s.slice(i + 1, end);
        const rep = { F: d.field, S: d.comp, T: d.sub, R: d.rep, E: d.esc }[code];
        if (rep !== undefined) { out += rep; i = end + 1; continue; }
        out += s.slice(i, end + 1); i = end + 1; continue;
      }
    }
    out += c; i++;
  }
  return out;
}

function escapeHl7(s, d) {
  s = String(s);
  if (s.indexOf(d.esc) < 0 && s.indexOf(d.field) < 0 && s.indexOf(d.comp) < 0 &&
      s.indexOf(d.sub) < 0 && s.indexOf(d.rep) < 0) {
    return s;
  }
  let out = "";
  for (const c of s) {
    if (c === d.esc) out += `${d.esc}E${d.esc}`;
    else if (c === d.field) out += `${d.esc}F${d.esc}`;
    else if (c === d.comp) out += `${d.esc}S${d.esc}`;
    else if (c === d.sub) out += `${d.esc}T${d.esc}`;
    else if (c === d.rep) out += `${d.esc}R${d.esc}`;
    else out += c;
  }
  return out;
}

// Parsed paths, by text: transforms use the same few paths for every message.
const pathCache = [new Map(), new Map()];
const PATH_CACHE_LIMIT = 10000;

// "PID.3[2].1.2", "OBX[2].5", "3.1" (relative to a segment).
function parsePath(path, withSegment) {
  const cache = pathCache[withSegment ? 1 : 0];
  let p = cache.get(path);
  if (p === undefined) {
    p = Object.freeze(parsePathText(path, withSegment));
    if (cache.size < PATH_CACHE_LIMIT) cache.set(path, p);
  }
  return p;
}

function parsePathText(path, withSegment) {
  const parts = String(path).split(".");
  const r = { seg: null, segIndex: 1, field: 0, rep: 1, comp: 0, sub: 0 };
  let i = 0;
  const idx = (p) => {
    const m = /^([A-Za-z0-9]+)(?:\[(\d+)\])?$/.exec(p);
    if (!m) throw new Error(`bad HL7 path "${path}"`);
    return [m[1], m[2] ? Number(m[2]) : 1];
  };
  if (withSegment) {
    [r.seg, r.segIndex] = idx(parts[i++] ?? "");
  }
  if (i < parts.length) { const [f, rep] = idx(parts[i++]); r.field = Number(f); r.rep = rep; }
  if (i < parts.length) r.comp = Number(parts[i++]);
  if (i < parts.length) r.sub = Number(parts[i++]);
  if ([r.field, r.comp, r.sub, r.rep, r.segIndex].some((n) => !Number.isInteger(n) || n < 0) ||
      i < parts.length) {
    throw new Error(`bad HL7 path "${path}"`);
  }
  return r;
}

function setPart(list, index, value) {
  while (list.length <= index) list.push("");
  list[index] = value;
}

class Segment {
  constructor(msg, raw) {
    this._msg = msg;
    this._raw = raw;
    this._fields = null; // split on first touch
  }
  get name() { return this._raw.slice(0, 3); }
  _split() {
    if (this._fields === null) {
      const d = this._msg._delims;
      const parts = this._raw.split(d.field);
      if (parts[0] === "MSH" || parts[0] === "FHS" || parts[0] === "BHS") {
        // MSH-1 is the field separator itself, MSH-2 the encoding characters.
        parts.splice(1, 0, d.field);
      }
      this._fields = parts;
    }
    return this._fields;
  }
  _isHeader() { const n = this.name; return n === "MSH" || n === "FHS" || n === "BHS"; }

  _read(p) {
    const d = this._msg._delims;
    const f = this._split()[p.field];
    if (f === undefined) return undefined;
    if (p.field <= 2 && this._isHeader()) return f;
    const reps = f.split(d.rep);
    let v = reps[p.rep - 1];
    if (v === undefined) return undefined;
    if (p.comp > 0) {
      v = v.split(d.comp)[p.comp - 1];
      if (v === undefined) return undefined;
      if (p.sub > 0) {
        v = v.split(d.sub)[p.sub - 1];
        if (v === undefined) return undefined;
      }
    }
    // A value still holding delimiters is a composite: returned as written.
    if (v.includes(d.comp) || v.includes(d.sub) || v.includes(d.rep)) return v;
    return unescapeHl7(v, d);
  }

  _write(p, value) {
    const d = this._msg._delims;
    const fields = this._split();
    if (p.field <= 2 && this._isHeader()) throw new Error("MSH-1 and MSH-2 are the delimiters; they cannot be set");
    if (p.field === 0) throw new Error("field 0 is the segment name");
    const text = value === null || value === undefined ? "" : escapeHl7(value, d);
    const reps = (fields[p.field] ?? "").split(d.rep);
    if (p.comp === 0) {
      setPart(reps, p.rep - 1, text);
    } else {
      const comps = (reps[p.rep - 1] ?? "").split(d.comp);
      if (p.sub === 0) {
        setPart(comps, p.comp - 1, text);
      } else {
        const subs = (comps[p.comp - 1] ?? "").split(d.sub);
        setPart(subs, p.sub - 1, text);
        setPart(comps, p.comp - 1, subs.join(d.sub));
      }
      setPart(reps, p.rep - 1, comps.join(d.comp));
    }
    setPart(fields, p.field, reps.join(d.rep));
    // A transform that rewrites MSH-18 declares the output's charset itself.
    if (p.field === 18 && this._isHeader()) this._msg._declaredChanged = true;
    this._dirty();
  }

  _dirty() {
    const fields = this._fields;
    const parts = this._isHeader() ? [fields[0], ...fields.slice(2)] : fields;
    this._raw = parts.join(this._msg._delims.field);
    this._msg._changed = true;
  }

  /** Field, component or subcomponent of this segment: seg.get("5.1"). */
  get(path) { return this._read(parsePath(path, false)); }
  set(path, value) { this._write(parsePath(path, false), value); return this; }
  /** Repetitions of a field, each as written. */
  repetitions(field) {
    const f = this._split()[Number(field)];
    return f === undefined || f === "" ? [] : f.split(this._msg._delims.rep);
  }
  toString() { return this._raw; }
}

// ---- charsets ---------------------------------------------------------------
//
// How bytes become text, everywhere the SDK reads a payload (HL7, JSON, CSV,
// XML, text). The worker hands every payload over as latin1 (one character
// per byte) with its byte class: 0 ASCII only, 1 well-formed UTF-8 with a
// multi-byte sequence, 2 anything else. Then:
// 1. the interface's `charset: utf-8 | iso-8859-1` forces one (for senders
//    whose MSH-18 is wrong);
// 2. HL7: MSH-18, when set, names it: UTF-8 for "UNICODE UTF-8" / "UTF-8",
//    ISO-8859-1 for "8859/1", "ISO-8859-1", "ISO IR100" and anything else;
// 3. otherwise the bytes: UTF-8 when they are well-formed UTF-8 with a
//    multi-byte sequence, ISO-8859-1 otherwise (ASCII reads the same).
// Bytes that are not UTF-8 are never decoded as UTF-8, whatever says so:
// that would replace them with U+FFFD, and an untouched message would no
// longer go back byte for byte. They are read as ISO-8859-1 instead.
// A read is { charset: "utf8" | "latin1", how: "forced" | "declared" | "auto" }.

const MSH18_UTF8 = /^(UNICODE UTF-?8|UTF-?8)$/i;

// MSH-18's first repetition as written in the message's first line, or "".
function msh18(text) {
  if (!text.startsWith("MSH")) return "";
  let end = text.indexOf("\r");
  if (end < 0) end = text.indexOf("\n");
  if (end < 0) end = text.length;
  const sep = text[3];
  // The 17th separator after "MSH" starts MSH-18 (MSH-1 is the separator).
  let at = 3;
  for (let k = 0; k < 16; k++) {
    at = text.indexOf(sep, at + 1);
    if (at < 0 || at >= end) return "";
  }
  let stop = text.indexOf(sep, at + 1);
  if (stop < 0 || stop > end) stop = end;
  const field = text.slice(at + 1, stop);
  const rep = text[5];
  const first = rep && field.indexOf(rep) >= 0 ? field.slice(0, field.indexOf(rep)) : field;
  return first.trim();
}

// "utf8" | "latin1" that MSH-18 declares, or null when it is empty.
function declaredCharset(text) {
  const cs = msh18(text);
  if (cs === "") return null;
  return MSH18_UTF8.test(cs) ? "utf8" : "latin1";
}

function forcedCharset(setting) {
  return setting === "utf-8" ? "utf8" : setting === "iso-8859-1" ? "latin1" : null;
}

// Reads a payload (latin1, one character per byte): [text, read].
function readBytes(format, bytes, setting, byteClass) {
  let charset = forcedCharset(setting);
  let how = "forced";
  // Respond mode's envelope is the engine's own JSON, not the sender's bytes.
  if (charset === null || format === "http") {
    charset = format === "hl7v2" ? declaredCharset(bytes) : null;
    how = "declared";
    if (charset === null) {
      charset = byteClass === 1 ? "utf8" : "latin1";
      how = "auto";
    }
  }
  if (charset === "utf8" && byteClass === 2) charset = "latin1";
  const text = charset === "utf8" && byteClass === 1 ? native.utf8(bytes) : bytes;
  return [text, { charset, how, ascii: byteClass === 0 }];
}

// The done() encoding for text in a read's charset: 1 UTF-8; 0 latin1; 2
// latin1 when every character fits, else UTF-8 (nothing declared it latin1).
function encodingOf(read) {
  if (!read) return 2;
  if (read.charset === "utf8") return 1;
  if (read.how !== "auto") return 0;
  // Nothing declared, and plain ASCII tells nothing either: new characters
  // in text and CSV are written as UTF-8, what most readers of those expect;
  // HL7 keeps ISO-8859-1 where it fits, as senders without MSH-18 expect.
  return read.ascii && read.format !== "hl7v2" ? 1 : 2;
}

class Hl7Message {
  // read: how the bytes were read (see readBytes); absent for a message
  // parsed from a string by interface code.
  constructor(text, read) {
    text = String(text);
    this._read = read ?? null;
    this._declaredChanged = false;
    if (!text.startsWith("MSH") && !text.startsWith("FHS") && !text.startsWith("BHS")) {
      throw new Error("not an HL7 v2 message: it does not start with MSH");
    }
    this._text = text;
    this._changed = false;
    const field = text[3];
    const enc = text.slice(4, 8);
    this._delims = {
      field,
      comp: enc[0] ?? "^",
      rep: enc[1] ?? "~",
      esc: enc[2] ?? "\\",
      sub: enc[3] ?? "&",
    };
    // Keep the segment terminator as written ("\r" by the standard).
    const m = /\r\n|\r|\n/.exec(text);
    this._eol = m ? m[0] : "\r";
    const lines = text.split(this._eol);
    this._trailing = lines.length > 1 && lines[lines.length - 1] === "";
    if (this._trailing) lines.pop();
    this._segments = lines.map((l) => new Segment(this, l));
  }

  /** Decoded value at a path: msg.get("PID.3[2].1"), msg.get("OBX[2].5"). */
  get(path) {
    const p = parsePath(path, true);
    const seg = this._find(p.seg, p.segIndex);
    if (!seg) return undefined;
    return p.field === 0 ? seg.toString() : seg._read(p);
  }

  /** Sets a value (escaped for you), adding fields and components as needed,
   *  and the segment itself (at the end) when the message has none yet. */
  set(path, value) {
    const p = parsePath(path, true);
    let seg = this._find(p.seg, p.segIndex);
    if (!seg) seg = this._newSegment(p, path);
    seg._write(p, value);
    return this;
  }

  // The segment a set() names when the message lacks it: the next one of
  // its name, appended. Checked before anything changes, so a refused set
  // leaves the message as it was.
  _newSegment(p, path) {
    const name = p.seg;
    if (!/^[A-Z][A-Z0-9]{2}$/.test(name)) {
      throw new Error(`cannot set ${path}: "${name}" is not a segment name (three capitals or digits, e.g. ZBR)`);
    }
    if (name === "MSH" || name === "FHS" || name === "BHS") {
      throw new Error(`cannot set ${path}: the message has no ${name} #${p.segIndex}, and a header segment cannot be added by set`);
    }
    if (p.field === 0) throw new Error(`cannot set ${path}: field 0 is the segment name`);
    const count = this.segments(name).length;
    if (p.segIndex !== count + 1) {
      throw new Error(`cannot set ${path}: the message has ${count} ${name} segment${count === 1 ? "" : "s"}, so ${name}[${count + 1}] is the next one that set can add`);
    }
    return this.add(name);
  }

  /** All segments, or those with a name: msg.segments("OBX"). */
  segments(name) {
    return name ? this._segments.filter((s) => s.name === name) : this._segments.slice();
  }

  /** Appends a segment from its text ("ZXX|a|b"); returns it. */
  add(text) {
    const s = new Segment(this, String(text));
    this._segments.push(s);
    this._changed = true;
    return s;
  }

  /** Removes every segment with this name; returns how many. */
  remove(name) {
    const before = this._segments.length;
    this._segments = this._segments.filter((s) => s.name !== name);
    if (this._segments.length !== before) this._changed = true;
    return before - this._segments.length;
  }

  /** The charset the message was read in (and is written in); for one
   *  parsed from a string, what MSH-18 says (latin1 when it says nothing). */
  get charset() {
    if (this._read && !this._declaredChanged) return this._read.charset;
    return declaredCharset(this._segments[0]?._raw ?? "") ?? this._read?.charset ?? "latin1";
  }

  // The done() encoding of toString(): the charset it was read in, unless
  // the transform rewrote MSH-18; callRead for a message made from a string.
  _encoding(callRead) {
    if (this._read && !this._declaredChanged) {
      // Unchanged text goes back as it came; latin1 cannot hold anything new.
      return !this._changed && this._read.charset === "latin1" ? 0 : encodingOf(this._read);
    }
    const declared = declaredCharset(this._segments[0]?._raw ?? "");
    if (declared) return declared === "utf8" ? 1 : 0;
    return encodingOf(this._read ?? callRead);
  }

  _find(name, index) {
    const field = this._delims.field;
    const len = name.length;
    let n = 0;
    for (const s of this._segments) {
      const raw = s._raw;
      if (raw.startsWith(name) && (raw.length === len || raw[len] === field) && ++n === index) return s;
    }
    return undefined;
  }

  toString() {
    // Unchanged: the text as received, byte for byte.
    if (!this._changed) return this._text;
    let out = this._segments.map((s) => s._raw).join(this._eol);
    if (this._trailing) out += this._eol;
    return out;
  }
}

export const hl7v2 = {
  /** Parses HL7 v2 text (already decoded to a string). */
  parse(text) { return new Hl7Message(text); },
};

// ---- csv ------------------------------------------------------------------

export const csv = {
  /** RFC 4180 rows: an array of arrays of strings. */
  parse(text, sep = ",") {
    const rows = [];
    let row = [], field = "", i = 0, quoted = false;
    text = String(text);
    while (i < text.length) {
      const c = text[i];
      if (quoted) {
        if (c === '"') {
          if (text[i + 1] === '"') { field += '"'; i += 2; continue; }
          quoted = false; i++; continue;
        }
        field += c; i++; continue;
      }
      if (c === '"' && field === "") { quoted = true; i++; continue; }
      if (c === sep) { row.push(field); field = ""; i++; continue; }
      if (c === "\r" || c === "\n") {
        row.push(field); rows.push(row); row = []; field = "";
        i += c === "\r" && text[i + 1] === "\n" ? 2 : 1;
        continue;
      }
      field += c; i++;
    }
    if (field !== "" || row.length) { row.push(field); rows.push(row); }
    return rows;
  },
  stringify(rows, sep = ",") {
    const cell = (v) => {
      const s = v === null || v === undefined ? "" : String(v);
      return /[",\r\n]/.test(s) || s.includes(sep) ? `"${s.replace(/"/g, '""')}"` : s;
    };
    return rows.map((r) => r.map(cell).join(sep)).join("\r\n") + "\r\n";
  },
};

// ---- xml (read) -----------------------------------------------------------

class XmlNode {
  constructor(name, attrs) { this.name = name; this.attrs = attrs; this.children = []; }
  get text() {
    return this.children.map((c) => (typeof c === "string" ? c : c.text)).join("");
  }
  /** First child element with this name (or path "a/b/c"). */
  find(path) {
    let node = this;
    for (const part of String(path).split("/")) {
      node = node?.children.find((c) => typeof c !== "string" && c.name === part);
    }
    return node;
  }
  findAll(name) { return this.children.filter((c) => typeof c !== "string" && c.name === name); }
}

function xmlDecode(s) {
  return s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|lt|gt|amp|quot|apos);/g, (_, e) => {
    if (e[0] === "#") return String.fromCodePoint(e[1] === "x" ? parseInt(e.slice(2), 16) : Number(e.slice(1)));
    return { lt: "<", gt: ">", amp: "&", quot: '"', apos: "'" }[e];
  });
}

export const xml = {
  /** A small non-validating parser: elements, attributes, text, CDATA. */
  parse(text) {
    text = String(text);
    const root = new XmlNode("#document", {});
    const stack = [root];
    const re = /<!\[CDATA\[([\s\S]*?)\]\]>|<!--[\s\S]*?-->|<\?[\s\S]*?\?>|<!DOCTYPE[^>]*>|<\/\s*([^\s>]+)\s*>|<([^\s/>]+)((?:\s+[^\s=/>]+\s*=\s*(?:"[^"]*"|'[^']*'))*)\s*(\/?)>|([^<]+)/g;
    let m;
    while ((m = re.exec(text))) {
      const top = stack[stack.length - 1];
      if (m[1] !== undefined) top.children.push(m[1]);
      else if (m[2] !== undefined) {
        if (top.name !== m[2]) throw new Error(`XML: </${m[2]}> closes <${top.name}>`);
        stack.pop();
      } else if (m[3] !== undefined) {
        const attrs = {};
        for (const a of m[4].matchAll(/([^\s=]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g)) {
          attrs[a[1]] = xmlDecode(a[2] ?? a[3]);
        }
        const node = new XmlNode(m[3], attrs);
        top.children.push(node);
        if (!m[5]) stack.push(node);
      } else if (m[6] !== undefined) {
        if (m[6].trim() !== "" || top !== root) top.children.push(xmlDecode(m[6]));
      }
    }
    if (stack.length !== 1) throw new Error(`XML: <${stack[stack.length - 1].name}> is not closed`);
    return root.children.find((c) => typeof c !== "string") ?? root;
  },
};

// ---- services -------------------------------------------------------------

let mocks = null; // set while `ductus test` runs a test

function notMocked(what, how) {
  return new Error(`${what} is not mocked in this test: call ${how}`);
}

async function request(kind, a, b, c) {
  return JSON.parse(await native.request(kind, a, b, c));
}

/** A database named in resources.yaml. Parameters are always bound ($1, $2...). */
export function db(name) {
  name = String(name);
  const call = async (kind, sql, params = []) => {
    if (mocks) {
      const h = mocks.db.get(name);
      if (!h) throw notMocked(`db("${name}")`, `mock.db("${name}", (sql, params) => rows)`);
      return (await h(sql, params)) ?? [];
    }
    const r = await request(kind, name, String(sql), JSON.stringify(params));
    return kind === "dbQuery" ? r ?? [] : r;
  };
  return {
    /** Rows as objects. */
    query: (sql, params) => call("dbQuery", sql, params),
    /** For statements without rows; resolves to { rowCount }. */
    execute: (sql, params) => call("dbExecute", sql, params),
  };
}

class Response {
  constructor(r) {
    this.status = r.status ?? 200;
    this.headers = r.headers ?? {};
    this.body = typeof r.body === "string" ? r.body : r.body === undefined ? "" : JSON.stringify(r.body);
  }
  get ok() { return this.status >= 200 && this.status < 300; }
  async text() { return this.body; }
  async json() { return JSON.parse(this.body); }
}

function retryable(status) { return status >= 500 || status === 408 || status === 429; }

async function httpCall(url, api, init) {
  init = init ?? {};
  const { retry, ...rest } = init;
  if (rest.body !== undefined && typeof rest.body !== "string") {
    rest.body = JSON.stringify(rest.body);
    // An object body is sent as JSON: say so, unless the script did.
    const headers = { ...(rest.headers ?? {}) };
    if (!Object.keys(headers).some((h) => h.toLowerCase() === "content-type"))
      headers["Content-Type"] = "application/json";
    rest.headers = headers;
  }
  let r;
  if (mocks) {
    if (!mocks.fetch) throw notMocked(api ? `api("${api}")` : "fetch()", "mock.fetch((url, init) => ({ status, body }))");
    const m = await mocks.fetch(api ? `api:${api}${url}` : url, rest);
    r = typeof m === "string" ? { status: 200, body: m } : m ?? { status: 200 };
  } else {
    r = await request("fetch", String(url), api ?? "", JSON.stringify(rest));
  }
  const res = new Response(r);
  if (retry !== false && retryable(res.status)) {
    throw new Error(`${TRANSIENT} ${api ? `api ${api} ${url}` : "fetch"} answered ${res.status}`);
  }
  return res;
}

/** HTTP through the engine. 5xx, 408 and 429 throw transient errors (the
 *  message is retried) unless init.retry is false. */
export function fetch(url, init) { return httpCall(String(url), null, init); }

/** An API named in resources.yaml: its URL, headers and timeout stay there. */
export function api(name) {
  name = String(name);
  const m = (method) => (path, body, init) => httpCall(String(path), name, { ...init, method, body });
  return {
    get: (path, init) => httpCall(String(path), name, { ...init, method: "GET" }),
    post: m("POST"), put: m("PUT"), patch: m("PATCH"), delete: m("DELETE"),
  };
}

/** An engine environment variable named DUCTUS_PUBLIC_*: other names are refused, so
 *  the engine's own credentials stay out of scripts. */
export async function env(name) {
  if (mocks) {
    if (!mocks.env.has(name)) throw notMocked(`env("${name}")`, `mock.env("${name}", value)`);
    return mocks.env.get(name);
  }
  return request("env", String(name));
}

/** A secret the interface may read. */
export async function secret(name) {
  if (mocks) {
    if (!mocks.secret.has(name)) throw notMocked(`secret("${name}")`, `mock.secret("${name}", value)`);
    return mocks.secret.get(name);
  }
  return request("secret", String(name));
}

// ---- formats and the call protocol ---------------------------------------

// text: the payload as text (see readBytes); read: how it was read, or
// null when it was text already (run() in a test).
function decodeInput(format, text, read) {
  // A byte order mark (Windows tools write one) is not part of the text:
  // JSON.parse refuses it, and a CSV header's first name would carry it.
  if (format !== "hl7v2" && text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  switch (format) {
    case "hl7v2": return new Hl7Message(text, read);
    case "json": return JSON.parse(text);
    case "csv": return csv.parse(text);
    case "csv-record": return csvRecord(text);
    case "xml": return xml.parse(text);
    case "http": return httpRequest(JSON.parse(text));
    default: return text; // text
  }
}

// `split: records` of a CSV file: the header line, then one record (the
// file source prepends the header to each). The transform gets the record
// as { column: value }: code says row.mrn, not row[3], and survives a
// sender reordering its columns. A record with more values than the header
// has names for is refused (quarantined) rather than losing them; missing
// values at the end are "".
function csvRecord(text) {
  const rows = csv.parse(text);
  const header = rows[0] ?? [];
  const values = rows[1] ?? [];
  if (rows.length > 2) throw new Error(`a CSV record was expected, got ${rows.length - 1} records`);
  if (values.length > header.length) {
    throw new Error(`the CSV record has ${values.length} values but its header names ${header.length} columns`);
  }
  const record = {};
  for (let i = 0; i < header.length; i++) record[header[i]] = values[i] ?? "";
  return record;
}

// "a=1&b=x%20y" → { a: "1", b: "x y" }; a repeated name keeps its last value.
function parseQuery(q) {
  if (q && typeof q === "object") return q;
  const out = {};
  for (const part of String(q ?? "").replace(/^\?/, "").split("&")) {
    if (!part) continue;
    const eq = part.indexOf("=");
    const decode = (s) => { try { return decodeURIComponent(s.replace(/\+/g, " ")); } catch { return s; } };
    out[decode(eq < 0 ? part : part.slice(0, eq))] = eq < 0 ? "" : decode(part.slice(eq + 1));
  }
  return out;
}

function httpRequest(env) {
  return {
    method: env.method, path: env.path, params: env.params ?? {}, query: parseQuery(env.query),
    headers: env.headers ?? {}, body: env.body ?? "",
    json() { return JSON.parse(this.body); },
  };
}

// Formats whose bytes carry no charset of their own: output in them keeps
// the charset the input was read in. JSON is UTF-8 (RFC 8259) and so is
// what the engine makes (http).
const KEEPS_CHARSET = new Set(["hl7v2", "text", "csv", "csv-record"]);

// Objects as CSV: a header of the (first) object's keys, then the values.
function csvRows(value) {
  if (Array.isArray(value) && value.every((r) => Array.isArray(r))) return value;
  const list = Array.isArray(value) ? value : [value];
  const columns = Object.keys(list[0] ?? {});
  return [columns, ...list.map((o) => columns.map((c) => o?.[c]))];
}

// [text, encoding] for done(): see encodingOf. read: how this call's input
// was read ({ charset, how, format }), or null.
function encodeOutput(format, value, read) {
  if (value instanceof Hl7Message) return [value.toString(), value._encoding(read)];
  const kept = read && KEEPS_CHARSET.has(read.format) ? encodingOf(read) : 1;
  switch (format) {
    case "hl7v2": {
      const s = String(value);
      const declared = declaredCharset(s);
      return [s, declared ? (declared === "utf8" ? 1 : 0) : encodingOf(read)];
    }
    case "json": return [typeof value === "string" ? value : JSON.stringify(value), 1];
    case "csv": return [value !== null && typeof value === "object" ? csv.stringify(csvRows(value)) : String(value), kept];
    case "http": {
      const r = typeof value === "object" ? value : { body: value };
      let body = r.body ?? "";
      const headers = { ...(r.headers ?? {}) };
      if (typeof body !== "string") {
        body = JSON.stringify(body);
        if (!Object.keys(headers).some((h) => h.toLowerCase() === "content-type")) headers["content-type"] = "application/json";
      }
      return [JSON.stringify({ status: r.status ?? 200, headers, body }), 1];
    }
    default: return [String(value), kept];
  }
}

// The stack without the SDK's own frames: the script's file:line.
function scriptStack(e) {
  const stack = typeof e?.stack === "string" ? e.stack : "";
  const lines = stack.split("\n").filter((l) => !/\(ductus:|at ductus:/.test(l));
  return lines.join("\n");
}

function classify(e) {
  if (e instanceof Kill) return [FILTERED, e.reason];
  const message = e instanceof Error ? e.message : show(e);
  if (message.includes(TRANSIENT)) return [TRANSIENT_K, message];
  if (e instanceof Error) return [QUARANTINE, scriptStack(e) || `${e.name}: ${message}`];
  return [QUARANTINE, `thrown: ${message}`];
}

function settle(callId, outFormat, result, read) {
  if (result === null) return native.done(callId, FILTERED, "", 0);
  if (result instanceof Kill) return native.done(callId, FILTERED, result.reason, 0);
  if (result === undefined) {
    return native.done(callId, QUARANTINE, "the transform returned nothing (return null to filter a message)", 0);
  }
  const [text, enc] = encodeOutput(outFormat, result, read);
  native.done(callId, OUTPUT, text, enc);
}

function fail(callId, e) {
  const [kind, text] = classify(e);
  native.done(callId, kind, text, 0);
}

class Meta {
  constructor(id, receivedAtMs, destination, origin) {
    this.id = id;
    this.receivedAtMs = receivedAtMs;
    this.destination = destination;
    this.origin = origin;
  }
  get receivedAt() { return new Date(this.receivedAtMs); }
}

// Called by the worker for each invoke. Reports through native.done, now
// for a synchronous transform or later for an async one. Not exported:
// interface code must not be able to settle another interface's calls.
// payload: the bytes as latin1; charset: the interface's `charset:`;
// byteClass: see readBytes.
function runCall(fn, inFormat, outFormat, payload, charset, byteClass, callId, id, receivedAtMs,
                 destination, origin) {
  let result, read;
  try {
    const [text, r] = readBytes(inFormat, payload, charset, byteClass);
    read = r;
    read.format = inFormat;
    result = fn(decodeInput(inFormat, text, read), new Meta(id, receivedAtMs, destination, origin));
  } catch (e) {
    return fail(callId, e);
  }
  if (result !== null && typeof result === "object" && typeof result.then === "function") {
    result.then((r) => {
      try { settle(callId, outFormat, r, read); } catch (e) { fail(callId, e); }
    }, (e) => fail(callId, e));
    return;
  }
  try { settle(callId, outFormat, result, read); } catch (e) { fail(callId, e); }
}

// ---- ductus test ----------------------------------------------------------

const tests = [];

/** Registers a test (in *.test.js); fn may be async. */
export function test(name, fn) { tests.push({ name: String(name), fn }); }

/** Mocks for services while a test runs; reset before each test. */
export const mock = {
  db(name, handler) {
    mocks.db.set(String(name), typeof handler === "function" ? handler : () => handler);
  },
  fetch(handler) { mocks.fetch = typeof handler === "function" ? handler : () => handler; },
  env(name, value) {
    if (typeof name === "object") for (const [k, v] of Object.entries(name)) mocks.env.set(k, v);
    else mocks.env.set(String(name), value);
  },
  secret(name, value) {
    if (typeof name === "object") for (const [k, v] of Object.entries(name)) mocks.secret.set(k, v);
    else mocks.secret.set(String(name), value);
  },
};

function deepEqual(a, b) {
  if (Object.is(a, b)) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a), kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => deepEqual(a[k], b[k]));
}

export const assert = {
  ok(v, message) { if (!v) throw new Error(message ?? `expected a true value, got ${show(v)}`); },
  equal(actual, expected, message) {
    if (!Object.is(actual, expected)) throw new Error(message ?? `expected ${show(expected)}, got ${show(actual)}`);
  },
  deepEqual(actual, expected, message) {
    if (!deepEqual(actual, expected)) throw new Error(message ?? `expected ${show(expected)}, got ${show(actual)}`);
  },
  async rejects(fnOrPromise, pattern) {
    try { await (typeof fnOrPromise === "function" ? fnOrPromise() : fnOrPromise); }
    catch (e) {
      if (pattern && !String(e?.message ?? e).match(pattern)) throw new Error(`rejected with "${e?.message}", expected ${pattern}`);
      return e;
    }
    throw new Error("expected a rejection");
  },
  throws(fn, pattern) {
    try { fn(); } catch (e) {
      if (pattern && !String(e?.message ?? e).match(pattern)) throw new Error(`threw "${e?.message}", expected ${pattern}`);
      return e;
    }
    throw new Error("expected an exception");
  },
};

/** Runs a transform on a payload the way the engine would (decode, call,
 *  classify): resolves to { kind: "output"|"filtered"|"quarantine"|"transient", value }. */
export async function run(fn, payload, { input = "hl7v2", output = input === "csv-record" ? "csv" : input, meta = {} } = {}) {
  const kinds = ["output", "filtered", "quarantine", "transient"];
  try {
    // The payload is text already: no charset to apply.
    const r = await fn(decodeInput(input, String(payload), null), meta);
    if (r === null) return { kind: "filtered", value: "" };
    if (r instanceof Kill) return { kind: "filtered", value: r.reason };
    return { kind: "output", value: encodeOutput(output, r, null)[0] };
  } catch (e) {
    const [k, text] = classify(e);
    return { kind: kinds[k], value: text };
  }
}

// Called by the worker under `ductus test`: JSON of the results.
async function runTests() {
  const results = [];
  for (const t of tests) {
    mocks = { db: new Map(), fetch: null, env: new Map(), secret: new Map() };
    try {
      await t.fn();
      results.push({ name: t.name, ok: true });
    } catch (e) {
      results.push({ name: t.name, ok: false, error: e instanceof Error ? scriptStack(e) || e.message : show(e) });
    }
  }
  mocks = null;
  return JSON.stringify(results);
}

native.register(runCall, runTests);
