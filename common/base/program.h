/* program: where the running program's own file is, to find what is installed beside it
 * (cloister-mcp next to a service, pan next to cloister-mcp, <prefix>/share next to
 * <prefix>/bin). */
#ifndef CLOISTER_PROGRAM_H
#define CLOISTER_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>

/* Writes "<directory of this program>/<relative>" into buf (from /proc/self/exe). Returns
 * false when it cannot be known or does not fit. */
bool program_beside(char *buf, size_t size, const char *relative);

#endif
