import { test, assert, run } from "ductus";
import { transform } from "./transform.js";

const doc = JSON.stringify({ mrn: "MRN123", event: "A08", family: "Doe" });

test("a routed document is written with the message it came from", async () => {
  const r = await run(transform, doc, { input: "json", meta: { origin: 41 } });
  assert.equal(r.kind, "output");
  assert.deepEqual(JSON.parse(r.value), { mrn: "MRN123", event: "A08", family: "Doe", routedFrom: 41 });
});
