// Checks project files against the JSON Schemas `ductus types` writes, with
// a validator that isn't ours (Ajv, draft-07) and YAML read as editors read
// it (the yaml package, YAML 1.2):
//   node check_schemas.mjs SCHEMA_DIR KIND:FILE ... [!KIND:FILE ...]
// KIND is interface, ductus or resources (KIND.schema.json); a FILE after
// `!` must be refused. Prints a line per file and exits 0 when every file
// was judged as expected, 1 otherwise, 2 when called wrong.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import Ajv from "ajv";
import { parse } from "yaml";

const [dir, ...files] = process.argv.slice(2);
if (!dir || files.length === 0) {
  console.error("usage: node check_schemas.mjs SCHEMA_DIR KIND:FILE ... [!KIND:FILE ...]");
  process.exit(2);
}
const ajv = new Ajv({ allErrors: true, allowUnionTypes: true });
const validators = {};
for (const kind of ["interface", "ductus", "resources"]) {
  const schema = JSON.parse(readFileSync(join(dir, `${kind}.schema.json`), "utf8"));
  validators[kind] = ajv.compile(schema);
}
let wrong = 0;
for (const arg of files) {
  const refuse = arg.startsWith("!");
  const [kind, ...rest] = (refuse ? arg.slice(1) : arg).split(":");
  const file = rest.join(":");
  const validate = validators[kind];
  if (!validate) {
    console.error(`unknown kind ${kind} (interface, ductus or resources)`);
    process.exit(2);
  }
  const doc = parse(readFileSync(file, "utf8")) ?? null;
  const ok = validate(doc);
  const errors = (validate.errors ?? [])
    .map((e) => `${e.instancePath || "/"} ${e.message}${e.params?.additionalProperty ? ` (${e.params.additionalProperty})` : ""}`)
    .join("; ");
  if (ok === !refuse) {
    console.log(`${refuse ? "refused" : "valid"} ${file}${refuse ? `: ${errors}` : ""}`);
  } else {
    wrong++;
    console.log(`WRONG ${file}: ${ok ? "accepted, but should be refused" : errors}`);
  }
}
process.exit(wrong ? 1 : 0);
