/* merge_credentials: see merge_credentials.h. */
#include "merge_credentials.h"

#include <stdio.h>
#include <stdlib.h>

/* The variable's value when it is set and not empty, else NULL. */
static const char *s_env(const char *name)
{
    const char *value = getenv(name);
    return value != NULL && value[0] != '\0' ? value : NULL;
}

/* Fails the acquisition with `message` as libgit2's error (the merge's reason). */
static int s_refuse(const char *message)
{
    git_error_set_str(GIT_ERROR_NET, message);
    return GIT_EAUTH;
}

int merge_credentials_acquire(git_credential **out, const char *url, const char *username_from_url,
                              unsigned int allowed_types, void *payload)
{
    merge_credentials_t *self = payload;
    char message[1024];
    if (allowed_types & GIT_CREDENTIAL_USERPASS_PLAINTEXT) {
        const char *token = s_env("CLOISTER_GIT_TOKEN");
        const char *from = "CLOISTER_GIT_TOKEN";
        if (token == NULL) {
            token = s_env("GH_TOKEN");
            from = "GH_TOKEN";
        }
        if (token == NULL) {
            snprintf(message, sizeof message,
                     "%s wants a user name and password: set CLOISTER_GIT_TOKEN (or GH_TOKEN) "
                     "in the merge-agent's environment to a token that may push",
                     url);
            return s_refuse(message);
        }
        if (self->offered & GIT_CREDENTIAL_USERPASS_PLAINTEXT) {
            snprintf(message, sizeof message,
                     "%s refused the token in %s: is it valid, and may it push there?", url,
                     from);
            return s_refuse(message);
        }
        self->offered |= GIT_CREDENTIAL_USERPASS_PLAINTEXT;
        const char *user = username_from_url;
        if (user == NULL || user[0] == '\0')
            user = s_env("CLOISTER_GIT_USER");
        if (user == NULL)
            user = "x-access-token";
        return git_credential_userpass_plaintext_new(out, user, token);
    }
    if (allowed_types & GIT_CREDENTIAL_SSH_KEY) {
        const char *user = username_from_url && username_from_url[0] ? username_from_url : "git";
        const char *key = s_env("CLOISTER_GIT_SSH_KEY");
        if (key == NULL && s_env("SSH_AUTH_SOCK") == NULL) {
            snprintf(message, sizeof message,
                     "%s wants an SSH key: set CLOISTER_GIT_SSH_KEY to a private key file, or "
                     "forward an SSH agent (SSH_AUTH_SOCK), for the merge-agent",
                     url);
            return s_refuse(message);
        }
        if (self->offered & GIT_CREDENTIAL_SSH_KEY) {
            snprintf(message, sizeof message, "%s refused the SSH key of %s for user %s", url,
                     key != NULL ? "CLOISTER_GIT_SSH_KEY" : "the agent at SSH_AUTH_SOCK", user);
            return s_refuse(message);
        }
        self->offered |= GIT_CREDENTIAL_SSH_KEY;
        if (key != NULL)
            return git_credential_ssh_key_new(out, user, NULL, key, NULL);
        return git_credential_ssh_key_from_agent(out, user);
    }
    if (allowed_types & GIT_CREDENTIAL_USERNAME) {
        const char *user = username_from_url && username_from_url[0] ? username_from_url : "git";
        return git_credential_username_new(out, user);
    }
    snprintf(message, sizeof message, "%s wants credentials of a kind the merge-agent has not",
             url);
    return s_refuse(message);
}
