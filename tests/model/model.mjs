// The scripted model: a loopback HTTP server that plays the model API for the real agent
// CLIs (Claude Code's Anthropic Messages API, Codex's OpenAI Responses API, Gemini's
// generateContent API), answering from a scenario file, and logging every request it
// serves so that tests can assert on what the CLI sent. Node's own modules only; no
// network beyond 127.0.0.1. The script language is described in README.md.
//
//   node tests/model/model.mjs --scenario FILE --log FILE --port-file FILE
//                              [--host ADDRESS --port PORT]
//
// It listens on 127.0.0.1 on a port the kernel picks, writes that port to --port-file
// (atomically) once it listens, and runs until killed. --host and --port choose another
// address (tests/compose/ runs it in a container, on 0.0.0.0, for the other containers). The scenario is read again for every
// request, so a test may change it between runs of the CLI.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { scriptFor } from './script.mjs';
import * as anthropic from './api_anthropic.mjs';
import * as openai from './api_openai.mjs';
import * as gemini from './api_gemini.mjs';

function parseArgs(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!['scenario', 'log', 'port-file', 'host', 'port'].includes(key) ||
        argv[i + 1] === undefined) {
      process.stderr.write(
        `model: usage: --scenario FILE --log FILE --port-file FILE [--host A --port P]\n`);
      process.exit(2);
    }
    opts[key] = argv[i + 1];
  }
  if (!opts.scenario || !opts.log || !opts['port-file']) {
    process.stderr.write(`model: --scenario, --log and --port-file are required\n`);
    process.exit(2);
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const apis = [anthropic, openai, gemini];
// Times an error step was served, by conversation and step (for `times`).
const served = new Map();
let requests = 0;

function log(entry) {
  fs.appendFileSync(opts.log, JSON.stringify(entry) + '\n');
}

function readScenario() {
  return JSON.parse(fs.readFileSync(opts.scenario, 'utf8'));
}

async function handle(req, res, body) {
  const api = apis.find((a) => a.handles(req.method, req.url));
  if (!api) {
    // Claude Code checks the base URL with a HEAD first; anything else is not an API call.
    res.writeHead(req.method === 'HEAD' ? 200 : 404, { 'content-type': 'application/json' });
    res.end(req.method === 'HEAD' ? '' : '{"error":"not a model API path"}');
    return;
  }
  const n = ++requests;
  let request;
  try {
    request = api.parse(req, body);
  } catch (err) {
    log({ n, api: api.name, path: req.url, status: 400, error: `unreadable request: ${err.message}` });
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: `unreadable request: ${err.message}` } }));
    return;
  }
  const entry = {
    n, api: api.name, path: req.url, model: request.model, session: request.session,
    tools: request.tools, prompt: request.prompt, earlier_prompts: request.earlierPrompts,
    results: request.results, messages: request.messageCount, system_chars: request.system.length,
  };
  if (request.auxiliary) {
    // A call of the CLI's own (token counting, routing): answered, logged, not scripted.
    entry.auxiliary = request.auxiliary;
    log(entry);
    api.answerAuxiliary(res, request);
    return;
  }
  let step;
  try {
    step = scriptFor(readScenario(), request, served);
  } catch (err) {
    step = { kind: 'error', status: 500, type: 'api_error', message: `scenario: ${err.message}` };
  }
  if (step.kind === 'action') {
    try {
      Object.assign(step, api.toolCall(request, step));
    } catch (err) {
      Object.assign(step, { kind: 'error', status: 500, type: 'api_error', message: `scenario: ${err.message}` });
    }
  }
  entry.rule = step.rule;
  entry.step = step.index;
  entry.served = step.kind === 'action' ? { action: step.action, tool: step.tool, input: step.input }
    : step.kind === 'text' ? { text: step.text }
    : { [step.kind]: step.status || true, message: step.message };
  log(entry);
  await new Promise((resolve) => setTimeout(resolve, step.delayMs));
  if (step.kind === 'error') api.answerError(res, step);
  else if (step.kind === 'cut') api.answerCut(res, request, step);
  else if (step.kind === 'stall') res.writeHead(200, { 'content-type': 'text/event-stream' });
  else await api.answer(res, request, step);
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    handle(req, res, Buffer.concat(chunks).toString('utf8')).catch((err) => {
      process.stderr.write(`model: ${err.stack}\n`);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
});
server.keepAliveTimeout = 60000;
server.listen(Number(opts.port || 0), opts.host || '127.0.0.1', () => {
  const file = opts['port-file'];
  const temp = path.join(path.dirname(file), `.${path.basename(file)}.tmp`);
  fs.writeFileSync(temp, `${server.address().port}\n`);
  fs.renameSync(temp, file);
});
