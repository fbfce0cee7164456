// Type declarations for the "ductus" module, for editors. The module itself
// (sdk/ductus.js) is compiled into the engine and runs inside the confined
// worker; interface code imports it as `import { ... } from "ductus"`.

declare module "ductus" {
  // ---- what a transform receives and returns --------------------------------

  /** About the message being transformed. */
  export interface Meta {
    /** The message's id in the store. */
    readonly id: number;
    /** When the engine received it. */
    readonly receivedAt: Date;
    readonly receivedAtMs: number;
    /** The destination this function runs for. */
    readonly destination: string;
    /** The message it was routed from; 0 when it was received directly. */
    readonly origin: number;
  }

  /**
   * What a transform may return:
   * - a message (Hl7Message), string, object (json), rows (csv) → sent on;
   * - `null` → filtered (dropped on purpose);
   * - `kill(reason)` → filtered with the reason.
   * Throwing `quarantine(reason)` or any other error quarantines the message
   * with the error and the script's stack (file:line); an error whose message
   * contains "[ductus:transient]" (see `transient()`) makes it wait and retry.
   */
  export type TransformResult = Hl7Message | string | object | unknown[][] | null | Kill;
  export type Transform<In = Hl7Message> = (
    input: In,
    meta: Meta,
  ) => TransformResult | Promise<TransformResult>;

  export interface Kill {
    readonly reason: string;
  }
  /** Filters the message with a reason: `return kill("duplicate")`. */
  export function kill(reason?: string): Kill;
  /** `throw quarantine("no patient id")`: the message is quarantined. */
  export function quarantine(reason: string): Error;
  /** `throw transient("lab busy")`: the message waits and is retried. */
  export function transient(reason: string): Error;

  // ---- HL7 v2 ----------------------------------------------------------------

  /**
   * An HL7 v2 message, parsed lazily: segments are split when read, fields
   * when touched; untouched segments are written back exactly as received.
   * Delimiters come from MSH-1/MSH-2. Paths: "PID.3", "PID.3.1", "PID.3[2].1",
   * "PID.5.1.2" (subcomponent), "OBX[2].5" (the second OBX).
   * `get` decodes escapes (\F\ \S\ \T\ \R\ \E\) in leaf values; `set` encodes
   * them.
   *
   * Charset: the interface's `charset: utf-8 | iso-8859-1` when it forces one;
   * else MSH-18 when set ("UNICODE UTF-8", "UTF-8" → UTF-8; "8859/1",
   * "ISO-8859-1", "ISO IR100" and any other value → ISO-8859-1); else the
   * bytes: well-formed UTF-8 with at least one multi-byte sequence → UTF-8,
   * anything else → ISO-8859-1 (ASCII reads the same either way). Bytes that
   * are not UTF-8 are read as ISO-8859-1 whatever says otherwise, so nothing
   * is replaced. The same rule reads JSON, CSV, XML and text payloads
   * (without MSH-18). A message returned unchanged goes out byte for byte;
   * a changed one in the charset it was read in (or the one a new MSH-18
   * names). Text read as ISO-8859-1 only because nothing said so goes out as
   * UTF-8 if the transform added a character ISO-8859-1 cannot hold.
   */
  export interface Hl7Message {
    get(path: string): string | undefined;
    /**
     * Sets a value, adding fields, components and, when the message has no
     * such segment yet, the segment itself at the end ("ZBR.1" on a message
     * without ZBR; "OBX[3].5" when it has two OBX). Throws for paths that
     * cannot be: a bad segment name, field 0, MSH-1/MSH-2, a missing
     * header segment, or a repetition past the next one ("OBX[5]" of two).
     */
    set(path: string, value: string | number | null): this;
    /** All segments, or those with a name. */
    segments(name?: string): Hl7Segment[];
    /** Appends a segment from its text ("ZXX|a|b"). */
    add(text: string): Hl7Segment;
    /** Removes every segment with this name; returns how many. */
    remove(name: string): number;
    /** The charset the message was read in and is written in (see above);
     *  for one parsed from a string, what MSH-18 says (latin1 when nothing). */
    readonly charset: "latin1" | "utf8";
    toString(): string;
  }

  export interface Hl7Segment {
    readonly name: string;
    /** Relative to the segment: seg.get("5.1"), seg.get("3[2].1"). */
    get(path: string): string | undefined;
    set(path: string, value: string | number | null): this;
    /** The repetitions of a field, each as written. */
    repetitions(field: number): string[];
    toString(): string;
  }

  export const hl7v2: {
    parse(text: string): Hl7Message;
  };

  // ---- other formats ---------------------------------------------------------

  /**
   * What a transform receives with `format: csv`:
   * - a whole file (no `split:`, or a route): rows, `string[][]`;
   * - `split: records`: one record, keyed by the header's column names:
   *   `{ order_id: "O1", mrn: "123" }`. The file source prepends the header
   *   to every record, so each record can be read by name: code says
   *   `record.mrn`, not `row[3]`, reads like the file's own header, and keeps
   *   working when a sender adds or reorders columns. Missing trailing
   *   values are ""; a record with more values than the header has names
   *   is quarantined rather than losing them. (`run(fn, text, { input:
   *   "csv-record" })` hands a test the same.)
   * Returned for `output: csv`: rows as they are, or objects (one or an
   * array), written as a header of the first object's keys and its values.
   */
  export type CsvRecord = Record<string, string>;

  export const csv: {
    /** RFC 4180: rows of strings. */
    parse(text: string, separator?: string): string[][];
    stringify(rows: unknown[][], separator?: string): string;
  };

  export interface XmlNode {
    readonly name: string;
    readonly attrs: Record<string, string>;
    readonly children: (XmlNode | string)[];
    /** The text of the node and its descendants. */
    readonly text: string;
    /** The first child element with this name, or a path "a/b/c". */
    find(path: string): XmlNode | undefined;
    findAll(name: string): XmlNode[];
  }
  export const xml: {
    /** A small non-validating parser; returns the root element. */
    parse(text: string): XmlNode;
  };

  /** Respond mode (input format "http"): the request a transform receives. */
  export interface HttpRequest {
    readonly method: string;
    readonly path: string;
    readonly params: Record<string, string>;
    readonly query: Record<string, string>;
    readonly headers: Record<string, string>;
    readonly body: string;
    json(): unknown;
  }
  /** Respond mode: what a transform returns (body objects become JSON). */
  export interface HttpResponse {
    status?: number;
    headers?: Record<string, string>;
    body?: string | object;
  }

  // ---- services (requests to the engine) -------------------------------------

  export interface Database {
    /** Rows as objects; parameters are bound ($1, $2, ...), never spliced. */
    query<Row = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<Row[]>;
    /** A statement without rows. */
    execute(sql: string, params?: unknown[]): Promise<{ rowCount: number }>;
  }
  /** A database named in resources.yaml. */
  export function db(name: string): Database;

  export interface FetchInit {
    method?: string;
    headers?: Record<string, string>;
    body?: string | object;
    /** false: 5xx/408/429 come back as responses instead of retrying the message. */
    retry?: boolean;
  }
  export interface FetchResponse {
    readonly status: number;
    readonly ok: boolean;
    readonly headers: Record<string, string>;
    text(): Promise<string>;
    json(): Promise<any>;
  }
  /** HTTP through the engine; 5xx, 408 and 429 throw transient errors unless retry: false. */
  export function fetch(url: string, init?: FetchInit): Promise<FetchResponse>;

  export interface Api {
    get(path: string, init?: FetchInit): Promise<FetchResponse>;
    post(path: string, body?: string | object, init?: FetchInit): Promise<FetchResponse>;
    put(path: string, body?: string | object, init?: FetchInit): Promise<FetchResponse>;
    patch(path: string, body?: string | object, init?: FetchInit): Promise<FetchResponse>;
    delete(path: string, body?: string | object, init?: FetchInit): Promise<FetchResponse>;
  }
  /** An API named in resources.yaml (its URL, headers and timeout stay there). */
  export function api(name: string): Api;

  /** An engine environment variable named DUCTUS_PUBLIC_* (other names are refused). */
  export function env(name: string): Promise<string>;
  /** A secret this interface may read. */
  export function secret(name: string): Promise<string>;

  // ---- ductus test -----------------------------------------------------------

  /** Registers a test in a *.test.js file; `ductus test` runs it. */
  export function test(name: string, fn: () => void | Promise<void>): void;

  /** Service mocks, reset before each test. An unmocked call fails saying how to mock it. */
  export const mock: {
    db(name: string, rows: unknown[] | ((sql: string, params: unknown[]) => unknown[] | Promise<unknown[]>)): void;
    /** api(name) calls arrive with url "api:<name><path>". */
    fetch(handler: HttpResponse | string | ((url: string, init: FetchInit) => HttpResponse | string | Promise<HttpResponse | string>)): void;
    env(name: string, value: string): void;
    env(values: Record<string, string>): void;
    secret(name: string, value: string): void;
    secret(values: Record<string, string>): void;
  };

  export const assert: {
    ok(value: unknown, message?: string): void;
    equal(actual: unknown, expected: unknown, message?: string): void;
    deepEqual(actual: unknown, expected: unknown, message?: string): void;
    throws(fn: () => unknown, pattern?: RegExp | string): unknown;
    rejects(fnOrPromise: (() => Promise<unknown>) | Promise<unknown>, pattern?: RegExp | string): Promise<unknown>;
  };

  /**
   * Runs a transform the way the engine would (decode, call, classify). The
   * payload is text already, so no charset applies. input: the interface's
   * format (default hl7v2); "csv-record" for `format: csv` with `split:
   * records`, "json" for a schedule's run ({ due, previous }) whatever
   * `format:` says, "http" for respond mode. output defaults to input.
   */
  export function run(
    fn: Transform<any>,
    payload: string,
    options?: { input?: string; output?: string; meta?: Partial<Meta> },
  ): Promise<{ kind: "output" | "filtered" | "quarantine" | "transient"; value: string }>;
}
