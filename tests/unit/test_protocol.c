/* The protocol's enums: every value has one spelling, names are unique, parsing a name
 * gives the value back, and the message table is in msg_type_t order. */
#include "check.h"
#include "messages.h"
#include "protocol.h"

#include <string.h>

static void test_fields_named_once(void)
{
    for (int i = 0; i < FIELD_COUNT; i++) {
        CHECK(field_name((field_t)i) != NULL && field_name((field_t)i)[0] != '\0');
        for (int j = 0; j < i; j++)
            CHECK(strcmp(field_name((field_t)i), field_name((field_t)j)) != 0);
    }
    CHECK_STR(field_name(FIELD_ISSUE_ID), "issueId");
    CHECK_STR(field_name(FIELD_MAX_ATTEMPTS), "max_attempts");
}

static void test_messages_in_order(void)
{
    CHECK_INT(messages_count, MSG_COUNT);
    for (int i = 0; i < MSG_COUNT; i++) {
        CHECK_INT(messages_table[i].type, i);
        const char *name = msg_type_name((msg_type_t)i);
        CHECK(messages_find(name, strlen(name)) == &messages_table[i]);
    }
    CHECK(messages_find("launch_missiles", 15) == NULL);
}

static void test_names_round_trip(void)
{
    for (int i = 0; i < PRIORITY_COUNT; i++)
        CHECK_INT(priority_parse(priority_name((priority_t)i)), i);
    CHECK_INT(priority_parse("asap"), -1);
    CHECK_INT(priority_parse(NULL), -1);
    for (int i = TASK_QUEUED; i <= TASK_CANCELLED; i++)
        CHECK_INT(task_state_parse(task_state_name((task_state_t)i)), i);
    for (int i = 0; i < EVENT_COUNT; i++)
        for (int j = 0; j < i; j++)
            CHECK(strcmp(event_type_name((event_type_t)i), event_type_name((event_type_t)j)) != 0);
    CHECK_STR(event_type_name(EVENT_MESSAGE_REJECTED), "message.rejected");
    for (int i = REVIEW_MODE_STRICT; i <= REVIEW_MODE_DISABLED; i++)
        CHECK_INT(review_mode_parse_name(review_mode_name((review_mode_t)i)), i);
}

int main(void)
{
    test_fields_named_once();
    test_messages_in_order();
    test_names_round_trip();
    return check_exit_code("test_protocol");
}
