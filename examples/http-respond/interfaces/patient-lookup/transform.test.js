import { test, assert, run } from "ductus";
import { lookup } from "./transform.js";

// Respond mode: the engine hands the request over as { method, path,
// query, headers, body } (input "http") and sends back what lookup returns.
const request = (query) => JSON.stringify({ method: "GET", path: "/patients", query, headers: {}, body: "" });

test("a lookup with an MRN answers 200 with JSON", async () => {
  const r = await run(lookup, request("mrn=MRN123"), { input: "http" });
  assert.equal(r.kind, "output");
  const answer = JSON.parse(r.value);
  assert.equal(answer.status, 200);
  assert.equal(answer.headers["content-type"], "application/json");
  assert.deepEqual(JSON.parse(answer.body), { mrn: "MRN123", found: false });
});

test("a lookup without an MRN answers 400", async () => {
  const r = await run(lookup, request(""), { input: "http" });
  const answer = JSON.parse(r.value);
  assert.equal(answer.status, 400);
  assert.deepEqual(JSON.parse(answer.body), { error: "mrn is required" });
});
