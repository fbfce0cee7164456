import { test, assert, run } from "ductus";
import { transform } from "./transform.js";

// The engine hands a schedule's run over as JSON (input "json") and writes
// the result as the interface's format (text).
const runRecord = (due, previous) => JSON.stringify({ due, previous });

test("the heartbeat names the run's due time and the previous one", async () => {
  const r = await run(transform, runRecord("2026-01-01T12:05:00Z", "2026-01-01T12:00:00Z"),
                      { input: "json", output: "text" });
  assert.equal(r.kind, "output");
  assert.equal(r.value, "heartbeat due 2026-01-01T12:05:00Z, previous 2026-01-01T12:00:00Z\n");
});

test("the first run has no previous one", async () => {
  const r = await run(transform, runRecord("2026-01-01T12:00:00Z", null), { input: "json", output: "text" });
  assert.equal(r.value, "heartbeat due 2026-01-01T12:00:00Z, previous none\n");
});
