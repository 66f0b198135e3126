/* LongBench's metrics (src/eval/metrics.c) on hand-computed cases. Each
 * expected value is worked out in the comment next to it from LongBench's
 * metrics.py / eval.py and the `rouge` package. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "eval/metrics.h"

#define assert_near(a, b) assert_true(fabs((double)(a) - (double)(b)) < 1e-12)

static void check_norm(const char *in, const char *want)
{
    char *got = vkv_normalize_answer(in);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void normalize_answer_lowers_strips_punctuation_articles_and_space(void **state)
{
    (void)state;
    check_norm("The Quick, brown fox!", "quick brown fox");
    check_norm("  An apple a day\tkeeps THE doctor away. ", "apple day keeps doctor away");
    /* punctuation goes first, so "a.b" is the word "ab"; "anthem" and "theater" are no articles */
    check_norm("anthem theater a.b", "anthem theater ab");
    /* Unicode: É lower-cases; the em dash is no word character, so "the" between dashes is an article */
    check_norm("\xc3\x89lan the\xe2\x80\x94" "end", "\xc3\xa9lan \xe2\x80\x94" "end");
    /* a letter outside ASCII is a word character: "a" glued to it stays */
    check_norm("a\xc3\xa9 A", "a\xc3\xa9");
    check_norm("", "");
    check_norm("The a an", "");
}

static void qa_f1_is_token_f1_of_normalised_text(void **state)
{
    (void)state;
    /* pred [paris, france], truth [paris]: common 1, P 1/2, R 1, F1 2/3 */
    assert_near(vkv_metric_qa_f1("Paris, France", "paris"), 2.0 / 3);
    /* pred [b, b, c] (article dropped), truth [b, b, d]: common 2, P = R = 2/3 */
    assert_near(vkv_metric_qa_f1("a b b c", "b b d"), 2.0 / 3);
    /* multiset intersection: pred [b, b, b], truth [b]: common 1, P 1/3, R 1, F1 1/2 */
    assert_near(vkv_metric_qa_f1("b b b", "b"), 0.5);
    /* both normalise to nothing */
    assert_near(vkv_metric_qa_f1("The", "the"), 0);
    assert_near(vkv_metric_qa_f1("", "x"), 0);
    assert_near(vkv_metric_qa_f1("Yes.", "yes"), 1);
}

static void rouge_l_follows_the_rouge_package(void **state)
{
    (void)state;
    /* one sentence each; word sets: ref {the cat is on mat} (5), hyp {the cat sat on mat} (5);
     * LCS "the cat on the mat" has the words {the cat on mat}: 4; R = P = 4/5 */
    double r = 0.8, p = 0.8;
    assert_near(vkv_metric_rouge_l("the cat sat on the mat", "the cat is on the mat"), 2 * p * r / (p + r + 1e-8));
    /* sentences split at '.': the union over (ref sentence, hyp sentence) pairs finds all 4 words */
    assert_near(vkv_metric_rouge_l("a b. c d", "c d. a b"), 2.0 / (2 + 1e-8));
    /* "hello. " is the sentences ["hello", ""]: words {hello, ""}: P = 1/2, R = 1 */
    assert_near(vkv_metric_rouge_l("hello. ", "hello"), 2 * 0.5 / (1.5 + 1e-8));
    /* words are a set: repeats count once (hyp {x, y}, ref {x, y}) */
    assert_near(vkv_metric_rouge_l("x x x y", "x y"), 2.0 / (2 + 1e-8));
    /* the package raises on an empty hypothesis (no sentence): LongBench scores 0 */
    assert_near(vkv_metric_rouge_l("", "anything"), 0);
    assert_near(vkv_metric_rouge_l("...", "anything"), 0);
    assert_near(vkv_metric_rouge_l("nothing shared", "at all"), 0);
}

static void kvpress_niah_scores_the_needle_against_the_answer(void **state)
{
    (void)state;
    /* get_scores(needle, answer): hyp = needle ["park sandwich"], ref = answer ["sandwich park",
     * "sandwich"]. Ref "sandwich park" x hyp: the LCS is one word; the backtrack moves left on
     * the tie and takes "park"; ref "sandwich" takes "sandwich": union {park, sandwich}, R = P = 1.
     * The other order (LongBench's, hyp = answer) takes "sandwich" twice: union 1 of 2, F 1/2. */
    const char *needle = "park sandwich", *answer = "sandwich park. sandwich";
    assert_near(vkv_metric_kvpress_niah(needle, answer), 2.0 / (2 + 1e-8));
    assert_near(vkv_metric_rouge_l(answer, needle), 2 * 0.25 / (1 + 1e-8));
    /* both stripped first: "hello. \n" would otherwise end in an empty sentence (R = 1/2) */
    assert_near(vkv_metric_kvpress_niah(" hello\n", "hello. \n"), 2.0 / (2 + 1e-8));
    assert_near(vkv_metric_rouge_l("hello", "hello. \n"), 2 * 0.5 / (1.5 + 1e-8));
    /* an answer of only white space is empty after the strip: the package raises, 0 */
    assert_near(vkv_metric_kvpress_niah("hello", " \n\t"), 0);
}

static void classification_counts_matches_with_pythons_remove_quirk(void **state)
{
    (void)state;
    const char *classes[] = {"Country", "Other location", "City"};
    assert_near(vkv_metric_classification("Type: Country", "Country", classes, 3), 1);
    /* two classes found, the truth among them: 1/2 */
    assert_near(vkv_metric_classification("City or Country", "Country", classes, 3), 0.5);
    assert_near(vkv_metric_classification("City", "Country", classes, 3), 0);
    /* em = [location, Other, Other location, City]; "location" is removed
     * (a substring of the truth), which makes the loop skip "Other"; the
     * truth stays: em = [Other, Other location, City] -> 1/3 (not 1/2) */
    const char *c2[] = {"location", "Other", "Other location", "City"};
    assert_near(vkv_metric_classification("Other location or City", "Other location", c2, 4), 1.0 / 3);
}

static void count_and_retrieval_score_the_fraction_of_right_numbers(void **state)
{
    (void)state;
    /* numbers 12, 13, 012: only "12" equals the truth as a string */
    assert_near(vkv_metric_count("There are 12 unique paragraphs, not 13 or 012.", "12"), 1.0 / 3);
    assert_near(vkv_metric_count("none", "12"), 0);
    assert_near(vkv_metric_count("7", "7"), 1);
    assert_near(vkv_metric_retrieval("Paragraph 3", "Paragraph 3"), 1);
    assert_near(vkv_metric_retrieval("Paragraph 3 or Paragraph 30", "Paragraph 3"), 0.5);
    assert_near(vkv_metric_retrieval("The answer is: Paragraph 30", "Paragraph 3"), 0);
    assert_near(vkv_metric_retrieval("3", "no paragraph here"), 0);
}

static void fuzz_ratio_is_fuzzywuzzys(void **state)
{
    (void)state;
    /* Levenshtein.ratio = 2 LCS / (len a + len b) */
    assert_int_equal(vkv_fuzz_ratio("kitten", "sitting", VKV_CODE_SIM_LEVENSHTEIN), 62); /* 8/13 = 61.5 */
    assert_int_equal(vkv_fuzz_ratio("abc", "abd", VKV_CODE_SIM_LEVENSHTEIN), 67);        /* 4/6 */
    /* round half to even: 2/16 = 12.5 -> 12, 6/16 = 37.5 -> 38 */
    assert_int_equal(vkv_fuzz_ratio("abcdefgh", "aijklmno", VKV_CODE_SIM_LEVENSHTEIN), 12);
    assert_int_equal(vkv_fuzz_ratio("abcdefgh", "abcijklm", VKV_CODE_SIM_LEVENSHTEIN), 38);
    assert_int_equal(vkv_fuzz_ratio("same", "same", VKV_CODE_SIM_LEVENSHTEIN), 100);
    assert_int_equal(vkv_fuzz_ratio("", "", VKV_CODE_SIM_LEVENSHTEIN), 100); /* equal before empty */
    assert_int_equal(vkv_fuzz_ratio("", "x", VKV_CODE_SIM_LEVENSHTEIN), 0);
    /* code points, not bytes: "é" vs "e" share nothing, "éa" vs "ea" share 'a': 2/4 */
    assert_int_equal(vkv_fuzz_ratio("\xc3\xa9" "a", "ea", VKV_CODE_SIM_LEVENSHTEIN), 50);
    /* difflib's greedy blocks: "bab" vs "acb" first matches b(0)-b(2), nothing is left on either
     * side: 2/6 = 33; the LCS "ab" gives 4/6 = 67 */
    assert_int_equal(vkv_fuzz_ratio("bab", "acb", VKV_CODE_SIM_DIFFLIB), 33);
    assert_int_equal(vkv_fuzz_ratio("bab", "acb", VKV_CODE_SIM_LEVENSHTEIN), 67);
}

static void code_sim_scores_the_first_line_that_is_not_a_comment(void **state)
{
    (void)state;
    /* leading newlines go, "# comment" and the "```" line are skipped */
    assert_near(vkv_metric_code_sim("\n\n# comment\n```python\nx = 1\ny = 2", "x = 1", VKV_CODE_SIM_LEVENSHTEIN), 1);
    /* "//" marks a comment too; "abc" vs "abd" -> 0.67 */
    assert_near(vkv_metric_code_sim("// c\nabc", "abd", VKV_CODE_SIM_LEVENSHTEIN), 0.67);
    /* a blank line after a comment is the first line taken (as LongBench does): empty -> 0 */
    assert_near(vkv_metric_code_sim("# c\n\nx = 1", "x = 1", VKV_CODE_SIM_LEVENSHTEIN), 0);
    /* no usable line: the empty string */
    assert_near(vkv_metric_code_sim("# only", "x", VKV_CODE_SIM_LEVENSHTEIN), 0);
}

static void longbench_score_takes_the_first_line_and_the_best_answer(void **state)
{
    (void)state;
    const vkv_lb_task *trivia = vkv_longbench_task("triviaqa"), *hotpot = vkv_longbench_task("hotpotqa");
    assert_non_null(trivia);
    assert_true(trivia->first_line && trivia->no_chat);
    assert_false(hotpot->first_line || hotpot->no_chat);
    const char *answers[] = {"London", "Paris"};
    /* the first line after leading newlines is "Paris": the second answer matches */
    assert_near(vkv_longbench_score(trivia, "\n\nParis\nLondon London", answers, 2, NULL, 0, NULL), 1);
    /* hotpotqa scores the whole prediction: [paris, london, london] vs [london]: common 1, P 1/3, R 1 */
    assert_near(vkv_longbench_score(hotpot, "Paris\nLondon London", answers, 2, NULL, 0, NULL), 0.5);
    assert_near(vkv_longbench_score(hotpot, "x", answers, 0, NULL, 0, NULL), 0);
    const vkv_lb_task *trec = vkv_longbench_task("trec");
    const char *classes[] = {"City", "Country"};
    const char *truth[] = {"City"};
    assert_near(vkv_longbench_score(trec, "City\nCountry", truth, 1, classes, 2, NULL), 1);
}

static void task_table_has_the_16_english_tasks_in_order(void **state)
{
    (void)state;
    assert_string_equal(vkv_lb_tasks[0].name, "narrativeqa");
    assert_string_equal(vkv_lb_tasks[15].name, "repobench-p");
    assert_int_equal(vkv_longbench_task_index("passage_retrieval_en"), 13);
    assert_int_equal(vkv_longbench_task_index("qasper_e"), 1);
    assert_int_equal(vkv_longbench_task_index("multifieldqa_zh"), -1);
    assert_null(vkv_longbench_task("nope"));
    assert_int_equal(vkv_longbench_task("lcc")->metric, VKV_LB_CODE_SIM);
    assert_int_equal(vkv_longbench_task("gov_report")->metric, VKV_LB_ROUGE);
    int no_chat = 0;
    for (int i = 0; i < VKV_LB_N_TASKS; i++) no_chat += vkv_lb_tasks[i].no_chat;
    assert_int_equal(no_chat, 5); /* trec, triviaqa, samsum, lcc, repobench-p (lsht is Chinese) */
}

/* kvpress's scorer strips all leading white space (eval.py only newlines, only
 * for the first-line tasks): a space before the first line decides trec. */
static void kvpress_scoring_strips_leading_white_space(void **state)
{
    (void)state;
    const vkv_lb_task *trec = vkv_longbench_task("trec"), *lcc = vkv_longbench_task("lcc");
    const char *classes[] = {"City", "Country"}, *answers[] = {"City"}, *code[] = {"return a - b"};
    const vkv_lb_score_opts thudm = {VKV_CODE_SIM_LEVENSHTEIN, false}, kvpress = {VKV_CODE_SIM_LEVENSHTEIN, true};
    /* " \nCity": eval.py keeps " " as the first line (no class), kvpress reads "City" */
    assert_near(vkv_longbench_score(trec, " \nCity", answers, 1, classes, 2, &thudm), 0);
    assert_near(vkv_longbench_score(trec, " \nCity", answers, 1, classes, 2, &kvpress), 1);
    /* indentation before code counts against eval.py's similarity, not kvpress's */
    double a = vkv_longbench_score(lcc, "    return a - b", code, 1, NULL, 0, &thudm);
    double b = vkv_longbench_score(lcc, "    return a - b", code, 1, NULL, 0, &kvpress);
    assert_true(a < 1 && b == 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(normalize_answer_lowers_strips_punctuation_articles_and_space),
        cmocka_unit_test(qa_f1_is_token_f1_of_normalised_text),
        cmocka_unit_test(rouge_l_follows_the_rouge_package),
        cmocka_unit_test(kvpress_niah_scores_the_needle_against_the_answer),
        cmocka_unit_test(classification_counts_matches_with_pythons_remove_quirk),
        cmocka_unit_test(count_and_retrieval_score_the_fraction_of_right_numbers),
        cmocka_unit_test(fuzz_ratio_is_fuzzywuzzys),
        cmocka_unit_test(code_sim_scores_the_first_line_that_is_not_a_comment),
        cmocka_unit_test(longbench_score_takes_the_first_line_and_the_best_answer),
        cmocka_unit_test(task_table_has_the_16_english_tasks_in_order),
        cmocka_unit_test(kvpress_scoring_strips_leading_white_space),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
