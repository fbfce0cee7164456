// One record of the file with `split: records`: an object keyed by the
// header's column names, e.g. { order_id: "O1", mrn: "123", test_code: "GLU" }.
export function transform(record) {
  if (!record.order_id) return null; // a record without an order is dropped
  return { order: record.order_id, patient: record.mrn, test: record.test_code };
}
