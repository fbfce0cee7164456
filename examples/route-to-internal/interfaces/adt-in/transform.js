export function toJson(msg) {
  return { mrn: msg.get("PID.3.1"), event: msg.get("MSH.9.2"), family: msg.get("PID.5.1") };
}
