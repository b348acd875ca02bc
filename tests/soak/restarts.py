"""Soak lines for many clients at once and for broker restarts (soak.py --only restarts).

  kill -9 x N under load: generic workers whose command makes its side effect under
      `pan task fence --exec` (appending its attempt to effects/<task>); tasks are submitted
      in batches and the broker is killed (-9) and started again N times. Figures: tasks
      acknowledged, done, lost, and run twice (a side effect made by two attempts).
  many clients: tests/test_many_clients sized up (CLOISTER_SOAK_*): loops of pan calls,
      submits and results, and rounds of 8 workers started at once, on a CURVE bus.
      Figures: its own line (refused, deaf, retried, run twice).

Each line ends PASS (nothing lost, nothing run twice, nothing refused) or FAIL."""
import os
import random
import signal
import subprocess
import time


def kill_loop(system_class, bin_dir, kills=60, batch=25):
    """Returns (name, figures, verdict)."""
    system = system_class(bin_dir)
    try:
        system.start_broker()
        effects = os.path.join(system.dir, "effects")
        os.makedirs(effects)
        command = ('exec "%s" task fence --exec /bin/sh -c \'sleep 0.$(($$ %% 5)); '
                   'echo "$CLOISTER_TASK_ATTEMPT" >> "%s/$CLOISTER_TASK_ID"\''
                   % (os.path.join(bin_dir, "pan"), effects))
        for i in range(4):
            system.start_worker("fenced-agent", "fenced-%d" % i, command)
        time.sleep(1.5)
        acked = []
        for _ in range(kills):
            acked += system.submit_batch("fenced-agent", count=batch)
            time.sleep(random.uniform(0.1, 1.0))
            os.kill(system.broker.pid, signal.SIGKILL)
            system.broker.wait()
            system.start_broker()
        lost = system.lost(acked, wait_s=300)
        twice = later = 0
        for task_id in acked:
            try:
                with open(os.path.join(effects, task_id)) as f:
                    attempts = f.read().split()
            except OSError:
                continue
            twice += len(attempts) > 1
            later += attempts[:1] != ["1"]
        figures = ("%d kills, %d tasks acknowledged, %d done, %d lost, %d run twice, "
                   "%d first run at a later attempt"
                   % (kills, len(acked), len(acked) - lost, lost, twice, later))
        return ("kill -9 x %d under load, fenced workers" % kills, figures,
                "PASS" if lost == 0 and twice == 0 else "FAIL")
    finally:
        system.stop()


def many_clients(bin_dir, rounds=10, storm=100, tasks=1000):
    """Runs tests/test_many_clients sized up; returns (name, figures, verdict)."""
    test = os.path.join(bin_dir, "..", "tests", "test_many_clients")
    env = dict(os.environ, CLOISTER_SOAK_ROUNDS=str(rounds), CLOISTER_SOAK_STORM=str(storm),
               CLOISTER_SOAK_TASKS=str(tasks))
    started = time.time()
    try:
        done = subprocess.run([test], env=env, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as error:
        return ("many clients", "could not run %s: %s" % (test, error), "FAIL")
    said = [line for line in (done.stdout + done.stderr).splitlines()
            if not line.startswith(("E:", "testenv:", "stopping")) and "dangling" not in line]
    figures = "%s (%.0f s)" % ("; ".join(said) or "no figures", time.time() - started)
    return ("many clients", figures, "PASS" if done.returncode == 0 else "FAIL")


def run(system_class, bin_dir):
    """The lines; returns their rows (name, figures, verdict)."""
    return [many_clients(bin_dir), kill_loop(system_class, bin_dir)]
