export function transform(run) {
  return `heartbeat due ${run.due}, previous ${run.previous ?? "none"}\n`;
}
