/* program: the running program's directory (see program.h). */
#include "program.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

bool program_beside(char *buf, size_t size, const char *relative)
{
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return false;
    self[len] = '\0';
    char *slash = strrchr(self, '/');
    if (slash == NULL)
        return false;
    *slash = '\0';
    int n = snprintf(buf, size, "%s/%s", self, relative);
    return n > 0 && (size_t)n < size;
}
