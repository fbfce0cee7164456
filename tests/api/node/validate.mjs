// Checks an OpenAPI document against the OpenAPI 3.1 schema:
//   node validate.mjs FILE
// Prints "valid" and exits 0, or prints the errors and exits 1.
import { readFileSync } from "node:fs";
import { Validator } from "@seriousme/openapi-schema-validator";

const file = process.argv[2];
if (!file) {
  console.error("usage: node validate.mjs FILE");
  process.exit(2);
}
const doc = JSON.parse(readFileSync(file, "utf8"));
const validator = new Validator();
const result = await validator.validate(doc);
if (!result.valid) {
  console.log(JSON.stringify(result.errors, null, 2));
  process.exit(1);
}
if (validator.version !== "3.1") {
  console.log(`valid, but as OpenAPI ${validator.version}, not 3.1`);
  process.exit(1);
}
console.log("valid");
