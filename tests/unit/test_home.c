/* home: $PANOPTICON_HOME first, then ~/.panopticon, where ~ is $HOME or, when HOME is unset
 * (cron, systemd), the user's entry in the password database — never the working
 * directory, so every program started anywhere finds the same state. */
#include "check.h"
#include "home.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void)
{
    setenv("PANOPTICON_HOME", "/srv/cloister-state", 1);
    CHECK_STR(home_dir(), "/srv/cloister-state");

    unsetenv("PANOPTICON_HOME");
    setenv("HOME", "/home/someone", 1);
    CHECK_STR(home_dir(), "/home/someone/.panopticon");

    unsetenv("HOME");
    struct passwd *entry = getpwuid(getuid());
    CHECK(entry != NULL);
    if (entry != NULL) {
        char expected[1024];
        snprintf(expected, sizeof expected, "%s/.panopticon", entry->pw_dir);
        CHECK_STR(home_dir(), expected);
    }
    char path[1200];
    CHECK_INT(home_path(path, sizeof path, "broker.db"), 0);
    CHECK(path[0] == '/');
    return check_exit_code("test_home");
}
