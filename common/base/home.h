/* home: where Cloister keeps its state. $PANOPTICON_HOME, or ~/.panopticon when unset
 * (the home directory from $HOME, or from the password database when HOME is unset).
 * Holds cloister.toml, the broker's database, specialists/<name>.session and
 * specialists/<name>/history.jsonl. */
#ifndef CLOISTER_HOME_H
#define CLOISTER_HOME_H

#include <stddef.h>
#include <sys/types.h>

/* The state directory (not created). The string is owned by the module. */
const char *home_dir(void);

/* Writes "<home>/<relative>" into buf. Returns 0, or FAILURE_TOO_BIG if it does not fit. */
int home_path(char *buf, size_t size, const char *relative);

/* Creates `path` and its missing parents (mode 0700). Returns 0 or FAILURE_IO. */
int home_mkdirs(const char *path);

/* Makes this user's state private, for a program about to use it: sets the process's umask
 * to 077 (every file it makes -- database, logs, sessions, keys, backups -- is 0600, every
 * directory 0700), creates the state directory 0700 when it is missing, and narrows it to
 * 0700 when it is this user's and open to others (a home made before this rule). Another
 * user's directory is left alone. Returns 0, or FAILURE_IO when the directory cannot be
 * made or narrowed. */
int home_secure(void);

/* The umask the process had before home_secure() (else its current one): what files made
 * in the user's own trees, not in the state, must follow (a merged file keeps the mode git
 * gives it, not 0600). */
mode_t home_user_umask(void);

#endif
