// OpenAI's Responses API as the Codex CLI uses it (a custom model provider whose base_url
// is the scripted model, wire_api "responses"): POST /v1/responses streamed as server-sent
// events (response.created, response.output_item.added/done, response.output_text.delta,
// response.completed with usage), errors as {"error": {...}} with the HTTP status.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { callId } from './script.mjs';
import { chunks, estimateTokens, sleep } from './stream.mjs';

export const name = 'openai';

export function handles(method, url) {
  return method === 'POST' && /^(\/v1)?\/responses(\?|$)/.test(url);
}

function textOf(content) {
  if (typeof content === 'string') return content;
  return (content || []).map((c) => c.text || '').join('');
}

// What Codex sends as user messages besides the prompt: its environment and instructions.
function isContext(text) {
  return /^\s*<(environment_context|user_instructions|INSTRUCTIONS)>/.test(text)
    || /^# AGENTS\.md/.test(text);
}

function promptText(item) {
  if (item.type !== 'message' || item.role !== 'user') return null;
  const text = textOf(item.content);
  return isContext(text) ? null : text;
}

const calls = ['function_call', 'custom_tool_call', 'local_shell_call'];
const outputs = ['function_call_output', 'custom_tool_call_output', 'local_shell_call_output'];

// Every tool's name, namespaces flattened (Codex lists its tools in an additional_tools item).
function toolNames(tools) {
  return (tools || []).flatMap((t) => (t.type === 'namespace' ? toolNames(t.tools) : [t.name]))
    .filter(Boolean);
}

export function parse(req, body) {
  const b = JSON.parse(body);
  const input = b.input || [];
  const system = [b.instructions || '', ...input
    .filter((i) => i.type === 'message' && (i.role === 'developer' || i.role === 'system'))
    .map((i) => textOf(i.content))].join('\n');
  let at = -1;
  input.forEach((item, i) => { if (promptText(item) !== null) at = i; });
  const prompts = input.map(promptText).filter((t) => t !== null);
  const after = input.slice(at + 1);
  const turns = after.filter((i) => calls.includes(i.type)
    || (i.type === 'message' && i.role === 'assistant')).map((i) => ({ callIds: i.call_id ? [i.call_id] : [] }));
  const names = Object.fromEntries(after.filter((i) => calls.includes(i.type))
    .map((i) => [i.call_id, i.name]));
  const lastCall = [...after].reverse().findIndex((i) => calls.includes(i.type));
  const results = lastCall < 0 ? [] : after.slice(after.length - lastCall)
    .filter((i) => outputs.includes(i.type))
    .map((i) => ({ id: i.call_id, tool: names[i.call_id] || '', is_error: false,
      content: typeof i.output === 'string' ? i.output
        : Array.isArray(i.output) ? i.output.map((c) => c.text || '').join('\n')
        : JSON.stringify(i.output) }));
  const context = input.map((i) => (i.type === 'message' ? textOf(i.content) : ''))
    .find((t) => t.includes('<cwd>')) || '';
  const prompt = at >= 0 ? promptText(input[at]) : '';
  const session = b.prompt_cache_key || b.client_metadata?.session_id || '';
  return {
    model: b.model || '',
    session,
    system,
    cwd: (/<cwd>([^<]*)<\/cwd>/.exec(context) || [])[1],
    tools: [...toolNames(b.tools), ...input.filter((i) => i.type === 'additional_tools')
      .flatMap((i) => toolNames(i.tools))],
    prompt,
    earlierPrompts: prompts.slice(0, -1).map((t) => t.slice(0, 300)),
    turns,
    results,
    lastResult: results.length ? results.at(-1).content : '',
    messageCount: input.filter((i) => i.type === 'message' || calls.includes(i.type)
      || outputs.includes(i.type)).length,
    conversation: `${session}\u0000${prompt}`,
    bytes: body.length,
    auxiliary: null,
  };
}

// An apply_patch that makes `path` hold `content`: Add File for a new file, else one hunk
// replacing every line (the patch format has no "write the whole file").
function patchFor(path, content) {
  const plus = (text) => text.split(/(?<=\n)/).filter((l) => l !== '')
    .map((l) => `+${l.replace(/\n$/, '')}\n`).join('');
  if (!fs.existsSync(path)) return `*** Begin Patch\n*** Add File: ${path}\n${plus(content)}*** End Patch\n`;
  const old = fs.readFileSync(path, 'utf8').split(/(?<=\n)/).filter((l) => l !== '')
    .map((l) => `-${l.replace(/\n$/, '')}\n`).join('');
  return `*** Begin Patch\n*** Update File: ${path}\n@@\n${old}${plus(content)}*** End Patch\n`;
}

// The tool call an action step makes, in Codex's tools: shell commands through exec_command,
// files through apply_patch, MCP tools from a script of its `exec` tool.
export function toolCall(request, step) {
  const a = step.args;
  switch (step.action) {
    case 'read': return { tool: 'exec_command', input: { cmd: `cat '${a}'` } };
    case 'write': return { tool: 'apply_patch', custom: true, input: patchFor(a.path, a.content) };
    case 'edit': {
      const now = fs.readFileSync(a.path, 'utf8');
      if (!now.includes(a.old)) throw new Error(`edit: '${a.old}' is not in ${a.path}`);
      return { tool: 'apply_patch', custom: true, input: patchFor(a.path, now.replace(a.old, a.new)) };
    }
    case 'run': return { tool: 'exec_command', input: { cmd: a } };
    case 'mcp': {
      const js = `const r = await tools.mcp__${a.server}__${a.tool}(${JSON.stringify(a.arguments || {})});\n`
        + 'text(JSON.stringify(r.structuredContent ?? r.content ?? r));\n';
      return { tool: 'exec', custom: true, input: js };
    }
    default: return { tool: a, custom: typeof step.input === 'string', input: step.input || {} };
  }
}

function usageOf(request, step) {
  const u = step.usage || {};
  const input = u.input_tokens ?? estimateTokens(request.bytes);
  const cached = u.cache_read_input_tokens ?? 0;
  const output = u.output_tokens ?? 20;
  return { input_tokens: input + cached, input_tokens_details: { cached_tokens: cached },
    output_tokens: output, output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + cached + output };
}

function send(res, type, data) {
  res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
}

function start(res) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const id = `resp_${crypto.randomBytes(8).toString('hex')}`;
  send(res, 'response.created', { response: { id, status: 'in_progress' } });
  return id;
}

export async function answer(res, request, step) {
  const id = start(res);
  let item;
  if (step.kind === 'text') {
    const itemId = `msg_${crypto.randomBytes(6).toString('hex')}`;
    send(res, 'response.output_item.added', { output_index: 0,
      item: { type: 'message', id: itemId, role: 'assistant', content: [] } });
    for (const piece of chunks(step.text, 3)) {
      await sleep(step.chunkDelayMs);
      send(res, 'response.output_text.delta', { item_id: itemId, output_index: 0, content_index: 0,
        delta: piece });
    }
    item = { type: 'message', id: itemId, role: 'assistant', status: 'completed',
      content: [{ type: 'output_text', text: step.text, annotations: [] }] };
  } else {
    const call = callId('call_', step.index, step.prelude);
    item = step.custom
      ? { type: 'custom_tool_call', id: `ctc_${call}`, call_id: call, name: step.tool, input: step.input }
      : { type: 'function_call', id: `fc_${call}`, call_id: call, name: step.tool,
        arguments: JSON.stringify(step.input) };
    send(res, 'response.output_item.added', { output_index: 0, item });
  }
  send(res, 'response.output_item.done', { output_index: 0, item });
  send(res, 'response.completed', { response: { id, status: 'completed',
    usage: usageOf(request, step) } });
  res.end();
}

// The answer starts, then the connection drops in the middle of the text.
export function answerCut(res, request, step) {
  start(res);
  send(res, 'response.output_text.delta', { item_id: 'msg_cut', output_index: 0,
    content_index: 0, delta: step.text });
  res.socket.destroy();
}

const errorTypes = {
  400: 'invalid_request_error', 401: 'invalid_api_key', 403: 'insufficient_quota',
  429: 'rate_limit_exceeded', 500: 'server_error', 503: 'server_is_overloaded',
};

export function answerError(res, step) {
  const headers = { 'content-type': 'application/json' };
  if (step.retryAfter !== undefined) headers['retry-after'] = String(step.retryAfter);
  res.writeHead(step.status, headers);
  res.end(JSON.stringify({ error: { message: step.message || 'error',
    type: step.type || errorTypes[step.status] || 'api_error', code: step.code ?? null, param: null } }));
}

export function answerAuxiliary(res) {
  res.writeHead(404, { 'content-type': 'application/json' });
  res.end('{"error":{"message":"no such endpoint"}}');
}
