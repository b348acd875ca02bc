/* help: `pan <command> --help` (or -h): each command's usage with every option explained. */
#include "pan.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *command;
    const char *text;
} help_t;

static const help_t s_help[] = {
    {"submit",
     "usage: pan submit <specialist> [options]\n"
     "Queues one task and prints its id once the broker committed it; says on stderr when\n"
     "no worker of the specialist is connected (the task waits for one).\n"
     "  --priority P          urgent, high, normal (default) or low\n"
     "  --issue ID            the issue; prior attempts of it reach the specialist\n"
     "  --pr-url URL          the pull request (payload.prUrl)\n"
     "  --workspace DIR       the repository (must exist here; made absolute); review-agent\n"
     "                        and test-agent: default the git repository pan runs in\n"
     "  --branch B            the branch (must exist in the workspace, locally or on a remote)\n"
     "  --target T            the branch it goes into (merge-agent; default main)\n"
     "  --title TEXT          one line for people\n"
     "  --description TEXT    what to do (payload.description)\n"
     "  --payload JSON        more payload (an object; the flags above win)\n"
     "  --id ID               the task id (default: a new uuid); a known id changes nothing\n"
     "  --group G             serialisation key (merge-agent with [merge] queue = false:\n"
     "                        merge:<repository>:<target>; with the queue: none)\n"
     "  --source S            who submits (default pan)\n"
     "  --max-attempts N      failed attempts before the task is dead (1..100)\n"
     "  --timeout SECONDS     longest one attempt may run\n"
     "  --force               merge although the newest review blocked the gate (recorded)\n"
     "  --wait                wait for the end: progress on stderr, the result and its\n"
     "                        verdict on stdout; exit with the verdict: 0 passed, gate open or\n"
     "                        merged, 1 task failed/dead/cancelled, 4 --wait-timeout passed,\n"
     "                        5 tests failed, 6 gate blocked, 7 merge failed\n"
     "  --wait-timeout S      how long --wait waits (default: no limit)\n"
     "  --chain               with --wait: follow the hand-offs ([pipeline]: review -> test ->\n"
     "                        merge) and exit with the last task's verdict\n"
     "  --json                print the task (or with --wait the ended task) as JSON\n"},
    {"task",
     "usage: pan task list [options] | show <id> [--json] | wait <id>... [options]\n"
     "task list: tasks of every state, newest first (a page; stderr says how to get the next)\n"
     "  --state S             queued, running, done, failed, dead or cancelled\n"
     "  --specialist S        only this specialist's tasks\n"
     "  --issue I             only this issue's tasks, then the agent cost and tokens they\n"
     "                        spent (each task's sum over all its agent runs)\n"
     "  --since DURATION      only tasks created in the last 90s, 15m, 2h, 7d, ...\n"
     "  --limit N             at most N tasks (1..1000, default 50)\n"
     "  --before ID           the page after task ID (the last of the page before)\n"
     "  --json                the tasks as a JSON array\n"
     "task show <id>: the verdict and what to do next, then the task, its payload and result\n"
     "  (nested fields indented); --json: the raw object\n"
     "task wait <id>...: waits until every task ended (progress on stderr, results on stdout)\n"
     "  --timeout SECONDS     give up after this long (exit 4)\n"
     "  --chain               follow each task's hand-offs ([pipeline]) to the last task\n"
     "  --json                each ended task as one JSON line, with its \"verdict\"\n"
     "  exit: the first verdict that is not 0 (with --chain, of the last tasks): 0 passed,\n"
     "  gate open or merged, 1 failed/dead/cancelled, 3 broker unreachable, 4 timed out,\n"
     "  5 tests failed, 6 gate blocked, 7 merge failed\n"
     "An <id> may be any unique start of a task id (`task list` shows them whole); an\n"
     "ambiguous one is refused with the ids it starts (exit 2).\n"},
    {"dead",
     "usage: pan dead [--specialist S] [--issue I] [--since DURATION] [--limit N] [--before ID]\n"
     "                [--json]\n"
     "The dead tasks (every attempt failed), newest first; options as for `pan task list`.\n"
     "`pan retry --all-dead` requeues them.\n"},
    {"retry",
     "usage: pan retry <id> | pan retry --all-dead [--specialist S] [--issue I] [--json]\n"
     "Moves a failed, dead or cancelled task back to its queue with a fresh failure count.\n"
     "<id>: the whole id or a unique start of it.\n"
     "  --all-dead            every dead task (of one specialist or issue, when given)\n"
     "  --json                with --all-dead: {retried, failed} as JSON\n"},
    {"priority",
     "usage: pan priority <id> urgent|high|normal|low\n"
     "Moves a queued task to another priority, at its submit-order place among that\n"
     "priority's queued tasks (dispatch takes urgent, then high, normal, low). Only a queued\n"
     "task: a running or ended one is refused (exit 1).\n"
     "<id>: the whole id or a unique start of it.\n"},
    {"cancel",
     "usage: pan cancel <id>\n"
     "Cancels a queued or running task (a running one is stopped by its worker).\n"
     "<id>: the whole id or a unique start of it.\n"},
    {"events",
     "usage: pan events [--since SEQ] [--follow] [--topic PREFIX] [--task ID] [--issue I]\n"
     "                  [--specialist S] [--limit N] [--json] [--verbose]\n"
     "The broker's events, one a line cut to the terminal's width (an ended task's with its\n"
     "verdict). Without --since: from now on, until Ctrl-C (as tail -f).\n"
     "  --since SEQ           the stored events after SEQ (0: all stored), then stop\n"
     "  --follow              with --since: then keep printing new events\n"
     "  --topic PREFIX        only topics starting with it (task.done/, task.failed/review-agent)\n"
     "  --task ID, --issue I, --specialist S   only events of that task (ID: or a unique\n"
     "                        start of it), issue or specialist\n"
     "  --limit N             only the newest N of the replay\n"
     "  --json                one JSON object per event\n"
     "  -v, --verbose         each line whole, with the task's result as JSON\n"},
    {"status",
     "usage: pan status [--json] | pan status --watch [--interval S] [--frames N]\n"
     "The broker's numbers: queues by priority, running, dead, workers, throughput, commit\n"
     "latency, refusals by reason, disk. --json: the raw stats object.\n"
     "  --watch               the live view of `pan top` (see pan top --help)\n"
     "  --interval S, --frames N   as for pan top\n"},
    {"reload",
     "usage: pan reload [--json]\n"
     "The broker reads cloister.toml (and its authorized keys) again and applies what can\n"
     "change while it runs: workspace roots, the review gate's settings, retries, retention,\n"
     "per-specialist defaults, new specialists. It says what it applied and what changed but\n"
     "waits for a restart (endpoints, sync, heartbeat, disk limits, CURVE). A file that does\n"
     "not parse changes nothing. Then each specialist deploy/run-local.sh started gets\n"
     "SIGHUP and reads the file again between tasks ([review], [tests], [agent], [merge],\n"
     "[specialists.<name>] ... from its next task on); one line per service says what it\n"
     "applied, what needs a restart, or that it reloads when its running task ends. The\n"
     "dashboard and hooks read it only at start. An admin key's request (SIGHUP to the\n"
     "broker reloads the broker alone).\n"},
    {"top",
     "usage: pan top [--interval SECONDS] [--frames N]\n"
     "A live view, redrawn until Ctrl-C: specialists (workers, busy, queued, done/failed/dead\n"
     "since the broker started, cost of their finished tasks), queues by priority, running\n"
     "tasks with worker, elapsed time and last progress line, recent failures. On a terminal\n"
     "each frame replaces the last; piped, frames follow one another ending with ----.\n"
     "  --interval SECONDS    time between frames (0.1 to 3600, default 1)\n"
     "  --frames N            stop after N frames (default: until Ctrl-C)\n"},
    {"specialists",
     "usage: pan specialists list [--json] | queue <name> [--json] | wake <name> [options] |\n"
     "                       reset <name>|--all [--force] | resume <name> | alive <worker-id>\n"
     "  list                  every specialist: queued, running, workers, done/failed/dead\n"
     "  queue <name>          its queued tasks in dispatch order\n"
     "  wake <name>           queue a task for it: --task TEXT, --priority P, --workspace DIR,\n"
     "                        --branch B; with no worker connected, deploy/run-local.sh (when\n"
     "                        it runs) starts one, and wake waits until it joins\n"
     "  reset <name>|--all    forget its agent session; refused while it runs a task\n"
     "                        (--force: no question, and its running task is cancelled first)\n"
     "  resume <name>         dispatch its tasks again after the broker paused it (its model\n"
     "                        API refused the key: fix the key first; `pan doctor` resumes\n"
     "                        paused specialists when its checks pass)\n"
     "  alive <worker-id>     exit 0 when that worker is registered (for health checks)\n"
     "  --json                the raw objects\n"},
    {"approve",
     "usage: pan approve <issue> | --task <review-task> [--force [--reason TEXT]] [--priority P]\n"
     "       [--json]\n"
     "Queues the merge of a reviewed issue (its newest finished review: only reviews of that\n"
     "issue, matched exactly as stored) or, with --task, of a review task (its id, or a\n"
     "unique start of it), pinned to the reviewed commit, its target and merge base; refused\n"
     "with the blocking findings when its gate is blocked.\n"
     "  --task                the argument is a review task's id (or the unique start of one)\n"
     "  --force               merge anyway; who, when and why go in payload.override\n"
     "  --reason TEXT         with --force: why, recorded as the override's reason\n"
     "  --priority P          the merge's priority (default high)\n"
     "  --json                the merge task as JSON\n"},
    {"tests",
     "usage: pan tests detect [DIR] [--json]\n"
     "       pan tests sandbox [--dir DIR] [--network] [--timeout S] -- COMMAND...\n"
     "detect: the test command the test-agent would run in DIR (default .), and why.\n"
     "sandbox: runs COMMAND (a shell command) in DIR as a branch's tests and review checks\n"
     "run here ([tests] sandbox and env of cloister.toml): the same sandbox, environment\n"
     "and, unless --network, a network of its own. Says how on stderr and exits with the\n"
     "command's code: to see what code under test can reach on this machine.\n"},
    {"merge-queue",
     "usage: pan merge-queue [REPO] [--json]\n"
     "       pan merge-queue pause|resume REPO TARGET\n"
     "The merge queues of this host's merge-agents (of REPO's repository only, if given):\n"
     "each merge waiting, building, testing, passed, failed, landed or ejected (and why),\n"
     "its candidate commit, test runs and time in the queue; test runs per landed merge.\n"
     "  pause REPO TARGET     build and test nothing new in that queue; what is under way\n"
     "                        finishes and passed merges still land (it drains)\n"
     "  resume REPO TARGET    let it go on\n"
     "  --json                the queues as JSON\n"},
    {"prompt",
     "usage: pan prompt <specialist> <task-id> [--prompts-dir DIR] [--reviewer NAME]\n"
     "The prompt a task would get, without running it.\n"
     "  --prompts-dir DIR     read the templates from DIR\n"
     "  --reviewer NAME       a review-agent task: the prompt of its domain reviewer NAME\n"
     "                        (the repository's .cloister/review/NAME.md on the target\n"
     "                        branch, else prompts/review/NAME.md)\n"},
    {"doctor",
     "usage: pan doctor [--workspace DIR]... [--json]\n"
     "Checks the configuration, the broker, the agent CLI and its login, git, gh, each\n"
     "workspace and the free disk; exit 1 on any failed check. For a specialist the broker\n"
     "paused (its model API refused the key) it also tries the model API with a short run,\n"
     "and when every check passes it resumes the paused specialists.\n"
     "  --workspace DIR       also check this repository (repeatable)\n"
     "  --json                the checks as JSON\n"},
    {"web",
     "usage: pan web url\n"
     "The dashboard's address with its token (cloister-web must have started once).\n"},
    {"keys",
     "usage: pan keys init | add NAME [--role ROLE] | revoke NAME\n"
     "  init                  make the broker's and the default client's CURVE keys\n"
     "  add NAME              a key pair for another party (keys/clients/NAME_secret; hand it\n"
     "                        that file, used through CLOISTER_CURVE_CERT, and keys/broker)\n"
     "    --role ROLE         what the key may do: submitter (the default: submit, read, cancel\n"
     "                        or retry its own tasks), worker (run tasks and report them) or\n"
     "                        admin (everything, forcing a merge past the gate too)\n"
     "  revoke NAME           remove it (then kill -HUP the broker)\n"},
    {"backup",
     "usage: pan backup FILE [--db DB]\n"
     "Copies the broker's database to FILE while the broker runs: one consistent snapshot\n"
     "(every task acknowledged when it began), read by pan itself with SQLite's online backup\n"
     "API; the broker never waits for it. FILE appears only once the copy is complete and\n"
     "checked.\n"
     "  --db DB               the database (default $PANOPTICON_HOME/broker.db)\n"},
    {"restore",
     "usage: pan restore FILE [--db DB]\n"
     "Replaces the broker's database with the backup FILE. Refused while a broker has it open\n"
     "(stop the broker first); the previous database is kept as DB.before-restore.\n"
     "  --db DB               the database (default $PANOPTICON_HOME/broker.db)\n"},
};

bool pan_help(const char *command)
{
    for (size_t i = 0; i < sizeof s_help / sizeof s_help[0]; i++) {
        if (strcmp(s_help[i].command, command) == 0) {
            fputs(s_help[i].text, stdout);
            fputs("Global options (before or after the command): --control EP --events EP --in "
                  "EP --timeout-ms N\n",
                  stdout);
            return true;
        }
    }
    return false;
}
