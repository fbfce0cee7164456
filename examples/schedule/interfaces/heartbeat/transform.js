// A schedule's run arrives as JSON whatever `format:` says:
// { due: "2026-01-01T12:00:00Z", previous: "2026-01-01T11:55:00Z" | null }.
// `format: text` is what the output is written as.
export function transform(run) {
  return `heartbeat due ${run.due}, previous ${run.previous ?? "none"}\n`;
}
