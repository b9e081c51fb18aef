// Runs every case of validation-cases.json through the reference (pi-ai's validateToolArguments, pi-schema's parse)
// and writes the expected results for pi-schema's validation tests.
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { validateToolArguments } from "@earendil-works/pi-ai";
import { compile } from "@earendil-works/pi-schema";
import { formats } from "@earendil-works/pi-schema/formats";

const here = dirname(fileURLToPath(import.meta.url));
const cases = JSON.parse(readFileSync(join(here, "validation-cases.json"), "utf8"));
const out = join(here, "../../crates/pi-schema/tests/fixtures/validation.json");
const TOOL = "tool";

const results = cases.map((c) => {
  // `argsText` keeps the arguments' key order as sent (JSON.parse reorders array-index keys first).
  if (c.argsText !== undefined) c.args = JSON.parse(c.argsText);
  const entry = { name: c.name, schema: c.schema, args: c.args };
  if (c.argsText !== undefined) entry.argsText = c.argsText;
  if (c.argumentsError !== undefined) entry.argumentsError = c.argumentsError;
  const tool = { name: TOOL, description: c.name, parameters: c.schema };
  const toolCall = { type: "toolCall", id: "call", name: TOOL, arguments: c.args, argumentsError: c.argumentsError };
  try {
    entry.coerced = validateToolArguments(tool, toolCall);
  } catch (error) {
    entry.error = error instanceof Error ? error.message : String(error);
  }
  // The issues as pi-schema reports them (JSON Pointer paths), for the validator API itself.
  try {
    const result = compile(c.schema, { formats, coerce: true, unresolvedRefs: "reject" }).parse(structuredClone(c.args));
    entry.issues = result.ok ? [] : result.errors.map((e) => ({ path: e.path, message: e.message }));
  } catch (error) {
    entry.compileError = error instanceof Error ? error.message : String(error);
  }
  return entry;
});

mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify(results, null, 2)}\n`);
console.log(`wrote ${results.length} cases to ${out}`);
