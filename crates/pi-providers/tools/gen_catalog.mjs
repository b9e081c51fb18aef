// Regenerates ../src/catalog.json from pi-ai's generated model catalog.
//   node tools/gen_catalog.mjs /path/to/node_modules/@earendil-works/pi-ai/dist/models.generated.js
// Keeps the chat models of the providers pi-rs ships adapters for, with the fields the Rust
// `Model` type reads.
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const source = process.argv[2];
if (!source) {
  console.error("usage: node tools/gen_catalog.mjs .../pi-ai/dist/models.generated.js");
  process.exit(2);
}
const { MODELS } = await import(pathToFileURL(source).href);
const PROVIDERS = ["openai", "anthropic", "google", "deepseek", "groq", "openrouter", "mistral"];
const APIS = new Set(["openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai", "mistral-conversations"]);
const KEEP = ["id", "name", "api", "provider", "baseUrl", "reasoning", "thinkingLevelMap", "input", "cost", "contextWindow", "maxTokens", "headers", "compat"];
const out = {};
for (const provider of PROVIDERS) {
  const models = Object.values(MODELS[provider] ?? {}).filter((m) => APIS.has(m.api));
  out[provider] = models.map((m) => Object.fromEntries(KEEP.filter((k) => m[k] !== undefined).map((k) => [k, m[k]])));
}
const target = join(dirname(fileURLToPath(import.meta.url)), "..", "src", "catalog.json");
const lines = Object.entries(out).map(
  ([p, list]) => `  ${JSON.stringify(p)}: [\n${list.map((m) => `    ${JSON.stringify(m)}`).join(",\n")}\n  ]`,
);
writeFileSync(target, `{\n${lines.join(",\n")}\n}\n`);
for (const [p, list] of Object.entries(out)) console.log(p, list.length);
