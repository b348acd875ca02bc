/* home: where Cloister keeps its state. $PANOPTICON_HOME, or ~/.panopticon when unset
 * (the home directory from $HOME, or from the password database when HOME is unset).
 * Holds cloister.toml, the broker's database, specialists/<name>.session and
 * specialists/<name>/history.jsonl. */
#ifndef CLOISTER_HOME_H
#define CLOISTER_HOME_H

#include <stddef.h>

/* The state directory (not created). The string is owned by the module. */
const char *home_dir(void);

/* Writes "<home>/<relative>" into buf. Returns 0, or FAILURE_TOO_BIG if it does not fit. */
int home_path(char *buf, size_t size, const char *relative);

/* Creates `path` and its missing parents (mode 0700). Returns 0 or FAILURE_IO. */
int home_mkdirs(const char *path);

#endif
