#!/usr/bin/python3
"""cloister-web against a real broker and workers, in a temporary directory.

  test_web.py api BIN_DIR OUT_DIR      every endpoint: status codes, the token and the
                                       session cookie, the origin check, bad JSON, a body too
                                       big, queue pages and "move to urgent", history search,
                                       an issue's chain and timeline, reviews awaiting
                                       approval, approve with an override's reason, the event
                                       stream
  test_web.py browser BIN_DIR OUT_DIR  headless Chromium (DevTools protocol): every view and
                                       action of the page (overview, task, issue, queue,
                                       history, reviews, figures), reached by its address
                                       after a reload with the cookie alone; screenshots of
                                       each at 1,400 and 800 px wide go to OUT_DIR

Exit 0 when every check passed, 1 otherwise (each failure printed)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

MODE, BIN, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return ok


class System:
    """A broker, cloister-web and workers on ipc endpoints in a temporary directory."""

    def __init__(self, config=""):
        self.dir = tempfile.mkdtemp(prefix="cloister-web-")
        self.home = os.path.join(self.dir, "home")
        os.makedirs(self.home)
        with open(os.path.join(self.home, "cloister.toml"), "w") as f:
            f.write(config)
        self.env = dict(os.environ, PANOPTICON_HOME=self.home,
                        CLOISTER_IN="ipc://%s/in.sock" % self.dir,
                        CLOISTER_EVENTS="ipc://%s/events.sock" % self.dir,
                        CLOISTER_CONTROL="ipc://%s/control.sock" % self.dir,
                        CLOISTER_WORKSPACE_ROOTS=self.dir)
        self.procs = []
        self.spawn("broker", [os.path.join(BIN, "cloister-broker")])
        self.wait_for(lambda: self.pan("status").returncode == 0, "the broker to answer")
        self.spawn("web", [os.path.join(BIN, "cloister-web"), "--port", "0"])
        port_file = os.path.join(self.home, "web.port")
        self.wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip(),
                      "cloister-web to listen")
        self.base = "http://127.0.0.1:%s" % open(port_file).read().strip()
        self.token = open(os.path.join(self.home, "web.token")).read().strip()

    def spawn(self, name, argv):
        log = open(os.path.join(self.dir, name + ".log"), "ab")
        proc = subprocess.Popen(argv, env=self.env, stdout=log, stderr=log,
                                start_new_session=True)
        self.procs.append(proc)
        return proc

    def worker(self, specialist, worker_id, command):
        self.spawn(worker_id, [os.path.join(BIN, "cloister-worker"), "--specialist", specialist,
                               "--worker-id", worker_id,
                               "--bind", "ipc://%s/%s.sock" % (self.dir, worker_id),
                               "--heartbeat-ms", "200", "--", "/bin/sh", "-c", command])

    def pan(self, *args):
        return subprocess.run([os.path.join(BIN, "pan")] + list(args), env=self.env,
                              capture_output=True, text=True, timeout=60)

    @staticmethod
    def wait_for(predicate, what, timeout=15):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate():
                return True
            time.sleep(0.05)
        raise SystemExit("test_web: gave up waiting for %s" % what)

    def request(self, path, method="GET", body=None, token=True, headers=None, raw=None):
        """(status, parsed JSON or text, headers)."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(self.base + path, data=data, method=method)
        if token:
            request.add_header("X-Cloister-Token", self.token if token is True else token)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        for key, value in (headers or {}).items():
            request.add_header(key, value)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, text, head = response.status, response.read().decode(), response.headers
        except urllib.error.HTTPError as error:
            status, text, head = error.code, error.read().decode(), error.headers
        try:
            return status, json.loads(text), head
        except ValueError:
            return status, text, head

    def stop(self):
        if os.environ.get("CLOISTER_KEEP_TESTDIR"):
            print("test_web: kept", self.dir, file=sys.stderr)
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if not os.environ.get("CLOISTER_KEEP_TESTDIR"):
            shutil.rmtree(self.dir, ignore_errors=True)


def paused_specialist(system, specialist, reason):
    """Plays a worker of `specialist` over the protocol (PROTOCOL.md) that takes a task and
    hands it back asking the broker to pause the specialist, as a specialist does when its
    model API refuses the key. Returns once the broker says the specialist is paused."""
    import msgpack
    import zmq
    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    endpoint = "ipc://%s/%s-w.sock" % (system.dir, specialist)
    pull.bind(endpoint)
    push = context.socket(zmq.PUSH)
    push.connect(system.env["CLOISTER_IN"])
    worker = specialist + "-w"
    push.send(msgpack.packb({"v": 1, "type": "hello", "worker": worker,
                             "specialist": specialist, "endpoint": endpoint}))
    system.wait_for(lambda: system.pan("submit", specialist, "--title", "pause me").returncode == 0,
                    specialist + " to be known")
    deadline = time.time() + 15
    task = None
    while task is None and time.time() < deadline:
        if pull.poll(100):
            message = msgpack.unpackb(pull.recv(), raw=False)
            if message.get("type") == "task":
                task = message
        push.send(msgpack.packb({"v": 1, "type": "heartbeat", "worker": worker}))
    check(task is not None, "the broker dispatched a task to the pausing worker")
    if task is not None:
        push.send(msgpack.packb({"v": 1, "type": "release", "worker": worker, "task": task["id"],
                                 "attempt": task["attempt"], "reason": reason, "pause": True}))
    system.wait_for(lambda: "Status: paused" in system.pan("specialists", "list").stdout,
                    specialist + " to be paused")
    pull.close(0)
    push.close(0)
    context.term()


def git_repo(system, name):
    """A repository with a main and a branch `feature` one commit ahead; its path and the
    branch's commit."""
    repo = os.path.join(system.dir, name)
    git = dict(system.env, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    for args in (["init", "-q", "-b", "main", repo],
                 ["-C", repo, "commit", "-q", "--allow-empty", "-m", "init"],
                 ["-C", repo, "checkout", "-q", "-b", "feature"],
                 ["-C", repo, "commit", "-q", "--allow-empty", "-m", "change"],
                 ["-C", repo, "checkout", "-q", "main"]):
        subprocess.run(["git"] + args, env=git, check=True)
    head = subprocess.run(["git", "-C", repo, "rev-parse", "feature"], env=git, check=True,
                          capture_output=True, text=True).stdout.strip()
    return repo, head


class ScriptedWorker:
    """A worker of `specialist` spoken over the protocol (PROTOCOL.md) from a thread: each task
    it gets is answered at once with answer(task) -> (outcome, error, result map), after
    `progress` progress lines."""

    def __init__(self, system, specialist, answer, progress=0):
        import threading
        import zmq
        self.system, self.specialist, self.answer = system, specialist, answer
        self.progress = progress
        self.worker = specialist + "-scripted"
        self.context = zmq.Context()
        self.pull = self.context.socket(zmq.PULL)
        self.endpoint = "ipc://%s/%s.sock" % (system.dir, self.worker)
        self.pull.bind(self.endpoint)
        self.push = self.context.socket(zmq.PUSH)
        self.push.connect(system.env["CLOISTER_IN"])
        self.stopping = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.send({"type": "hello", "worker": self.worker, "specialist": specialist,
                   "endpoint": self.endpoint})
        self.thread.start()

    def send(self, message):
        import msgpack
        message["v"] = 1
        self.push.send(msgpack.packb(message))

    def run(self):
        import msgpack
        while not self.stopping:
            if self.pull.poll(100):
                message = msgpack.unpackb(self.pull.recv(), raw=False)
                if message.get("type") == "task":
                    for i in range(self.progress):
                        self.send({"type": "progress", "worker": self.worker,
                                   "task": message["id"], "attempt": message["attempt"],
                                   "kind": "agent", "text": "line %d" % i})
                    outcome, error, result = self.answer(message)
                    reply = {"type": "result", "worker": self.worker, "task": message["id"],
                             "attempt": message["attempt"], "outcome": outcome,
                             "result": result}
                    if error:
                        reply["error"] = error
                    self.send(reply)
            self.send({"type": "heartbeat", "worker": self.worker})

    def stop(self):
        self.stopping = True
        self.thread.join()
        self.send({"type": "bye", "worker": self.worker})
        self.pull.close(0)
        self.push.close(100)
        self.context.term()


def test_session(system):
    """The token, shown once in the header, becomes an HttpOnly, SameSite=Strict cookie for
    /api; the cookie then stands for it, and a POST it authenticates must show its Origin."""
    check(system.request("/api/session", method="POST", body={}, token="0" * 64)[0] == 401,
          "a session from a wrong token: 401")
    status, body, head = system.request("/api/session", method="POST", body={})
    cookie = head.get("Set-Cookie", "")
    port = system.base.rsplit(":", 1)[1]
    check(status == 200 and cookie.startswith("cloister_%s=%s;" % (port, system.token)),
          "POST /api/session sets the cookie: " + cookie)
    for attribute in ("HttpOnly", "SameSite=Strict", "Path=/api"):
        check(attribute in cookie, "the cookie is " + attribute)
    jar = {"Cookie": cookie.split(";")[0]}
    check(system.request("/api/status", token=False, headers=jar)[0] == 200,
          "the cookie stands for the token")
    check(system.request("/api/status", token=False,
                         headers={"Cookie": "cloister_%s=%s" % (port, "0" * 64)})[0] == 401,
          "a cookie with a wrong token: 401")
    check(system.request("/api/session", method="POST", body={}, token=False,
                         headers=dict(jar, Origin=system.base))[0] == 401,
          "a session is made from the token, not from the cookie")
    path = "/api/specialists/test-agent/wake"
    check(system.request(path, method="POST", body={}, token=False, headers=jar)[0] == 403,
          "a POST the cookie authenticates, without an Origin: 403")
    check(system.request(path, method="POST", body={}, token=False,
                         headers=dict(jar, Origin="http://evil.example"))[0] == 403,
          "a POST the cookie authenticates, from another origin: 403")
    status, body, _ = system.request(path, method="POST", body={"task": "from the page"},
                                     token=False, headers=dict(jar, Origin=system.base))
    check(status == 200 and body.get("specialist") == "test-agent",
          "a POST the cookie authenticates, from the page's origin")


def test_host(system):
    """The Host header names the dashboard (DNS rebinding: a page of evil.example whose name
    now resolves to 127.0.0.1 sends Host: evil.example): anything else is 421, the page too,
    token or not; localhost, an address and a name in [web] hosts are served."""
    port = system.base.rsplit(":", 1)[1]
    for host in ("evil.example:" + port, "evil.example", "localhost.evil.example:" + port,
                 "127.0.0.1.evil.example", "localhost:" + port + "@evil.example", ""):
        status, body, _ = system.request("/api/status", headers={"Host": host})
        check(status == 421 and "does not name this dashboard" in json.dumps(body),
              "Host %r refused for /api: %s %s" % (host, status, body))
        check(system.request("/", token=False, headers={"Host": host})[0] == 421,
              "Host %r refused for the page" % host)
    for host in ("localhost:" + port, "127.0.0.1:" + port, "LOCALHOST", "[::1]:" + port,
                 "dashboard.example:" + port):
        status, _, _ = system.request("/api/status", headers={"Host": host})
        check(status == 200, "Host %r served: %s" % (host, status))


def test_queue_and_history(system):
    """A queue in dispatch order, paged; "move to urgent"; the history's filters, text
    search and pages."""
    ids = []
    for i in range(5):
        ids.append(system.pan("submit", "queue-agent", "--title", "queued number %d" % i,
                              "--issue", "Q-1").stdout.strip())
    status, body, _ = system.request("/api/queues/queue-agent?offset=0&limit=2")
    check(status == 200 and [t["id"] for t in body["items"]] == ids[:2] and body["total"] == 5,
          "GET /api/queues/NAME pages in dispatch order: %s" % body)
    status, body, _ = system.request("/api/queues/queue-agent?offset=4&limit=2")
    check([t["id"] for t in body.get("items", [])] == ids[4:], "the queue's last page")
    check(system.request("/api/queues/queue-agent?limit=0")[0] == 400, "a limit of 0: 400")
    check(system.request("/api/queues/nobody-agent")[0] == 404, "an unknown queue: 404")
    status, body, _ = system.request("/api/tasks/%s/priority" % ids[3], method="POST",
                                     body={"priority": "urgent"})
    check(status == 200 and body.get("priority") == "urgent", "POST priority: %s" % body)
    status, body, _ = system.request("/api/queues/queue-agent?limit=2")
    check([t["id"] for t in body["items"]] == [ids[3], ids[0]], "moved to urgent goes first")
    check(system.request("/api/tasks/%s/priority" % ids[0], method="POST",
                         body={"priority": "soon"})[0] == 400, "an unknown priority: 400")
    check(system.request("/api/tasks/%s/priority" % ids[0])[0] == 405, "GET on priority: 405")

    status, body, _ = system.request("/api/tasks?q=NUMBER%203")
    check(status == 200 and [t["id"] for t in body["items"]] == [ids[3]],
          "a text search, whatever the case: %s" % body)
    status, body, _ = system.request("/api/tasks?issue=Q-1&limit=2")
    check(len(body["items"]) == 2 and body["next"] == body["items"][1]["id"],
          "a history page says where the next starts")
    status, body2, _ = system.request("/api/tasks?issue=Q-1&limit=2&before=" + body["next"])
    check(len(body2["items"]) == 2 and body2["items"][0]["id"] not in
          [t["id"] for t in body["items"]], "the next page follows it")
    status, body, _ = system.request("/api/tasks?issue=Q-1&q=queued&limit=4")
    check(len(body["items"]) == 4 and body["next"] is not None, "a search pages too")
    status, body, _ = system.request("/api/tasks?issue=Q-1&q=queued&limit=4&before=" +
                                     body["next"])
    check(len(body["items"]) == 1 and body["next"] is None, "the search's last page")
    check(system.request("/api/tasks?limit=abc")[0] == 400, "a limit that is no number: 400")
    check(system.request("/api/tasks?state=bogus")[0] == 400, "an unknown state: 400")


def review_answer(head):
    """A review-agent's answer: the gate blocked by two findings in one file, one elsewhere."""
    findings = [
        {"id": "f-1", "severity": "error", "file": "src/a.c", "line": 12, "title": "buffer overrun",
         "message": "buffer overrun", "detail": "memcpy of len+1 bytes into a len-byte buffer",
         "suggestion": "copy len bytes and terminate", "blocking": True, "status": "new"},
        {"id": "f-2", "severity": "warning", "file": "src/a.c", "line": 40,
         "title": "unchecked return", "message": "unchecked return", "blocking": False},
        {"id": "f-3", "severity": "error", "file": "src/b.c", "line": 3, "title": "leak",
         "message": "leak", "suggestion": "free it on the error path", "blocking": True}]

    def answer(task):
        return "done", None, {"REVIEW_RESULT": "CHANGES_REQUESTED", "GATE": "blocked",
                              "review_mode": "normal", "diff_head": head, "FINDINGS": findings,
                              "approval": "blocked", "cost_usd": 0.42}
    return answer


def test_issue_and_reviews(system):
    """A review with findings and a failed test of one issue: the issue's chain and stored
    timeline, the review waiting for approval, approve refused in the page's words, then
    overridden with a reason."""
    repo, head = git_repo(system, "repo-PAN-9")
    review = ScriptedWorker(system, "review-agent", review_answer(head))
    tester = ScriptedWorker(system, "test-agent", lambda task: (
        "done", None, {"TEST_RESULT": "FAIL", "TESTS_RUN": 10, "TESTS_FAILED": 2,
                       "FAILURES": ["test_a: expected 1, got 2", "test_b: timed out"],
                       "TESTED_COMMIT": head}))
    try:
        check(system.pan("submit", "review-agent", "--id", "review-PAN-9", "--issue", "PAN-9",
                         "--workspace", repo, "--branch", "feature").returncode == 0,
              "submit the review")
        System.wait_for(lambda: '"state": "done"' in system.pan("task", "show", "review-PAN-9",
                                                               "--json").stdout, "the review")
        check(system.pan("submit", "review-agent", "--id", "review-solo", "--workspace", repo,
                         "--branch", "feature").returncode == 0, "submit a review of no issue")
        System.wait_for(lambda: '"state": "done"' in system.pan("task", "show", "review-solo",
                                                               "--json").stdout, "the review")
        check(system.pan("submit", "test-agent", "--id", "test-PAN-9", "--issue", "PAN-9",
                         "--workspace", repo, "--branch", "feature").returncode == 0,
              "submit the test run")
        System.wait_for(lambda: '"state": "done"' in system.pan("task", "show", "test-PAN-9",
                                                               "--json").stdout, "the test run")
    finally:
        review.stop()
        tester.stop()
    status, body, _ = system.request("/api/issues/PAN-9")
    check(status == 200 and [t["id"] for t in body.get("tasks", [])] ==
          ["review-PAN-9", "test-PAN-9"], "GET /api/issues/ID: the chain, oldest first")
    check(abs(body.get("cost_usd", 0) - 0.42) < 1e-9, "the issue's cost")
    seen = [(e["task"], e["event"]) for e in body.get("events", [])]
    for task in ("review-PAN-9", "test-PAN-9"):
        for event in ("task.queued", "task.dispatched", "task.done"):
            check((task, event) in seen, "the issue's timeline has %s %s" % (task, event))
    check(all("result" not in e for e in body.get("events", [])), "events without results")
    check(system.request("/api/issues/NOBODY-1")[0] == 404, "an unknown issue: 404")
    status, body, _ = system.request("/api/tasks/test-PAN-9/events")
    check(status == 200 and [e["event"] for e in body["events"]] ==
          ["task.queued", "task.dispatched", "task.done"], "GET /api/tasks/ID/events: %s" % body)

    status, body, _ = system.request("/api/reviews")
    entry = next((r for r in body if r.get("issue") == "PAN-9"), {}) if status == 200 else {}
    check(entry.get("id") == "review-PAN-9" and entry.get("gate") == "blocked" and
          [f["id"] for f in entry.get("must_fix", [])] == ["f-1", "f-3"] and
          entry.get("branch") == "feature", "GET /api/reviews: the blocked review: %s" % body)
    status, body, _ = system.request("/api/approve", method="POST", body={"issue": "PAN-9"})
    error = body.get("error", "") if isinstance(body, dict) else ""
    check(status == 409 and "blocked the merge gate" in error and "src/a.c:12" in error and
          "pan:" not in error and "--force" not in error and "override" in error,
          "approve of a blocked review is refused in the page's words: %r" % error)
    check(system.request("/api/approve", method="POST",
                         body={"issue": "PAN-9", "force": True})[0] == 400,
          "an override without a reason: 400")
    status, body, _ = system.request("/api/approve", method="POST",
                                     body={"issue": "PAN-9", "force": True,
                                           "reason": "hotfix, checked by hand"})
    override = (body.get("payload") or {}).get("override", {}) if status == 200 else {}
    check(override.get("reason") == "hotfix, checked by hand" and
          override.get("review") == "review-PAN-9",
          "approve with an override records its reason: %s %s" % (status, body))
    status, body, _ = system.request("/api/reviews")
    check(status == 200 and not any(r.get("issue") == "PAN-9" for r in body),
          "an approved review no longer waits")
    check(any(r.get("id") == "review-solo" for r in body), "a review of no issue waits too")
    status, _, _ = system.request("/api/approve", method="POST",
                                  body={"task": "review-solo", "force": True, "reason": "test"})
    check(status == 200, "approve a review by its task id")
    status, body, _ = system.request("/api/reviews")
    check(status == 200 and not any(r.get("id") == "review-solo" for r in body),
          "an approved review of no issue no longer waits")


def test_history_cut_pages(system):
    """The broker cuts a listing to keep its reply under its cap (two of these tasks fill
    it): the history reads on past the cut, so no task is skipped."""
    import msgpack
    import zmq
    context = zmq.Context()
    control = context.socket(zmq.REQ)
    control.connect(system.env["CLOISTER_CONTROL"])
    big = "x" * (1536 * 1024)
    try:
        for i in range(3):
            control.send(msgpack.packb({"v": 1, "type": "submit", "id": "big-%d" % i,
                                        "specialist": "queue-agent", "issue": "BIG-1",
                                        "payload": {"context": {"text": big}}}))
            check(msgpack.unpackb(control.recv(), raw=False).get("ok"), "submit a big task")
    finally:
        control.close(0)
        context.term()
    status, body, _ = system.request("/api/tasks?issue=BIG-1&limit=50")
    listed = [t["id"] for t in body.get("items", [])] if status == 200 else []
    check(listed == ["big-2", "big-1", "big-0"] and body.get("next") is None,
          "a page the broker cut is followed by the rest: %s" % listed)
    for i in range(3):
        system.request("/api/tasks/big-%d/cancel" % i, method="POST", body={})


def test_long_timeline(system):
    """An issue whose tasks said more progress lines than a timeline keeps: the newest are
    kept with every other event, and the page is told how many were left out."""
    chatty = ScriptedWorker(system, "chatty-agent", lambda task: ("done", None, {}),
                            progress=20)
    try:
        System.wait_for(lambda: system.pan("submit", "chatty-agent", "--issue", "CHAT-1",
                                           "--id", "chat-0").returncode == 0,
                        "chatty-agent to be known")
        for i in range(1, 55):
            system.pan("submit", "chatty-agent", "--issue", "CHAT-1", "--id", "chat-%d" % i)
        System.wait_for(lambda: '"state": "done"' in system.pan("task", "show", "chat-54",
                                                               "--json").stdout,
                        "the chatty tasks", timeout=60)
    finally:
        chatty.stop()
    status, body, _ = system.request("/api/issues/CHAT-1")
    events = body.get("events", []) if status == 200 else []
    progress = [e for e in events if e["event"] == "task.progress"]
    check(len(body.get("tasks", [])) == 55, "the chatty issue's tasks")
    check(len(progress) == 1000 and body.get("progress_omitted") == 100,
          "a timeline keeps the newest 1000 progress lines and says how many it left out: "
          "%d kept, %s left out" % (len(progress), body.get("progress_omitted")))
    check(progress and progress[-1]["task"] == "chat-54" and progress[-1]["text"] == "line 19",
          "the newest progress lines are the ones kept")
    check(sum(e["event"] == "task.done" for e in events) == 55, "every other event is kept")


def test_merge_queues(system):
    """GET /api/merge-queues: the merge-agents' queue files, as pan merge-queue --json."""
    status, body, _ = system.request("/api/merge-queues")
    check(status == 200 and body == [], "GET /api/merge-queues with no queue: %s" % body)
    queue_dir = os.path.join(system.home, "specialists", "merge-agent", "queue")
    os.makedirs(queue_dir, exist_ok=True)
    item = {"id": "merge-1", "seq": 1, "source": "feature/x", "state": "ejected",
            "candidate": "ab" * 20, "tests": 1, "reason": "tests failed: test_login",
            "enqueued_ms": 1, "ended_ms": 2}
    with open(os.path.join(queue_dir, "q-0000000000000001.json"), "w") as f:
        json.dump({"repo": "/r", "target": "main", "paused": False, "landed": 0, "ejected": 1,
                   "test_runs": 1, "items": [item]}, f)
    status, body, _ = system.request("/api/merge-queues")
    check(status == 200 and len(body) == 1 and body[0]["target"] == "main" and
          body[0]["items"][0]["reason"] == "tests failed: test_login",
          "GET /api/merge-queues lists the queue: %s" % body)
    os.remove(os.path.join(queue_dir, "q-0000000000000001.json"))


def test_api(system):
    url = system.pan("web", "url").stdout.strip()
    check(url == "%s/#token=%s" % (system.base, system.token), "pan web url: " + url)
    status, text, head = system.request("/", token=False)
    check(status == 200 and "<title>Cloister</title>" in text, "GET / serves the page")
    check("script-src 'self'" in head.get("Content-Security-Policy", ""), "the page has a CSP")
    check(system.request("/app.js", token=False)[0] == 200, "GET /app.js")
    check(system.request("/nope", token=False)[0] == 404, "an unknown page is 404")
    check(system.request("/", method="DELETE", token=False)[0] == 405, "DELETE / is 405")

    check(system.request("/api/status", token=False)[0] == 401, "no token: 401")
    check(system.request("/api/status", token="0" * 64)[0] == 401, "a wrong token: 401")
    check(system.request("/api/status?token=" + system.token, token=False)[0] == 401,
          "the token in the query is not taken (it would stay in logs and history)")
    status, body, _ = system.request("/api/status")
    check(status == 200 and "stats" in body and isinstance(body.get("specialists"), list),
          "GET /api/status")
    check(system.request("/api/nothing")[0] == 404, "an unknown API path is 404")
    test_merge_queues(system)
    test_session(system)
    test_host(system)

    # A test run needs a workspace (pan would take the git tree it runs in, outside the
    # test's workspace roots): the test directory is one.
    queued = system.pan("submit", "test-agent", "--title", "queued one", "--workspace",
                        system.dir).stdout.strip()
    status, body, _ = system.request("/api/tasks?state=queued")
    check(status == 200 and any(t["id"] == queued for t in body["items"]),
          "GET /api/tasks?state=queued")
    status, body, _ = system.request("/api/tasks/" + queued)
    check(status == 200 and body.get("title") == "queued one", "GET /api/tasks/ID")
    check(system.request("/api/tasks/no-such-task")[0] == 404, "an unknown task: 404")
    # The session a specialist's agent keeps, with the CLI it belongs to.
    os.makedirs(os.path.join(system.home, "specialists"), exist_ok=True)
    with open(os.path.join(system.home, "specialists", "test-agent.session"), "w") as f:
        json.dump({"format": 1, "cli": "codex", "session_id": "0199a213-81c0-7800-8aa1-bbab2a035a53",
                   "cwd": system.dir, "runs": 3, "cost_usd": 0}, f)
    status, body, _ = system.request("/api/status")
    entry = next((s for s in body.get("specialists", []) if s.get("name") == "test-agent"), {})
    check(entry.get("session", {}).get("agent") == "codex" and entry["session"].get("runs") == 3,
          "GET /api/status: a specialist's session and its agent CLI")
    status, body, _ = system.request("/api/queues/test-agent")
    check(status == 200 and queued in json.dumps(body), "GET /api/queues/NAME")
    status, body, _ = system.request("/api/figures")
    check(status == 200 and isinstance(body.get("hour"), list) and
          isinstance(body.get("day"), list), "GET /api/figures")
    sample = (body.get("hour") or [{}])[0]
    check("test-agent" in sample.get("specialists", {}), "a sample has each specialist: %s"
          % sample)

    path = "/api/tasks/%s/cancel" % queued
    check(system.request(path, method="POST", body={}, token=False)[0] == 401, "POST without token")
    check(system.request(path, method="POST", body={}, headers={"Origin": "http://evil.example"})[0]
          == 403, "POST from another origin: 403")
    check(system.request(path, method="POST", raw=b"{not json")[0] == 400, "bad JSON: 400")
    check(system.request(path, method="POST", raw=b"x" * (70 * 1024))[0] == 413, "a body too big: 413")
    check(system.request(path)[0] == 405, "GET on an action: 405")
    status, body, _ = system.request(path, method="POST", body={},
                                     headers={"Origin": system.base})
    check(status == 200 and body.get("state") == "cancelled", "POST cancel")
    check(system.request(path, method="POST", body={})[0] == 409, "cancelling it again: 409")
    check(system.request("/api/tasks/%s/priority" % queued, method="POST",
                         body={"priority": "urgent"})[0] == 409, "moving an ended task: 409")
    status, body, _ = system.request("/api/tasks/%s/retry" % queued, method="POST", body={})
    check(status == 200 and body.get("state") == "queued", "POST retry of a cancelled task")
    check(system.request("/api/tasks/no-such-task/retry", method="POST", body={})[0] == 404,
          "retry of an unknown task: 404")

    status, body, _ = system.request("/api/specialists/test-agent/wake", method="POST",
                                     body={"task": "look at the logs"})
    check(status == 200 and body.get("specialist") == "test-agent", "POST wake")
    check(system.request("/api/specialists/nobody-agent/wake", method="POST", body={})[0] == 400,
          "waking an unknown specialist: 400")
    check(system.request("/api/specialists/test-agent/wake", method="POST",
                         body={"task": 5})[0] == 400, "a wake with a task that is no string: 400")

    check(system.request("/api/approve", method="POST", body={})[0] == 400, "approve without issue")
    status, body, _ = system.request("/api/approve", method="POST", body={"issue": "NONE-1"})
    check(status == 409 and "no finished review" in body.get("error", ""), "approve, no review")
    # Cancel what test-agent has queued, so the scripted worker gets only the issue's tasks.
    for task in system.request("/api/queues/test-agent")[1]["items"]:
        system.request("/api/tasks/%s/cancel" % task["id"], method="POST", body={})
    test_queue_and_history(system)
    test_issue_and_reviews(system)
    test_long_timeline(system)
    test_history_cut_pages(system)

    check(system.request("/api/events?since=abc")[0] == 400, "events since no number: 400")
    request = urllib.request.Request(system.base + "/api/events?since=0",
                                     headers={"X-Cloister-Token": system.token})
    with urllib.request.urlopen(request, timeout=10) as stream:
        check(stream.headers.get("Content-Type") == "text/event-stream", "the stream's type")
        lines = [stream.readline().decode().rstrip("\n") for _ in range(3)]
    check(lines[0] == "id: 1" and lines[1].startswith("data: {") and
          json.loads(lines[1][6:]).get("seq") == 1, "the stream replays from since: " + repr(lines))
    # A browser that reconnects sends the last id it saw: the stream goes on after it.
    request = urllib.request.Request(system.base + "/api/events?since=0",
                                     headers={"Last-Event-ID": "2",
                                              "X-Cloister-Token": system.token})
    with urllib.request.urlopen(request, timeout=10) as stream:
        first = stream.readline().decode().rstrip("\n")
    check(first == "id: 3", "Last-Event-ID resumes after it: " + repr(first))


class Browser:
    """Headless Chromium driven through the DevTools protocol (python3-websocket)."""

    def __init__(self, url, profile):
        import websocket
        self.proc = subprocess.Popen(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--remote-debugging-port=0", "--user-data-dir=" + profile,
             "--window-size=1400,900", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port_file = os.path.join(profile, "DevToolsActivePort")
        System.wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip(),
                        "Chromium's DevTools port", timeout=30)
        self.port = open(port_file).read().split()[0]
        targets = json.loads(urllib.request.urlopen(
            "http://127.0.0.1:%s/json/list" % self.port).read())
        page = [t for t in targets if t.get("type") == "page"][0]
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30)
        self.next_id = 0
        self.errors = []
        self.call("Runtime.enable")

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("method") == "Runtime.exceptionThrown":
                details = message["params"]["exceptionDetails"]
                self.errors.append(details.get("exception", {}).get("description") or
                                   details.get("text"))
            if message.get("id") == self.next_id:
                return message.get("result", {})

    def eval(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    def wait_for(self, expression, timeout=15):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.eval("!!(%s)" % expression):
                return True
            time.sleep(0.05)
        return False

    def go(self, address):
        """Shows a view by its address, as following a link does."""
        self.eval("location.hash = %s; true" % json.dumps(address))

    def click(self, selector):
        return self.eval("(() => { const e = document.querySelector(%s); if (!e) return false; "
                         "e.click(); return true; })()" % json.dumps(selector))

    def text(self, selector):
        return self.eval("(document.querySelector(%s) || {}).textContent || ''"
                         % json.dumps(selector))

    def screenshots(self, name):
        """The whole page at 1,400 and at 800 px wide: OUT/<name>-1400.png, -800.png."""
        import base64
        for width in (1400, 800):
            self.call("Emulation.setDeviceMetricsOverride", width=width, height=900,
                      deviceScaleFactor=1, mobile=False)
            time.sleep(0.2)
            height = self.eval("document.documentElement.scrollHeight")
            self.call("Emulation.setDeviceMetricsOverride", width=width,
                      height=min(max(int(height or 900), 600), 6000), deviceScaleFactor=1,
                      mobile=False)
            time.sleep(0.2)
            data = self.call("Page.captureScreenshot", format="png")["data"]
            with open(os.path.join(OUT, "%s-%d.png" % (name, width)), "wb") as f:
                f.write(base64.b64decode(data))
        self.call("Emulation.setDeviceMetricsOverride", width=1400, height=900,
                  deviceScaleFactor=1, mobile=False)

    def new_tab(self, url):
        """Opens `url` in a new tab of the same browser: its target id and a websocket to it."""
        import websocket
        target = self.call("Target.createTarget", url=url)["targetId"]
        targets = json.loads(urllib.request.urlopen(
            "http://127.0.0.1:%s/json/list" % self.port).read())
        page = [t for t in targets if t.get("id") == target][0]
        return target, websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30)

    def close_tab(self, target, tab):
        """Closes a tab new_tab() opened; this one is in front again."""
        tab.close()
        self.call("Target.closeTarget", targetId=target)
        self.call("Page.bringToFront")

    def close(self):
        self.ws.close()
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def ids(selector):
    """The ids of a table's rows, as a JSON text (JavaScript)."""
    return ("JSON.stringify([...document.querySelectorAll('%s tbody tr')]"
            ".map(r => r.dataset.task))" % selector)


def json_list(values):
    """A list as JSON.stringify writes it, quoted for JavaScript."""
    return json.dumps(json.dumps(values, separators=(",", ":")))


def rows_text(selector):
    return "[...document.querySelectorAll('%s tbody tr')].map(r => r.textContent).join('\\n')" \
        % selector


def test_overview(system, browser, running, title, go, failing):
    """The overview: the running task and its new progress line, a markup title kept as text,
    a paused specialist with why, "idle" not drawn as a warning, Retry, the Wake form."""
    rows = rows_text("#running")
    check(browser.wait_for("document.querySelector(%s)"
                           % json.dumps("#running tr[data-task='%s']" % running)),
          "the page lists the running task")
    check(browser.wait_for("(%s).includes(%s)" % (rows, json.dumps(title))),
          "the markup title shows as text")
    check(browser.eval("document.querySelectorAll('main img').length") == 0,
          "the markup title made no element")
    check(browser.eval("window.__xss === undefined"), "the markup title ran nothing")
    check(browser.wait_for("document.getElementById('connection').textContent === 'live'"),
          "the page follows the live events")
    specialists = rows_text("#specialists")
    check(browser.wait_for("(%s).includes('pause-agentpausedthe model API refused the key')"
                           % specialists), "a paused specialist shows as paused, with why")
    check(browser.eval("(() => { const idle = [...document.querySelectorAll('#specialists "
                       ".badge')].filter(b => b.textContent === 'idle'); return idle.length > 0 "
                       "&& idle.every(b => b.classList.contains('neutral')); })()"),
          "an idle specialist is drawn in a neutral colour, not a warning")
    open(go, "w").close()
    started = time.time()
    check(browser.wait_for("(%s).includes('SECOND-LINE-')" % rows, timeout=10),
          "the new progress line appears")
    print("progress line on the page %.2f s after the command was told to print it"
          % (time.time() - started))
    check(browser.wait_for("document.querySelector(%s)" % json.dumps(
        "#failures tr[data-task='%s'] button[data-action=retry]" % failing)),
          "a failed task is listed with its Retry")
    browser.screenshots("overview")
    check(browser.click("#failures tr[data-task='%s'] button[data-action=retry]" % failing),
          "click Retry")
    check(System.wait_for(lambda: "retried by a user" in json.dumps(
        system.request("/api/tasks/%s/events" % failing)[1]), "the retry", timeout=10),
        "Retry queued the failed task again")
    options = browser.eval("[...document.querySelectorAll('#wake-form select option')]"
                           ".map(o => o.value)") or []
    check("test-agent" in options and "queue-agent" in options,
          "the Wake form's specialist is a select of the known ones: %s" % options)
    browser.eval("const f = document.getElementById('wake-form'); f.specialist.value = "
                 "'test-agent'; f.task.value = 'look at the logs'; "
                 "f.querySelector('button').click(); true")
    check(browser.wait_for("document.getElementById('wake-result').textContent"
                           ".startsWith('Queued as task')"), "the Wake form queues a task")


def test_queue_view(system, browser, queued):
    """A queue's own page after a full load with the cookie alone: its tasks in dispatch
    order, "move to urgent" and cancel."""
    browser.call("Page.navigate", url=system.base + "/#/queue/queue-agent")
    rows = ids("#queue")
    check(browser.wait_for("%s === %s" % (rows, json_list(queued))),
          "the queue page lists the queued tasks in dispatch order, loaded by its address")
    check(browser.wait_for("document.getElementById('queue-about').textContent.includes("
                           "'No worker of queue-agent is connected')"),
          "the queue page says no worker takes them")
    about = browser.eval("document.getElementById('queue-about').textContent") or ""
    check("null" not in about and "undefined" not in about,
          "the queue page's line has no 'null' in it (it read '0 failednull'): %r" % about)
    browser.screenshots("queue")
    check(browser.click("#queue tr[data-task='%s'] button[data-action=urgent]" % queued[2]),
          "click Move to urgent")
    moved = [queued[2], queued[0], queued[1], queued[3]]
    check(browser.wait_for("%s === %s" % (rows, json_list(moved))),
          "the moved task is first")
    cancel = "#queue tr[data-task='%s'] button[data-action=cancel]" % queued[3]
    check(browser.click(cancel), "click Cancel")
    check(browser.wait_for("document.querySelector(%s).textContent === 'Really cancel?'"
                           % json.dumps(cancel)), "one click on Cancel only asks")
    time.sleep(1)
    status, body, _ = system.request("/api/tasks/%s" % queued[3])
    check(status == 200 and body.get("state") == "queued",
          "one click cancelled nothing (the task is still queued)")
    check(browser.click(cancel), "click Really cancel?")
    check(browser.wait_for("%s === %s" % (rows, json_list(moved[:3]))),
          "the second click cancelled it: it left the queue")


def test_task_views(system, browser):
    """A task's own view: the review's findings grouped by file with suggestions, its stored
    timeline, the same view after a reload; the test run's failures."""
    browser.go("#/task/review-PAN-7")
    check(browser.wait_for("document.querySelectorAll('#findings .file-group').length === 2"),
          "the review's findings, grouped by file")
    findings = browser.text("#findings")
    check("src/a.c" in findings and "Suggestion: copy len bytes and terminate" in findings,
          "the findings carry their suggestions")
    check("Gate blocked by 2 findings" in browser.text("#task-verdict"), "the task's verdict")
    check(browser.wait_for("['dispatched', 'done'].every(e => [...document.querySelectorAll("
                           "'#task-timeline .badge')].map(b => b.textContent).includes(e))"),
          "the task's timeline from the stored events")
    browser.screenshots("task-review")
    browser.call("Page.reload")
    check(browser.wait_for("document.getElementById('task-id') && "
                           "document.getElementById('task-id').textContent === 'review-PAN-7'"),
          "a reload shows the same task")
    # A link opened in a new tab: the cookie, not the token, lets it in.
    href = browser.eval("document.querySelector(\"a[href='#/issue/PAN-7']\")"
                        "?.getAttribute('href')")
    check(href == "#/issue/PAN-7", "the task page links to its issue with a real link")
    target, tab = browser.new_tab(system.base + "/" + (href or ""))
    try:
        opened = False
        deadline = time.time() + 15
        while not opened and time.time() < deadline:
            tab.send(json.dumps({"id": 1, "method": "Runtime.evaluate", "params": {
                "expression": "document.querySelectorAll('#chain .step').length",
                "returnByValue": True}}))
            while True:
                reply = json.loads(tab.recv())
                if reply.get("id") == 1:
                    break
            opened = reply.get("result", {}).get("result", {}).get("value") == 2
            time.sleep(0.1)
        check(opened, "the issue's link opens in a new tab")
    finally:
        browser.close_tab(target, tab)
    browser.go("#/task/test-PAN-7")
    check(browser.wait_for("(document.getElementById('failures') || {}).textContent"
                           "?.includes('test_a: expected 1, got 2')"), "the test run's failures")
    browser.screenshots("task-test")


def test_reviews_view(system, browser):
    """Reviews awaiting approval: the blocked gate holds (its refusal in the page's words),
    an override needs a reason, then the merge is queued."""
    browser.go("#/reviews")
    card = "#reviews .review[data-review='review-PAN-7']"
    check(browser.wait_for("document.querySelector(%s)" % json.dumps(card)),
          "the blocked review waits for approval")
    text = browser.text(card)
    check("blocked" in text and "src/a.c:12" in text and "src/b.c:3" in text and
          "unchecked return" not in text, "the card shows the must-fix findings only")
    browser.screenshots("reviews")
    result = card + " .result"
    browser.click(card + " button[type=submit]")
    check(browser.wait_for("document.querySelector(%s).textContent.includes('blocked the merge "
                           "gate')" % json.dumps(result)), "approve is refused: the gate holds")
    refusal = browser.text(result)
    check("pan:" not in refusal and "--force" not in refusal and "override" in refusal,
          "the refusal is in the page's words: %r" % refusal)
    browser.click(card + " input[name=force]")
    browser.click(card + " button[type=submit]")
    check(browser.wait_for("document.querySelector(%s).textContent.includes('needs a reason')"
                           % json.dumps(result)), "an override needs a reason")
    browser.eval("document.querySelector(%s).value = 'hotfix, checked by hand'; "
                 "window.__card = document.querySelector(%s); refreshView(); true"
                 % (json.dumps(card + " input[name=reason]"), json.dumps(card)))
    time.sleep(0.5)
    check(browser.eval("document.querySelector(%s) === window.__card && "
                       "document.querySelector(%s).value === 'hotfix, checked by hand'"
                       % (json.dumps(card), json.dumps(card + " input[name=reason]"))),
          "a refresh keeps the card and what is typed in it")
    browser.click(card + " button[type=submit]")
    check(browser.wait_for("document.getElementById('reviews-approved').textContent.includes("
                           "'Merge of PAN-7 queued as task merge-review-PAN-7')"),
          "approve with an override queues the merge, and the page says so")
    browser.screenshots("reviews-approved")


def test_issue_view(system, browser):
    """The issue's chain review -> test -> merge with their verdicts, and its timeline."""
    System.wait_for(lambda: '"state": "done"' in system.pan(
        "task", "show", "merge-review-PAN-7", "--json").stdout, "the merge")
    browser.go("#/task/merge-review-PAN-7")
    check(browser.wait_for("(document.getElementById('merge-files') || {}).textContent"
                           "?.includes('src/a.c')"), "the merge's files")
    check("Merged." in browser.text("#task-verdict"), "the merge's verdict")
    browser.screenshots("task-merge")
    browser.go("#/issue/PAN-7")
    check(browser.wait_for("document.querySelectorAll('#chain .step').length === 3"),
          "the issue's chain has its review, test and merge")
    chain = browser.text("#chain")
    for words in ("Gate blocked", "Tests failed (2 failed, 8 passed of 10)", "Merged.",
                  "tested ", "$0.42",
                  "gate overridden: hotfix, checked by hand"):
        check(words in chain, "the chain says %r: %r" % (words, chain))
    check(browser.wait_for("document.querySelectorAll('#issue-timeline li').length >= 9"),
          "the issue's timeline has the stored events of its three tasks")
    browser.screenshots("issue")


def test_history_view(system, browser, queued):
    browser.go("#/history?q=" + "queued%20task")
    rows = ids("#history")
    check(browser.wait_for("JSON.parse(%s).length === 4" % rows), "the history's text search")
    browser.eval("const f = document.getElementById('history-filters'); f.state.value = "
                 "'cancelled'; f.querySelector('button').click(); true")
    check(browser.wait_for("location.hash.includes('state=cancelled') && %s === %s"
                           % (rows, json_list([queued[3]]))),
          "the history's filters, in the address")
    browser.screenshots("history")


def test_merge_queue_view(system, browser):
    """The merge queues page: one queue's merges, an ejected one with its reason."""
    queue_dir = os.path.join(system.home, "specialists", "merge-agent", "queue")
    os.makedirs(queue_dir, exist_ok=True)
    path = os.path.join(queue_dir, "q-0000000000000002.json")
    with open(path, "w") as f:
        json.dump({"repo": "/r", "target": "main", "paused": False, "landed": 1, "ejected": 1,
                   "test_runs": 3, "items": [
                       {"id": "merge-a", "seq": 1, "source": "feature/a", "state": "landed",
                        "candidate": "cd" * 20, "tests": 2, "enqueued_ms": 1, "ended_ms": 4001},
                       {"id": "merge-b", "seq": 2, "source": "feature/b", "state": "ejected",
                        "candidate": "ab" * 20, "tests": 1, "reason": "tests failed: test_login",
                        "enqueued_ms": 1, "ended_ms": 2001}]}, f)
    browser.go("#/merge-queue")
    check(browser.wait_for("document.querySelectorAll('#merge-queues tr[data-item]').length === 2"
                           " && document.getElementById('merge-queues').textContent"
                           ".includes('tests failed: test_login')"
                           " && document.getElementById('merge-queues').textContent"
                           ".includes('3.00 per landed merge')"),
          "the merge queues page")
    browser.screenshots("merge-queue")
    os.remove(path)


def test_browser(system):
    os.makedirs(OUT, exist_ok=True)
    go = os.path.join(system.dir, "go")
    title = '<img src=x onerror="window.__xss=1">'
    # A running task whose title is markup: it prints a first line, then one more when told.
    system.worker("echo-agent", "echo-w",
                  "echo first line; while [ ! -e '%s' ]; do sleep 0.05; done; "
                  "echo SECOND-LINE-$(date +%%s); sleep 30" % go)
    # echo-agent is known once its worker has said hello.
    submitted = []
    system.wait_for(lambda: submitted.append(system.pan("submit", "echo-agent", "--title", title))
                    or submitted[-1].returncode == 0, "echo-agent to be known")
    running = submitted[-1].stdout.strip()
    system.wait_for(lambda: '"state": "running"' in system.pan("task", "show", running,
                                                               "--json").stdout, "the task to run")
    paused_specialist(system, "pause-agent", "the model API refused the key (HTTP 401): test")
    repo, head = git_repo(system, "repo-PAN-7")
    workers = [
        ScriptedWorker(system, "review-agent", review_answer(head)),
        ScriptedWorker(system, "test-agent", lambda task: (
            ("failed", "the suite crashed: segfault in test_c", {})
            if "break" in task.get("title", "") else
            ("done", None, {"TEST_RESULT": "FAIL", "TESTS_RUN": 10, "TESTS_PASSED": 8,
                            "TESTS_FAILED": 2, "TESTED_COMMIT": head, "cost_usd": 0,
                            "FAILURES": ["test_a: expected 1, got 2", "test_b: timed out"]}))),
        ScriptedWorker(system, "merge-agent", lambda task: (
            "done", None, {"MERGE_RESULT": "SUCCESS", "files_changed": ["src/a.c", "src/b.c"],
                           "RESOLVED_FILES": []}))]
    browser = None
    try:
        for specialist, task in (("review-agent", "review-PAN-7"), ("test-agent", "test-PAN-7")):
            check(system.pan("submit", specialist, "--id", task, "--issue", "PAN-7", "--title",
                             "PAN-7: login form", "--workspace", repo, "--branch",
                             "feature").returncode == 0, "submit " + task)
            System.wait_for(lambda: '"state": "done"' in system.pan("task", "show", task,
                                                                   "--json").stdout, task)
        failing = system.pan("submit", "test-agent", "--title", "break the build", "--workspace",
                             repo, "--max-attempts", "1").stdout.strip()
        System.wait_for(lambda: '"state": "failed"' in system.pan("task", "show", failing,
                                                                 "--json").stdout, "a failure")
        queued = [system.pan("submit", "queue-agent", "--title", "queued task %d" % i)
                  .stdout.strip() for i in range(4)]
        browser = Browser(system.base + "/#token=" + system.token,
                          os.path.join(system.dir, "chromium"))
        check(browser.wait_for("location.hash === '#/'"), "the token leaves the address bar")
        check(browser.eval("document.cookie") == "", "the session cookie is out of scripts' reach")
        test_overview(system, browser, running, title, go, failing)
        test_queue_view(system, browser, queued)
        test_task_views(system, browser)
        test_reviews_view(system, browser)
        test_issue_view(system, browser)
        test_history_view(system, browser, queued)
        test_merge_queue_view(system, browser)
        browser.go("#/figures")
        check(browser.wait_for("document.querySelectorAll('#charts svg').length === 4"),
              "the figures: four charts")
        check(browser.wait_for("document.querySelector(%s)"
                               % json.dumps("#glance tr a[href='#/queue/queue-agent']")),
              "the figures at a glance, per specialist")
        check(browser.wait_for("document.querySelectorAll('#chart-queue polyline, "
                               "#chart-queue circle').length > 0"),
              "the queue depth is drawn")
        browser.screenshots("figures")
        check(browser.errors == [], "no script error on any page: %s" % browser.errors)
    finally:
        if browser is not None:
            browser.close()
        for worker in workers:
            worker.stop()


def main():
    # queue-agent: a specialist with no worker, so what is submitted to it stays queued.
    system = System("[specialists.queue-agent]\n\n[web]\nhosts = [\"dashboard.example\"]\n")
    try:
        test_api(system) if MODE == "api" else test_browser(system)
    finally:
        system.stop()
    if failures:
        print("test_web %s: %d failed" % (MODE, len(failures)), file=sys.stderr)
        return 1
    print("test_web %s: all checks passed" % MODE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
