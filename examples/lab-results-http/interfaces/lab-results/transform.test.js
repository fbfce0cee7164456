import { test, assert, run } from "ductus";
import { toJson, transform } from "./transform.js";

const oru =
  "MSH|^~\\&|LAB|HOSP|EHR|HOSP|202601011200||ORU^R01|MSG0042|P|2.5\r" +
  "PID|1||MRN123^^^HOSP^MR||Doe^Jane\r" +
  "OBR|1|||GLU^Glucose^LN\r" +
  "OBX|1|NM|GLU^Glucose^LN||5.4|mmol/L^millimoles per litre|3.9-5.8|N|||F\r";

test("the receiver gets the result as JSON", async () => {
  const r = await run(toJson, oru, { output: "json" });
  assert.equal(r.kind, "output");
  assert.deepEqual(JSON.parse(r.value), { mrn: "MRN123", test: "GLU", value: "5.4", units: "mmol/L" });
});

test("the archive keeps the message byte for byte", async () => {
  const r = await run(transform, oru);
  assert.equal(r.kind, "output");
  assert.equal(r.value, oru);
});
