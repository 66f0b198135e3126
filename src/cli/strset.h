/* A set of strings (open addressing, FNV-1a), for the evaluation harnesses'
 * "already done" and de-duplication keys. */
#ifndef VKV_CLI_STRSET_H
#define VKV_CLI_STRSET_H

#include <stdbool.h>
#include <stddef.h>

typedef struct strset {
    char **slots;
    size_t cap, n;
} strset;

/* Adds a copy of key; true when it was not there yet. False also when out of
 * memory (then *oom is set, if given). */
bool strset_add(strset *s, const char *key, bool *oom);
bool strset_has(const strset *s, const char *key);
void strset_free(strset *s);

#endif
