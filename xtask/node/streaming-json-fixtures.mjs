// Records the reference behaviour of pi-ai's streaming JSON utilities for the Rust port's tests.
//
// Output: crates/pi-json/tests/fixtures/streaming-json.json (relative to the repository root), or
// the path given as the first argument.
//
// For every document and every piece size 1..8 the document is cut into pieces (at multiples of
// the size in UTF-16 units; a cut inside a surrogate pair moves one unit later and an empty piece
// is dropped, the rule of `pi_types::json::utf16_chunks`). Each piece is fed to a
// ToolCallArgumentsStream and to a StreamingJsonParser, and the step records:
//   p: the piece
//   a: the partial arguments, only when append() returned a new object (absent: unchanged; the
//      first step always records them, as the initial object is not observable)
//   s: the parser snapshot, only when snapshot() returned a new value (absent: unchanged;
//      {"$undefined": true} stands for undefined); "new" is JavaScript's !==, so a primitive
//      snapshot equal to the previous one is unchanged
//   c: the parser's changes (absent when empty; not recorded for documents with surrogate escapes)
// and the run ends with finish(). Values whose JSON text is longer than 256 characters are
// replaced by {"$hash": fnv1a64 of the UTF-8 JSON text, "$length": UTF-16 length} to keep the file
// small (the open 1,000-element array would otherwise take tens of megabytes).
//
// Strings are made well-formed before recording, because serde_json cannot read lone surrogates:
// in streaming values a lone high surrogate at the end of a string is dropped (the Rust parser
// holds an incomplete surrogate pair back), then any other lone surrogate becomes U+FFFD.
import { writeFileSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  StreamingJsonParser,
  ToolCallArgumentsStream,
  parseStreamingJson,
  parseToolCallArguments,
  repairJson,
} from "@earendil-works/pi-ai";

const here = dirname(fileURLToPath(import.meta.url));
const output = resolve(process.argv[2] ?? resolve(here, "../../crates/pi-json/tests/fixtures/streaming-json.json"));

function chunks(text, units) {
  if (text === "") return [""];
  const pieces = [];
  let start = 0;
  for (let cut = units; start < text.length; cut += units) {
    let end = Math.min(cut, text.length);
    const code = text.charCodeAt(end - 1);
    if (end < text.length && code >= 0xd800 && code < 0xdc00) end += 1;
    if (end > start) pieces.push(text.slice(start, end));
    start = Math.max(start, end);
    if (cut < start) cut = start - (start % units);
  }
  return pieces;
}

function wellFormed(value, dropTrailingHigh) {
  if (typeof value === "string") {
    let text = value;
    const last = text.charCodeAt(text.length - 1);
    if (dropTrailingHigh && last >= 0xd800 && last < 0xdc00) text = text.slice(0, -1);
    return text.toWellFormed();
  }
  if (Array.isArray(value)) return value.map((item) => wellFormed(item, dropTrailingHigh));
  if (value !== null && typeof value === "object") {
    const out = {};
    for (const [key, member] of Object.entries(value)) {
      Object.defineProperty(out, wellFormed(key, false), {
        value: wellFormed(member, dropTrailingHigh),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
  return value;
}

function fnv1a64(text) {
  let hash = 0xcbf29ce484222325n;
  for (const byte of Buffer.from(text, "utf8")) {
    hash ^= BigInt(byte);
    hash = (hash * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return hash.toString(16).padStart(16, "0");
}

function compact(value) {
  const text = JSON.stringify(value);
  if (text !== undefined && text.length > 256) return { $hash: fnv1a64(text), $length: text.length };
  return value;
}

const streamValue = (value) => compact(wellFormed(value, true));

function bigArray(count) {
  return `{"items": [${Array.from({ length: count }, (_, i) => (i % 97 === 3 ? `"s${i}"` : String(i % 10))).join(",")}], "done": true}`;
}

function deep(levels) {
  let text = '"leaf"';
  for (let i = levels - 1; i >= 0; i--) text = i % 2 === 0 ? `{"k${i}": ${text}, "n": ${i}}` : `[${i}, ${text}]`;
  return text;
}

const documents = [
  '{"path": "/tmp/a.txt", "content": "hello\\nworld", "count": 3}',
  '{"a": {"b": [1, 2, {"c": "d"}], "e": []}, "f": {}}',
  '{"s": "quote \\" backslash \\\\ slash \\/ e\\u00e9 smile \\ud83d\\ude00 raw é😀 tab\\t"}',
  '{"n": [0, -0, 1, -1, 1.5, -12.25e3, 1E+2, 3e-7, 123456789012345678901234, 0.1, 1e400]}',
  '{"t": true, "f": false, "n": null, "x": [true, false, null]}',
  '  \n\t{ "spaced" :\r\n [ 1 , 2 ] ,  "k"  :  "v" }  \n',
  '{"a": 1 "b": 2, "c" 3, "d": tru, "e": nul, "f": -, "g": 01, "h": 1.}',
  '{"bad": "\\d\\x\\u12zz\\", "ctl": "a\tb\u0001c", "after": 1}',
  '{"a": [1, 2}, "b": ]3, "c": {"d": 1]}',
  '{"x": 1} trailing garbage {"y": 2}',
  '[1, 2, {"a": "b"}]',
  '"just a string"',
  '12345',
  'nonsense {"late": true}',
  '{"dup": 1, "dup": "two", "dup": [3], "dup": {"four": 4}}',
  '{"0": "zero", "10": "ten", "2": "two", "b": 1, "a": 2, "01": 3, "__proto__": {"p": 1}}',
  '{"long": ' + '1234567890'.repeat(7) + ', "after": 1.' + '5'.repeat(70) + 'e-5, "word": ' + 'truex'.repeat(14) + '}',
  deep(40),
  '{"deep": ' + '['.repeat(36) + '"x", {"k": "v"}' + ']'.repeat(36) + ', "after": "yes"}',
  '{"unclosed": [1, 2, {"a": "b',
  '{"esc": "\\u00',
  '{"emoji": "\\ud83d\\ude00\\ud83d\\ude01", "mixed": "a\\ud83dz"}',
  '{"open": "text ending in backslash \\',
  '}]{"a": [1e, 2E+, -1.5e-, 0.5]}',
  '{"keys": {"": 1, "a b": 2, "\\u0041": 3, "é": 4}}',
  bigArray(1000),
];

function runStream(document, size) {
  const pieces = chunks(document, size);
  const stream = new ToolCallArgumentsStream();
  const parser = new StreamingJsonParser();
  const recordChanges = !/\\u[dD][89abAB]/.test(document);
  let lastArguments;
  let lastSnapshot;
  const steps = pieces.map((piece) => {
    const step = { p: piece };
    const args = stream.append(piece);
    if (args !== lastArguments) step.a = streamValue(args);
    lastArguments = args;
    const changes = parser.append(piece);
    const snapshot = parser.snapshot();
    if (snapshot !== lastSnapshot) step.s = snapshot === undefined ? { $undefined: true } : streamValue(snapshot);
    lastSnapshot = snapshot;
    if (recordChanges && changes.length > 0) {
      step.c = changes.map((change) =>
        change.kind === "set"
          ? { set: change.path, value: streamValue(change.value) }
          : { append: change.path, text: change.text },
      );
    }
    return step;
  });
  const finished = stream.finish();
  return {
    size,
    steps,
    finish: { arguments: compact(wellFormed(finished.arguments, false)), argumentsError: finished.argumentsError ?? null },
  };
}

const streams = documents.map((document) => ({
  document,
  runs: [1, 2, 3, 4, 5, 6, 7, 8].map((size) => runStream(document, size)),
}));

// replace(): continuing text, identical text, and text that starts over.
function runReplace(texts) {
  const stream = new ToolCallArgumentsStream();
  return texts.map((text) => {
    const { delta, arguments: args } = stream.replace(text);
    return { text, delta: delta ?? null, arguments: streamValue(args) };
  });
}
const replaces = [
  runReplace(['{"a": "x', '{"a": "xy', '{"a": "xy', '{"b": 1', '{"b": 12}']),
  runReplace(["", '{"k": [1', '{"k": [1, 2]}']),
];

const parseInputs = [];
const prefixSources = [
  '{"path": "/tmp/a.txt", "content": "line\\nnext \\"q\\" \\u00e9", "n": -1.5e3, "ok": true, "none": null}',
  '[1, {"a": [true, false, null]}, "s", -0.25, 1e5]',
  '{"bad": "C:\\dir\\file", "ctl": "a\tb", "u": "\\u12"}',
  '{"a": 1 "b": 2, "c" 3}',
  '{"inf": Infinity, "nan": NaN, "ninf": -Infinity}',
];
for (const source of prefixSources) for (let i = 0; i <= source.length; i++) parseInputs.push(source.slice(0, i));
parseInputs.push(
  "",
  "   ",
  "\ufeff",
  "null",
  "[]",
  "42",
  '"str"',
  "{}",
  "{a}",
  '{"a":1,}',
  "[1,]",
  "x",
  "undefined",
  "NaN",
  "abcdefghijklmnopqrstuvwxyz",
  '{"aaaaaaaaaaaaaaaa": xyz}',
  '{"k":[1,2,3,4,5,6,7,8,9,10,11,12] x}',
  '{"a":"😀" 😀}',
  "[1,2,3,4,5,6,7,8,9,10,11,😀]",
  '{"a": "\\ud83d"}',
  '{"a": "\\ud83d\\ude00"}',
  '{"a": 1e400}',
  '{"a": 1} {"b": 2}',
  '{"__proto__": {"x": 1}, "y": 2}',
  '{"__proto__": {"x": 1}, "y": ',
  '{"a": "\u0000\u001f\u007f"}',
  '{"a": "tab\there"',
  '{"a": [1, 2, 3e',
  '{"a": "x\\',
  '{"a": "x\\\\',
  '{"a": -',
  '["a", 1.',
  '{"a": tr',
  '{"a": {"b": {"c": [1, {"d": "e',
  '  {"trimmed": 1}  ',
  '\u00a0{"nbsp": 1}',
  '{"a": 01}',
  '-',
  '{1: 2}',
  '{"a":1,"b" 1}',
  '{"a":1,"b""c"}',
);

const parses = parseInputs.map((input) => {
  const streaming = parseStreamingJson(input);
  const tool = parseToolCallArguments(input);
  return {
    input,
    streaming: wellFormed(streaming === undefined ? null : streaming, false),
    arguments: wellFormed(tool.arguments, false),
    argumentsError: tool.argumentsError === undefined ? null : wellFormed(tool.argumentsError, false),
    repaired: wellFormed(repairJson(input), false),
  };
});
parses.push({ input: null, streaming: parseStreamingJson(undefined), arguments: parseToolCallArguments(undefined).arguments, argumentsError: null, repaired: null });

const fixture = {
  generator: "xtask/node/streaming-json-fixtures.mjs",
  reference: "@earendil-works/pi-ai@1.6.0",
  streams,
  replaces,
  parses,
};
mkdirSync(dirname(output), { recursive: true });
const text = JSON.stringify(fixture);
writeFileSync(output, text + "\n");
console.log(`wrote ${output} (${(text.length / 1024).toFixed(0)} KiB, ${streams.length} documents, ${parses.length} parse inputs)`);
