// Prints the reference's classifier or image catalog as one JSON object `{provider: [model, ...]}`:
// pi-ai's getBuiltinProviders() in order, each with getBuiltinClassifierModels(provider) or
// getBuiltinImageModels(provider); providers with none are left out.
//   node catalog-types-reference.mjs classifier|image [--write FILE]
// `--write` writes the data file pi-providers embeds instead (one model per line):
// crates/pi-providers/src/classifier/catalog.json, crates/pi-providers/src/images/catalog.json.
import { writeFileSync } from "node:fs";
import { getBuiltinClassifierModels, getBuiltinImageModels, getBuiltinProviders } from "@earendil-works/pi-ai/providers/all";

const type = process.argv[2];
const list = { classifier: getBuiltinClassifierModels, image: getBuiltinImageModels }[type];
if (!list) {
  process.stderr.write("usage: node catalog-types-reference.mjs classifier|image\n");
  process.exit(2);
}
const catalog = {};
for (const provider of getBuiltinProviders()) {
  const models = list(provider);
  if (models.length > 0) catalog[provider] = models;
}
if (process.argv[3] === "--write" && process.argv[4]) {
  const groups = Object.entries(catalog).map(
    ([provider, models]) => `  ${JSON.stringify(provider)}: [\n${models.map((m) => `    ${JSON.stringify(m)}`).join(",\n")}\n  ]`,
  );
  writeFileSync(process.argv[4], `{\n${groups.join(",\n")}\n}\n`);
} else {
  process.stdout.write(`${JSON.stringify(catalog)}\n`);
}
