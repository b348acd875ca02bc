"""Network partitions for the soak (issue 29, section 6): a broker on TCP with CURVE, and
workers and an events follower in a network namespace of their own, as on another host.

The namespace is joined to this one by a veth pair. Faults are made with `tc netem` where
the kernel has the netem qdisc; else loss and delay by `netfault` (tests/soak/netfault.c:
iptables in the namespace hands the packets to an NFQUEUE queue, and it drops some and lets
the others through late), or, where that was not built, by iptables alone (random drops
with the statistic match; no added delay, and the report says so). A cut is an iptables
DROP without netem. Everything is named after this
process's pid (namespace cloister-soak-PID, links csH/csN+PID, network 10.A.B.0/24 with A
in 200..249, apart from test_partition's 100..199) and removed at the end.

Each scenario gives one report line: (name, figures, verdict) with verdict PASS or FAIL.
"""
import json
import os
import shutil
import subprocess
import time

import msgpack
import zmq

LOSSY_S = 60           # the lossy link lasts a full minute
LOSSY_EVERY_S = 0.5    # a task submitted this often over it
EVENT_CUTS_S = (8, 30)  # how long the follower is cut off, one line each
EVENTS_PER_S = 2000    # submits pushed while it is, each a task.queued event


def unavailable():
    """Why namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root (ip netns, veth, iptables)"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    probe = "cloister-soak-probe-%d" % os.getpid()
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return "`ip netns add` failed: %s" % made.stderr.strip()
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


class Netns:
    """A namespace linked to this one by a veth pair; the faults on that link."""

    def __init__(self, bin_dir):
        pid = os.getpid()
        self.name = "cloister-soak-%d" % pid
        self.host_link = "csH%d" % pid
        self.ns_link = "csN%d" % pid
        a, b = 200 + (pid >> 8) % 50, pid & 255
        self.host_ip = "10.%d.%d.1" % (a, b)
        self.ns_ip = "10.%d.%d.2" % (a, b)
        self.made = False
        self.netem = False
        netfault = os.path.join(bin_dir, "netfault")
        self.netfault = netfault if os.access(netfault, os.X_OK) else None
        self.netfault_proc = None

    def sh(self, command, check=True):
        done = subprocess.run(command, shell=True, capture_output=True, text=True)
        if check and done.returncode != 0:
            raise RuntimeError("`%s` exited %d: %s" % (command, done.returncode,
                                                       done.stderr.strip()))
        return done.returncode

    def inside(self, command):
        return "ip netns exec %s %s" % (self.name, command)

    def add(self):
        self.sh("ip netns add %s" % self.name)
        self.made = True
        self.sh("ip link add %s type veth peer name %s" % (self.host_link, self.ns_link))
        self.sh("ip link set %s netns %s" % (self.ns_link, self.name))
        self.sh("ip addr add %s/24 dev %s" % (self.host_ip, self.host_link))
        self.sh("ip link set %s up" % self.host_link)
        self.sh("ip -n %s addr add %s/24 dev %s" % (self.name, self.ns_ip, self.ns_link))
        self.sh("ip -n %s link set %s up" % (self.name, self.ns_link))
        self.sh("ip -n %s link set lo up" % self.name)
        self.netem = self.sh(self.inside("tc qdisc add dev %s root netem delay 1ms"
                                         % self.ns_link), check=False) == 0
        if self.netem:
            self.sh(self.inside("tc qdisc del dev %s root" % self.ns_link))

    def remove(self):
        if self.netfault_proc is not None:
            self.netfault_proc.kill()
            self.netfault_proc.wait()
            self.netfault_proc = None
        if not self.made:
            return
        self.sh("ip link del %s" % self.host_link, check=False)
        self.sh("ip netns del %s" % self.name, check=False)
        self.made = False

    def delays(self):
        """True when the lossy link also gets its 200 ms delay."""
        return self.netem or self.netfault is not None

    def how(self):
        if self.netem:
            return "netem"
        if self.netfault:
            return "netfault (NFQUEUE; no netem qdisc in this kernel)"
        return "iptables (no netem qdisc in this kernel, netfault not built)"

    def cut(self):
        """Every packet either way is lost."""
        self.faults(0, 1.0, True)

    def lossy(self, both_ways):
        """30 % loss and 200 ms delay (where netem or netfault can add it) on what the
        namespace sends, as netem on a worker's interface makes them, or on both
        directions."""
        self.faults(200, 0.3, both_ways)

    def faults(self, delay_ms, drop, both_ways):
        if self.netem:
            args = "delay %dms loss %d%%" % (delay_ms, round(drop * 100))
            self.sh(self.inside("tc qdisc replace dev %s root netem %s" % (self.ns_link, args)))
            if both_ways:
                self.sh("tc qdisc replace dev %s root netem %s" % (self.host_link, args))
            return
        if self.netfault and drop < 1:
            self.netfault_faults(delay_ms, drop, both_ways)
            return
        match = "" if drop >= 1 else "-m statistic --mode random --probability %.2f " % drop
        self.sh(self.inside("iptables -I OUTPUT -o %s %s-j DROP" % (self.ns_link, match)))
        if both_ways:
            self.sh(self.inside("iptables -I INPUT -i %s %s-j DROP" % (self.ns_link, match)))

    def netfault_faults(self, delay_ms, drop, both_ways):
        """netfault in the namespace on queue 1 (what it sends) and 2 (what it gets)."""
        argv = ["ip", "netns", "exec", self.name, self.netfault, "--queue", "1", "--queue",
                "2", "--delay-ms", str(delay_ms), "--loss-percent", str(round(drop * 100))]
        self.netfault_proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, text=True)
        if self.netfault_proc.stdout.readline().strip() != "ready":
            raise RuntimeError("netfault did not start: %s" % self.netfault_proc.stderr.read())
        self.sh(self.inside("iptables -I OUTPUT -o %s -j NFQUEUE --queue-num 1 --queue-bypass"
                            % self.ns_link))
        if both_ways:
            self.sh(self.inside("iptables -I INPUT -i %s -j NFQUEUE --queue-num 2 "
                                "--queue-bypass" % self.ns_link))

    def heal(self):
        if self.netem:
            self.sh(self.inside("tc qdisc del dev %s root" % self.ns_link), check=False)
            self.sh("tc qdisc del dev %s root" % self.host_link, check=False)
            return
        self.sh(self.inside("iptables -F INPUT"))
        self.sh(self.inside("iptables -F OUTPUT"))
        if self.netfault_proc is not None:
            self.netfault_proc.terminate()
            self.netfault_proc.wait(timeout=10)
            self.netfault_proc = None


def free_port(ip):
    import socket
    with socket.socket() as sock:
        sock.bind((ip, 0))
        return sock.getsockname()[1]


def tcp_endpoints(ip):
    return {name: "tcp://%s:%d" % (ip, free_port(ip)) for name in ("in", "events", "control")}


CONFIG = ("[security]\ncurve = true\n\n[broker]\nsync = \"normal\"\n"
          "event_retention = 500000\nretry_backoff_ms = 50\n\n"
          "[specialists.part-agent]\nenabled = true\n\n"
          "[specialists.gap-agent]\nenabled = true\n")


def script(system):
    """The workers' command: a start line; for cut-* tasks a wait for the go file, then
    `pan task fence` (noted, and no side effect unless it passes); then the side effect, a
    line `TASK ATTEMPT` in effects.log."""
    d = system.dir
    return ("T=\"$CLOISTER_TASK_ID $CLOISTER_TASK_ATTEMPT\"\n"
            "echo \"$T\" >> '{d}/starts.log'\n"
            "case \"$CLOISTER_TASK_ID\" in\n"
            "cut-*)\n"
            "  while [ ! -e \"{d}/go-$CLOISTER_TASK_ID-$CLOISTER_TASK_ATTEMPT\" ]; do\n"
            "    sleep 0.05; done\n"
            "  '{pan}' --timeout-ms 1000 task fence \"$CLOISTER_TASK_ID\" "
            "\"$CLOISTER_TASK_ATTEMPT\"\n"
            "  rc=$?\n"
            "  echo \"$T fence $rc\" >> '{d}/fences.log'\n"
            "  [ $rc -eq 0 ] || exit 1 ;;\n"
            "load*) sleep 0.3 ;;\n"
            "esac\n"
            "echo \"$T\" >> '{d}/effects.log'\n"
            "echo \"RAN_ATTEMPT: $CLOISTER_TASK_ATTEMPT\"\n").format(
                d=d, pan=os.path.join(system.bin, "pan"))


class Partitions:
    """The scenarios, on a System whose broker listens on the host's end of the pair."""

    def __init__(self, system, netns):
        self.system = system
        self.netns = netns
        self.workers = {}

    # ---- processes ----

    def worker(self, worker_id, in_netns):
        system = self.system
        if in_netns:
            bind = "tcp://%s:*" % self.netns.ns_ip
        else:
            bind = "ipc://%s/%s.sock" % (system.dir, worker_id)
        argv = [os.path.join(system.bin, "cloister-worker"), "--specialist", "part-agent",
                "--worker-id", worker_id, "--bind", bind, "--", "/bin/sh", "-c",
                script(system)]
        if in_netns:
            argv = ["ip", "netns", "exec", self.netns.name] + argv
        self.workers[worker_id] = system.spawn(worker_id, argv)

    def stop_worker(self, worker_id):
        proc = self.workers.pop(worker_id)
        proc.terminate()
        proc.wait(timeout=15)

    def follower(self, name, since):
        """`pan events --follow --since SINCE --json` in the namespace, into NAME.out."""
        system = self.system
        out = open(os.path.join(system.dir, name + ".out"), "wb")
        err = open(os.path.join(system.dir, name + ".err"), "wb")
        argv = ["ip", "netns", "exec", self.netns.name, os.path.join(system.bin, "pan"),
                "events", "--follow", "--since", str(since), "--json"]
        proc = subprocess.Popen(argv, env=system.env, stdout=out, stderr=err,
                                start_new_session=True)
        system.procs.append(proc)
        return proc

    # ---- what the broker and the files say ----

    def events(self, since=0):
        """The stored events after seq `since`, oldest first."""
        found = []
        while True:
            page = self.system.call({"type": "replay", "since": since,
                                     "limit": 10000})["data"]
            if not page:
                return found
            found.extend(page)
            since = page[-1]["seq"]

    def wait_event(self, name, task=None, worker=None, since=0, timeout_s=15):
        deadline = time.time() + timeout_s
        while True:
            for event in self.events(since):
                if event.get("event") == name and task in (None, event.get("task")) and \
                        worker in (None, event.get("worker")):
                    return event
            if time.time() > deadline:
                return None
            time.sleep(0.2)

    def last_seq(self):
        return self.system.call({"type": "stats"})["data"]["last_seq"]

    def stale_results(self):
        return self.system.rejected().get("stale_result", 0)

    def lines(self, name):
        try:
            with open(os.path.join(self.system.dir, name)) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def effects(self, task):
        """How many side effects task made, any attempt."""
        return sum(1 for line in self.lines("effects.log") if line.split(" ")[0] == task)

    def wait_line(self, name, line, timeout_s=15):
        deadline = time.time() + timeout_s
        while line not in self.lines(name):
            if time.time() > deadline:
                return False
            time.sleep(0.05)
        return True

    def go(self, task, attempt):
        open(os.path.join(self.system.dir, "go-%s-%d" % (task, attempt)), "w").close()

    def state(self, task):
        reply = self.system.call({"type": "show_task", "id": task})
        return reply["data"].get("state") if reply.get("ok") else None

    def wait_done(self, tasks, timeout_s):
        pending = set(tasks)
        deadline = time.time() + timeout_s
        while pending and time.time() < deadline:
            pending = {task for task in pending if self.state(task) != "done"}
            if pending:
                time.sleep(0.3)
        return pending

    # ---- the scenarios: each returns (figures, passed) ----

    def cut_mid_task(self):
        """A worker cut off mid-task for longer than its lease, then healed."""
        system, netns = self.system, self.netns
        stale_before = self.stale_results()
        system.call({"type": "submit", "id": "cut-1", "specialist": "part-agent"})
        if not self.wait_line("starts.log", "cut-1 1"):
            return "cut-1 never started on the namespace's worker", False
        netns.cut()
        cut_at = time.time()
        self.worker("wh", False)
        lost = self.wait_event("worker.lost", worker="wn", timeout_s=25)
        lost_after = time.time() - cut_at
        second = self.wait_event("task.dispatched", task="cut-1", worker="wh")
        if second is not None:
            self.go("cut-1", second["attempt"])
        self.wait_done(["cut-1"], 15)
        # Attempt 1 goes on behind the cut: its fence cannot reach the broker.
        self.go("cut-1", 1)
        self.wait_line("fences.log", "cut-1 1 fence 3")
        while time.time() - cut_at < 10:  # cut off for 10 s at least (lost after 10 s)
            time.sleep(0.1)
        netns.heal()
        cut_s = time.time() - cut_at
        rejoined = self.wait_event("worker.joined", worker="wn",
                                   since=lost["seq"] if lost else 0, timeout_s=20)
        # The late result reaches the broker once healed, and is refused.
        deadline = time.time() + 15
        while self.stale_results() == stale_before and time.time() < deadline:
            time.sleep(0.2)
        late_refused = self.stale_results() - stale_before
        # Resynchronised: with the host's worker gone, it runs a new task.
        self.stop_worker("wh")
        system.call({"type": "submit", "id": "after-cut", "specialist": "part-agent"})
        after = self.wait_event("task.done", task="after-cut", timeout_s=20)
        resynced = rejoined is not None and after is not None and after.get("worker") == "wn"
        done = self.wait_event("task.done", task="cut-1", timeout_s=0)
        stored = self.events()
        results = sum(1 for e in stored if e.get("task") == "cut-1" and
                      e.get("event") in ("task.done", "task.failed"))
        effects = self.effects("cut-1")
        by = done.get("result", {}).get("RAN_ATTEMPT") if done else None
        tasks_done = (done is not None) + (after is not None)
        figures = ("2 submitted, %d done, %d lost, %d run twice; cut-1: lease lost after "
                   "%.1f s, cut %.0f s, %d side effect (attempt %s's), %d result; the late "
                   "result refused (%d copies: resent while cut off); worker %s" % (
                       tasks_done, 2 - tasks_done, int(effects > 1), lost_after, cut_s,
                       effects, by or "none", results, late_refused,
                       "resynchronised" if resynced else "NOT resynchronised"))
        passed = (lost is not None and done is not None and effects == 1 and results == 1
                  and by == str(second["attempt"] if second else -1) and late_refused >= 1
                  and resynced)
        return figures, passed

    def lossy_minute(self, both_ways):
        """30 % loss and 200 ms delay for a minute; a task every LOSSY_EVERY_S."""
        system, netns = self.system, self.netns
        if "wn2" not in self.workers:
            self.worker("wn2", True)
            if self.wait_event("worker.joined", worker="wn2") is None:
                return "the second worker in the namespace never joined", False
        start = self.last_seq()
        netns.lossy(both_ways)
        t0 = time.time()
        tasks = []
        while time.time() - t0 < LOSSY_S:
            task = "load%s-%03d" % ("2" if both_ways else "1", len(tasks))
            try:
                if system.call({"type": "submit", "id": task, "specialist": "part-agent"},
                               timeout_ms=5000).get("ok"):
                    tasks.append(task)
            except TimeoutError:
                pass
            time.sleep(LOSSY_EVERY_S)
        lossy_s = time.time() - t0
        during = self.events(start)
        netns.heal()
        pending = self.wait_done(tasks, 120)
        states = {}
        for task in pending:
            states[self.state(task)] = states.get(self.state(task), 0) + 1
        after = self.events(start)
        workers_lost = sum(1 for e in during if e.get("event") == "worker.lost")
        retried = sum(1 for e in after if e.get("event") == "task.retry")
        twice = sum(1 for task in tasks if self.effects(task) > 1)
        no_effect = sum(1 for task in tasks if task not in pending and self.effects(task) == 0)
        delay = "200 ms delay" if netns.delays() else "no delay (no netem or netfault here)"
        figures = ("%.0f s of 30%% loss %s, %s: %d submitted, %d done, %d lost%s, %d run "
                   "twice, %d done without a side effect; %d worker(s) declared lost, %d "
                   "task(s) retried" % (
                       lossy_s, "each way" if both_ways else "on what the namespace sends",
                       delay, len(tasks), len(tasks) - len(pending), len(pending),
                       " (%s)" % ", ".join("%d %s" % (n, state) for state, n in states.items())
                       if states else "", twice, no_effect, workers_lost, retried))
        passed = not pending and twice == 0 and no_effect == 0 and workers_lost == 0
        return figures, passed

    def follower_cut(self, cut_s, printed):
        """The follower cut off for cut_s while events are published, then healed with
        nothing published after: it must print every event once, by replay."""
        system, netns = self.system, self.netns
        # Following live first: an event, then the cut.
        system.call({"type": "submit", "id": "mark-%d" % cut_s, "specialist": "gap-agent"})
        start = self.last_seq()
        deadline = time.time() + 30
        while max(printed() or [0]) < start and time.time() < deadline:
            time.sleep(0.1)
        push = system.socket(zmq.PUSH, system.ep["in"])
        push.sndhwm = 0
        netns.cut()
        t0 = time.time()
        sent = 0
        tag = "gap%d" % cut_s
        while time.time() - t0 < cut_s:
            due = int((time.time() - t0) * EVENTS_PER_S)
            while sent < due:
                push.send(msgpack.packb({"v": 1, "type": "submit", "id": "%s-%06d" % (tag, sent),
                                         "specialist": "gap-agent"}))
                sent += 1
            time.sleep(0.01)
        push.linger = 30000  # every submit reaches the broker (it is on this side)
        push.close()
        last_id = "%s-%06d" % (tag, sent - 1)
        deadline = time.time() + 60
        while self.state(last_id) is None and time.time() < deadline:
            time.sleep(0.1)
        netns.heal()
        healed_at = time.time()
        target = self.last_seq()
        caught_up = None
        while time.time() - healed_at < 120:
            if printed() and max(printed()) >= target:
                caught_up = time.time() - healed_at
                break
            time.sleep(0.2)
        return start, target, caught_up

    def follower_scenarios(self):
        """The follower's lines: one per cut in EVENT_CUTS_S."""
        # No worker left in the namespace, so nothing but the burst is published.
        for worker_id in [w for w in self.workers if w.startswith("wn")]:
            self.stop_worker(worker_id)
        since = self.last_seq()
        out = os.path.join(self.system.dir, "follower.out")
        follower = self.follower("follower", since)

        def printed():
            seqs = []
            try:
                with open(out) as f:
                    for line in f:
                        try:
                            seqs.append(json.loads(line)["seq"])
                        except (ValueError, KeyError):
                            pass  # a line being written
            except FileNotFoundError:
                pass
            return seqs

        rows = []
        for cut_s in EVENT_CUTS_S:
            start, target, caught_up = self.follower_cut(cut_s, printed)
            seqs = [seq for seq in printed() if start < seq <= target]
            missed = len(set(range(start + 1, target + 1)) - set(seqs))
            duplicated = len(seqs) - len(set(seqs))
            figures = ("%d events published while cut off for %d s, none after; %s; %d "
                       "missed, %d duplicated" % (
                           target - start, cut_s,
                           "caught up %.1f s after healing" % caught_up if caught_up is not None
                           else "NOT caught up 120 s after healing", missed, duplicated))
            rows.append(("events follower cut off %d s" % cut_s, figures,
                         caught_up is not None and missed == 0 and duplicated == 0))
        follower.terminate()
        follower.wait(timeout=10)
        return rows


def run(system_class, bin_dir):
    """Runs the scenarios; returns the report rows (name, figures, PASS/FAIL/SKIPPED) and
    how the faults were made (None when skipped)."""
    def names(delay):
        return (["a worker cut off mid-task past its lease"] +
                ["30 %% loss%s, %d s, %s" % (delay, LOSSY_S, way)
                 for way in ("one way", "both ways")] +
                ["events follower cut off %d s" % s for s in EVENT_CUTS_S])
    why = unavailable()
    if why is not None:
        return [(name, "not tested: %s" % why, "SKIPPED")
                for name in names(", 200 ms delay")], None
    netns = Netns(bin_dir)
    system = None
    rows = []
    try:
        netns.add()
        names = names(", 200 ms delay" if netns.delays() else " (no delay: no netem)")
        system = system_class(bin_dir, endpoints=tcp_endpoints(netns.host_ip), config=CONFIG)
        system.start_broker()
        parts = Partitions(system, netns)
        parts.worker("wn", True)
        if parts.wait_event("worker.joined", worker="wn") is None:
            raise RuntimeError("the worker in the namespace never joined")
        scenarios = ((names[0], parts.cut_mid_task),
                     (names[1], lambda: parts.lossy_minute(False)),
                     (names[2], lambda: parts.lossy_minute(True)))
        for name, scenario in scenarios:
            figures, passed = scenario()
            rows.append((name, figures, "PASS" if passed else "FAIL"))
        for name, figures, passed in parts.follower_scenarios():
            rows.append((name, figures, "PASS" if passed else "FAIL"))
    except Exception as error:  # a scenario that breaks fails, saying why
        rows.append(("(partitions stopped)", "ERROR %s: %s" % (type(error).__name__, error),
                     "FAIL"))
    finally:
        if system is not None:
            system.stop()
        netns.remove()
    return rows, netns.how()
