// The script language of the scripted model (README.md): which rule answers a request,
// which of its steps comes next, and the {{templates}} in a step.
//
// Every API module turns its request into the same shape (see `normalised` in README.md);
// this module knows nothing of HTTP or of any API's wire format.
import fs from 'node:fs';
import crypto from 'node:crypto';

// The step a tool call served, written into its id, so that the next request (which carries
// the call back with its result) says how far the conversation is: "cs3" = step 3, "cs3p" =
// the prelude of step 3 (e.g. Claude Code's ToolSearch before a deferred MCP tool).
export function callId(prefix, index, prelude) {
  return `${prefix}cs${index}${prelude ? 'p' : ''}_${crypto.randomBytes(6).toString('hex')}`;
}

function parseCallId(id) {
  const m = /cs(\d+)(p?)_[0-9a-f]+$/.exec(id || '');
  return m ? { index: Number(m[1]), prelude: m[2] === 'p' } : null;
}

function matches(pattern, text) {
  if (pattern === undefined) return {};
  const m = new RegExp(pattern, 'm').exec(text || '');
  return m ? { ...(m.groups || {}) } : null;
}

// Keeps ours, theirs or both (ours then theirs) of each conflict block; a diff3 base
// section is dropped.
function resolve(text, mode) {
  if (!['ours', 'theirs', 'both'].includes(mode)) throw new Error(`resolve: ${mode}?`);
  const out = [];
  let part = null; // null outside a block, else 'ours' | 'base' | 'theirs'
  for (const line of text.split(/(?<=\n)/)) {
    if (part === null && line.startsWith('<<<<<<< ')) part = 'ours';
    else if (part === 'ours' && line.startsWith('||||||| ')) part = 'base';
    else if ((part === 'ours' || part === 'base') && line.startsWith('=======')) part = 'theirs';
    else if (part === 'theirs' && line.startsWith('>>>>>>> ')) part = null;
    else if (part === null || (part === 'ours' && mode !== 'theirs')
             || (part === 'theirs' && mode !== 'ours')) out.push(line);
  }
  if (part !== null) throw new Error('resolve: an unterminated conflict block');
  return out.join('');
}

const filters = {
  read: (value) => fs.readFileSync(value, 'utf8'),
  resolve: (value, mode) => resolve(value, mode),
  trim: (value) => value.trim(),
  json: (value) => JSON.stringify(value),
};

// {{name|filter arg|...}} in one string. A string that is one template alone keeps the
// value's type (a filter's result is a string anyway).
function expandString(text, vars) {
  const one = (expr) => {
    const [head, ...rest] = expr.split('|').map((s) => s.trim());
    if (!(head in vars)) throw new Error(`template: no variable '${head}'`);
    let value = vars[head];
    for (const call of rest) {
      const [name, ...args] = call.split(/\s+/);
      if (!filters[name]) throw new Error(`template: no filter '${name}'`);
      value = filters[name](String(value), ...args);
    }
    return value;
  };
  const whole = /^\{\{([^}]*)\}\}$/.exec(text);
  if (whole) return one(whole[1]);
  return text.replace(/\{\{([^}]*)\}\}/g, (_, expr) => String(one(expr)));
}

function expand(value, vars) {
  if (typeof value === 'string') return expandString(value, vars);
  if (Array.isArray(value)) return value.map((v) => expand(v, vars));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, expand(v, vars)]));
  }
  return value;
}

// The first rule whose conditions hold, with its variables; null when none.
function pickRule(scenario, request) {
  for (const [i, rule] of (scenario.rules || []).entries()) {
    const fromPrompt = matches(rule.prompt, request.prompt);
    const fromSystem = matches(rule.system, request.system);
    if (!fromPrompt || !fromSystem) continue;
    if (rule.history !== undefined && rule.history !== request.earlierPrompts.length > 0) continue;
    if (rule.tool !== undefined && !request.tools.includes(rule.tool)) continue;
    if (rule.model !== undefined && !new RegExp(rule.model).test(request.model)) continue;
    const vars = {
      prompt: request.prompt, cwd: request.cwd || '', last_result: request.lastResult || '',
      ...fromSystem, ...fromPrompt,
    };
    for (const [name, template] of Object.entries(rule.vars || {})) {
      vars[name] = expand(template, vars);
    }
    return { rule, name: rule.name || `rule ${i}`, vars };
  }
  return null;
}

// How far the conversation since the prompt went: the index of the step to serve now, and
// whether that step's prelude was served already.
function position(request) {
  const last = request.turns.at(-1);
  if (!last) return { index: 0, preludeDone: false };
  const mark = last.callIds.map(parseCallId).find(Boolean);
  if (mark) return { index: mark.prelude ? mark.index : mark.index + 1, preludeDone: mark.prelude };
  return { index: request.turns.length, preludeDone: false };
}

// The step that answers `request`, normalised:
//   { rule, index, kind: 'action' | 'text' | 'error' | 'cut' | 'stall', ... }
// `served` counts error steps with `times` per conversation.
export function scriptFor(scenario, request, served) {
  const picked = pickRule(scenario, request);
  if (!picked) {
    return { rule: null, index: -1, kind: 'text', text: scenario.fallback
      || 'The scripted model has no rule for this prompt.', usage: scenario.usage };
  }
  const { rule, name, vars } = picked;
  let { index, preludeDone } = position(request);
  for (;;) {
    const step = rule.steps[index];
    if (step === undefined) {
      return { rule: name, index, kind: 'text', text: rule.after
        || `The scripted model's rule '${name}' has no step ${index}.`, usage: scenario.usage };
    }
    if (step.error && step.times !== undefined) {
      const key = `${request.conversation}\u0000${name}\u0000${index}`;
      const count = served.get(key) || 0;
      if (count >= step.times) {
        index++;
        continue;
      }
      served.set(key, count + 1);
    }
    return normalise(expand(step, vars), name, index, preludeDone, scenario);
  }
}

const actions = ['read', 'write', 'edit', 'run', 'mcp', 'tool'];

function normalise(step, rule, index, preludeDone, scenario) {
  const common = {
    rule, index, preludeDone, delayMs: step.delay_ms || 0,
    usage: { ...(scenario.usage || {}), ...(step.usage || {}) },
  };
  const action = actions.find((a) => a in step);
  if (action) return { ...common, kind: 'action', action, args: step[action], input: step.input };
  if ('text' in step) return { ...common, kind: 'text', text: step.text, chunkDelayMs: step.chunk_delay_ms || 0 };
  if ('error' in step) {
    return { ...common, kind: 'error', status: step.error.status, type: step.error.type,
      message: step.error.message, code: step.error.code, retryAfter: step.retry_after };
  }
  if ('cut' in step) return { ...common, kind: 'cut', text: step.cut };
  if ('stall' in step) return { ...common, kind: 'stall' };
  throw new Error(`step ${index} of '${rule}' is none of ${actions.join(', ')}, text, error, cut, stall`);
}
