import { test, assert, run } from "ductus";
import { transform } from "./transform.js";

// What the file source hands over for each record: the header line, then
// the record (input "csv-record" = `format: csv` with `split: records`).
const record = (line) => `order_id,mrn,test_code\r\n${line}`;

test("a record becomes a JSON order keyed by the header's names", async () => {
  const r = await run(transform, record("O1,MRN123,GLU"), { input: "csv-record", output: "json" });
  assert.equal(r.kind, "output");
  assert.deepEqual(JSON.parse(r.value), { order: "O1", patient: "MRN123", test: "GLU" });
});

test("quoted fields keep their commas", async () => {
  const r = await run(transform, record('O2,"MRN,9",HBA1C'), { input: "csv-record", output: "json" });
  assert.deepEqual(JSON.parse(r.value), { order: "O2", patient: "MRN,9", test: "HBA1C" });
});

test("a record without an order id is filtered", async () => {
  const r = await run(transform, record(",MRN123,GLU"), { input: "csv-record", output: "json" });
  assert.equal(r.kind, "filtered");
});

test("a record with more values than the header names is quarantined", async () => {
  const r = await run(transform, record("O3,MRN1,GLU,extra"), { input: "csv-record", output: "json" });
  assert.equal(r.kind, "quarantine");
  assert.ok(r.value.includes("4 values but its header names 3 columns"), r.value);
});
