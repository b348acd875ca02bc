// Anthropic's Messages API as Claude Code uses it (ANTHROPIC_BASE_URL): POST /v1/messages
// streamed as server-sent events (message_start, content_block_start/delta/stop with text or
// tool_use + input_json_delta, message_delta, message_stop), errors as {"type":"error",...}
// with the HTTP status, and /v1/messages/count_tokens.
import crypto from 'node:crypto';
import { callId } from './script.mjs';
import { chunks, estimateTokens, sleep } from './stream.mjs';

export const name = 'anthropic';

export function handles(method, url) {
  return method === 'POST' && /^\/v1\/messages(\/count_tokens)?(\?|$)/.test(url);
}

function blocks(content) {
  return typeof content === 'string' ? [{ type: 'text', text: content }] : content || [];
}

function textOf(content) {
  return blocks(content).map((b) => (b.type === 'text' ? b.text : '')).join('');
}

// A user message that is not the answer to tool calls: its text, without the
// <system-reminder> blocks the CLI adds; null for any other message.
function promptText(message) {
  if (message.role !== 'user') return null;
  const parts = blocks(message.content);
  if (parts.some((b) => b.type === 'tool_result')) return null;
  const texts = parts.filter((b) => b.type === 'text' && !b.text.startsWith('<system-reminder>'));
  return texts.length ? texts.map((b) => b.text).join('\n') : null;
}

export function parse(req, body) {
  const b = JSON.parse(body);
  const messages = b.messages || [];
  // The system prompt, and the environment Claude Code sends as a system-role message.
  const system = [textOf(b.system), ...messages.filter((m) => m.role === 'system')
    .map((m) => textOf(m.content))].join('\n');
  const convo = messages.filter((m) => m.role === 'user' || m.role === 'assistant');
  let at = -1;
  convo.forEach((m, i) => { if (promptText(m) !== null) at = i; });
  const prompts = convo.map(promptText).filter((t) => t !== null);
  const turns = convo.slice(at + 1).filter((m) => m.role === 'assistant').map((m) => ({
    callIds: blocks(m.content).filter((x) => x.type === 'tool_use').map((x) => x.id),
  }));
  // The results of the last tool calls, named after the calls.
  const lastAssistant = [...convo].reverse().find((m) => m.role === 'assistant');
  const names = Object.fromEntries(blocks(lastAssistant?.content)
    .filter((x) => x.type === 'tool_use').map((x) => [x.id, x.name]));
  const lastUser = convo.at(-1);
  const results = lastUser && lastUser !== convo[at] ? blocks(lastUser.content)
    .filter((x) => x.type === 'tool_result')
    .map((x) => ({ id: x.tool_use_id, tool: names[x.tool_use_id] || '', is_error: !!x.is_error,
      content: textOf(x.content) })) : [];
  const prompt = at >= 0 ? promptText(convo[at]) : '';
  const session = req.headers['x-claude-code-session-id'] || '';
  return {
    model: b.model || '',
    session,
    system,
    cwd: (/Primary working directory: (\S+)/.exec(system) || [])[1],
    tools: (b.tools || []).filter((t) => !t.defer_loading).map((t) => t.name),
    prompt,
    earlierPrompts: prompts.slice(0, -1).map((t) => t.slice(0, 300)),
    turns,
    results,
    lastResult: results.length ? results.at(-1).content : '',
    messageCount: convo.length,
    conversation: `${session}\u0000${prompt}`,
    bytes: body.length,
    auxiliary: /count_tokens/.test(req.url) ? 'count_tokens' : null,
  };
}

// The tool call an action step makes, in Claude Code's tools. An MCP tool that is deferred
// (not among the tools of the request) is loaded first with ToolSearch: the step's prelude.
export function toolCall(request, step) {
  const a = step.args;
  switch (step.action) {
    case 'read': return { tool: 'Read', input: { file_path: a } };
    case 'write': return { tool: 'Write', input: { file_path: a.path, content: a.content } };
    case 'edit':
      return { tool: 'Edit', input: { file_path: a.path, old_string: a.old, new_string: a.new } };
    case 'run': return { tool: 'Bash', input: { command: a, description: 'Run a command' } };
    case 'mcp': {
      const tool = `mcp__${a.server}__${a.tool}`;
      if (!request.tools.includes(tool) && !step.preludeDone && request.tools.includes('ToolSearch')) {
        return { tool: 'ToolSearch', input: { query: `select:${tool}`, max_results: 5 }, prelude: true };
      }
      return { tool, input: a.arguments || {} };
    }
    default: return { tool: a, input: step.input || {} };
  }
}

function usageOf(request, step) {
  const u = step.usage || {};
  return {
    input_tokens: u.input_tokens ?? estimateTokens(request.bytes),
    cache_creation_input_tokens: u.cache_creation_input_tokens ?? 0,
    cache_read_input_tokens: u.cache_read_input_tokens ?? 0,
    output_tokens: u.output_tokens ?? 20,
  };
}

function send(res, type, data) {
  res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
}

function start(res, request, step) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const usage = usageOf(request, step);
  send(res, 'message_start', { message: {
    id: `msg_${crypto.randomBytes(8).toString('hex')}`, type: 'message', role: 'assistant',
    model: request.model, content: [], stop_reason: null, stop_sequence: null,
    usage: { ...usage, output_tokens: 1 } } });
  return usage;
}

export async function answer(res, request, step) {
  const usage = start(res, request, step);
  let stop = 'end_turn';
  if (step.kind === 'text') {
    send(res, 'content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
    for (const piece of chunks(step.text, 3)) {
      await sleep(step.chunkDelayMs);
      send(res, 'content_block_delta', { index: 0, delta: { type: 'text_delta', text: piece } });
    }
  } else {
    stop = 'tool_use';
    send(res, 'content_block_start', { index: 0, content_block: {
      type: 'tool_use', id: callId('toolu_', step.index, step.prelude), name: step.tool, input: {} } });
    for (const piece of chunks(JSON.stringify(step.input), 2)) {
      send(res, 'content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: piece } });
    }
  }
  send(res, 'content_block_stop', { index: 0 });
  send(res, 'message_delta', { delta: { stop_reason: stop, stop_sequence: null },
    usage: { output_tokens: usage.output_tokens } });
  send(res, 'message_stop', {});
  res.end();
}

// The answer starts, then the connection drops in the middle of the text.
export function answerCut(res, request, step) {
  start(res, request, step);
  send(res, 'content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
  send(res, 'content_block_delta', { index: 0, delta: { type: 'text_delta', text: step.text } });
  res.socket.destroy();
}

const errorTypes = {
  400: 'invalid_request_error', 401: 'authentication_error', 402: 'billing_error',
  403: 'permission_error', 404: 'not_found_error', 413: 'request_too_large',
  429: 'rate_limit_error', 500: 'api_error', 529: 'overloaded_error',
};

export function answerError(res, step) {
  const headers = { 'content-type': 'application/json' };
  if (step.retryAfter !== undefined) headers['retry-after'] = String(step.retryAfter);
  res.writeHead(step.status, headers);
  res.end(JSON.stringify({ type: 'error', error: {
    type: step.type || errorTypes[step.status] || 'api_error', message: step.message || 'error' },
  request_id: `req_${crypto.randomBytes(8).toString('hex')}` }));
}

export function answerAuxiliary(res, request) {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ input_tokens: estimateTokens(request.bytes) }));
}
