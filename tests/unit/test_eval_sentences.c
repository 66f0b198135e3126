/* English sentence boundaries (src/eval/sentences.c), NLTK Punkt's rules:
 * abbreviations, decimals, initials, numbers, quotes and brackets after the
 * end, ellipses, "?!", the orthographic evidence the text itself gives, and
 * no end inside a token. Each expected split is what NLTK's Punkt tokenizer
 * gives with the module's abbreviations and starters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "eval/sentences.h"

/* The sentences of text joined by '|'. */
static char *split(const char *text)
{
    vkv_sentence *s;
    size_t n;
    assert_int_equal(vkv_sentences_split(text, strlen(text), &s, &n), VKV_OK);
    static char buf[4096];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(s[i].start < s[i].end && s[i].end <= strlen(text));
        assert_true(i == 0 || s[i].start >= s[i - 1].end);
        if (i) buf[k++] = '|';
        memcpy(buf + k, text + s[i].start, s[i].end - s[i].start);
        k += s[i].end - s[i].start;
    }
    buf[k] = 0;
    free(s);
    return buf;
}

static void abbreviations_do_not_end_sentences(void **state)
{
    (void)state;
    assert_string_equal(split("Mr. Smith went to Washington. He arrived."),
                        "Mr. Smith went to Washington.|He arrived.");
    assert_string_equal(split("Dr. Jones met the U.S. ambassador. They talked, e.g. about trade. It went well."),
                        "Dr. Jones met the U.S. ambassador.|They talked, e.g. about trade.|It went well.");
    assert_string_equal(split("See Fig. 3 and Mr. Brown (Jr.) tomorrow. Okay."),
                        "See Fig. 3 and Mr. Brown (Jr.) tomorrow.|Okay.");
    /* an abbreviation then a frequent sentence starter: the sentence ends there */
    assert_string_equal(split("He moved to the U.S. The move was hard."), "He moved to the U.S.|The move was hard.");
    assert_true(vkv_sentences_is_abbreviation("e.g", 3));
    assert_true(vkv_sentences_is_abbreviation("Mrs", 3)); /* compared lower-cased */
    assert_false(vkv_sentences_is_abbreviation("end", 3));
}

static void orthographic_evidence_of_the_text(void **state)
{
    (void)state;
    /* "Foo" is capitalised inside a sentence: no sentence starts at it */
    assert_string_equal(split("They use Foo etc. Foo is good."), "They use Foo etc. Foo is good.");
    /* "trees" occurs lower case and never capitalised inside one: it starts one */
    assert_string_equal(split("We saw trees etc. Trees grow. The trees are tall."),
                        "We saw trees etc.|Trees grow.|The trees are tall.");
}

static void numbers_and_initials(void **state)
{
    (void)state;
    assert_string_equal(split("Pi is about 3.14 and e is 2.718. Both are irrational."),
                        "Pi is about 3.14 and e is 2.718.|Both are irrational.");
    /* a number then a lower-case word goes on; then a capitalised one ends */
    assert_string_equal(split("It happened in 1998. the next year was quiet. In 1999. The year after was not."),
                        "It happened in 1998. the next year was quiet.|In 1999.|The year after was not.");
    assert_string_equal(split("J. S. Bach wrote it. A. Smith agreed."), "J. S. Bach wrote it.|A. Smith agreed.");
}

static void quotes_brackets_and_marks(void **state)
{
    (void)state;
    assert_string_equal(split("He said \"Stop.\" Then he left. (It was late.) We slept."),
                        "He said \"Stop.\"|Then he left.|(It was late.)|We slept.");
    assert_string_equal(split("She asked, 'Why?' He shrugged."), "She asked, 'Why?'|He shrugged.");
    assert_string_equal(split("Really?! Yes! Why? Because."), "Really?!|Yes!|Why?|Because.");
    assert_string_equal(split("Very bad acting!!! I promise."), "Very bad acting!!!|I promise.");
}

static void ellipses(void **state)
{
    (void)state;
    /* an ellipsis ends a sentence before a word that starts one, not before a lower-case word */
    assert_string_equal(split("He waited... The door opened. She paused... and went on."),
                        "He waited...|The door opened.|She paused... and went on.");
}

static void no_end_inside_a_token_or_at_plain_periods(void **state)
{
    (void)state;
    /* a period followed by a letter is inside a token; a plain word's period ends even before lower case */
    assert_string_equal(split("one.Two three. four"), "one.Two three.|four");
    assert_string_equal(split("  Lead and trail.  "), "Lead and trail."); /* trimmed (NLTK keeps the lead) */
    vkv_sentence *s = (vkv_sentence *)1;
    size_t n = 9;
    assert_int_equal(vkv_sentences_split("   \n ", 5, &s, &n), VKV_OK);
    assert_int_equal(n, 0);
    assert_null(s);
}

/* RULER's use: single-spaced text, the sentences joined by spaces give it back. */
static void sentences_joined_give_the_text(void **state)
{
    (void)state;
    const char *t = "July 2010What hard liquor, cigarettes, heroin, and crack have in common is that they're all more "
                    "concentrated. Most if not all the things we describe as addictive are. And the scary thing is, "
                    "the process is accelerating.We wouldn't want to stop it. (Dr. Smith disagrees.) \"Really?\" "
                    "No... It's the same process, e.g. technological progress, at 3.5x the rate. Period.";
    vkv_sentence *s;
    size_t n;
    assert_int_equal(vkv_sentences_split(t, strlen(t), &s, &n), VKV_OK);
    assert_int_equal(n, 8); /* "accelerating.We" is one token */
    char joined[1024] = "";
    for (size_t i = 0; i < n; i++) {
        if (i) strcat(joined, " ");
        strncat(joined, t + s[i].start, s[i].end - s[i].start);
    }
    assert_string_equal(joined, t);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(abbreviations_do_not_end_sentences),
        cmocka_unit_test(orthographic_evidence_of_the_text),
        cmocka_unit_test(numbers_and_initials),
        cmocka_unit_test(quotes_brackets_and_marks),
        cmocka_unit_test(ellipses),
        cmocka_unit_test(no_end_inside_a_token_or_at_plain_periods),
        cmocka_unit_test(sentences_joined_give_the_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
