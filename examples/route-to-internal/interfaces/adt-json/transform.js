export function transform(doc, meta) {
  return { ...doc, routedFrom: meta.origin ?? null };
}
