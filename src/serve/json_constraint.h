/* OpenAI's `response_format` as constrained decoding: a JSON schema (or
 * json_object mode) compiled once per request, a matcher per sequence that
 * follows the bytes generated so far, and the tokens that may come next.
 *
 * The schema subset is OpenAI structured outputs': type (one name or an
 * array of names: object, array, string, number, integer, boolean, null),
 * properties, required, additionalProperties (false; true or absent: any
 * extra key with any value; a schema: extra keys' values), items, minItems,
 * maxItems, enum and const (strings, numbers, booleans, null), minimum,
 * maximum, exclusiveMinimum and exclusiveMaximum (below), anyOf, $defs at
 * the top with "$ref": "#/$defs/NAME" or "#" (recursion allowed), and the
 * annotations (description, title, default, examples, $schema, $id,
 * $comment, deprecated, readOnly, writeOnly, strict) ignored. Any other
 * keyword (multipleOf, pattern, format, ...) is refused by name.
 *
 * What the matcher lets a model write, always valid JSON for the schema:
 * - object keys in the order of `properties`: optional ones may be skipped,
 *   required ones may not, none twice. Extra keys (additionalProperties not
 *   false) come only once every required key was written, never spell a
 *   declared name, and have no escapes when the object declares properties
 *   (so the spelling is the name). Objects of json_object mode and `{}`
 *   schemas take any keys, duplicates included (RFC 8259 allows them);
 * - strings: JSON's escapes, \u surrogates in pairs only, valid UTF-8;
 * - numbers: JSON's grammar, at most VKV_JSON_CONSTRAINT_MAX_NUMBER bytes;
 *   integer without fraction or exponent; within the schema's bounds;
 * - enum and const values spelled one way: their shortest JSON text;
 * - white space only between tokens, each gap one space or a newline and
 *   up to VKV_JSON_CONSTRAINT_MAX_WS spaces or tabs (compact or indented
 *   JSON, never runs of blank lines); none before or after the top-level
 *   value; at most VKV_JSON_CONSTRAINT_MAX_NEST objects and arrays open (as
 *   vkv_json_parse reads).
 * A prefix the matcher accepts can always be completed: a key or value
 * whose shortest completion would nest too deep is not offered, and
 * schemas whose values cannot end (a required property that is the object
 * itself) are refused. anyOf alternatives are followed side by side while
 * they agree (up to 32 at once; later ones past that are dropped, which
 * only narrows the output). Any JSON value may stand at the top level of a
 * schema; json_object mode wants an object.
 *
 * Numeric bounds: minimum, maximum, exclusiveMinimum, exclusiveMaximum are
 * numbers (as in JSON Schema 2020-12; a boolean exclusive* is refused), on
 * schemas whose type allows integer or number (or has no type); elsewhere
 * they are refused. They bound the numbers a schema's value may be; enum
 * and const values outside them are dropped. A number's value is its exact
 * decimal value, whatever its spelling (0.5, 5e-1, 50E-2, 0.050e1). An
 * inclusive bound is its shortest decimal spelling, i.e. what the schema
 * wrote (maximum 0.3 holds 0.3 itself). An exclusive bound must also hold
 * for the number as a double reader (JSON.parse, float()) reads it: a
 * number is within exclusiveMaximum b when it is below b and its nearest
 * double is too, so exclusiveMaximum 1 refuses 0.99999999999999995 (read
 * as 1) and takes 0.99999999999999994 (read as the double below 1);
 * exclusiveMinimum 0 refuses 1e-400 (read as 0). Inclusive bounds need no
 * such care: a number within one reads as a double within it too. The
 * matcher enforces the bounds exactly, byte by byte: it takes a byte of a
 * number only when some completion of the number (within the grammar
 * above, the integer's, and the VKV_JSON_CONSTRAINT_MAX_NUMBER byte cap) is
 * within the bounds, and ends a number (the byte after it, or the end of a
 * top-level number) only when its value is within them. So with minimum 10
 * and maximum 99, "5" is taken (50 to 59 may follow) but may not end, and
 * "100" is refused at its last '0'; with maximum 0.7, "7" is taken (7e-1
 * may follow); with zodResponseFormat's z.number().int() bounds,
 * +-9007199254740991, "9007199254740992" is refused at its last digit. A
 * schema whose bounds leave no number of at most
 * VKV_JSON_CONSTRAINT_MAX_NUMBER bytes is refused, naming the bound: minimum
 * above maximum, no integer between them (integer, minimum 1.2, maximum
 * 1.8), two exclusive bounds with no double strictly between them.
 *
 * The compiled constraint and the vocabulary index are immutable once built
 * and shared read-only by threads; a matcher belongs to one sequence. */
#ifndef VKV_SERVE_JSON_CONSTRAINT_H
#define VKV_SERVE_JSON_CONSTRAINT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/json.h"

#define VKV_JSON_CONSTRAINT_MAX_NEST 128  /* objects and arrays open at once */
#define VKV_JSON_CONSTRAINT_MAX_WS 20     /* indentation bytes after a newline */
#define VKV_JSON_CONSTRAINT_MAX_NUMBER 32 /* bytes of a number */
#define VKV_JSON_CONSTRAINT_MAX_DEPTH 64  /* schemas nested in schemas */
/* The parameter refusals name paths under. */
#define VKV_JSON_CONSTRAINT_PARAM "response_format.json_schema.schema"

typedef struct vkv_json_constraint vkv_json_constraint;
typedef struct vkv_json_matcher vkv_json_matcher;
typedef struct vkv_json_vocab vkv_json_vocab;

/* ---- compiling ---- */

/* Compiles response_format.json_schema.schema; schema NULL is json_object
 * mode (any JSON object). On success *out is the constraint (free it with
 * vkv_json_constraint_free after every matcher on it). On failure returns
 * false with *out NULL, msg a sentence and param the path of the offending
 * keyword, e.g. "response_format.json_schema.schema.properties.age.minimum"
 * (a 400 with that param); param "" means out of memory (a 500). */
bool vkv_json_constraint_compile(const vkv_json *schema, vkv_json_constraint **out, char *param, size_t param_size,
                                 char *msg, size_t msg_size);
void vkv_json_constraint_free(vkv_json_constraint *c);

/* ---- one sequence's output ---- */

/* A matcher at the start of the output; NULL out of memory. */
vkv_json_matcher *vkv_json_matcher_new(const vkv_json_constraint *c);
/* A copy in the same state; NULL out of memory. */
vkv_json_matcher *vkv_json_matcher_clone(const vkv_json_matcher *m);
void vkv_json_matcher_free(vkv_json_matcher *m);

/* Follows bytes[0, n) of output. False when they cannot continue the output
 * (or out of memory): the state is then unchanged. */
bool vkv_json_matcher_advance(vkv_json_matcher *m, const char *bytes, size_t n);

/* The top-level value is finished: end of generation is allowed exactly
 * then (after a finished object, array, string or literal, nothing else
 * is; after a top-level number, more digits still are). */
bool vkv_json_matcher_complete(const vkv_json_matcher *m);

/* ---- token masks ---- */

/* A vocabulary token's bytes. Special (control) tokens are never allowed by
 * vkv_json_matcher_allowed: the caller allows end-of-generation tokens when
 * the matcher is complete. */
typedef struct vkv_token_bytes {
    const char *p;
    size_t n;
    bool special;
} vkv_token_bytes;

/* A byte trie of a vocabulary, built once per model and shared by every
 * matcher (it keeps no pointer into tokens); NULL out of memory. */
vkv_json_vocab *vkv_json_vocab_new(const vkv_token_bytes *tokens, size_t n_vocab);
void vkv_json_vocab_free(vkv_json_vocab *v);

/* Sets allowed[i] (n_vocab entries) for every token whose whole byte string
 * can continue the output, false for the others (empty and special tokens
 * included): what vkv_json_matcher_advance would take, token by token, in
 * one walk of the trie that skips each subtree whose first bytes cannot. The
 * matcher's state is unchanged. False out of memory (then allowed[] is all
 * false). Sub-millisecond at 150K tokens on one core (test_json_constraint
 * prints its timings). */
bool vkv_json_matcher_allowed(vkv_json_matcher *m, const vkv_json_vocab *v, bool *allowed);

#endif
