// The Cloister dashboard. Every text that comes from the broker -- titles, agent output,
// file names, errors -- goes into the page with textContent, never as markup.
"use strict";

const state = {
  token: "",
  lastSeq: -1,
  progress: new Map(),   // task id -> last progress line
  timeline: new Map(),   // task id -> [events seen here]
  running: [],
  refreshQueued: false,
  openTask: null,
};

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (key === "class") node.className = value;
    else if (key === "onclick") node.addEventListener("click", value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function fill(tbody, rows, empty) {
  tbody.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: "9", class: "muted" }, empty))]));
}

async function api(path, options = {}) {
  const headers = { "X-Cloister-Token": state.token };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method: options.method || "GET", headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body) });
  let body = null;
  try { body = await response.json(); } catch (e) { body = null; }
  if (!response.ok) {
    const error = new Error(body && body.error ? body.error : "HTTP " + response.status);
    error.status = response.status;
    throw error;
  }
  return body;
}

function age(ms) {
  if (ms < 1000) return "just now";
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
  return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
}

function taskLink(id) {
  return el("button", { class: "link", type: "button", onclick: () => showTask(id) }, id);
}

function items(list) {
  return Array.isArray(list) ? list : (list && list.items) || [];
}

async function refresh() {
  state.refreshQueued = false;
  try {
    const [status, running, dead, failed, merges] = await Promise.all([
      api("/api/status"),
      api("/api/tasks?state=running&limit=200"),
      api("/api/tasks?state=dead&limit=50"),
      api("/api/tasks?state=failed&limit=10"),
      api("/api/tasks?specialist=merge-agent&limit=50"),
    ]);
    state.running = items(running);
    renderCounts(status.stats);
    renderSpecialists(status.specialists, state.running);
    renderRunning(state.running);
    renderQueues(status.stats);
    renderMerges(items(merges));
    renderDead(items(dead));
    renderFailed(items(failed));
    if (state.lastSeq < 0) connectEvents(status.stats.last_seq || 0);
    notice(null);
  } catch (error) {
    notice(error.status === 401 ? "The dashboard needs its token: open the address `pan web url` prints."
                                : "Cannot reach the broker: " + error.message);
  }
}

function scheduleRefresh() {
  if (state.refreshQueued) return;
  state.refreshQueued = true;
  setTimeout(refresh, 500);
}

function notice(text) {
  const box = document.getElementById("notice");
  box.hidden = !text;
  box.textContent = text || "";
}

function renderCounts(stats) {
  let queued = 0;
  for (const queue of Object.values(stats.queues || {}))
    for (const depth of Object.values(queue)) queued += depth;
  document.getElementById("counts").replaceChildren(
    el("span", {}, "queued ", el("b", { id: "count-queued" }, queued)),
    el("span", {}, "running ", el("b", { id: "count-running" }, stats.running || 0)),
    el("span", {}, "done since start ", el("b", {}, (stats.completed || 0))),
    el("span", {}, "dead ", el("b", {}, stats.dead || 0)),
    el("span", {}, "throughput ", el("b", {}, (stats.throughput_per_s || 0).toFixed(1)), "/s"));
}

function renderSpecialists(specialists, running) {
  const rows = (specialists || []).map((s) => {
    const task = running.find((t) => t.specialist === s.name);
    const busy = (s.running || 0) > 0;
    const phase = (s.phases || [])[0];
    // A specialist the broker paused: its model API refused the key (pan specialists resume).
    const status = s.paused ? "paused"
      : busy ? (phase ? "busy: " + phase.phase : "busy") : (s.workers || 0) > 0 ? "idle" : "offline";
    const session = s.session;
    return el("tr", task ? { "data-task": task.id } : {},
      el("td", {}, s.name),
      el("td", { class: "state-" + (s.paused ? "paused" : busy ? "busy" : status), title: s.paused || "" },
        status, s.paused ? el("div", { class: "paused-reason" }, s.paused) : ""),
      el("td", {}, s.workers || 0),
      el("td", {}, s.queued || 0),
      el("td", {}, s.running || 0),
      el("td", {}, task ? taskLink(task.id) : "", task ? " " + age(Date.now() - task.updated) : ""),
      el("td", { class: "progress" }, task ? state.progress.get(task.id) || "" : ""),
      el("td", {}, session ? session.agent + " " + session.id.slice(0, 8) + "…" : ""),
      el("td", {}, session ? "$" + Number(session.costUsd || 0).toFixed(2) : ""));
  });
  fill(document.querySelector("#specialists tbody"), rows, "no specialist known yet");
}

function renderRunning(running) {
  const rows = running.map((t) => el("tr", { "data-task": t.id },
    el("td", {}, taskLink(t.id)),
    el("td", {}, t.specialist),
    el("td", {}, t.title || ""),
    el("td", {}, t.worker || ""),
    el("td", {}, age(Date.now() - t.updated)),
    el("td", { class: "progress" }, state.progress.get(t.id) || ""),
    el("td", {}, el("button", { type: "button", onclick: () => act(t.id, "cancel") }, "Cancel"))));
  fill(document.querySelector("#running tbody"), rows, "nothing running");
}

function renderQueues(stats) {
  const rows = Object.entries(stats.queues || {}).map(([name, depth]) =>
    el("tr", {}, el("td", {}, name), ...["urgent", "high", "normal", "low"].map((p) => el("td", {}, depth[p] || 0))));
  fill(document.querySelector("#queues tbody"), rows, "no queue");
  const oldest = stats.oldest_queued_age_ms;
  document.getElementById("oldest").textContent = oldest ? "oldest queued task: " + age(oldest) : "";
}

function renderMerges(tasks) {
  const groups = new Map();
  for (const t of tasks) {
    const key = t.group || "(no group)";
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(t);
  }
  const boxes = [...groups.entries()].map(([group, list]) => el("div", { class: "group" },
    el("h3", {}, group.replace(/^merge:/, "")),
    el("table", {}, el("tbody", {}, ...list.slice(0, 10).map((t) => el("tr", {},
      el("td", {}, taskLink(t.id)),
      el("td", { class: "state-" + t.state }, t.state),
      el("td", {}, t.title || ""),
      el("td", { class: "progress" }, t.state === "running" ? state.progress.get(t.id) || "" : t.error || "")))))));
  document.getElementById("merges").replaceChildren(...(boxes.length ? boxes : [el("p", { class: "muted" }, "no merge yet")]));
}

function renderDead(tasks) {
  const rows = tasks.map((t) => el("tr", {},
    el("td", {}, taskLink(t.id)), el("td", {}, t.specialist), el("td", {}, t.title || ""),
    el("td", {}, t.error || ""),
    el("td", {}, el("button", { type: "button", onclick: () => act(t.id, "retry") }, "Retry"))));
  fill(document.querySelector("#dead tbody"), rows, "no dead task");
}

function renderFailed(tasks) {
  const rows = tasks.map((t) => el("tr", {},
    el("td", {}, taskLink(t.id)), el("td", {}, t.specialist), el("td", {}, t.title || ""),
    el("td", {}, t.error || "")));
  fill(document.querySelector("#failed tbody"), rows, "no failure");
}

function chart(id, values) {
  const box = document.getElementById(id);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 360 80");
  svg.setAttribute("preserveAspectRatio", "none");
  const max = Math.max(1, ...values);
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", values.map((v, i) => i + "," + (78 - (v / max) * 74).toFixed(1)).join(" "));
  svg.append(line);
  const label = document.createElementNS(ns, "text");
  label.setAttribute("x", "2");
  label.setAttribute("y", "12");
  label.setAttribute("font-size", "10");
  label.textContent = "max " + max.toFixed(1);
  svg.append(label);
  box.replaceChildren(svg);
}

async function refreshFigures() {
  try {
    const figures = await api("/api/figures");
    chart("chart-throughput", figures.samples.map((s) => s.throughput));
    chart("chart-latency", figures.samples.map((s) => s.p99_ms));
  } catch (e) { /* the notice says why */ }
}

function onEvent(message) {
  let event;
  try { event = JSON.parse(message.data); } catch (e) { return; }
  state.lastSeq = event.seq || state.lastSeq;
  if (event.task) {
    const list = state.timeline.get(event.task) || [];
    list.push(event);
    if (list.length > 200) list.shift();
    state.timeline.set(event.task, list);
  }
  if (event.event === "task.progress" && event.task) {
    state.progress.set(event.task, event.text || "");
    for (const cell of document.querySelectorAll("tr[data-task] td.progress")) {
      if (cell.parentElement.getAttribute("data-task") === event.task) cell.textContent = event.text || "";
    }
    if (state.openTask === event.task) renderTimeline(event.task);
    return;
  }
  scheduleRefresh();
}

function connectEvents(since) {
  state.lastSeq = since;
  const source = new EventSource("/api/events?since=" + since + "&token=" + encodeURIComponent(state.token));
  source.onmessage = onEvent;
  source.onopen = () => { document.getElementById("connection").textContent = "live"; };
  source.onerror = () => { document.getElementById("connection").textContent = "reconnecting…"; };
}

async function act(id, action) {
  try {
    await api("/api/tasks/" + encodeURIComponent(id) + "/" + action, { method: "POST", body: {} });
    notice(null);
  } catch (error) {
    notice(action + " " + id + ": " + error.message);
  }
  scheduleRefresh();
}

function findingsTable(findings) {
  return el("table", {}, el("thead", {}, el("tr", {}, ...["Severity", "Where", "Finding", "Blocks"].map((h) => el("th", {}, h)))),
    el("tbody", {}, ...findings.map((f) => el("tr", {},
      el("td", {}, f.severity || ""),
      el("td", {}, (f.file || "") + (f.line ? ":" + f.line : "")),
      el("td", {}, f.message || ""),
      el("td", {}, f.blocking ? "blocks the gate" : "")))));
}

function renderTimeline(id) {
  const list = state.timeline.get(id) || [];
  const box = document.getElementById("task-timeline");
  if (!box) return;
  box.replaceChildren(...list.map((e) => el("li", {}, new Date(e.time).toLocaleTimeString() + " " + e.event +
    (e.text ? " — " + e.text : "") + (e.error ? " — " + e.error : ""))));
}

async function showTask(id) {
  let task;
  try { task = await api("/api/tasks/" + encodeURIComponent(id)); } catch (error) { notice(error.message); return; }
  state.openTask = id;
  const result = task.result || {};
  const parts = [
    el("p", {}, el("b", {}, task.state), " · ", task.specialist, " · attempt ", task.attempt, " of ", task.max_attempts,
      task.worker ? " · worker " + task.worker : "", task.issue ? " · issue " + task.issue : ""),
    el("p", {}, task.title || ""),
  ];
  if (task.error) parts.push(el("p", { class: "result refused" }, task.error));
  const handoff = (task.payload || {}).handoff;
  if (handoff && typeof handoff === "object") {
    parts.push(el("p", { class: "handoff" }, "Handed off from " + (handoff.from || "an agent") +
      (handoff.from_task ? " (task " + handoff.from_task + ")" : "") + (handoff.reason ? ": " + handoff.reason : "")));
    if (handoff.context) parts.push(el("pre", {}, handoff.context));
  }
  for (const to of Array.isArray(result.handoffs) ? result.handoffs : []) {
    parts.push(el("p", { class: "handoff" }, "Handed off to " + (to.specialist || "?") + " as task " + (to.id || "?") +
      (to.reason ? ": " + to.reason : "")));
  }
  if (Array.isArray(result.FINDINGS) && result.FINDINGS.length) parts.push(el("h3", {}, "Findings"), findingsTable(result.FINDINGS));
  if (result.GATE) parts.push(el("p", {}, "Gate: ", el("b", {}, result.GATE), result.REVIEW_RESULT ? " (" + result.REVIEW_RESULT + ")" : ""));
  for (const key of ["TEST_RESULT", "TESTS", "MERGE_RESULT"]) if (result[key]) parts.push(el("p", {}, key + ": ", el("b", {}, String(result[key]))));
  for (const key of ["FAILURES", "RESOLVED_FILES", "FAILED_FILES", "files_changed"]) {
    if (Array.isArray(result[key]) && result[key].length) parts.push(el("h3", {}, key), el("ul", {}, ...result[key].map((f) => el("li", {}, typeof f === "string" ? f : JSON.stringify(f)))));
  }
  if (result.cost_usd !== undefined) parts.push(el("p", {}, "Agent cost: $" + Number(result.cost_usd).toFixed(4)));
  parts.push(el("h3", {}, "Events seen here"), el("ul", { id: "task-timeline" }));
  parts.push(el("h3", {}, "Payload"), el("pre", {}, JSON.stringify(task.payload || {}, null, 2)));
  parts.push(el("h3", {}, "Result"), el("pre", {}, JSON.stringify(result, null, 2)));
  const buttons = el("p", {});
  if (task.state === "queued" || task.state === "running") buttons.append(el("button", { type: "button", onclick: () => act(id, "cancel") }, "Cancel"));
  if (task.state === "dead" || task.state === "failed") buttons.append(el("button", { type: "button", onclick: () => act(id, "retry") }, "Retry"));
  parts.push(buttons);
  document.getElementById("task-id").textContent = id;
  document.getElementById("task-body").replaceChildren(...parts);
  document.getElementById("task").hidden = false;
  renderTimeline(id);
}

function setupForms() {
  document.getElementById("approve-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const form = e.target;
    const out = document.getElementById("approve-result");
    try {
      const task = await api("/api/approve", { method: "POST", body: { issue: form.issue.value, force: form.force.checked } });
      out.className = "result ok";
      out.textContent = "Merge queued: " + (task.id || "");
    } catch (error) {
      out.className = "result refused";
      out.textContent = error.message;
    }
    scheduleRefresh();
  });
  document.getElementById("wake-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const form = e.target;
    const out = document.getElementById("wake-result");
    const body = { task: form.task.value || undefined, workspace: form.workspace.value || undefined, branch: form.branch.value || undefined };
    try {
      const task = await api("/api/specialists/" + encodeURIComponent(form.specialist.value) + "/wake", { method: "POST", body });
      out.className = "result ok";
      out.textContent = "Queued " + task.id;
    } catch (error) {
      out.className = "result refused";
      out.textContent = error.message;
    }
    scheduleRefresh();
  });
  document.getElementById("task-close").addEventListener("click", () => {
    state.openTask = null;
    document.getElementById("task").hidden = true;
  });
}

function start() {
  const match = /token=([0-9a-f]+)/.exec(location.hash);
  if (match) sessionStorage.setItem("cloister-token", match[1]);
  state.token = sessionStorage.getItem("cloister-token") || "";
  setupForms();
  refresh();
  refreshFigures();
  setInterval(refresh, 5000);
  setInterval(refreshFigures, 10000);
}

start();
