/* fuzz_testparse: feeds arbitrary bytes to the test-output parser (testparse.h) as a
 * runner's output. Besides "no crash, no leak, no undefined behaviour" it checks the
 * result's promises and aborts if one breaks: counts are -1 or >= 0, run = passed +
 * failed when all are known, at most TESTRUN_MAX_FAILURES failures, each valid UTF-8 of
 * at most TESTRUN_MAX_FAILURE_LEN bytes, and the output kept whole. */
#include "msgjson.h"
#include "testparse.h"
#include "utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void s_check_counts(const testrun_result_t *r)
{
    if (r->run < -1 || r->passed < -1 || r->failed < -1 || r->skipped < -1)
        abort();
    if (r->run >= 0 && r->passed >= 0 && r->failed >= 0 && r->run != r->passed + r->failed)
        abort();
}

static void s_check_failures(const testrun_result_t *r)
{
    if (r->nfailures > TESTRUN_MAX_FAILURES)
        abort();
    for (size_t i = 0; i < r->nfailures; i++) {
        size_t len = strlen(r->failures[i]);
        if (len > TESTRUN_MAX_FAILURE_LEN || utf8_cut(r->failures[i], len) != len)
            abort(); /* too long, or not whole UTF-8 characters */
        json_t *text = json_string(r->failures[i]);
        if (text == NULL)
            abort(); /* jansson refuses what is not UTF-8 */
        json_decref(text);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    testrun_result_t *r = NULL;
    if (testrun_parse(&r, (const char *)data, size) != 0)
        return 0; /* out of memory */
    if (r->output_len != size || memcmp(r->output, data, size) != 0 || r->started)
        abort();
    s_check_counts(r);
    s_check_failures(r);
    (void)testrun_verdict(r);
    testrun_result_destroy(&r);
    return 0;
}
