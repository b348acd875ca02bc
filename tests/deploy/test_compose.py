#!/usr/bin/python3
"""deploy/docker-compose.yml as it stands, without a Docker engine:

1. `docker-compose config` accepts it, with deploy/.env.example's values;
2. every `environment:` variable of every service is read by the program that receives it
   (a quoted name in the C sources, or a variable of deploy/entrypoint.sh, or the agent
   CLI's ANTHROPIC_API_KEY) and every .env.example setting is used by the file, so a
   misspelt name fails here;
3. the image's entrypoint and healthcheck commands run outside a container with the
   environment the file gives them (ports moved to free ones): the broker starts and its
   healthcheck passes, a specialist registers and its healthcheck passes, the dashboard
   answers its healthcheck, the hooks service passes its healthcheck, and a specialist
   that cloister.toml disables exits 0 saying so;
4. the settings of .env reach the file (issue 37): the host ports are the .env's, the
   image's INSTALL_CLAUDE is the .env's, and the push credentials go to the merge-agent
   alone (a branch's tests run in the test-agent and the review-agent).

usage: test_compose.py BIN_DIR SOURCE_DIR"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

import yaml

BIN, SRC = sys.argv[1], sys.argv[2]
COMPOSE = os.path.join(SRC, "deploy", "docker-compose.yml")
ENTRYPOINT = os.path.join(SRC, "deploy", "entrypoint.sh")
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def env_example():
    values = {}
    with open(os.path.join(SRC, "deploy", ".env.example")) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                values[key] = value
    return values


def compose_config(example):
    env = dict(os.environ, **example)
    run = subprocess.run(["docker-compose", "-f", COMPOSE, "config"], env=env,
                         capture_output=True, text=True, timeout=60)
    check(run.returncode == 0, "docker-compose config: " + run.stderr.strip())
    return yaml.safe_load(run.stdout) if run.returncode == 0 else {"services": {}}


def known_variables():
    names = {"ANTHROPIC_API_KEY"}  # read by the agent CLI itself
    for top in ("common", "services"):
        for root, _, files in os.walk(os.path.join(SRC, top)):
            for name in files:
                if name.endswith(".c"):
                    with open(os.path.join(root, name)) as f:
                        names.update(re.findall(r'"([A-Z][A-Z0-9_]{2,})"', f.read()))
    with open(ENTRYPOINT) as f:
        names.update(re.findall(r"\$\{?([A-Z][A-Z0-9_]+)", f.read()))
    return names


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(command, env, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if subprocess.run(command, env=env, capture_output=True, timeout=30).returncode == 0:
            return True
        time.sleep(0.3)
    return False


def healthcheck(service):
    """The healthcheck's command, as the container runs it ("$$" is compose's escaped "$")."""
    test = [part.replace("$$", "$") for part in service["healthcheck"]["test"]]
    return ["/bin/sh", "-c", test[1]] if test[0] == "CMD-SHELL" else test[1:]


def moved(values, ports):
    """The compose values with the container ports replaced by free host ports."""
    out = []
    for value in values:
        for inside, outside in ports.items():
            value = value.replace(":%d" % inside, ":%d" % outside)
        out.append(value)
    return out


def run_entrypoints(config):
    services = config["services"]
    home = tempfile.mkdtemp(prefix="cloister-compose-")
    ports = {5560: free_port(), 5561: free_port(), 5562: free_port(), 7000: free_port()}
    base = dict(os.environ, PANOPTICON_HOME=home, PATH=BIN + ":" + os.environ["PATH"])
    procs = []
    try:
        broker_env = dict(base)
        for key, value in services["broker"]["environment"].items():
            broker_env[key] = moved([str(value)], ports)[0]
        broker_log = open(os.path.join(home, "broker.log"), "w")
        procs.append(subprocess.Popen([ENTRYPOINT] + services["broker"]["command"],
                                      env=broker_env, stderr=broker_log))
        check(wait_for(moved(healthcheck(services["broker"]), ports), broker_env, 15),
              "the broker's healthcheck never passed")

        review = services["review-agent"]
        review_env = dict(base, CLOISTER_ADVERTISE_HOST="127.0.0.1")
        for key, value in review["environment"].items():
            value = str(value).replace("tcp://broker:", "tcp://127.0.0.1:")
            review_env[key] = moved([value], ports)[0]
        review_env["CLOISTER_PORT"] = str(ports[7000])
        review_env["CLAUDE_CONFIG_DIR"] = os.path.join(home, "agent")
        log = open(os.path.join(home, "review.log"), "w")
        procs.append(subprocess.Popen([ENTRYPOINT] + review["command"], env=review_env,
                                      stderr=log))
        passed = wait_for(healthcheck(review), review_env, 15)
        if not passed:
            for name in ("broker.log", "review.log"):
                with open(os.path.join(home, name)) as f:
                    print(f.read()[-1500:], file=sys.stderr)
        check(passed, "the review-agent's healthcheck never passed")

        web = services["web"]
        web_env = dict(base)
        for key, value in web["environment"].items():
            web_env[key] = moved([str(value).replace("tcp://broker:", "tcp://127.0.0.1:")],
                                 ports)[0]
        web_env["CLOISTER_WEB_PORT"] = str(free_port())
        procs.append(subprocess.Popen([ENTRYPOINT] + web["command"], env=web_env,
                                      stderr=open(os.path.join(home, "web.log"), "w")))
        check(wait_for(healthcheck(web), web_env, 15), "the dashboard's healthcheck never passed")

        hooks = services["hooks"]
        hooks_env = dict(base)
        for key, value in hooks["environment"].items():
            hooks_env[key] = moved([str(value).replace("tcp://broker:", "tcp://127.0.0.1:")],
                                   ports)[0]
        procs.append(subprocess.Popen([ENTRYPOINT] + hooks["command"], env=hooks_env,
                                      stderr=open(os.path.join(home, "hooks.log"), "w")))
        check("healthcheck" in hooks, "the hooks service has no healthcheck")
        if "healthcheck" in hooks:
            check(wait_for(healthcheck(hooks), hooks_env, 15),
                  "the hooks service's healthcheck never passed")

        with open(os.path.join(home, "cloister.toml"), "w") as f:
            f.write("[specialists.test-agent]\nenabled = false\n")
        run = subprocess.run([ENTRYPOINT] + services["test-agent"]["command"], env=review_env,
                             capture_output=True, text=True, timeout=30)
        check(run.returncode == 0, "a disabled specialist exited %d" % run.returncode)
        check("disabled in cloister.toml" in run.stderr,
              "a disabled specialist did not say so: " + run.stderr.strip())
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        subprocess.run(["rm", "-rf", home])


def settings_reach_the_file(example):
    changed = dict(example, CLOISTER_HOST_IN_PORT="15560", CLOISTER_HOST_EVENTS_PORT="15561",
                   CLOISTER_HOST_CONTROL_PORT="15562", CLOISTER_HOST_WEB_PORT="17700",
                   INSTALL_CLAUDE="0", CLOISTER_GIT_TOKEN="a-token")
    services = compose_config(changed)["services"]
    if not services:
        return
    published = set()
    for name in ("broker", "web"):
        for port in services[name].get("ports", []):
            published.add(str(port.get("published")) if isinstance(port, dict) else
                          port.split(":")[-2])
    check(published == {"15560", "15561", "15562", "17700"},
          "the host ports are not the .env's: %s" % sorted(published))
    check(services["broker"]["build"]["args"].get("INSTALL_CLAUDE") == "0",
          "INSTALL_CLAUDE in .env does not reach the build")
    check(services["merge-agent"]["environment"].get("CLOISTER_GIT_TOKEN") == "a-token",
          "the merge-agent does not get CLOISTER_GIT_TOKEN")
    for name in ("review-agent", "test-agent", "web", "hooks", "broker"):
        env = services[name].get("environment") or {}
        check("CLOISTER_GIT_TOKEN" not in env and "GH_TOKEN" not in env,
              "%s gets the push token, which only the merge-agent needs" % name)


def main():
    example = env_example()
    config = compose_config(example)
    known = known_variables()
    with open(COMPOSE) as f:
        text = f.read()
    for key in example:
        check("${" + key in text, ".env.example sets %s, which the compose file never uses" % key)
    for name, service in config["services"].items():
        for key in (service.get("environment") or {}):
            check(key in known, "%s: environment variable %s is read by nothing" % (name, key))
    settings_reach_the_file(example)
    if config["services"]:
        run_entrypoints(config)
    if failures:
        print("test_compose: %d check(s) failed" % len(failures), file=sys.stderr)
        return 1
    print("test_compose: all checks passed")
    return 0


sys.exit(main())
