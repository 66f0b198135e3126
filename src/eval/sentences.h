/* English sentence boundaries the way NLTK's Punkt tokenizer draws them
 * (nltk.sent_tokenize), for RULER's essay haystack: RULER puts its needles
 * between the sentences of the essays' text (docs/ARCHITECTURE.md §5).
 *
 * Punkt's rules, written here for English prose:
 * - a candidate end is '.', '?' or '!' followed by white space and a token,
 *   or by a closing or other non-word character ( ) " ' ] } ; : * @ ( [ { ! ? );
 *   of several candidates in one word ("?!", "!!!") only the last counts;
 * - '?' and '!' end a sentence; a word ending in '.' ends one unless it is a
 *   known abbreviation (Mr., Dr., e.g., U.S., ...), an ellipsis ("..."), an
 *   initial ("J.") or a number ("1998.") followed by what does not start a
 *   sentence; a '.' inside a token (3.14, U.S, e.g) never ends one;
 * - after an abbreviation or an ellipsis a sentence ends when the next word
 *   is capitalised and is a sentence starter: by Punkt's orthographic
 *   evidence (the word occurs lower case in the text and never capitalised
 *   inside a sentence) or by a list of frequent starters (The, But, It, ...);
 * - after an initial or a number, a next word that does not start a sentence
 *   (lower case, or a capitalised word the text only ever capitalises)
 *   joins them;
 * - closing quotes and brackets after the end go with the sentence they
 *   close.
 * Punkt's English model learned its abbreviations, sentence starters,
 * collocations and orthographic table from a news corpus; here the
 * abbreviations and starters are lists of common English ones, the
 * orthographic table is learned from the text being split (as Punkt's
 * trainer learns it), and there are no collocations. */
#ifndef VKV_EVAL_SENTENCES_H
#define VKV_EVAL_SENTENCES_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"

/* A sentence: bytes [start, end) of the text, no white space at either end. */
typedef struct vkv_sentence {
    size_t start, end;
} vkv_sentence;

/* The sentences of text[0, len) in order (none for a blank text), as
 * nltk.sent_tokenize returns them: the white space between sentences
 * belongs to neither. *out is malloc'ed (NULL when *n is 0). VKV_ERR_OOM. */
vkv_status vkv_sentences_split(const char *text, size_t len, vkv_sentence **out, size_t *n);

/* Whether the lower-case word (no final period; "e.g", "u.s") is one of the
 * known abbreviations. */
bool vkv_sentences_is_abbreviation(const char *word, size_t len);

#endif
