// The receiver wants JSON; the archive keeps the message as it came.
export function toJson(msg) {
  return {
    mrn: msg.get("PID.3.1"),
    test: msg.get("OBR.4.1"),
    value: msg.get("OBX.5"),
    units: msg.get("OBX.6.1"),
  };
}

export function transform(msg) {
  return msg;
}
