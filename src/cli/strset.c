#include "cli/strset.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static size_t find_slot(char **slots, size_t cap, const char *key)
{
    size_t i = (size_t)(fnv1a(key) & (cap - 1));
    while (slots[i] && strcmp(slots[i], key)) i = (i + 1) & (cap - 1);
    return i;
}

bool strset_has(const strset *s, const char *key)
{
    if (!s->cap) return false;
    return s->slots[find_slot(s->slots, s->cap, key)] != NULL;
}

bool strset_add(strset *s, const char *key, bool *oom)
{
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        char **slots = calloc(cap, sizeof *slots);
        if (!slots) {
            if (oom) *oom = true;
            return false;
        }
        for (size_t i = 0; i < s->cap; i++)
            if (s->slots[i]) slots[find_slot(slots, cap, s->slots[i])] = s->slots[i];
        free(s->slots);
        s->slots = slots;
        s->cap = cap;
    }
    size_t i = find_slot(s->slots, s->cap, key);
    if (s->slots[i]) return false;
    if (!(s->slots[i] = strdup(key))) {
        if (oom) *oom = true;
        return false;
    }
    s->n++;
    return true;
}

void strset_free(strset *s)
{
    for (size_t i = 0; i < s->cap; i++) free(s->slots[i]);
    free(s->slots);
    memset(s, 0, sizeof *s);
}
