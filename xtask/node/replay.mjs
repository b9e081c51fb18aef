#!/usr/bin/env node
// Reference replay oracle for pi-providers.
// (Vendored from the shared oracle, `../shared/providers/reference/replay.mjs`, for
// `cargo xtask reference-update`; it runs against the pi-ai pinned in package.json here.)
//
//   node replay.mjs CASE.json
//
// Starts a loopback HTTP server that answers the adapter's request with the case's recorded
// response (status, headers, body bytes, optionally split into chunks), runs the real
// @earendil-works/pi-ai adapter for the case's `api` against it, and prints a JSON Lines trace:
//
//   {"kind":"request", "method", "path", "query", "headers": {...subset...}, "body": {...}}   (one per request received)
//   {"kind":"event", "event": {...}}                                                          (one per AssistantMessageEvent)
//   {"kind":"result", "message": {...}}                                                       (stream.result())
//
// Normalization: every `timestamp` -> 0, every `durationMs` dropped, Gemini tool-call ids that
// pi-ai synthesizes as `<name>_<Date.now()>_<n>` -> `<name>_0_<n>`, the server's real base URL ->
// "{{BASE_URL}}", object keys sorted. Each event is snapshotted (deep copy) at the moment the
// adapter pushes it, so `partial` shows the message exactly as it was when the event fired.
// See the shared oracle's README (`../shared/providers/README.md`) for the full contract.

import { readFileSync } from "node:fs";
import http from "node:http";
import { createModels, createProvider, AssistantMessageEventStream } from "@earendil-works/pi-ai";
import { openAICompletionsApi } from "@earendil-works/pi-ai/api/openai-completions.lazy";
import { anthropicMessagesApi } from "@earendil-works/pi-ai/api/anthropic-messages.lazy";
import { openAIResponsesApi } from "@earendil-works/pi-ai/api/openai-responses.lazy";
import { googleGenerativeAIApi } from "@earendil-works/pi-ai/api/google-generative-ai.lazy";
import { bedrockConverseStreamApi } from "@earendil-works/pi-ai/api/bedrock-converse-stream.lazy";
import { azureOpenAIResponsesApi } from "@earendil-works/pi-ai/api/azure-openai-responses.lazy";
import { mistralConversationsApi } from "@earendil-works/pi-ai/api/mistral-conversations.lazy";
import { googleVertexApi } from "@earendil-works/pi-ai/api/google-vertex.lazy";
import { openAICodexResponsesApi } from "@earendil-works/pi-ai/api/openai-codex-responses.lazy";
import { piMessagesApi } from "@earendil-works/pi-ai/api/pi-messages.lazy";
import { typesafeSystemOneApi } from "@earendil-works/pi-ai/api/typesafe-system-one.lazy";
import { cloudflareWorkersAISystemOneApi } from "@earendil-works/pi-ai/api/cloudflare-workers-ai-system-one.lazy";
import { llamaCppClassifyApi } from "@earendil-works/pi-ai/api/llama-cpp-classify.lazy";
import { openAIDecisionsApi } from "@earendil-works/pi-ai/api/openai-decisions.lazy";
import { piDecisionApi } from "@earendil-works/pi-ai/api/pi-decision.lazy";
import { openrouterImagesApi } from "@earendil-works/pi-ai/api/openrouter-images.lazy";

const API_FACTORIES = {
	"openai-completions": openAICompletionsApi,
	"anthropic-messages": anthropicMessagesApi,
	"openai-responses": openAIResponsesApi,
	"google-generative-ai": googleGenerativeAIApi,
	"bedrock-converse-stream": bedrockConverseStreamApi,
	"azure-openai-responses": azureOpenAIResponsesApi,
	"mistral-conversations": mistralConversationsApi,
	"google-vertex": googleVertexApi,
	"openai-codex-responses": openAICodexResponsesApi,
	"pi-messages": piMessagesApi,
};
// One-shot APIs: `entry: "classify"` (classifier models) and `entry: "generateImages"` (image models).
const CLASSIFIER_FACTORIES = {
	"typesafe-system-one": typesafeSystemOneApi,
	"cloudflare-workers-ai-system-one": cloudflareWorkersAISystemOneApi,
	"llama-cpp-classify": llamaCppClassifyApi,
	"openai-decisions": openAIDecisionsApi,
	"pi-decision": piDecisionApi,
};
const IMAGE_FACTORIES = {
	"openrouter-images": openrouterImagesApi,
};
const ENTRIES = ["streamSimple", "stream", "classify", "generateImages"];

const DEFAULT_API_KEY = "test-api-key-0000";
const DEFAULT_TIMEOUT_MS = 5000;
const DEFAULT_CHUNK_DELAY_MS = 3;
const BASE_URL_PLACEHOLDER = "{{BASE_URL}}";

// Keep the environment from steering requests elsewhere or changing adapter defaults.
for (const key of Object.keys(process.env)) {
	if (/^(https?_proxy|all_proxy|no_proxy)$/i.test(key) || key === "PI_CACHE_RETENTION") delete process.env[key];
}

function usage() {
	process.stderr.write("usage: node replay.mjs CASE.json\n");
	process.exit(2);
}

// ---------------------------------------------------------------------------------------------
// Event capture: snapshot each event when the adapter pushes it (the `partial` message is a live
// object that keeps changing afterwards). Models.streamSimple wraps the adapter's stream in
// forwarding streams that push the same event objects again; only the first push counts.
// ---------------------------------------------------------------------------------------------
const snapshots = new WeakMap();
const originalPush = AssistantMessageEventStream.prototype.push;
AssistantMessageEventStream.prototype.push = function push(event) {
	if (!this.done && event && typeof event === "object" && !snapshots.has(event)) {
		snapshots.set(event, JSON.parse(JSON.stringify(event)));
	}
	return originalPush.call(this, event);
};

// ---------------------------------------------------------------------------------------------
// Normalization
// ---------------------------------------------------------------------------------------------
function normalize(value, ctx) {
	if (Array.isArray(value)) return value.map((v) => normalize(v, ctx));
	if (value && typeof value === "object") {
		const out = {};
		for (const key of Object.keys(value).sort()) {
			if (key === "durationMs") continue;
			let v = value[key];
			if (key === "timestamp" && typeof v === "number") v = 0;
			else if (
				key === "id" &&
				(ctx.api === "google-generative-ai" || ctx.api === "google-vertex") &&
				value.type === "toolCall" &&
				typeof v === "string"
			) {
				v = normalizeGoogleToolCallId(v);
			}
			out[key] = normalize(v, ctx);
		}
		return out;
	}
	if (typeof value === "string" && ctx.baseUrl && value.includes(ctx.baseUrl)) {
		return value.split(ctx.baseUrl).join(BASE_URL_PLACEHOLDER);
	}
	return value;
}

// pi-ai's google adapter names tool calls that arrive without an id `${name}_${Date.now()}_${counter}`
// (counter is per process, starting at 1; a call without a name gets `undefined_<ms>_<n>` and name "").
// The clock part is normalized like every timestamp: `<prefix>_<13 digits>_<n>` -> `<prefix>_0_<n>`.
function normalizeGoogleToolCallId(id) {
	const m = /^(.*)_\d{13}_(\d+)$/s.exec(id);
	return m ? `${m[1]}_0_${m[2]}` : id;
}

function stableStringify(value) {
	// normalize() already sorted keys; JSON.stringify preserves insertion order.
	return JSON.stringify(value);
}

// ---------------------------------------------------------------------------------------------
// Loopback server
// ---------------------------------------------------------------------------------------------
function bodyChunks(bodyBytes, splitPoints) {
	if (!splitPoints || splitPoints.length === 0) return [bodyBytes];
	const points = [...new Set(splitPoints)].filter((p) => p > 0 && p < bodyBytes.length).sort((a, b) => a - b);
	const chunks = [];
	let start = 0;
	for (const p of points) {
		chunks.push(bodyBytes.subarray(start, p));
		start = p;
	}
	chunks.push(bodyBytes.subarray(start));
	return chunks;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function startServer(caseData, requests) {
	// `responses` (an array) answers the n-th request with its n-th entry, for calls that make several
	// requests (llama.cpp classification, sign-in flows); `response` is the one answer of a single-request case.
	const responses = Array.isArray(caseData.responses) ? caseData.responses : [caseData.response];
	const server = http.createServer((req, res) => {
		const parts = [];
		req.on("data", (d) => parts.push(d));
		req.on("end", async () => {
			const raw = Buffer.concat(parts).toString("utf8");
			requests.push({ method: req.method, url: req.url, headers: req.headers, raw });
			if (process.env.REPLAY_DUMP_HEADERS) {
				// Debug aid: the full request headers (not part of the trace).
				process.stderr.write(`${req.method} ${req.url}\n${JSON.stringify(req.headers, null, 2)}\n`);
			}
			if (requests.length > responses.length) {
				// Cases are single-attempt; an extra request is a bug in the options (retries).
				res.writeHead(599, { "content-type": "text/plain" });
				res.end("replay: unexpected extra request");
				return;
			}
			const response = responses[requests.length - 1];
			// `body_base64` carries binary bodies (Bedrock's event stream); `body` is UTF-8 text.
			const bodyBytes =
				typeof response.body_base64 === "string"
					? Buffer.from(response.body_base64, "base64")
					: Buffer.from(response.body ?? "", "utf8");
			const chunks = bodyChunks(bodyBytes, response.chunks);
			// REPLAY_CHUNK_DELAY_MS overrides the case's delay (used to check that traces do not depend on timing).
			const envDelay = process.env.REPLAY_CHUNK_DELAY_MS;
			const delayMs =
				envDelay !== undefined && envDelay !== "" ? Number(envDelay) : (response.chunk_delay_ms ?? DEFAULT_CHUNK_DELAY_MS);
			try {
				res.socket?.setNoDelay(true);
				const headers = { ...(response.headers ?? {}) };
				const streamed = Array.isArray(response.chunks) && response.chunks.length > 0;
				if (!streamed && !Object.keys(headers).some((h) => h.toLowerCase() === "content-length")) {
					headers["content-length"] = String(bodyBytes.length);
				}
				res.writeHead(response.status ?? 200, headers);
				res.flushHeaders();
				for (let i = 0; i < chunks.length; i++) {
					if (i > 0 && delayMs > 0) await sleep(delayMs);
					if (chunks[i].length > 0) res.write(chunks[i]);
				}
				if (response.disconnect === true) {
					// Drop the connection without terminating the chunked body.
					await sleep(delayMs);
					res.socket?.destroy();
				} else {
					res.end();
				}
			} catch (error) {
				process.stderr.write(`replay: server error: ${error?.stack ?? error}\n`);
				res.destroy();
			}
		});
	});
	return new Promise((resolve) => {
		server.listen(0, "127.0.0.1", () => resolve(server));
	});
}

function requestRecord(req) {
	const url = new URL(req.url, "http://127.0.0.1");
	const query = {};
	for (const [k, v] of url.searchParams.entries()) query[k] = v;
	const present = (name) => typeof req.headers[name] === "string" && req.headers[name].length > 0;
	let body;
	try {
		body = req.raw.length > 0 ? JSON.parse(req.raw) : null;
	} catch {
		body = { __unparsed__: req.raw };
	}
	return {
		kind: "request",
		method: req.method,
		path: url.pathname,
		query,
		headers: {
			"content-type": req.headers["content-type"] ?? null,
			authorization: present("authorization"),
			"x-api-key": present("x-api-key"),
			"x-goog-api-key": present("x-goog-api-key"),
		},
		body,
	};
}

// ---------------------------------------------------------------------------------------------
// Case -> pi-ai call
// ---------------------------------------------------------------------------------------------
function substituteBaseUrl(value, baseUrl) {
	if (typeof value === "string") return value.split(BASE_URL_PLACEHOLDER).join(baseUrl);
	if (Array.isArray(value)) return value.map((v) => substituteBaseUrl(v, baseUrl));
	if (value && typeof value === "object") {
		const out = {};
		for (const [k, v] of Object.entries(value)) out[k] = substituteBaseUrl(v, baseUrl);
		return out;
	}
	return value;
}

const MODEL_DEFAULTS = {
	input: ["text"],
	reasoning: false,
	cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
	contextWindow: 128000,
	maxTokens: 8192,
};

async function main() {
	const casePath = process.argv[2];
	if (!casePath || process.argv.length > 3) usage();
	const caseData = JSON.parse(readFileSync(casePath, "utf8"));
	const api = caseData.api;
	const entry = caseData.entry ?? "streamSimple";
	if (!ENTRIES.includes(entry)) throw new Error(`unknown entry: ${entry} (one of ${ENTRIES.join(", ")})`);
	const table = entry === "classify" ? CLASSIFIER_FACTORIES : entry === "generateImages" ? IMAGE_FACTORIES : API_FACTORIES;
	const factory = table[api];
	if (!factory) throw new Error(`unknown api for ${entry}: ${api}`);

	// `env`: variables the adapter reads (credentials, Azure/Vertex settings), for this process only;
	// they are also passed as `options.env`.
	const caseEnv = caseData.env ?? {};

	const requests = [];
	const server = await startServer(caseData, requests);
	const { port } = server.address();
	const baseUrl = `http://127.0.0.1:${port}`;

	const model = {
		...MODEL_DEFAULTS,
		name: caseData.model.id,
		...substituteBaseUrl(caseData.model, baseUrl),
		api,
	};
	const apiKey = caseData.apiKey ?? DEFAULT_API_KEY;
	const models = createModels();
	models.setProvider(
		createProvider({
			id: model.provider,
			auth: {
				apiKey: {
					name: "replay key",
					resolve: async () => ({ auth: { apiKey }, source: "replay" }),
				},
			},
			models: [model],
			...(entry === "classify"
				? { classifiers: { [api]: factory() } }
				: entry === "generateImages"
					? { images: { [api]: factory() } }
					: { api: { [api]: factory() } }),
		}),
	);

	const context = caseData.context ?? { messages: [] };
	const options = {
		...(caseData.options ?? {}),
		apiKey,
		maxRetries: 0,
		timeoutMs: caseData.options?.timeoutMs ?? DEFAULT_TIMEOUT_MS,
		...(caseData.env ? { env: substituteBaseUrl(caseEnv, baseUrl) } : {}),
	};
	for (const [k, v] of Object.entries(caseEnv)) process.env[k] = substituteBaseUrl(String(v), baseUrl);

	const eventLines = [];
	let resultMessage;
	let thrown;
	try {
		if (entry === "classify" || entry === "generateImages") {
			// One-shot calls resolve to a result object (ClassifierResult / AssistantImages) and never reject.
			resultMessage = JSON.parse(JSON.stringify(await models[entry](model, context, options)));
		} else {
			// `stream` takes the API's own options (e.g. Anthropic's toolChoice {type:"tool",name}); `streamSimple`
			// the provider-neutral SimpleStreamOptions.
			const stream = models[entry](model, context, options);
			for await (const event of stream) {
				eventLines.push({ kind: "event", event: snapshots.get(event) ?? JSON.parse(JSON.stringify(event)) });
			}
			resultMessage = JSON.parse(JSON.stringify(await stream.result()));
		}
	} catch (error) {
		thrown = error;
	}
	await new Promise((resolve) => {
		server.close(resolve);
		server.closeAllConnections?.();
	});

	const ctx = { api, baseUrl };
	const lines = [];
	for (const req of requests) lines.push(normalize(requestRecord(req), ctx));
	for (const line of eventLines) lines.push(normalize(line, ctx));
	if (thrown) {
		lines.push(normalize({ kind: "thrown", message: thrown instanceof Error ? thrown.message : String(thrown) }, ctx));
	} else {
		lines.push(normalize({ kind: "result", message: resultMessage ?? null }, ctx));
	}
	process.stdout.write(lines.map(stableStringify).join("\n") + "\n");
}

main().catch((error) => {
	process.stderr.write(`replay: ${error?.stack ?? error}\n`);
	process.exit(1);
});
