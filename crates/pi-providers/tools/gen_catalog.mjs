// Regenerates ../src/catalog/catalog.json and ../src/catalog/provider_keys.json from the reference package.
//   node tools/gen_catalog.mjs [/path/to/node_modules]
// (default: the node_modules folder that resolves `@earendil-works/pi-ai` from the current
// directory). catalog.json is `{provider: [model, ...]}` exactly as pi-ai's
// `getBuiltinProviders()` / `getBuiltinModels(provider)` return them: every provider, every
// chat model, every field, in the reference's order. provider_keys.json maps each provider to the
// environment variables pi-ai's `env-api-keys.js` reads its key from, in order.
import { existsSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

// The installed package: `<dir>/node_modules/@earendil-works/pi-ai`, from the given folder upwards.
function packageDir(start) {
  for (let dir = resolve(start); ; dir = dirname(dir)) {
    const candidate = join(dir, "node_modules", "@earendil-works", "pi-ai");
    if (existsSync(candidate)) return candidate;
    if (dirname(dir) === dir) throw new Error(`@earendil-works/pi-ai is not installed above ${start}`);
  }
}
const pkg = packageDir(process.argv[2] ? dirname(resolve(process.argv[2])) : process.cwd());
const load = (file) => import(pathToFileURL(join(pkg, "dist", file)).href);
const all = await load("providers/all.js");
const envKeys = await load("env-api-keys.js");

const catalog = {};
const keys = {};
for (const provider of all.getBuiltinProviders()) {
  catalog[provider] = all.getBuiltinModels(provider).map((m) => JSON.parse(JSON.stringify(m)));
  // `findEnvKeys` filters the provider's variable list by what the environment holds: an
  // environment that holds every name and records the lookups yields the list in order.
  const asked = [];
  const env = new Proxy({}, { get: (_, name) => (typeof name === "string" ? (asked.push(name), "set") : undefined) });
  const found = envKeys.findEnvKeys(provider, env) ?? [];
  keys[provider] = found.filter((name) => asked.includes(name));
}

const here = dirname(fileURLToPath(import.meta.url));
const lines = Object.entries(catalog).map(
  ([p, list]) => `  ${JSON.stringify(p)}: [${list.length ? "\n" : ""}${list.map((m) => `    ${JSON.stringify(m)}`).join(",\n")}${list.length ? "\n  " : ""}]`,
);
writeFileSync(join(here, "..", "src", "catalog", "catalog.json"), `{\n${lines.join(",\n")}\n}\n`);
writeFileSync(join(here, "..", "src", "catalog", "provider_keys.json"), `${JSON.stringify(keys, null, 2)}\n`);
let total = 0;
for (const [p, list] of Object.entries(catalog)) {
  total += list.length;
  console.log(`${p} ${list.length} [${keys[p].join(", ")}]`);
}
console.log(`${Object.keys(catalog).length} providers, ${total} models`);
