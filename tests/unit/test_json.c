/* The JSON reader and writer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/json.h"
#include "core/json_write.h"

static void json_parses_nested_values(void **state)
{
    (void)state;
    const char *t = "{\"a\": [1, -2.5e3, true, false, null], \"b\": {\"c\": \"x\\ny\\u00e9\\ud83d\\ude00\"}, \"e\": []}";
    vkv_json_doc *d;
    assert_int_equal(vkv_json_parse(t, strlen(t), &d), VKV_OK);
    const vkv_json *r = vkv_json_root(d);
    const vkv_json *a = vkv_json_get(r, "a");
    assert_int_equal(a->n_items, 5);
    assert_true(vkv_json_at(a, 0)->number == 1);
    assert_true(vkv_json_at(a, 1)->number == -2500);
    assert_true(vkv_json_at(a, 2)->boolean);
    assert_int_equal(vkv_json_at(a, 4)->type, VKV_JSON_NULL);
    assert_null(vkv_json_at(a, 5));
    assert_string_equal(vkv_json_get(vkv_json_get(r, "b"), "c")->string, "x\ny\xc3\xa9\xf0\x9f\x98\x80");
    assert_int_equal(vkv_json_get(r, "e")->n_items, 0);
    assert_null(vkv_json_get(r, "missing"));
    vkv_json_free(d);
}

static void json_rejects_malformed_text_with_position(void **state)
{
    (void)state;
    const char *bad[] = {"", "{", "[1,]", "{\"a\" 1}", "\"unterminated", "[1] 2", "{\"a\":tru}", "[\"\\x\"]",
                         "[01a]", "{1:2}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        vkv_json_doc *d = NULL;
        assert_int_equal(vkv_json_parse(bad[i], strlen(bad[i]), &d), VKV_ERR_FORMAT);
        assert_null(d);
        assert_non_null(strstr(vkv_last_error(), "line"));
    }
    /* every prefix of a valid document is rejected cleanly */
    const char *ok = "{\"k\": [1, 2, {\"z\": \"s\"}], \"t\": true}";
    for (size_t n = 0; n < strlen(ok); n++) {
        vkv_json_doc *d = NULL;
        assert_int_equal(vkv_json_parse(ok, n, &d), VKV_ERR_FORMAT);
    }
}

static void json_rejects_deep_nesting(void **state)
{
    (void)state;
    char buf[1000];
    memset(buf, '[', sizeof buf);
    vkv_json_doc *d;
    assert_int_equal(vkv_json_parse(buf, sizeof buf, &d), VKV_ERR_FORMAT);
}

static void json_writer_output_parses_back(void **state)
{
    (void)state;
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    vkv_json_writer w;
    vkv_json_init(&w, f, true);
    vkv_json_begin_object(&w);
    vkv_json_key(&w, "s"); vkv_json_str(&w, "q\"uote\\\n\x01");
    vkv_json_key(&w, "n"); vkv_json_num(&w, 0.1);
    vkv_json_key(&w, "nan"); vkv_json_num(&w, 0.0 / 0.0);
    vkv_json_key(&w, "arr");
    vkv_json_begin_array(&w);
    vkv_json_int(&w, -3);
    vkv_json_bool(&w, true);
    vkv_json_begin_object(&w);
    vkv_json_end_object(&w);
    vkv_json_end_array(&w);
    vkv_json_end_object(&w);
    fclose(f);
    vkv_json_doc *d;
    assert_int_equal(vkv_json_parse(mem, len, &d), VKV_OK);
    const vkv_json *r = vkv_json_root(d);
    assert_string_equal(vkv_json_get(r, "s")->string, "q\"uote\\\n\x01");
    assert_true(vkv_json_get(r, "n")->number == 0.1);
    assert_int_equal(vkv_json_get(r, "nan")->type, VKV_JSON_NULL);
    assert_int_equal(vkv_json_get(r, "arr")->n_items, 3);
    vkv_json_free(d);
    free(mem);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(json_parses_nested_values),
        cmocka_unit_test(json_rejects_malformed_text_with_position),
        cmocka_unit_test(json_rejects_deep_nesting),
        cmocka_unit_test(json_writer_output_parses_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
