// Drives cloister-mcp with the official MCP TypeScript SDK (@modelcontextprotocol/sdk), a
// client this project did not write: initialize, ping, list the tools, call every tool.
// Run by tests/integration/test_mcp_sdk.c against a real broker and real services; it
// asserts what each call returns, prints a JSON report on stdout and exits 1 on the first
// failed assertion.
//
// Environment: MCP_SDK (the SDK's dist/esm directory), CLOISTER_MCP (the server), WORKSPACE
// (a git repository with main and feature), plus the broker's endpoints and home.
import assert from 'node:assert/strict';

const sdk = process.env.MCP_SDK;
const { Client } = await import(`${sdk}/client/index.js`);
const { StdioClientTransport } = await import(`${sdk}/client/stdio.js`);
const { LATEST_PROTOCOL_VERSION } = await import(`${sdk}/types.js`);

const workspace = process.env.WORKSPACE;
const transport = new StdioClientTransport({
  command: process.env.CLOISTER_MCP, args: [], env: process.env, stderr: 'inherit',
});
const client = new Client({ name: 'cloister-sdk-test', version: '1.0.0' });
await client.connect(transport);
const report = { server: client.getServerVersion(), calls: {} };

// The server introduced itself.
assert.equal(report.server.name, 'cloister');
await client.ping();

const listed = await client.listTools();
report.tools = listed.tools.map((t) => t.name).sort();
assert.deepEqual(report.tools, ['apply_patch', 'cancel_task', 'handoff_to', 'list_tasks',
  'recent_events', 'request_merge', 'request_review', 'retry_task', 'run_tests', 'submit_task',
  'task_status', 'wait_task']);
for (const tool of listed.tools) {
  assert.equal(tool.inputSchema.type, 'object', `${tool.name} has an object schema`);
  assert.ok(tool.description.length > 20, `${tool.name} says what it does`);
}

async function call(name, args, expectError = false) {
  const result = await client.callTool({ name, arguments: args });
  report.calls[name] = report.calls[name] || [];
  report.calls[name].push({ args, isError: !!result.isError, text: result.content[0].text });
  assert.equal(!!result.isError, expectError,
    `${name}(${JSON.stringify(args)}): ${result.content[0].text}`);
  assert.equal(result.content[0].type, 'text');
  return result;
}

// A review of the feature branch, waited for.
const review = await call('request_review', {
  workspace, branch: 'feature', issue: 'MCP-1', title: 'review through MCP' });
const reviewId = review.structuredContent.task.id;
assert.equal(review.structuredContent.task.specialist, 'review-agent');
const reviewed = await call('wait_task', { id: reviewId, timeout_s: 60 });
assert.equal(reviewed.structuredContent.task.state, 'done');
assert.equal(reviewed.structuredContent.task.result.GATE, 'open');
assert.equal(reviewed.structuredContent.verdict, 'gate_open');

const status = await call('task_status', { id: reviewId });
assert.equal(status.structuredContent.task.state, 'done');
assert.match(status.content[0].text, /done \(review-agent\)/);

// The tests of the feature branch, through the test-agent, waited for.
const tests = await call('run_tests', { workspace, branch: 'feature', timeout_s: 60 });
assert.equal(tests.structuredContent.task.state, 'done');
assert.equal(tests.structuredContent.task.result.TEST_RESULT, 'PASS');
assert.equal(tests.structuredContent.task.result.TESTS_PASSED, 3);
assert.equal(tests.structuredContent.verdict, 'passed');

const listing = await call('list_tasks', { issue: 'MCP-1' });
assert.deepEqual(listing.structuredContent.tasks.map((t) => t.id), [reviewId]);
// The data is in the text too, for a client that reads only the text.
assert.deepEqual(JSON.parse(listing.content[0].text.split('\n')[1]).map((t) => t.id), [reviewId]);
const done = await call('list_tasks', { state: 'done', limit: 5 });
assert.ok(done.structuredContent.tasks.length >= 2);

const events = await call('recent_events', { task: reviewId });
const names = events.structuredContent.events.map((e) => e.event);
assert.ok(names.includes('task.queued') && names.includes('task.done'), names.join(' '));
assert.deepEqual(JSON.parse(events.content[0].text.split('\n')[1]).map((e) => e.event), names);

// The merge of the reviewed issue: the gate is open, so it is queued.
const merge = await call('request_merge', { review: 'MCP-1' });
assert.equal(merge.structuredContent.task.id, `merge-${reviewId}`);
assert.equal(merge.structuredContent.task.specialist, 'merge-agent');
// A test task is no review: refused with the reason.
const refused = await call('request_merge', { review: tests.structuredContent.task.id, task: true },
  true);
assert.match(refused.content[0].text, /not a review-agent review/);

const submitted = await call('submit_task', {
  specialist: 'test-agent', workspace, branch: 'feature', title: 'submitted through MCP',
  priority: 'low', payload: { note: 'from the SDK test' } });
assert.equal(submitted.structuredContent.task.priority, 'low');
assert.equal(submitted.structuredContent.task.payload.note, 'from the SDK test');

// Outside a task, a handoff is submitted at once.
const handoff = await call('handoff_to', {
  specialist: 'test-agent', message: 'run the tests again', context: 'after the review',
  workspace, branch: 'feature' });
const handoffTask = handoff.structuredContent.task;
assert.equal(handoffTask.payload.task, 'run the tests again');
assert.equal(handoffTask.payload.handoff.context, 'after the review');

// A patch: checked, then applied; one reaching outside the workspace is refused.
const diff = 'diff --git a/notes.txt b/notes.txt\nnew file mode 100644\n--- /dev/null\n' +
  '+++ b/notes.txt\n@@ -0,0 +1 @@\n+written through MCP\n';
const checked = await call('apply_patch', { workspace, diff, check_only: true });
assert.equal(checked.structuredContent.applied, false);
const applied = await call('apply_patch', { workspace, diff });
assert.equal(applied.structuredContent.applied, true);
assert.deepEqual(applied.structuredContent.files, [{ path: 'notes.txt', ok: true }]);
const evil = diff.replaceAll('notes.txt', '../evil.txt');
const outside = await call('apply_patch', { workspace, diff: evil }, true);
assert.match(outside.content[0].text, /outside the workspace/);
const stale = await call('apply_patch', { workspace, diff }, true);
assert.equal(stale.structuredContent.files[0].ok, false);

// Wrong arguments are tool errors, not protocol errors; an unknown tool is one.
const missing = await call('task_status', {}, true);
assert.match(missing.content[0].text, /missing required argument 'id'/);
const wrongType = await call('list_tasks', { limit: 'ten' }, true);
assert.match(wrongType.content[0].text, /'limit' must be an integer/);
const unknown = await call('task_status', { id: 'no-such-task' }, true);
assert.match(unknown.content[0].text, /no task 'no-such-task'/);
await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }),
  (error) => error.code === -32602);

// Waiting on a task nobody takes ends when the time is up, saying so.
const waiting = await call('wait_task', { id: `merge-${reviewId}`, timeout_s: 1 });
assert.equal(waiting.structuredContent.timedOut, true);
assert.equal(waiting.structuredContent.verdict, 'timeout');

report.protocolVersion = LATEST_PROTOCOL_VERSION;
await client.close();
console.log(JSON.stringify(report));
