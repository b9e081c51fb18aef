// Prints the reference's model catalog as one JSON object `{provider: [model, ...]}`:
// pi-ai's getBuiltinProviders() in order, each with getBuiltinModels(provider).
import { getBuiltinModels, getBuiltinProviders } from "@earendil-works/pi-ai/providers/all";

const catalog = {};
for (const provider of getBuiltinProviders()) catalog[provider] = getBuiltinModels(provider);
process.stdout.write(`${JSON.stringify(catalog)}\n`);
