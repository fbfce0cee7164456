import { test, assert, run } from "ductus";
import { toJson } from "./transform.js";

const adt =
  "MSH|^~\\&|HIS|WARD|ENGINE|HOSP|202601011200||ADT^A08|MSG0007|P|2.5\r" +
  "PID|1||MRN123^^^HOSP^MR||Doe^Jane\r";

test("an ADT message is routed on as JSON", async () => {
  const r = await run(toJson, adt, { output: "json" });
  assert.equal(r.kind, "output");
  assert.deepEqual(JSON.parse(r.value), { mrn: "MRN123", event: "A08", family: "Doe" });
});
