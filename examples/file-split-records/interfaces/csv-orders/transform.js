// One record with its header: rows[0] is the record as { column: value }.
export function transform(table) {
  const [row] = table.rows ?? [];
  if (!row) return null;
  return { order: row.order_id, patient: row.mrn, test: row.test_code };
}
