/* kvpress's evaluation registry (evaluation/evaluate_registry.py, kvpress
 * commit 91773cb): the names its evaluate.py takes with --press_name, each a
 * composition of presses with fixed parameters, and what vkvector builds for
 * it. `longbench`, `niah` and `ruler` take these names under --protocol
 * kvpress (docs/ARCHITECTURE.md §5, "kvpress's registry names"); the bare
 * presses keep their own names everywhere. */
#ifndef VKV_PRESS_REGISTRY_H
#define VKV_PRESS_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

typedef struct vkv_press_registry_entry {
    const char *kvpress_name;  /* the registry's key ("expected_attention") */
    const char *composition;   /* the registry's value as kvpress writes it */
    const char *press;         /* vkvector's press building it (press/press.h), NULL for no_press or when refused */
    bool decoding;             /* kvpress's DecodingPress around it: no compression after the prefill, the
                                  cache compressed during generation under kvpress's rule with its defaults
                                  (every 512 steps to 2048 pairs per head) */
    const char *refused;       /* why vkvector does not build it; NULL when it does */
} vkv_press_registry_entry;

/* Every entry, in the registry's order; *n their count. */
const vkv_press_registry_entry *vkv_press_registry(size_t *n);
/* The entry of a registry name; NULL when the registry has none. */
const vkv_press_registry_entry *vkv_press_registry_find(const char *kvpress_name);

#endif
