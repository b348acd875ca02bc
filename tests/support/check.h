/* check: the assertions tests use. A failed CHECK prints where and what and stops the
 * test program at once (exit status 1): what follows a failed check -- often a NULL from a
 * set-up that did not work -- is never run and can never read as a pass. Processes and
 * directories of live test environments are cleaned up at exit (testenv.h).
 * check_exit_code() is what main() returns when every check passed. */
#ifndef CLOISTER_CHECK_H
#define CLOISTER_CHECK_H

#include <stdio.h>
#include <string.h>

extern int check_failures;

/* Counts a failure and ends the program with status 1: the hook set by check_on_fail()
 * runs first (e.g. to print a service's log), then the atexit handlers. */
void check_fail(void) __attribute__((noreturn));

/* Sets (fn non-NULL) or clears (NULL) the one function check_fail() calls before exiting. */
void check_on_fail(void (*fn)(void *arg), void *arg);

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);       \
            check_fail();                                                                  \
        }                                                                                  \
    } while (0)

#define CHECK_STR(actual, expected)                                                        \
    do {                                                                                   \
        const char *check_a_ = (actual), *check_e_ = (expected);                           \
        if (check_a_ == NULL || strcmp(check_a_, check_e_) != 0) {                         \
            fprintf(stderr, "%s:%d: CHECK_STR failed: %s is \"%s\", expected \"%s\"\n",    \
                    __FILE__, __LINE__, #actual, check_a_ ? check_a_ : "(null)", check_e_); \
            check_fail();                                                                  \
        }                                                                                  \
    } while (0)

#define CHECK_INT(actual, expected)                                                        \
    do {                                                                                   \
        long long check_a_ = (long long)(actual), check_e_ = (long long)(expected);        \
        if (check_a_ != check_e_) {                                                        \
            fprintf(stderr, "%s:%d: CHECK_INT failed: %s is %lld, expected %lld\n",        \
                    __FILE__, __LINE__, #actual, check_a_, check_e_);                      \
            check_fail();                                                                  \
        }                                                                                  \
    } while (0)

/* 0 if every CHECK passed, 1 otherwise; prints a summary line. */
int check_exit_code(const char *test_name);

#endif
