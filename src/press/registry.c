/* kvpress's evaluation registry and what vkvector builds for each name
 * (press/registry.h). A composition's fixed parameters live in the vkvector
 * press named here: adakv-expected runs its ExpectedAttention with epsilon
 * 1e-2, critical-expected and critical-adakv-expected without the value norms,
 * chunkkv chunks of 20 over SnapKV (press/adakv.c, critical.c, chunkkv.c);
 * tests/unit/test_press_registry.c checks each name against the press it
 * builds. */
#include "press/registry.h"

#include <string.h>

/* Reasons shared by several names. */
#define TRAINED "it needs trained artefacts vkvector does not have"
#define NOT_BUILT "vkvector has no such press yet"
#define GENERATION_LAYER \
    "compression during generation keeps a count per KV head, and AdaKV shares a layer's budget between its heads"

static const vkv_press_registry_entry registry[] = {
    {"adakv_snapkv", "AdaKVPress(SnapKVPress())", "adakv-snapkv", false, NULL},
    {"block_keydiff", "BlockPress(press=KeyDiffPress(), block_size=128)", NULL, false,
     "kvpress's BlockPress re-scores the kept tokens with each next block; vkvector's block-wise KeyDiff "
     "(--block) scores each block against the running mean instead, another selection"},
    {"chunkkv", "ChunkKVPress(press=SnapKVPress(), chunk_length=20)", "chunkkv", false, NULL},
    {"critical_adakv_expected_attention", "CriticalAdaKVPress(ExpectedAttentionPress(use_vnorm=False))",
     "critical-adakv-expected", false, NULL},
    {"critical_adakv_snapkv", "CriticalAdaKVPress(SnapKVPress())", "critical-adakv-snapkv", false, NULL},
    {"critical_expected_attention", "CriticalKVPress(ExpectedAttentionPress(use_vnorm=False))", "critical-expected",
     false, NULL},
    {"critical_snapkv", "CriticalKVPress(SnapKVPress())", "critical-snapkv", false, NULL},
    {"cur", "CURPress()", NULL, false, NOT_BUILT " (CUR decomposition scores)"},
    {"duo_attention", "DuoAttentionPress()", NULL, false, TRAINED " (DuoAttention's per-head patterns)"},
    {"duo_attention_on_the_fly", "DuoAttentionPress(on_the_fly_scoring=True)", NULL, false,
     NOT_BUILT " (DuoAttention's on-the-fly head scoring)"},
    {"expected_attention", "AdaKVPress(ExpectedAttentionPress(epsilon=1e-2))", "adakv-expected", false, NULL},
    {"fastkvzip", "FastKVzipPress()", NULL, false, TRAINED " (FastKVzip's gates)"},
    {"finch", "FinchPress()", NULL, false, NOT_BUILT " (Finch adds a delimiter token to the model)"},
    {"keydiff", "KeyDiffPress()", "keydiff", false, NULL},
    {"kvzip", "KVzipPress()", "kvzip", false, NULL},
    {"kvzip_plus", "KVzipPress(kvzip_plus_normalization=True)", NULL, false, NOT_BUILT " (KVzip+'s normalisation)"},
    {"kvzap_linear", "DMSPress(press=KVzapPress(model_type=\"linear\"))", NULL, false, TRAINED " (KVzap's models)"},
    {"kvzap_mlp", "DMSPress(press=KVzapPress(model_type=\"mlp\"))", NULL, false, TRAINED " (KVzap's models)"},
    {"kvzap_mlp_head", "KVzapPress(model_type=\"mlp\")", NULL, false, TRAINED " (KVzap's models)"},
    {"kvzap_mlp_layer", "AdaKVPress(KVzapPress(model_type=\"mlp\"))", NULL, false, TRAINED " (KVzap's models)"},
    {"lagkv", "LagKVPress()", "lagkv", false, NULL},
    {"knorm", "KnormPress()", "knorm", false, NULL},
    {"observed_attention", "ObservedAttentionPress()", "observed", false, NULL},
    {"pyramidkv", "PyramidKVPress()", "pyramidkv", false, NULL},
    {"qfilter", "QFilterPress()", NULL, false, TRAINED " (Q-Filters' per-model directions)"},
    {"random", "RandomPress()", "random", false, NULL},
    {"snap_think", "ComposedPress([SnapKVPress(), ThinKPress()])", NULL, false, NOT_BUILT " (ThinK's key channels)"},
    {"snapkv", "SnapKVPress()", "snapkv", false, NULL},
    {"streaming_llm", "StreamingLLMPress()", "streamingllm", false, NULL},
    {"think", "ThinKPress()", NULL, false, NOT_BUILT " (ThinK's key channels)"},
    {"tova", "TOVAPress()", "tova", false, NULL},
    {"compactor", "CompactorPress()", NULL, false, NOT_BUILT " (Compactor)"},
    {"adakv_compactor", "AdaKVPress(CompactorPress())", NULL, false, NOT_BUILT " (Compactor)"},
    {"no_press", "None", NULL, false, NULL},
    {"decoding_knorm", "DecodingPress(base_press=KnormPress())", "knorm", true, NULL},
    {"decoding_streaming_llm", "DecodingPress(base_press=StreamingLLMPress())", "streamingllm", true, NULL},
    {"decoding_tova", "DecodingPress(base_press=TOVAPress())", "tova", true, NULL},
    {"decoding_qfilter", "DecodingPress(base_press=QFilterPress())", NULL, true,
     TRAINED " (Q-Filters' per-model directions)"},
    {"decoding_adakv_expected_attention_e2",
     "DecodingPress(base_press=AdaKVPress(ExpectedAttentionPress(epsilon=1e-2)))", NULL, true, GENERATION_LAYER},
    {"decoding_adakv_snapkv", "DecodingPress(base_press=AdaKVPress(SnapKVPress()))", NULL, true, GENERATION_LAYER},
    {"decoding_keydiff", "DecodingPress(base_press=KeyDiffPress())", "keydiff", true, NULL},
};

const vkv_press_registry_entry *vkv_press_registry(size_t *n)
{
    *n = sizeof registry / sizeof registry[0];
    return registry;
}

const vkv_press_registry_entry *vkv_press_registry_find(const char *kvpress_name)
{
    for (size_t i = 0; kvpress_name && i < sizeof registry / sizeof registry[0]; i++)
        if (!strcmp(registry[i].kvpress_name, kvpress_name)) return &registry[i];
    return NULL;
}
