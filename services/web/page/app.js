// The Cloister dashboard: one page, a view per address (#/, #/task/ID, #/issue/ID,
// #/queue/NAME, #/history, #/reviews, #/figures), so every link opens in a new tab and
// survives a reload. The token in `pan web url`'s address is exchanged once for the
// dashboard's HttpOnly cookie and leaves the address bar. Every text that comes from the
// broker -- titles, agent output, file names, errors -- goes into the page as text
// (textContent, text nodes), never as markup.
"use strict";

const PRIORITIES = ["urgent", "high", "normal", "low"];
const PAGE = 50;

const state = {
  lastSeq: -1,
  progress: new Map(),   // task id -> last progress line
  specialists: [],       // from the last status
  view: null,            // {name, arg, params, refresh, onEvent}
  refreshTimer: null,
  history: [],           // the `before` cursors of the history pages seen
  cancelArmed: null,     // {id, until}: a Cancel clicked once, waiting for its second click
};

const CANCEL_CONFIRM_MS = 5000;

// ---- building blocks ----

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function link(href, text, cls) {
  return el("a", { href, class: cls }, text);
}

function taskLink(id) {
  const a = link("#/task/" + encodeURIComponent(id), shortId(id), "id");
  a.title = id;
  return a;
}

function issueLink(issue) {
  return issue ? link("#/issue/" + encodeURIComponent(issue), issue) : el("span",
    { class: "muted" }, "—");
}

function queueLink(name) {
  return link("#/queue/" + encodeURIComponent(name), name);
}

function shortId(id) {
  return id.length > 20 && /^[0-9a-f-]{36}$/.test(id) ? id.slice(0, 8) + "…" : id;
}

// A table; a header written "#Name" is a numeric column's (right-aligned).
function table(headers, rows, empty) {
  const head = el("tr", {}, headers.map((h) => h.startsWith("#")
    ? el("th", { class: "num" }, h.slice(1)) : el("th", {}, h)));
  const body = rows.length ? rows : [el("tr", {}, el("td", { class: "empty",
    colspan: String(headers.length) }, empty))];
  return el("div", { class: "table-wrap" }, el("table", {}, el("thead", {}, head), el("tbody", {},
    body)));
}

function panel(title, aside, ...children) {
  return el("section", { class: "panel" }, el("h2", {}, title, aside ? el("span",
    { class: "aside" }, aside) : null), ...children);
}

const STATE_TONE = {
  done: "ok", running: "run", queued: "neutral", failed: "bad", dead: "bad", cancelled: "neutral",
  busy: "run", idle: "neutral", offline: "warn", paused: "bad", open: "ok", blocked: "bad",
  waiting: "neutral", building: "run", testing: "run", built: "neutral", passed: "ok",
  landed: "ok", ejected: "bad" };

function badge(text, tone) {
  return el("span", { class: "badge " + (tone || STATE_TONE[text] || "neutral") }, text);
}

function age(ms) {
  if (ms < 1000) return "just now";
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
  if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
  return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
}

function ago(time) {
  return time ? age(Date.now() - time) + " ago" : "";
}

function clock(time) {
  return new Date(time).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit",
    second: "2-digit", hourCycle: "h23" });
}

function money(usd) {
  const n = Number(usd || 0);
  return "$" + (n >= 1 ? n.toFixed(2) : n.toFixed(n === 0 ? 2 : 3));
}

function items(list) {
  return Array.isArray(list) ? list : (list && list.items) || [];
}

// ---- the API ----

async function api(path, options = {}) {
  const init = { method: options.method || "GET", headers: {}, credentials: "same-origin" };
  if (options.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  if (options.token) init.headers["X-Cloister-Token"] = options.token;
  const response = await fetch(path, init);
  let body = null;
  try { body = await response.json(); } catch (e) { body = null; }
  if (!response.ok) {
    const error = new Error(body && body.error ? body.error : "HTTP " + response.status);
    error.status = response.status;
    throw error;
  }
  return body;
}

function notice(text) {
  const box = document.getElementById("notice");
  box.hidden = !text;
  box.textContent = text || "";
}

function failed(error) {
  notice(error.status === 401
    ? "This browser has no session with the dashboard: open the address `pan web url` prints " +
      "(it holds the token, exchanged once for a cookie)."
    : error.status === 502 ? "Cannot reach the broker: " + error.message : error.message);
}

// An action's button: runs `fn`, shows what happened next to `out` (or the notice).
async function act(fn, out, done) {
  try {
    const result = await fn();
    if (out) { out.className = "result ok"; out.textContent = done ? done(result) : "Done."; }
    notice(null);
  } catch (error) {
    if (out) { out.className = "result refused"; out.textContent = error.message; }
    else failed(error);
  }
  scheduleRefresh(300);
}

// Cancelling stops an agent's work and cannot be undone (a retry starts it again): the first
// click asks, a second within CANCEL_CONFIRM_MS does it. The question is kept in `state`,
// not only in the button, since a refresh renders the row anew.
function cancelArmed(id) {
  return state.cancelArmed !== null && state.cancelArmed.id === id &&
    Date.now() < state.cancelArmed.until;
}

// Shows the button asking or not, as `state` says; an asking one turns back when its time
// is up.
function showCancel(button, id) {
  const armed = cancelArmed(id);
  button.textContent = armed ? "Really cancel?" : "Cancel";
  if (!armed) {
    delete button.dataset.armed;
    return;
  }
  button.dataset.armed = "yes";
  setTimeout(() => showCancel(button, id), state.cancelArmed.until - Date.now() + 50);
}

function cancelButton(id) {
  const button = el("button", { type: "button", class: "danger", "data-action": "cancel",
    onclick: () => {
      if (!cancelArmed(id)) {
        state.cancelArmed = { id, until: Date.now() + CANCEL_CONFIRM_MS };
        showCancel(button, id);
        return;
      }
      state.cancelArmed = null;
      act(() => api("/api/tasks/" + encodeURIComponent(id) + "/cancel",
        { method: "POST", body: {} }));
    } });
  showCancel(button, id);
  return button;
}

function retryButton(id) {
  return el("button", { type: "button", "data-action": "retry",
    onclick: () => act(() => api("/api/tasks/" + encodeURIComponent(id) + "/retry",
      { method: "POST", body: {} })) }, "Retry");
}

function urgentButton(id) {
  return el("button", { type: "button", "data-action": "urgent",
    onclick: () => act(() => api("/api/tasks/" + encodeURIComponent(id) + "/priority",
      { method: "POST", body: { priority: "urgent" } })) }, "Move to urgent");
}

// ---- routing ----

function parseHash() {
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { name: parts[0] || "overview", arg: parts.slice(1).join("/"),
    params: new URLSearchParams(query || "") };
}

const VIEWS = {
  overview: overviewView,
  task: taskView,
  issue: issueView,
  queue: queueView,
  history: historyView,
  reviews: reviewsView,
  "merge-queue": mergeQueueView,
  figures: figuresView,
};

function route() {
  const { name, arg, params } = parseHash();
  const make = VIEWS[name] || overviewView;
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("current",
    a.dataset.nav === name);
  const main = document.getElementById("view");
  main.replaceChildren();
  main.dataset.view = name;
  notice(null);
  state.view = make(main, arg, params);
  window.scrollTo(0, 0);
  refreshView();
}

async function refreshView() {
  clearTimeout(state.refreshTimer);
  state.refreshTimer = null;
  const view = state.view;
  if (!view || !view.refresh) return;
  try { await view.refresh(); } catch (error) { failed(error); }
}

function scheduleRefresh(delay) {
  if (state.refreshTimer) return;
  state.refreshTimer = setTimeout(refreshView, delay || 500);
}

// ---- overview ----

function overviewView(main) {
  const tiles = el("div", { class: "tiles" });
  const specialists = el("div");
  const running = el("div");
  const failures = el("div");
  const merges = el("div");
  const wake = wakeForm();
  main.append(tiles,
    panel("Specialists", null, specialists),
    panel("Running", null, running),
    el("div", { class: "grid2" },
      panel("Failures", link("#/history?state=failed", "all failures"), failures),
      panel("Merge queue", link("#/history?specialist=merge-agent", "all merges"), merges)),
    panel("Wake a specialist", null, wake.form));
  return {
    async refresh() {
      const [status, run, dead, fail, merge] = await Promise.all([
        api("/api/status"),
        api("/api/tasks?state=running&limit=200"),
        api("/api/tasks?state=dead&limit=20"),
        api("/api/tasks?state=failed&limit=20"),
        api("/api/tasks?specialist=merge-agent&limit=20").catch(() => ({ items: [] })),
      ]);
      state.specialists = status.specialists || [];
      const runningTasks = items(run);
      renderTiles(tiles, status.stats, state.specialists);
      renderSpecialists(specialists, state.specialists, runningTasks, status.stats);
      renderRunning(running, runningTasks);
      const ended = items(dead).concat(items(fail)).sort((a, b) => b.updated - a.updated);
      renderFailures(failures, ended.slice(0, 20));
      renderMerges(merges, items(merge));
      wake.setSpecialists(state.specialists);
      connectEvents(status.stats.last_seq || 0);
      refreshReviewCount();
    },
    onEvent() { scheduleRefresh(); },
  };
}

function queuedTotal(stats) {
  let queued = 0;
  for (const queue of Object.values(stats.queues || {}))
    for (const depth of Object.values(queue)) queued += depth;
  return queued;
}

function renderTiles(box, stats, specialists) {
  // The specialists' counts are stored by the broker: they survive its restarts.
  const finished = specialists.reduce(
    (n, s) => n + (s.done || 0) + (s.failed || 0) + (s.dead || 0), 0);
  const tile = (label, value, id, bad) => el("div", { class: "tile" },
    el("div", { class: "label" }, label),
    el("div", { class: "value" + (bad ? " bad" : ""), id }, value));
  box.replaceChildren(
    tile("Queued", queuedTotal(stats), "count-queued"),
    tile("Running", stats.running || 0, "count-running"),
    tile("Finished", finished, "count-finished"),
    tile("Dead", stats.dead || 0, null, (stats.dead || 0) > 0),
    tile("Throughput", (stats.throughput_per_s || 0).toFixed(1) + "/s"),
    tile("Oldest queued", stats.oldest_queued_age_ms ? age(stats.oldest_queued_age_ms) : "—"));
}

function specialistStatus(s) {
  if (s.paused) return "paused";
  if ((s.running || 0) > 0) return "busy";
  return (s.workers || 0) > 0 ? "idle" : "offline";
}

function renderSpecialists(box, specialists, running, stats) {
  const rows = specialists.map((s) => {
    const task = running.find((t) => t.specialist === s.name);
    const status = specialistStatus(s);
    const phase = (s.phases || [])[0];
    const session = s.session;
    return el("tr", task ? { "data-task": task.id } : {},
      el("td", { class: "name" }, queueLink(s.name)),
      el("td", {}, badge(status), phase ? el("span", { class: "muted" }, " " + phase.phase) : null,
        s.paused ? el("div", { class: "paused-reason" }, s.paused) : null),
      el("td", { class: "num" }, s.workers || 0),
      el("td", { class: "num" }, link("#/queue/" + encodeURIComponent(s.name),
        String(s.queued || 0))),
      el("td", { class: "num" }, s.running || 0),
      el("td", {}, task ? taskLink(task.id) : "", task ? el("span", { class: "muted" },
        " " + age(Date.now() - task.updated)) : ""),
      el("td", { class: "progress" }, task ? state.progress.get(task.id) || "" : ""),
      el("td", { class: "num" }, s.done || 0),
      el("td", { class: "num" }, (s.failed || 0) + (s.dead || 0)),
      el("td", {}, session ? session.agent + " · " + session.runs + " runs" : el("span",
        { class: "muted" }, "—")),
      el("td", { class: "num" }, session ? money(session.costUsd) : ""));
  });
  box.replaceChildren(table(["Specialist", "State", "#Workers", "#Queued", "#Running",
    "Current task", "Last progress",
    "#Done", "#Failed", "Session", "#Cost"], rows, "no specialist known yet"));
  box.querySelector("table").id = "specialists";
}

function renderRunning(box, running) {
  const rows = running.map((t) => el("tr", { "data-task": t.id },
    el("td", {}, taskLink(t.id)),
    el("td", { class: "name" }, queueLink(t.specialist)),
    el("td", {}, t.title || ""),
    el("td", {}, issueLink(t.issue)),
    el("td", {}, t.worker || ""),
    el("td", {}, age(Date.now() - t.updated)),
    el("td", { class: "progress" }, state.progress.get(t.id) || ""),
    el("td", { class: "actions" }, cancelButton(t.id))));
  box.replaceChildren(table(["Task", "Specialist", "Title", "Issue", "Worker", "Running for",
    "Last progress", ""], rows, "nothing running"));
  box.querySelector("table").id = "running";
}

function renderFailures(box, tasks) {
  const rows = tasks.map((t) => el("tr", { "data-task": t.id },
    el("td", {}, taskLink(t.id)),
    el("td", {}, badge(t.state)),
    el("td", {}, t.specialist),
    el("td", {}, t.title || "", t.error ? el("div", { class: "muted" }, t.error) : null),
    el("td", { class: "actions" }, retryButton(t.id))));
  box.replaceChildren(table(["Task", "State", "Specialist", "Title / error", ""], rows,
    "no failure"));
  box.querySelector("table").id = "failures";
}

function renderMerges(box, tasks) {
  const rows = tasks.slice(0, 10).map((t) => el("tr", {},
    el("td", {}, taskLink(t.id)),
    el("td", {}, badge(t.state)),
    el("td", {}, issueLink(t.issue)),
    el("td", {}, t.title || ""),
    el("td", { class: "muted" }, ago(t.updated))));
  box.replaceChildren(table(["Task", "State", "Issue", "Title", "Updated"], rows, "no merge yet"));
}

function wakeForm() {
  const select = el("select", { name: "specialist", required: true });
  const out = el("p", { class: "result", id: "wake-result" });
  const form = el("form", { id: "wake-form", class: "filters" },
    el("label", {}, "Specialist", select),
    el("label", { class: "grow" }, "Task", el("input", { name: "task",
      placeholder: "what to do, in a sentence" })),
    el("label", {}, "Workspace", el("input", { name: "workspace",
      placeholder: "/path/to/repository" })),
    el("label", {}, "Branch", el("input", { name: "branch", size: "12" })),
    el("button", { type: "submit", class: "primary" }, "Wake"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const body = { task: form.task.value || undefined, workspace: form.workspace.value || undefined,
      branch: form.branch.value || undefined };
    act(() => api("/api/specialists/" + encodeURIComponent(select.value) + "/wake",
      { method: "POST", body }),
      out, (task) => "Queued as task " + task.id + ".");
  });
  return {
    form: el("div", {}, form, out),
    setSpecialists(list) {
      const names = list.map((s) => s.name);
      const have = [...select.options].map((o) => o.value);
      if (names.join() === have.join()) return;
      const chosen = select.value;
      select.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
      if (names.includes(chosen)) select.value = chosen;
    },
  };
}

let reviewCountAt = 0;

// The reviews waiting, in the navigation: asked at most every 30 s (it reads every review).
async function refreshReviewCount() {
  if (Date.now() - reviewCountAt < 30000) return;
  reviewCountAt = Date.now();
  try {
    const reviews = await api("/api/reviews");
    const pill = document.getElementById("reviews-count");
    pill.hidden = reviews.length === 0;
    pill.textContent = String(reviews.length);
  } catch (e) { /* the view's own refresh says why */ }
}

// ---- a task ----

function verdictOf(task) {
  const r = task.result || {};
  if (task.state === "queued") return ["Queued, waiting for a " + task.specialist + " worker.", ""];
  if (task.state === "running")
    return ["Running" + (task.phase ? ": " + task.phase : "") + ".", ""];
  if (task.state === "cancelled") return ["Cancelled.", ""];
  if (task.state === "dead") return ["Dead: gave up after " + task.attempt + " attempts.", "bad"];
  if (r.MERGE_RESULT) {
    return r.MERGE_RESULT === "SUCCESS" && task.state === "done" ? ["Merged.", "ok"]
      : ["The merge failed: " + r.MERGE_RESULT + ".", "bad"];
  }
  if (task.state === "failed") return ["Failed.", "bad"];
  if (r.GATE || r.REVIEW_RESULT) {
    const open = r.GATE ? r.GATE === "open" : r.REVIEW_RESULT === "APPROVED";
    const blocking = (r.FINDINGS || []).filter((f) => f.blocking).length;
    return open ? ["Gate open" + (r.merge_task || r.test_task ? ": the next step is queued." :
      ": waiting for approval."), "ok"]
      : ["Gate blocked by " + blocking + " finding" + (blocking === 1 ? "" : "s") + ".", "bad"];
  }
  if (r.TEST_RESULT) {
    const counts = testCounts(r);
    const said = counts ? " (" + counts + ")." : ".";
    if (r.TEST_RESULT === "PASS") return ["Tests passed" + said, "ok"];
    if (r.TEST_RESULT === "FAIL") return ["Tests failed" + said, "bad"];
    return ["The tests could not run.", "bad"];
  }
  return ["Done.", "ok"];
}

function overrideText(o) {
  return (o.reason || "no reason given") + " — by " + (o.by || "?") + (o.at ? " at " + o.at : "");
}

// "2 failed, 8 passed of 10" from the test-agent's counts (or its TESTS text).
function testCounts(r) {
  if (typeof r.TESTS_RUN === "number")
    return (r.TESTS_FAILED || 0) + " failed, " + (r.TESTS_PASSED || 0) + " passed of " +
      r.TESTS_RUN;
  return r.TESTS ? String(r.TESTS) : "";
}

function findingsByFile(findings) {
  const groups = new Map();
  for (const f of findings) {
    const key = f.file || "(the change as a whole)";
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(f);
  }
  return [...groups.entries()].map(([file, list]) => el("div", { class: "file-group" },
    el("div", { class: "file" }, file, el("span", { class: "muted" },
      "  " + list.length + " finding" + (list.length === 1 ? "" : "s"))),
    list.sort((a, b) => (a.line || 0) - (b.line || 0)).map((f) => el("div", { class: "finding" },
      el("div", { class: "head" },
        badge(f.severity || "info",
          f.severity === "error" ? "bad" : f.severity === "warning" ? "warn" : "neutral"),
        f.line ? el("span", { class: "line" }, "line " + f.line) : null,
        el("b", {}, f.title || f.message || ""),
        f.blocking ? badge("blocks the gate", "bad") : null,
        f.status === "unresolved" ? badge("unresolved", "warn") : null,
        f.reviewer ? el("span", { class: "muted" }, f.reviewer) : null),
      f.detail ? el("div", { class: "detail" }, f.detail) : null,
      f.suggestion ? el("div", { class: "suggestion" }, "Suggestion: " + f.suggestion) : null))));
}

function listOf(values) {
  return el("ul", {}, values.map((v) => el("li", {},
    typeof v === "string" ? v : JSON.stringify(v))));
}

function eventText(e) {
  const parts = [];
  if (e.worker && e.event !== "task.progress") parts.push("worker " + e.worker);
  if (e.attempt && e.event === "task.dispatched") parts.push("attempt " + e.attempt);
  if (e.text) parts.push(e.text);
  if (e.error) parts.push(e.error);
  if (e.coalesced) parts.push("(+" + e.coalesced + " more)");
  return parts.join(" — ");
}

function timelineItem(e, withTask) {
  return el("li", {}, el("span", { class: "when" }, clock(e.time)),
    el("span", {}, badge(e.event.replace(/^task\./, ""),
      e.event === "task.done" ? "ok" : /failed|dead|retry/.test(e.event) ? "bad" :
      e.event === "task.progress" ? "neutral" : "info"),
      withTask && e.task ? el("span", {}, " ", taskLink(e.task)) : null),
    el("span", { class: "text" }, eventText(e)));
}

function taskView(main, id) {
  const head = el("div");
  const body = el("div");
  const timeline = el("ol", { class: "timeline", id: "task-timeline" });
  const timelineNote = el("p", { class: "muted" });
  main.append(head, body, panel("Timeline", "from the broker's stored events", timeline,
    timelineNote));
  const seen = new Set();
  let loadedTimeline = false;
  let shown = "";
  const addEvent = (e) => {
    if (seen.has(e.seq)) return;
    seen.add(e.seq);
    timeline.append(timelineItem(e, false));
  };
  return {
    async refresh() {
      const task = await api("/api/tasks/" + encodeURIComponent(id));
      // Drawn again only when it changed, so an opened <details> stays open.
      const key = JSON.stringify(task);
      if (key !== shown) renderTask(head, body, task);
      shown = key;
      if (!loadedTimeline) {
        loadedTimeline = true;
        const stored = await api("/api/tasks/" + encodeURIComponent(id) + "/events");
        stored.events.forEach(addEvent);
        timelineNote.textContent = stored.progress_omitted
          ? stored.progress_omitted + " older progress lines are not shown." : "";
        if (stored.truncated) timelineNote.textContent = "Only the first events stored are shown.";
        else if (!stored.events.length)
          timelineNote.textContent = "No stored event of this task (the broker keeps the newest).";
      }
      connectEvents(-1);
    },
    onEvent(e) {
      if (e.task !== id) return;
      addEvent(e);
      if (e.event !== "task.progress") scheduleRefresh();
    },
  };
}

function renderTask(head, body, task) {
  const r = task.result || {};
  const [verdict, tone] = verdictOf(task);
  const actions = el("span", { class: "actions" },
    task.state === "queued" ? urgentButton(task.id) : null,
    task.state === "queued" || task.state === "running" ? cancelButton(task.id) : null,
    ["failed", "dead", "cancelled"].includes(task.state) ? retryButton(task.id) : null);
  head.replaceChildren(
    el("div", { class: "crumbs" }, link("#/", "Overview"), " / ", queueLink(task.specialist),
      task.issue ? [" / ", issueLink(task.issue)] : null),
    el("h1", {}, "Task ", el("span", { class: "id", id: "task-id" }, task.id), badge(task.state),
      actions),
    el("div", { class: "verdict " + tone, id: "task-verdict" }, verdict));
  const summary = el("dl", { class: "summary" });
  const row = (k, ...v) => summary.append(el("dt", {}, k), el("dd", {}, ...v));
  row("Title", task.title || "—");
  row("Specialist", queueLink(task.specialist));
  row("Issue", issueLink(task.issue));
  row("Priority", task.priority);
  row("Attempt", task.attempt + " of " + task.max_attempts +
    (task.failures ? " (" + task.failures + " failed)" : ""));
  if (task.worker) row("Worker", task.worker);
  row("Created", new Date(task.created).toLocaleString() + " (" + ago(task.created) + ")");
  row("Updated", new Date(task.updated).toLocaleString());
  if (task.parent) row("Came from", taskLink(task.parent));
  const payload = task.payload || {};
  if (payload.workspace) row("Workspace", el("span", { class: "mono" }, payload.workspace));
  if (payload.branch) row("Branch", el("span", { class: "mono" },
    payload.branch + (payload.target ? " → " + payload.target : "")));
  const commit = r.diff_head || r.TESTED_COMMIT || r.REVIEWED_COMMIT || payload.commit;
  if (commit) row(r.TESTED_COMMIT ? "Tested commit" : "Commit", el("span", { class: "mono" },
    commit));
  if (r.cost_usd !== undefined) row("Agent cost",
    money(r.cost_usd) + (r.agent_cli ? " (" + r.agent_cli + ")" : ""));
  if (payload.override) row("Gate overridden", overrideText(payload.override));
  if (task.error) row("Error", el("span", { class: "result refused" }, task.error));
  const parts = [panel("Summary", null, summary)];
  const handoff = payload.handoff;
  if (handoff && typeof handoff === "object") {
    parts.push(panel("Handed off", null, el("p", {}, "From " + (handoff.from || "an agent"),
      handoff.from_task ? [" (", taskLink(handoff.from_task), ")"] : null,
      handoff.reason ? ": " + handoff.reason : ""),
      handoff.context ? el("pre", {}, handoff.context) : null));
  }
  for (const to of Array.isArray(r.handoffs) ? r.handoffs : []) {
    parts.push(el("p", {}, "Handed off to " + (to.specialist || "?") + " as task ",
      to.id ? taskLink(to.id) : "?", to.reason ? ": " + to.reason : ""));
  }
  const next = r.merge_task || r.test_task;
  if (next) parts.push(el("p", {}, "Next: ", taskLink(next)));
  if (Array.isArray(r.FINDINGS) && r.FINDINGS.length) {
    const files = new Set(r.FINDINGS.map((f) => f.file)).size;
    const where = r.FINDINGS.length + " in " + files + " file" + (files === 1 ? "" : "s");
    parts.push(panel("Findings", where, el("div", { id: "findings" }, findingsByFile(r.FINDINGS))));
  }
  if (Array.isArray(r.FAILURES) && r.FAILURES.length) parts.push(panel("Test failures",
    testCounts(r) || null, el("div", { id: "failures" }, listOf(r.FAILURES))));
  const mergeFiles = [["Files changed", r.files_changed], ["Conflicts resolved", r.RESOLVED_FILES],
    ["Conflicts left", r.FAILED_FILES]]
    .filter(([, list]) => Array.isArray(list) && list.length);
  if (mergeFiles.length) parts.push(panel("Files", null, el("div", { id: "merge-files" },
    mergeFiles.map(([t, list]) => [el("h3", {}, t), listOf(list)]))));
  if (r.NOTES) parts.push(panel("Notes", null, el("pre", {}, r.NOTES)));
  parts.push(el("details", {}, el("summary", {}, "Payload and result (JSON)"),
    el("pre", {}, JSON.stringify(payload, null, 2)), el("pre", {}, JSON.stringify(r, null, 2))));
  body.replaceChildren(...parts);
}

// ---- an issue ----

function stepKind(task) {
  return { "review-agent": "Review", "test-agent": "Test",
    "merge-agent": "Merge" }[task.specialist] || task.specialist;
}

function issueView(main, issue) {
  const head = el("div");
  const chain = el("div", { class: "chain", id: "chain" });
  const details = el("div");
  const timeline = el("ol", { class: "timeline", id: "issue-timeline" });
  main.append(head, chain, details, panel("Timeline", "from the broker's stored events", timeline));
  return {
    async refresh() {
      const data = await api("/api/issues/" + encodeURIComponent(issue));
      head.replaceChildren(el("div", { class: "crumbs" }, link("#/", "Overview"), " / issue"),
        el("h1", {}, "Issue " + data.issue, el("span", { class: "muted", id: "issue-cost" },
          " " + money(data.cost_usd) + " spent")));
      chain.replaceChildren(...data.tasks.map((t) => {
        const [verdict, tone] = verdictOf(t);
        const r = t.result || {};
        const commit = r.TESTED_COMMIT || r.diff_head || r.REVIEWED_COMMIT ||
          (t.payload || {}).commit;
        return el("div", { class: "step " + (tone || (t.state === "running" ? "run" : "")) },
          el("div", { class: "kind" }, stepKind(t)),
          el("div", { class: "what" }, verdict),
          el("div", {}, taskLink(t.id), " ", badge(t.state), " ", el("span", { class: "muted" },
            ago(t.updated))),
          commit ? el("div", { class: "mono muted" },
            (r.TESTED_COMMIT ? "tested " : "commit ") + commit.slice(0, 12)) : null,
          r.MERGE_RESULT ? el("div", {}, "merge: " + r.MERGE_RESULT) : null,
          (t.payload || {}).override ? el("div", { class: "result refused" },
            "gate overridden: " + overrideText(t.payload.override)) : null,
          r.cost_usd !== undefined ? el("div", { class: "muted" },
            "cost " + money(r.cost_usd)) : null);
      }));
      const review = [...data.tasks].reverse().find((t) => t.specialist === "review-agent" &&
        t.result && t.result.FINDINGS);
      const parts = [];
      if (review && review.result.FINDINGS.length) parts.push(panel("Findings of the newest review",
        taskLink(review.id), findingsByFile(review.result.FINDINGS)));
      const test = [...data.tasks].reverse().find((t) => t.result &&
        Array.isArray(t.result.FAILURES) && t.result.FAILURES.length);
      if (test) parts.push(panel("Test failures", taskLink(test.id), listOf(test.result.FAILURES)));
      details.replaceChildren(...parts);
      timeline.replaceChildren(...data.events.map((e) => timelineItem(e, true)));
      connectEvents(-1);
    },
    // A progress line is added where it belongs; anything else redraws the chain.
    onEvent(e) {
      if (e.issue !== issue) return;
      if (e.event === "task.progress") timeline.append(timelineItem(e, true));
      else scheduleRefresh(1000);
    },
    periodic: false,
  };
}

// ---- a queue ----

function queueView(main, name, params) {
  const offset = Math.max(0, parseInt(params.get("offset") || "0", 10) || 0);
  const body = el("div");
  const pager = el("div", { class: "pager" });
  const about = el("p", { class: "muted", id: "queue-about" });
  main.append(el("div", { class: "crumbs" }, link("#/", "Overview"), " / queue"),
    el("h1", {}, "Queue ", name), about,
    panel("Queued, in dispatch order", link("#/history?specialist=" + encodeURIComponent(name),
      "history"), body, pager));
  return {
    async refresh() {
      const status = await api("/api/status");
      const me = (status.specialists || []).find((s) => s.name === name);
      // replaceChildren() writes a null as the text "null": only the parts that are there.
      about.replaceChildren(...(me ? [badge(specialistStatus(me)), " ",
        me.workers + " worker" + (me.workers === 1 ? "" : "s") + " · " +
          (me.running || 0) + " running · " +
        (me.done || 0) + " done, " + ((me.failed || 0) + (me.dead || 0)) + " failed",
        me.paused ? el("div", { class: "paused-reason" }, "Paused: " + me.paused) : null,
        !me.workers ? el("div", {},
          "No worker of " + name + " is connected: its tasks wait until one says hello.") : null]
        .filter((part) => part !== null) : []));
      const page = await api("/api/queues/" + encodeURIComponent(name) + "?offset=" + offset +
        "&limit=" + PAGE);
      const rows = page.items.map((t, i) => el("tr", { "data-task": t.id },
        el("td", { class: "num" }, offset + i + 1),
        el("td", {}, taskLink(t.id)),
        el("td", {}, badge(t.priority,
          t.priority === "urgent" ? "bad" : t.priority === "high" ? "warn" : "neutral")),
        el("td", {}, t.title || ""),
        el("td", {}, issueLink(t.issue)),
        el("td", { class: "muted" }, ago(t.created),
          t.attempt ? " · retried " + t.attempt + "×" : "",
          t.not_before > Date.now() ? " · waits " + age(t.not_before - Date.now()) : ""),
        el("td", { class: "actions" }, t.priority !== "urgent" ? urgentButton(t.id) : null,
          cancelButton(t.id))));
      body.replaceChildren(table(["##", "Task", "Priority", "Title", "Issue", "Queued", ""], rows,
        "nothing queued"));
      body.querySelector("table").id = "queue";
      const base = "#/queue/" + encodeURIComponent(name) + "?offset=";
      pager.replaceChildren(...[
        el("span", { class: "muted" },
          page.total ? (offset + 1) + "–" + (offset + page.items.length) + " of " + page.total :
          "0 queued"),
        offset > 0 ? link(base + Math.max(0, offset - PAGE), "← earlier") : null,
        offset + page.items.length < page.total ? link(base + (offset + PAGE),
          "later →") : null].filter(Boolean));
      connectEvents(-1);
    },
    onEvent(e) { if (e.specialist === name) scheduleRefresh(); },
  };
}

// ---- history ----

function historyView(main, arg, params) {
  const specialist = el("select", { name: "specialist" }, el("option", { value: "" }, "any"));
  const stateSelect = el("select", { name: "state" }, ["", "done", "failed", "dead", "cancelled",
    "queued", "running"]
    .map((s) => el("option", { value: s }, s || "any")));
  const issue = el("input", { name: "issue", placeholder: "PAN-42", size: "10" });
  const text = el("input", { name: "q", type: "search", placeholder: "id, title, error…",
    size: "24" });
  const form = el("form", { class: "filters", id: "history-filters" },
    el("label", {}, "Specialist", specialist), el("label", {}, "State", stateSelect),
    el("label", {}, "Issue", issue), el("label", {}, "Search", text),
    el("button", { type: "submit", class: "primary" }, "Filter"));
  const body = el("div");
  const pager = el("div", { class: "pager" });
  main.append(el("h1", {}, "History"), panel("Tasks, newest first", null, form, body, pager));
  for (const [key, input] of [["state", stateSelect], ["issue", issue], ["q",
    text]]) input.value = params.get(key) || "";
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const query = new URLSearchParams();
    for (const input of [specialist, stateSelect, issue,
      text]) if (input.value) query.set(input.name, input.value);
    location.hash = "#/history" + (query.toString() ? "?" + query : "");
  });
  return {
    async refresh() {
      const status = await api("/api/status");
      const names = status.specialists.map((s) => s.name);
      if (specialist.options.length !== names.length + 1) {
        specialist.replaceChildren(el("option", { value: "" }, "any"),
          ...names.map((n) => el("option", { value: n }, n)));
      }
      specialist.value = params.get("specialist") || "";
      const query = new URLSearchParams(params);
      query.set("limit", String(PAGE));
      const page = await api("/api/tasks?" + query);
      const rows = page.items.map((t) => el("tr", { "data-task": t.id },
        el("td", {}, taskLink(t.id)),
        el("td", {}, badge(t.state)),
        el("td", {}, queueLink(t.specialist)),
        el("td", {}, t.title || "", t.error && t.state !== "done" ? el("div", { class: "muted" },
          t.error) : null),
        el("td", {}, issueLink(t.issue)),
        el("td", { class: "muted" }, ago(t.updated)),
        el("td", { class: "actions" }, ["failed", "dead",
          "cancelled"].includes(t.state) ? retryButton(t.id) : null)));
      body.replaceChildren(table(["Task", "State", "Specialist", "Title", "Issue", "Updated", ""],
        rows,
        params.get("q") ? "no task mentions that among the " + page.scanned + " newest" :
          "no task"));
      body.querySelector("table").id = "history";
      const older = new URLSearchParams(params);
      if (page.next) older.set("before", page.next);
      pager.replaceChildren(...[
        params.get("q") ? el("span", { class: "muted" },
          "searched " + page.scanned + " tasks") : null,
        params.get("before") ? link("#/history?" + withoutBefore(params), "newest") : null,
        page.next ? link("#/history?" + older, "older →") : null].filter(Boolean));
    },
  };
}

function withoutBefore(params) {
  const copy = new URLSearchParams(params);
  copy.delete("before");
  return copy.toString();
}

// ---- reviews awaiting approval ----

function reviewsView(main) {
  const list = el("div", { id: "reviews" });
  // What was approved stays said here once its card has left the list.
  const approved = el("div", { id: "reviews-approved" });
  main.append(el("h1", {}, "Reviews awaiting approval"),
    el("p", { class: "muted" },
      "The newest review of each issue whose merge waits on a person. Approving queues the " +
      "merge of the reviewed commit; a blocked gate holds unless you override it, and the " +
      "override is recorded with your reason."),
    approved, list);
  let cards = new Map(); // review id -> {key (its JSON), node}
  const onApproved = (review, task) => approved.append(el("div", { class: "verdict ok" },
    "Merge of " + (review.issue || review.id) + " queued as task ", taskLink(task.id), "."));
  return {
    async refresh() {
      const reviews = await api("/api/reviews");
      const pill = document.getElementById("reviews-count");
      pill.hidden = reviews.length === 0;
      pill.textContent = String(reviews.length);
      // A card whose review did not change is kept as it is, with what is typed in it.
      const kept = new Map();
      const nodes = reviews.map((r) => {
        const key = JSON.stringify(r);
        const card = cards.get(r.id);
        const node = card && card.key === key ? card.node : reviewCard(r, onApproved);
        kept.set(r.id, { key, node });
        return node;
      });
      cards = kept;
      list.replaceChildren(...(nodes.length ? nodes
        : [el("div", { class: "panel muted" }, "No review is waiting.")]));
    },
  };
}

function reviewCard(r, onApproved) {
  const blocked = r.gate !== "open";
  const out = el("p", { class: "result" });
  const reason = el("input", { name: "reason",
    placeholder: "why the gate is overridden (recorded)" });
  const override = el("input", { type: "checkbox", name: "force" });
  const form = el("form", { "data-review": r.id },
    el("button", { type: "submit", class: "primary" }, blocked ? "Approve" : "Approve & merge"),
    blocked ? el("label", {}, override, " override the blocked gate") : null,
    blocked ? reason : null);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const body = r.issue ? { issue: r.issue } : { task: r.id };
    if (blocked && override.checked) { body.force = true; body.reason = reason.value; }
    act(() => api("/api/approve", { method: "POST", body }), out, (task) => {
      onApproved(r, task);
      return "Merge queued as task " + task.id + ".";
    });
  });
  return el("div", { class: "review", "data-review": r.id },
    el("div", { class: "head" }, badge(blocked ? "blocked" : "open"),
      el("span", { class: "title" }, r.issue ? issueLink(r.issue) : "review", " ",
        r.branch ? el("span", { class: "mono" }, r.branch + " → " + (r.target || "main")) : null),
      el("span", { class: "muted" }, "review ", taskLink(r.id), " · ", r.review_result || "",
        r.review_mode ? " · mode " + r.review_mode : "", " · ", ago(r.updated))),
    r.must_fix.length ? [el("div", {}, "Must fix (" + r.must_fix.length + "):"),
      el("ul", {}, r.must_fix.map((f) => el("li", {}, el("span", { class: "mono" },
        (f.file || "") + (f.line ? ":" + f.line : "")), " ", f.title || f.message || "")))]
      : blocked ? el("div", { class: "muted" },
        "No blocking finding: the verdict itself blocks.") : null,
    form, out);
}

// ---- merge queues (docs/merge-queue.md) ----

function mergeQueueView(main) {
  const list = el("div", { id: "merge-queues" });
  main.append(el("h1", {}, "Merge queues"),
    el("p", { class: "muted" },
      "Each target's speculative queue: every merge is tested on top of the ones ahead of it, " +
      "candidates in parallel, and lands only as the very commit that passed."), list);
  return {
    async refresh() {
      const queues = await api("/api/merge-queues");
      list.replaceChildren(...(queues.length ? queues.map(mergeQueuePanel)
        : [el("div", { class: "panel muted" }, "No merge queue on this host.")]));
    },
  };
}

function mergeQueuePanel(q) {
  const active = q.items.filter((i) => i.state !== "landed" && i.state !== "ejected").length;
  const perMerge = q.landed ? " (" + (q.test_runs / q.landed).toFixed(2) + " per landed merge)"
    : "";
  const rows = q.items.slice().reverse().map((i) => {
    const state = i.claim_kind === "build" ? "building" : i.claim_kind === "test" ? "testing"
      : i.state;
    const end = i.ended_ms > 0 ? i.ended_ms : Date.now();
    return el("tr", { "data-item": String(i.seq) },
      el("td", { class: "num" }, String(i.seq)), el("td", {}, taskLink(i.id)),
      el("td", { class: "mono" }, i.source),
      el("td", { class: "mono" }, i.candidate ? i.candidate.slice(0, 12) : "–"),
      el("td", { class: "num" }, String(i.tests)), el("td", {}, age(end - i.enqueued_ms)),
      el("td", {}, badge(state), i.reason && (state === "ejected" || state === "failed")
        ? el("span", { class: "muted" }, " " + i.reason) : null));
  });
  return panel(q.repo + " → " + q.target, (q.paused ? "paused · " : "") + active + " queued · " +
    q.landed + " landed · " + q.ejected + " ejected · " + q.test_runs + " test runs" + perMerge,
    table(["##", "Task", "Branch", "Candidate", "#Runs", "In queue", "State"], rows,
      "Nothing queued yet."));
}

// ---- figures ----

const COLOURS = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#1b7c83", "#bc4c00",
  "#6e7781"];

// A line chart of `series` ([{name, points: [[t, value]]}]) over the last `span` ms. A
// specialist whose line stays at zero is left out, so the chart shows what moves.
function lineChart(title, id, all, unit, span) {
  const ns = "http://www.w3.org/2000/svg";
  const W = 600, H = 160, L = 48, R = 10, T = 10, B = 22;
  const series = all.filter((s) => s.points.some((p) => p[1] > 0));
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  const add = (tag, attrs, text) => {
    const node = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    svg.append(node);
    return node;
  };
  const now = Date.now();
  const max = niceMax(Math.max(0, ...series.flatMap((s) => s.points.map((p) => p[1]))));
  const x = (t) => L + (W - L - R) * Math.max(0, 1 - (now - t) / span);
  const y = (v) => T + (H - T - B) * (1 - v / max);
  for (const f of [0, 0.5, 1]) {
    add("line", { x1: L, x2: W - R, y1: y(max * f), y2: y(max * f),
      class: f === 0 ? "axis" : "grid" });
    add("text", { x: L - 6, y: y(max * f) + 4, "text-anchor": "end" }, formatValue(max * f, unit));
  }
  const hours = span >= 86400000;
  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    const label = f === 1 ? "now" : hours ? "−" + Math.round(24 * (1 - f)) + " h" :
      "−" + Math.round(60 * (1 - f)) + " min";
    add("text", { x: L + (W - L - R) * f, y: H - 5,
      "text-anchor": f === 0 ? "start" : f === 1 ? "end" : "middle" }, label);
  }
  series.forEach((s, i) => {
    const colour = COLOURS[all.indexOf(s) % COLOURS.length];
    if (s.points.length === 1) add("circle", { cx: x(s.points[0][0]), cy: y(s.points[0][1]), r: 3,
      fill: colour });
    else add("polyline", { points: s.points.map(([t,
      v]) => x(t).toFixed(1) + "," + y(v).toFixed(1)).join(" "), stroke: colour });
  });
  if (!series.length) add("text", { x: (L + W - R) / 2, y: (T + H - B) / 2 + 4,
    "text-anchor": "middle", class: "empty" }, "nothing yet");
  const legend = el("div", { class: "legend" }, series.map((s) => {
    const swatch = el("i");
    swatch.style.background = COLOURS[all.indexOf(s) % COLOURS.length]; // CSSOM: allowed by the CSP
    return el("span", {}, swatch, s.name);
  }));
  return el("section", { class: "panel chart", id }, el("h2", {}, title), svg, legend);
}

function niceMax(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function formatValue(v, unit) {
  if (unit === "$") return "$" + (v >= 1 ? v.toFixed(0) : v.toFixed(2));
  if (unit === "ms") return v >= 1000 ? (v / 1000).toFixed(1) + "s" : v.toFixed(0) + "ms";
  return v >= 10 || v === 0 ? v.toFixed(0) : v.toFixed(1);
}

function figuresView(main, arg, params) {
  const range = params.get("range") === "day" ? "day" : "hour";
  const glance = el("div");
  const charts = el("div", { class: "charts", id: "charts" });
  main.append(el("h1", {}, "Figures", el("span", { class: "range" },
    link("#/figures", "last hour", range === "hour" ? "current" : null),
    link("#/figures?range=day", "last day", range === "day" ? "current" : null))),
    el("p", { class: "muted", id: "figures-note" }), panel("Now",
      "per specialist, over the last 10 minutes", glance), charts);
  return {
    async refresh() {
      const figures = await api("/api/figures");
      const samples = figures[range] || [];
      const span = range === "day" ? 86400000 : 3600000;
      const names = [...new Set(samples.flatMap((s) => Object.keys(s.specialists || {})))].sort();
      const per = (key) => names.map((name) => ({ name, points: samples
        .filter((s) => s.specialists && s.specialists[name] &&
          typeof s.specialists[name][key] === "number")
        .map((s) => [s.t, s.specialists[name][key]]) }));
      document.getElementById("figures-note").textContent = samples.length
        ? "A sample every " + (range === "day" ? figures.day_every_ms :
          figures.every_ms) / 1000 + " s since cloister-web started (" + samples.length +
          " so far)."
        : "No sample yet: cloister-web asks the broker every " + figures.every_ms / 1000 + " s.";
      renderGlance(glance, figures.hour || [], names);
      charts.replaceChildren(
        lineChart("Throughput (tasks finished per minute)", "chart-throughput", per("per_min"), "",
          span),
        lineChart("Queue depth (tasks queued)", "chart-queue", per("queued"), "", span),
        lineChart("Latency, submit to finish (median)", "chart-latency", per("latency_ms"), "ms",
          span),
        lineChart("Agent cost (USD per hour)", "chart-cost", per("cost_per_h"), "$", span));
    },
  };
}

// The last 10 minutes per specialist, in figures: what the charts say, at a glance.
function renderGlance(box, samples, names) {
  const recent = samples.filter((s) => s.t >= Date.now() - 600000);
  const last = samples[samples.length - 1];
  const rows = names.map((name) => {
    const mine = recent.map((s) => (s.specialists || {})[name]).filter(Boolean);
    const mean = (key) => {
      const values = mine.map((m) => m[key]).filter((v) => typeof v === "number");
      return values.length ? values.reduce((a, b) => a + b, 0) / values.length : null;
    };
    const now = last && last.specialists && last.specialists[name];
    const latency = mean("latency_ms");
    return el("tr", {}, el("td", {}, queueLink(name)),
      el("td", { class: "num" }, (mean("per_min") || 0).toFixed(1)),
      el("td", { class: "num" }, now ? now.queued : 0),
      el("td", { class: "num" }, now ? now.running : 0),
      el("td", { class: "num" }, latency === null ? "—" : formatValue(latency, "ms")),
      el("td", { class: "num" }, money(mean("cost_per_h") || 0) + "/h"));
  });
  box.replaceChildren(table(["Specialist", "#Finished / min", "#Queued", "#Running", "#Latency p50",
    "#Cost"], rows, "no sample yet"));
  box.querySelector("table").id = "glance";
}

// ---- live events ----

let source = null;

function connectEvents(since) {
  if (source) return;
  const from = since >= 0 ? since : state.lastSeq;
  source = new EventSource(from >= 0 ? "/api/events?since=" + from : "/api/events");
  source.onmessage = onEvent;
  source.onopen = () => {
    const box = document.getElementById("connection");
    box.textContent = "live";
    box.className = "connection live";
  };
  source.onerror = () => {
    const box = document.getElementById("connection");
    box.textContent = "reconnecting…";
    box.className = "connection";
  };
}

function onEvent(message) {
  let event;
  try { event = JSON.parse(message.data); } catch (e) { return; }
  state.lastSeq = event.seq || state.lastSeq;
  if (event.event === "task.progress" && event.task) {
    state.progress.set(event.task, event.text || "");
    for (const row of document.querySelectorAll("tr[data-task]")) {
      const cell = row.querySelector("td.progress");
      if (cell && row.getAttribute("data-task") === event.task) cell.textContent = event.text || "";
    }
  }
  if (state.view && state.view.onEvent) state.view.onEvent(event);
}

// ---- start ----

async function start() {
  // `pan web url` gives #token=...: exchanged once for the cookie, then out of the address.
  const match = /(?:^#|[#&?])token=([0-9a-f]+)/.exec(location.hash);
  if (match) {
    try {
      await api("/api/session", { method: "POST", token: match[1], body: {} });
    } catch (error) { failed(error); }
    history.replaceState(null, "", location.pathname + "#/");
  }
  window.addEventListener("hashchange", route);
  route();
  // Views that read much (an issue's timeline) refresh on their events only.
  setInterval(() => { if (!document.hidden && state.view &&
    state.view.periodic !== false) scheduleRefresh(10); }, 5000);
}

start();
