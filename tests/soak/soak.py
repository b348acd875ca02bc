#!/usr/bin/python3
"""Soak: replays the hostile-load attack list against a running Cloister and prints a table.

Not part of the default suite (it takes a few minutes). It starts its own system in a
temporary directory -- a broker on ipc endpoints with CURVE on, and generic workers
(cloister-worker) -- then runs each attack in turn. After each one it submits a batch of
ordinary tasks as the legitimate client and waits for them:

  attack    what was done
  result    what the broker made of it (refusals counted, events kept, ...)
  lost      ordinary tasks the broker acknowledged that did not finish
  crashed   whether the broker process died
  RSS       the broker's resident memory afterwards, MB
  disk      the store (broker.db + WAL) afterwards, MB

Then the network partitions (partition.py): a second broker, on TCP with CURVE, with
generic workers and a `pan events --follow` in a network namespace of their own (needs root
and iproute2; skipped, and said so, where a namespace cannot be made). One line each:

  a worker cut off mid-task past its lease, then healed
  30 % loss and 200 ms delay for a minute, one way and both ways (the delay by netem, or by
  netfault where the kernel has no netem; none where neither)
  an events follower cut off for 8 s, then for 30 s, while events are published

each with its figures (tasks submitted, done, lost, run twice; side effects; late results
refused; events missed, duplicated) and PASS or FAIL.

Then many clients at once and broker restarts (restarts.py): test_many_clients sized up
(pan calls, submits, results and rounds of 8 workers started at once on a CURVE bus), and
kill -9 of the broker 60 times under load with generic workers whose side effect is made
under `pan task fence --exec`: tasks lost, run twice.

  usage: tests/soak/soak.py [--only attacks|partitions|restarts] [BIN_DIR]
         (default BIN_DIR: build/bin)
Needs python3-zmq and python3-msgpack (deploy/setup.sh installs them). Exits 1 if an
ordinary task was lost, the broker died or a partition line failed.
"""
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import msgpack
import zmq
import zmq.auth

sys.dont_write_bytecode = True  # no __pycache__ beside the sources
import partition  # noqa: E402 (after the line above)
import restarts  # noqa: E402

BATCH = 50  # ordinary tasks submitted after each attack


class System:
    """A broker and its workers in a temporary directory."""

    def __init__(self, bin_dir, endpoints=None, config=None):
        """endpoints: {in, events, control} (default: ipc in the directory); config: the
        text of cloister.toml (default: CURVE on, sync normal, 20,000 events kept)."""
        self.bin = bin_dir
        self.dir = tempfile.mkdtemp(prefix="cloister-soak-")
        self.home = os.path.join(self.dir, "home")
        os.makedirs(self.home)
        self.ep = endpoints or {name: "ipc://%s/%s.sock" % (self.dir, name)
                                for name in ("in", "events", "control")}
        self.env = dict(os.environ, PANOPTICON_HOME=self.home,
                        CLOISTER_IN=self.ep["in"], CLOISTER_EVENTS=self.ep["events"],
                        CLOISTER_CONTROL=self.ep["control"],
                        CLOISTER_WORKSPACE_ROOTS=self.dir)
        with open(os.path.join(self.home, "cloister.toml"), "w") as f:
            f.write(config or "[security]\ncurve = true\n\n[broker]\nsync = \"normal\"\n"
                              "event_retention = 20000\n")
        self.procs = []
        self.broker = None
        self.ctx = zmq.Context()
        self.seq = 0

    def spawn(self, name, argv):
        log = open(os.path.join(self.dir, name + ".log"), "ab")
        proc = subprocess.Popen(argv, env=self.env, stdout=log, stderr=log,
                                start_new_session=True)
        self.procs.append(proc)
        return proc

    def start_broker(self):
        self.broker = self.spawn("broker", [os.path.join(self.bin, "cloister-broker"),
                                            "--home", self.home])
        deadline = time.time() + 10
        while time.time() < deadline:
            if os.path.exists(os.path.join(self.home, "keys", "client_secret")):
                try:
                    self.call({"type": "stats"}, timeout_ms=500)
                    return
                except TimeoutError:
                    pass
            time.sleep(0.1)
        raise SystemExit("soak: the broker did not start (see %s/broker.log)" % self.dir)

    def start_worker(self, specialist, worker_id, command):
        bind = "ipc://%s/%s.sock" % (self.dir, worker_id)
        self.spawn(worker_id, [os.path.join(self.bin, "cloister-worker"),
                               "--specialist", specialist, "--worker-id", worker_id,
                               "--bind", bind, "--heartbeat-ms", "200", "--",
                               "/bin/sh", "-c", command])

    def pan(self, *args):
        return subprocess.run([os.path.join(self.bin, "pan")] + list(args), env=self.env,
                              capture_output=True, text=True, timeout=30)

    def keys(self, name):
        """(public, secret) of a client cert under keys/ and the broker's public key."""
        cert = os.path.join(self.home, "keys", name)
        public, secret = zmq.auth.load_certificate(cert)
        server, _ = zmq.auth.load_certificate(os.path.join(self.home, "keys", "broker"))
        return public, secret, server

    def socket(self, kind, endpoint, cert="client_secret"):
        sock = self.ctx.socket(kind)
        sock.linger = 0
        if cert is not None:
            sock.curve_publickey, sock.curve_secretkey, sock.curve_serverkey = self.keys(cert)
        sock.connect(endpoint)
        return sock

    def call(self, request, timeout_ms=5000, cert="client_secret"):
        sock = self.socket(zmq.REQ, self.ep["control"], cert)
        try:
            sock.send(msgpack.packb(dict(request, v=1)))
            if not sock.poll(timeout_ms):
                raise TimeoutError(request["type"])
            return msgpack.unpackb(sock.recv(), raw=False)
        finally:
            sock.close()

    def rejected(self):
        return self.call({"type": "stats"})["data"].get("rejected", {})

    def submit_batch(self, specialist="echo-agent", count=BATCH):
        """Submits `count` tasks through control; returns the acknowledged ids."""
        acked = []
        for _ in range(count):
            self.seq += 1
            task_id = "soak-%d" % self.seq
            try:
                reply = self.call({"type": "submit", "id": task_id, "specialist": specialist})
            except TimeoutError:
                continue
            if reply.get("ok"):
                acked.append(task_id)
        return acked

    def lost(self, ids, wait_s=60):
        """How many of `ids` are not done within wait_s."""
        pending = set(ids)
        deadline = time.time() + wait_s
        while pending and time.time() < deadline:
            for task_id in list(pending):
                try:
                    reply = self.call({"type": "show_task", "id": task_id}, timeout_ms=2000)
                except TimeoutError:
                    continue
                if reply.get("ok") and reply["data"].get("state") == "done":
                    pending.discard(task_id)
            if pending:
                time.sleep(0.2)
        return len(pending)

    def rss_mb(self):
        try:
            with open("/proc/%d/status" % self.broker.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def disk_mb(self):
        total = 0
        for name in os.listdir(self.home):
            if name.startswith("broker.db") and not name.endswith(".reserve"):
                total += os.path.getsize(os.path.join(self.home, name))
        return total / (1024 * 1024)

    def stop(self):
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.ctx.destroy(linger=0)
        if os.environ.get("CLOISTER_KEEP_TESTDIR"):
            print("soak: kept %s" % self.dir, file=sys.stderr)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


# ---- the attacks: each returns its `result` text ---------------------------------------

def garbage(system):
    before = system.rejected().get("malformed", 0)
    push = system.socket(zmq.PUSH, system.ep["in"], "clients/attacker_secret")
    push.sndhwm = 0
    for _ in range(100000):
        push.send(os.urandom(random.randint(1, 200)))
    time.sleep(2)
    push.close()
    return "%d refused as malformed" % (system.rejected().get("malformed", 0) - before)


def oversized(system):
    before = system.rejected().get("too_big", 0)
    push = system.socket(zmq.PUSH, system.ep["in"], "clients/attacker_secret")
    blob = msgpack.packb({"v": 1, "type": "submit", "id": "huge", "specialist": "echo-agent",
                          "payload": {"x": "y" * (5 << 20)}})
    for _ in range(20):
        push.send(blob)
    time.sleep(3)
    push.close()
    accepted = system.call({"type": "show_task", "id": "huge"}).get("ok")
    return "%s (cut off by ZMQ_MAXMSGSIZE; %d counted too_big)" % (
        "ACCEPTED" if accepted else "none accepted",
        system.rejected().get("too_big", 0) - before)


def strangers(system):
    before = system.rejected().get("unauthenticated", 0)
    push = system.socket(zmq.PUSH, system.ep["in"], cert=None)
    sub = system.socket(zmq.SUB, system.ep["events"], cert=None)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    push.send(msgpack.packb({"v": 1, "type": "submit", "id": "stranger",
                             "specialist": "echo-agent"}))
    heard = sub.poll(1500)
    push.close()
    sub.close()
    time.sleep(1)  # the broker takes its handshake counts at its next iteration
    accepted = system.call({"type": "show_task", "id": "stranger"}).get("ok")
    return "submit %s, events %s, %d handshakes refused" % (
        "ACCEPTED" if accepted else "refused", "HEARD" if heard else "none",
        system.rejected().get("unauthenticated", 0) - before)


def connections(system):
    path = system.ep["in"][len("ipc://"):]
    held = []
    try:
        for _ in range(2200):
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(path)
            held.append(conn)
    except OSError as error:
        note = "stopped at %d (%s)" % (len(held), error.strerror)
    else:
        note = "%d held open" % len(held)
    acked = system.submit_batch()
    lost = system.lost(acked)
    for conn in held:
        conn.close()
    return "%s; %d/%d ordinary tasks done meanwhile" % (note, len(acked) - lost, len(acked))


def slow_subscriber(system):
    sub = system.socket(zmq.SUB, system.ep["events"], "clients/attacker_secret")
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.rcvhwm = 0
    push = system.socket(zmq.PUSH, system.ep["in"])
    for i in range(20000):
        push.send(msgpack.packb({"v": 1, "type": "submit", "id": "parked-%d" % i,
                                 "specialist": "test-agent"}))
    time.sleep(5)
    push.close()
    rss = system.rss_mb()
    sub.close()
    return "20,000 events to a SUB that never reads; RSS then %.0f MB" % rss


def many_slow_subscribers(system):
    """200 subscribers (of the attacker's key) that never read, then 20,000 events."""
    subs = []
    for _ in range(200):
        sub = system.socket(zmq.SUB, system.ep["events"], "clients/attacker_secret")
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.rcvhwm = 1
        sub.setsockopt(zmq.RCVBUF, 4096)
        subs.append(sub)
    time.sleep(1)
    before = system.rss_mb()
    push = system.socket(zmq.PUSH, system.ep["in"])
    for i in range(20000):
        push.send(msgpack.packb({"v": 1, "type": "submit", "id": "parked2-%d" % i,
                                 "specialist": "test-agent", "title": "t" * 100}))
    time.sleep(8)
    push.close()
    rss = system.rss_mb()
    for sub in subs:
        sub.close()
    return "200 SUBs that never read, 20,000 events: RSS %.0f -> %.0f MB" % (before, rss)


def unread_replays(system):
    """300 replays of 10,000 events of about 4 KiB each (task.queued events of submits with
    4 KiB titles, to a specialist with no worker), asked on DEALER sockets that never
    read: the issue's target is broker RSS under 400 MB."""
    push = system.socket(zmq.PUSH, system.ep["in"])
    title = "r" * 4096
    first = system.call({"type": "stats"})["data"]["last_seq"]
    for i in range(12000):
        push.send(msgpack.packb({"v": 1, "type": "submit", "id": "big-%d" % i,
                                 "specialist": "test-agent", "title": title}))
    deadline = time.time() + 120
    while time.time() < deadline and \
            system.call({"type": "stats"})["data"]["last_seq"] < first + 12000:
        time.sleep(0.2)
    push.close()
    dealers = []
    for _ in range(300):
        dealer = system.socket(zmq.DEALER, system.ep["control"], "clients/attacker_secret")
        dealer.send_multipart([b"", msgpack.packb({"v": 1, "type": "replay", "since": first,
                                                   "limit": 10000})])
        dealers.append(dealer)
    time.sleep(5)
    rss = system.rss_mb()
    for dealer in dealers:
        dealer.close()
    return "300 replays of 10,000 4 KiB events never read; RSS then %.0f MB" % rss


def chatty_task(system):
    system.start_worker("chatty-agent", "chatty-1", "yes | head -c 20000000")
    time.sleep(1)
    acked = system.submit_batch("chatty-agent", 1)
    start = time.time()
    lost = system.lost(acked, wait_s=120)
    took = time.time() - start
    events = 0
    since = 0
    while True:
        page = system.call({"type": "replay", "since": since,
                            "topic": "task.progress/chatty-agent", "limit": 10000})["data"]
        events += len(page)
        if not page:
            break
        since = page[-1]["seq"]
    return "20 MB of output in %.1f s kept as %d progress events%s" % (
        took, events, "" if not lost else " (task did not finish)")


def unreviewed_merge(system):
    reply = system.call({"type": "submit", "id": "merge-unreviewed", "specialist": "merge-agent",
                         "issue": "SOAK-1",
                         "payload": {"workspace": system.dir, "branch": "evil",
                                     "commit": "0" * 40}}, cert="clients/attacker_secret")
    return "refused: %s" % reply.get("error", "")[:60] if not reply.get("ok") else "ACCEPTED"


def outside_workspace(system):
    reply = system.call({"type": "submit", "id": "etc-review", "specialist": "review-agent",
                         "payload": {"workspace": "/etc"}}, cert="clients/attacker_secret")
    return "refused: %s" % reply.get("error", "")[:60] if not reply.get("ok") else "ACCEPTED"


def stolen_result(system):
    go = os.path.join(system.dir, "go-slow")
    system.start_worker("slow-agent", "slow-1",
                        "while [ ! -e '%s' ]; do sleep 0.05; done; echo 'RESULT: mine'" % go)
    time.sleep(1)
    acked = system.submit_batch("slow-agent", 1)
    time.sleep(1)
    push = system.socket(zmq.PUSH, system.ep["in"], "clients/attacker_secret")
    push.send(msgpack.packb({"v": 1, "type": "result", "worker": "slow-1", "task": acked[0],
                             "attempt": 1, "outcome": "done", "result": {"RESULT": "stolen"}}))
    time.sleep(1)
    push.close()
    open(go, "w").close()
    system.lost(acked)
    result = system.call({"type": "show_task", "id": acked[0]})["data"].get("result", {})
    return "the task's result is %s's" % ("the worker" if result.get("RESULT") == "mine"
                                          else "the THIEF")


def kill_broker(system):
    acked = system.submit_batch(count=300)
    os.kill(system.broker.pid, signal.SIGKILL)
    system.broker.wait()
    system.start_broker()
    lost = system.lost(acked, wait_s=120)
    return "kill -9 with %d acknowledged tasks in flight; %d lost" % (len(acked), lost)


ATTACKS = [
    ("garbage: 100,000 random frames on in", garbage),
    ("oversized: 20 x 5 MiB submits", oversized),
    ("no key: submit and subscribe", strangers),
    ("2,200 raw connections to in", connections),
    ("a subscriber that never reads", slow_subscriber),
    ("200 subscribers that never read", many_slow_subscribers),
    ("replays that are never read", unread_replays),
    ("a task printing 20 MB", chatty_task),
    ("merge with no review", unreviewed_merge),
    ("workspace outside the roots", outside_workspace),
    ("another key's result for a task", stolen_result),
    ("kill -9 of the broker", kill_broker),
]


def run_attacks(bin_dir):
    """The attack list; returns its rows (name, result, lost, crashed, RSS, disk)."""
    system = System(bin_dir)
    rows = []
    try:
        system.start_broker()
        if system.pan("keys", "add", "attacker").returncode != 0:
            raise SystemExit("soak: pan keys add attacker failed")
        os.kill(system.broker.pid, signal.SIGHUP)
        system.start_worker("echo-agent", "echo-1", "echo 'RESULT: ok'")
        time.sleep(1)
        idle_rss = system.rss_mb()
        print("broker idle: RSS %.0f MB, store %.1f MB" % (idle_rss, system.disk_mb()))
        for name, attack in ATTACKS:
            try:
                result = attack(system)
            except Exception as error:  # an attack that breaks is a finding, not a stop
                result = "ERROR %s: %s" % (type(error).__name__, error)
            crashed = system.broker.poll() is not None
            lost = system.lost(system.submit_batch()) if not crashed else BATCH
            rows.append((name, result, lost, "yes" if crashed else "no", system.rss_mb(),
                         system.disk_mb()))
            print("  %s: %s" % (name, result), file=sys.stderr)
            if crashed:
                system.start_broker()
    finally:
        system.stop()
    width = max(len(row[0]) for row in rows)
    print("%-*s | %-70s | lost | crashed | RSS MB | disk MB" % (width, "attack", "result"))
    for row in rows:
        print("%-*s | %-70s | %4d | %-7s | %6.0f | %7.1f" % (width, row[0], row[1][:70], row[2],
                                                             row[3], row[4], row[5]))
    return any(row[2] or row[3] == "yes" for row in rows)


def run_partitions(bin_dir):
    """The partition scenarios; prints their lines; returns whether one failed."""
    rows, how = partition.run(System, bin_dir)
    print()
    print("partitions%s:" % (" (faults by %s)" % how if how else ""))
    width = max(len(row[0]) for row in rows)
    for name, figures, verdict in rows:
        print("%-*s | %-7s | %s" % (width, name, verdict, figures))
    return any(verdict == "FAIL" for _, _, verdict in rows)


def run_restarts(bin_dir):
    """Many clients at once, and kill -9 of the broker under load (restarts.py); prints
    their lines; returns whether one failed."""
    rows = restarts.run(System, bin_dir)
    print()
    print("many clients and restarts:")
    width = max(len(row[0]) for row in rows)
    for name, figures, verdict in rows:
        print("%-*s | %-7s | %s" % (width, name, verdict, figures))
    return any(verdict == "FAIL" for _, _, verdict in rows)


def main():
    args = sys.argv[1:]
    only = None
    kinds = ("attacks", "partitions", "restarts")
    if args[:1] == ["--only"] and len(args) > 1 and args[1] in kinds:
        only, args = args[1], args[2:]
    elif args[:1] == ["--only"]:
        raise SystemExit("soak: --only takes attacks, partitions or restarts")
    bin_dir = os.path.abspath(args[0] if args else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "bin"))
    failed = False
    if only in (None, "attacks"):
        failed |= run_attacks(bin_dir)
    if only in (None, "partitions"):
        failed |= run_partitions(bin_dir)
    if only in (None, "restarts"):
        failed |= run_restarts(bin_dir)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
