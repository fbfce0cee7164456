import { test, assert, run } from "ductus";
import { transform } from "./transform.js";

const adt = (mrn) =>
  "MSH|^~\\&|HIS|WARD|LAB|HOSP|202601011200||ADT^A01|MSG0001|P|2.5\r" +
  `PID|1||${mrn}||doe^jane\r`;

test("an ADT message leaves with the family name upper-cased", async () => {
  const r = await run(transform, adt("MRN123"));
  assert.equal(r.kind, "output");
  assert.ok(r.value.includes("PID|1||MRN123||DOE^jane"), r.value);
});

test("a message that is not ADT is filtered", async () => {
  const r = await run(transform, adt("MRN123").replace("ADT^A01", "ORU^R01"));
  assert.equal(r.kind, "filtered");
});

test("an ADT message without an MRN is quarantined", async () => {
  const r = await run(transform, adt(""));
  assert.equal(r.kind, "quarantine");
  assert.ok(r.value.includes("no MRN"), r.value);
});
