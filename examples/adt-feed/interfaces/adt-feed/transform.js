import { quarantine } from "ductus";

// ADT only; a message without an MRN needs a person, not a retry.
export function transform(msg, meta) {
  if (msg.get("MSH.9.1") !== "ADT") return null;       // filtered
  if (!msg.get("PID.3.1")) throw quarantine("no MRN");  // quarantined
  msg.set("PID.5.1", msg.get("PID.5.1").toUpperCase());
  return msg;                                           // delivered
}
