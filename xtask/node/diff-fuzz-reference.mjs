#!/usr/bin/env node
// Batch driver for `cargo xtask diff-fuzz`: runs many scenarios through the unmodified
// reference runner (`run.mjs`) in one Node process, so the reference packages load once.
//
//   node diff-fuzz-reference.mjs /path/to/run.mjs     then one scenario path per stdin line
//
// For each path it answers one JSON line on stdout: {"code": 0|2, "stdout": TRACE, "stderr": TEXT}.
// run.mjs reads its scenario path from process.argv[2] when its module is evaluated and finishes
// with exactly one process.stdout.write (the trace) or process.stderr.write + process.exit(2).
// Each scenario imports a fresh copy of the module (a distinct query string), with argv, stdout,
// stderr and exit captured until that scenario has finished; scenarios run one at a time.
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const runUrl = pathToFileURL(process.argv[2]).href;
const writeOut = process.stdout.write.bind(process.stdout);
const realExit = process.exit.bind(process);

let current = null;

process.stdout.write = (chunk) => {
	if (current === null) return writeOut(chunk);
	current.stdout += String(chunk);
	current.finish(0);
	return true;
};
process.stderr.write = (chunk) => {
	if (current !== null) current.stderr += String(chunk);
	return true;
};
process.exit = (code) => {
	if (current === null) realExit(code);
	else current.finish(code ?? 0);
};

let count = 0;
const input = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of input) {
	const path = line.trim();
	if (path === "") continue;
	count++;
	const outcome = await new Promise((resolve) => {
		const run = { stdout: "", stderr: "", done: false };
		run.finish = (code) => {
			if (run.done) return;
			run.done = true;
			resolve({ code, stdout: run.stdout, stderr: run.stderr });
		};
		current = run;
		process.argv[2] = path;
		import(`${runUrl}?scenario=${count}`).catch((error) => {
			run.stderr += `import failed: ${error?.stack ?? error}`;
			run.finish(2);
		});
	});
	current = null;
	writeOut(`${JSON.stringify(outcome)}\n`);
}
