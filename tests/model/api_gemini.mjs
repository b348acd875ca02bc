// Google's Gemini API as the Gemini CLI uses it (GOOGLE_GEMINI_BASE_URL, with the
// gemini-api-key auth method chosen in its settings): POST
// /v1beta/models/<model>:streamGenerateContent?alt=sse streamed as server-sent events, each
// a GenerateContentResponse; :generateContent for the CLI's own side questions;
// :countTokens. Errors as {"error": {"code", "message", "status"}} with the HTTP status.
import { callId } from './script.mjs';
import { chunks, estimateTokens, sleep } from './stream.mjs';

export const name = 'gemini';

export function handles(method, url) {
  return method === 'POST' && /^\/v1(beta)?\/models\/[^:/]+:(streamGenerateContent|generateContent|countTokens)/.test(url);
}

function textOf(parts) {
  return (parts || []).map((p) => (typeof p.text === 'string' && !p.thought ? p.text : '')).join('');
}

// A user content that is neither tool results nor the CLI's session context: its text.
function promptText(content) {
  if (content.role !== 'user') return null;
  const parts = content.parts || [];
  if (parts.some((p) => p.functionResponse)) return null;
  const texts = parts.filter((p) => typeof p.text === 'string' && !p.text.startsWith('<session_context>'));
  return texts.length ? texts.map((p) => p.text).join('\n') : null;
}

export function parse(req, body) {
  const b = JSON.parse(body);
  const [, model, method] = /\/models\/([^:/]+):(\w+)/.exec(req.url);
  const contents = b.contents || [];
  let at = -1;
  contents.forEach((c, i) => { if (promptText(c) !== null) at = i; });
  const prompts = contents.map(promptText).filter((t) => t !== null);
  const after = contents.slice(at + 1);
  const turns = after.filter((c) => c.role === 'model').map((c) => ({
    callIds: (c.parts || []).filter((p) => p.functionCall).map((p) => p.functionCall.id || ''),
  }));
  const last = contents.at(-1);
  const results = last && last.role === 'user' ? (last.parts || []).filter((p) => p.functionResponse)
    .map((p) => {
      const response = p.functionResponse.response || {};
      return { id: p.functionResponse.id || '', tool: p.functionResponse.name || '',
        is_error: 'error' in response,
        content: typeof response.output === 'string' ? response.output
          : typeof response.error === 'string' ? response.error : JSON.stringify(response) };
    }) : [];
  const context = textOf(contents[0]?.parts);
  const prompt = at >= 0 ? promptText(contents[at]) : '';
  const system = textOf(b.systemInstruction?.parts);
  return {
    model,
    session: req.headers['x-gemini-session-id'] || '',
    system,
    cwd: (/Workspace Directories:\*\*\s*\n\s*- (\S+)/.exec(context) || [])[1],
    tools: (b.tools || []).flatMap((t) => (t.functionDeclarations || []).map((f) => f.name)),
    prompt,
    earlierPrompts: prompts.slice(0, -1).map((t) => t.slice(0, 300)),
    turns,
    results,
    lastResult: results.length ? results.at(-1).content : '',
    messageCount: contents.length,
    conversation: `${model}\u0000${prompts.join('\u0000')}`,
    bytes: body.length,
    auxiliary: method === 'countTokens' ? 'countTokens'
      : method === 'generateContent' ? 'generateContent' : null,
  };
}

// The tool call an action step makes, in the Gemini CLI's tools; an MCP tool by the name
// it is declared under (the CLI prefixes a tool only when two servers share its name).
export function toolCall(request, step) {
  const a = step.args;
  switch (step.action) {
    case 'read': return { tool: 'read_file', input: { file_path: a } };
    case 'write': return { tool: 'write_file', input: { file_path: a.path, content: a.content } };
    case 'edit':
      return { tool: 'replace', input: { file_path: a.path, instruction: 'Make the change asked for.',
        old_string: a.old, new_string: a.new } };
    case 'run': return { tool: 'run_shell_command', input: { command: a, description: 'Run a command' } };
    case 'mcp': {
      const tool = request.tools.find((t) => t === `mcp_${a.server}_${a.tool}`)
        || request.tools.find((t) => t.endsWith(a.tool) && t.includes(a.server))
        || request.tools.find((t) => t === a.tool) || a.tool;
      return { tool, input: a.arguments || {} };
    }
    default: return { tool: a, input: step.input || {} };
  }
}

function usageOf(request, step) {
  const u = step.usage || {};
  const input = (u.input_tokens ?? estimateTokens(request.bytes)) + (u.cache_read_input_tokens ?? 0);
  const output = u.output_tokens ?? 20;
  return { promptTokenCount: input, candidatesTokenCount: output,
    cachedContentTokenCount: u.cache_read_input_tokens ?? 0, totalTokenCount: input + output };
}

function send(res, data) {
  res.write(`data: ${JSON.stringify(data)}\r\n\r\n`);
}

function start(res) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
}

export async function answer(res, request, step) {
  start(res);
  const usage = usageOf(request, step);
  const candidate = (parts, done) => ({ candidates: [{ content: { role: 'model', parts }, index: 0,
    ...(done ? { finishReason: 'STOP' } : {}) }], usageMetadata: usage, modelVersion: request.model });
  if (step.kind === 'text') {
    const pieces = chunks(step.text, 3);
    for (const [i, piece] of pieces.entries()) {
      await sleep(step.chunkDelayMs);
      send(res, candidate([{ text: piece }], i === pieces.length - 1));
    }
  } else {
    send(res, candidate([{ functionCall: { id: callId('call_', step.index, step.prelude),
      name: step.tool, args: step.input } }], true));
  }
  res.end();
}

// The answer starts, then the connection drops in the middle of the text.
export function answerCut(res, request, step) {
  start(res);
  send(res, { candidates: [{ content: { role: 'model', parts: [{ text: step.text }] }, index: 0 }] });
  res.socket.destroy();
}

const statuses = {
  400: 'INVALID_ARGUMENT', 401: 'UNAUTHENTICATED', 403: 'PERMISSION_DENIED',
  429: 'RESOURCE_EXHAUSTED', 500: 'INTERNAL', 503: 'UNAVAILABLE',
};

export function answerError(res, step) {
  const headers = { 'content-type': 'application/json' };
  if (step.retryAfter !== undefined) headers['retry-after'] = String(step.retryAfter);
  res.writeHead(step.status, headers);
  res.end(JSON.stringify({ error: { code: step.status, message: step.message || 'error',
    status: step.type || statuses[step.status] || 'UNKNOWN' } }));
}

// The CLI's own calls: token counts, and the side questions it asks the model (which
// speaker is next, ...), answered so that the turn ends with the user.
export function answerAuxiliary(res, request) {
  res.writeHead(200, { 'content-type': 'application/json' });
  if (request.auxiliary === 'countTokens') {
    res.end(JSON.stringify({ totalTokens: estimateTokens(request.bytes) }));
    return;
  }
  res.end(JSON.stringify({ candidates: [{ content: { role: 'model', parts: [{
    text: JSON.stringify({ reasoning: 'The task is done.', next_speaker: 'user' }) }] },
  finishReason: 'STOP', index: 0 }], usageMetadata: { promptTokenCount: estimateTokens(request.bytes),
    candidatesTokenCount: 10, totalTokenCount: estimateTokens(request.bytes) + 10 } }));
}
