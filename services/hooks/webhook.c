/* webhook: the signed POST (see webhook.h), with libcurl and libsodium's HMAC-SHA256. */
#include "webhook.h"

#include "failure.h"

#include <curl/curl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

int webhook_init(void)
{
    if (sodium_init() < 0)
        return failure_set(FAILURE_IO, "cannot initialise libsodium");
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return failure_set(FAILURE_IO, "cannot initialise libcurl");
    return 0;
}

void webhook_sign(const char *secret, const char *body, size_t len, char *out, size_t size)
{
    unsigned char mac[crypto_auth_hmacsha256_BYTES];
    crypto_auth_hmacsha256_state state;
    crypto_auth_hmacsha256_init(&state, (const unsigned char *)secret, strlen(secret));
    crypto_auth_hmacsha256_update(&state, (const unsigned char *)body, len);
    crypto_auth_hmacsha256_final(&state, mac);
    char hex[2 * sizeof mac + 1];
    sodium_bin2hex(hex, sizeof hex, mac, sizeof mac);
    snprintf(out, size, "sha256=%s", hex);
}

/* The answer's body is not wanted. */
static size_t s_discard(char *data, size_t size, size_t count, void *arg)
{
    (void)data;
    (void)arg;
    return size * count;
}

bool webhook_post(const char *url, const char *secret, const char *event, int64_t delivery,
                  const char *body, size_t len, long timeout_ms, char *outcome, size_t size)
{
    char signature[80], line[160];
    webhook_sign(secret, body, len, signature, sizeof signature);
    struct curl_slist *headers = NULL;
    const char *fixed[] = {"Content-Type: application/json",
                           "User-Agent: cloister-hooks/" CLOISTER_VERSION, "Expect:"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        headers = curl_slist_append(headers, fixed[i]);
    snprintf(line, sizeof line, "X-Cloister-Event: %s", event);
    headers = curl_slist_append(headers, line);
    snprintf(line, sizeof line, "X-Cloister-Delivery: %lld", (long long)delivery);
    headers = curl_slist_append(headers, line);
    snprintf(line, sizeof line, "X-Cloister-Signature-256: %s", signature);
    headers = curl_slist_append(headers, line);
    CURL *curl = curl_easy_init();
    if (curl == NULL || headers == NULL) {
        snprintf(outcome, size, "out of memory");
        curl_slist_free_all(headers);
        curl_easy_cleanup(curl);
        return false;
    }
    char error[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, s_discard);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    CURLcode rc = curl_easy_perform(curl);
    long status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK)
        snprintf(outcome, size, "%s", error[0] ? error : curl_easy_strerror(rc));
    else
        snprintf(outcome, size, "HTTP %ld", status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return rc == CURLE_OK && status >= 200 && status < 300;
}
