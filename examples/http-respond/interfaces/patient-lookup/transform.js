// The request arrives as { method, path, params, query, headers, body }.
export function lookup(request) {
  const mrn = request.query?.mrn;
  if (!mrn) return { status: 400, body: { error: "mrn is required" } };
  return { status: 200, body: { mrn, found: false } };
}
