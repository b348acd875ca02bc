/* merge_credentials: how the merge-agent authenticates to a remote when it fetches and
 * pushes. libgit2 runs no git credential helper and reads no ~/.git-credentials, so the
 * credentials come from the environment (which is how containers get them):
 *
 *   https   a token: CLOISTER_GIT_TOKEN, else GH_TOKEN (what `gh` uses), as the password of
 *           the user the URL names, else CLOISTER_GIT_USER, else "x-access-token" (GitHub
 *           takes any user name with a token; GitLab wants "oauth2");
 *   ssh     the user the URL names (else "git"), with the key CLOISTER_GIT_SSH_KEY names (a
 *           private key file without a passphrase), else the SSH agent at SSH_AUTH_SOCK.
 *
 * Each kind is offered once per connection: a remote that refuses it gets an error naming
 * what was tried, never the same credential again in a loop. With nothing to offer the
 * error says which variable to set. The token itself never appears in a message. */
#ifndef CLOISTER_MERGE_CREDENTIALS_H
#define CLOISTER_MERGE_CREDENTIALS_H

#include <git2.h>

/* One connection's attempts: zero it before each connect / fetch / push. */
typedef struct {
    unsigned int offered; /* GIT_CREDENTIAL_* already given on this connection */
} merge_credentials_t;

/* A git_credential_acquire_cb; `payload` is a merge_credentials_t. */
int merge_credentials_acquire(git_credential **out, const char *url, const char *username_from_url,
                              unsigned int allowed_types, void *payload);

#endif
