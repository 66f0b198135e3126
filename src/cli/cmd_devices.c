/* vkvector devices [--json]: every Vulkan device and its probed capabilities. */
#include <stdio.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "core/json_write.h"
#include "vk/gpu.h"

static const char *const USAGE = "vkvector devices [--json]\n"
                                 "\n"
                                 "Lists every Vulkan device with its probed capabilities.\n"
                                 "The default device (used when --device / VKVECTOR_DEVICE is not given) is marked.";

static const char *device_type_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

static const char *component_name(uint32_t t)
{
    static const char *names[] = {"f16", "f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"};
    return t < sizeof names / sizeof names[0] ? names[t] : "other";
}

static void print_shapes(const char *label, const vkv_coopmat_shape *s, uint32_t n)
{
    printf("  %-28s", label);
    if (!n) printf(" none");
    for (uint32_t i = 0; i < n; i++)
        printf("%s %ux%ux%u %s*%s+%s", i ? "," : "", s[i].m, s[i].n, s[i].k, component_name(s[i].a_type),
               component_name(s[i].b_type), component_name(s[i].c_type));
    printf("\n");
}

static void print_text(const vkv_caps *c, uint32_t i, bool preferred)
{
    printf("device %u: %s%s\n", i, c->name, preferred ? "  (default)" : "");
    printf("  %-28s %s\n", "type", device_type_name(c->type));
    printf("  %-28s %s (%s)\n", "driver", c->driver_name, c->driver_info);
    printf("  %-28s %u.%u.%u\n", "Vulkan", VK_API_VERSION_MAJOR(c->api_version), VK_API_VERSION_MINOR(c->api_version),
           VK_API_VERSION_PATCH(c->api_version));
    printf("  %-28s %u (min %u, max %u)%s\n", "subgroup size", c->subgroup_size, c->subgroup_min_size,
           c->subgroup_max_size, c->subgroup_size_control ? ", size control" : "");
    printf("  %-28s basic %s, arithmetic %s, shuffle %s, ballot %s\n", "subgroup operations",
           c->subgroup_basic ? "yes" : "no", c->subgroup_arithmetic ? "yes" : "no", c->subgroup_shuffle ? "yes" : "no",
           c->subgroup_ballot ? "yes" : "no");
    printf("  %-28s fp16 %s, int8 %s, int16 %s, int64 %s, bf16 %s\n", "arithmetic", c->shader_float16 ? "yes" : "no",
           c->shader_int8 ? "yes" : "no", c->shader_int16 ? "yes" : "no", c->shader_int64 ? "yes" : "no",
           c->bfloat16 ? "yes" : "no");
    printf("  %-28s 16-bit %s, 8-bit %s\n", "storage", c->storage_16bit ? "yes" : "no", c->storage_8bit ? "yes" : "no");
    printf("  %-28s %s%s\n", "integer dot product", c->integer_dot_product ? "yes" : "no",
           c->integer_dot_product_4x8_accelerated ? " (4x8 accelerated)" : "");
    printf("  %-28s KHR %s, NV %s, NV2 %s\n", "cooperative matrix", c->coopmat_khr ? "yes" : "no",
           c->coopmat_nv ? "yes" : "no", c->coopmat2_nv ? "yes" : "no");
    /* the grouped kernels of the batched decode step bind arrays of 8 caches */
    printf("  %-28s dynamic indexing %s, %u a stage, %u push\n", "storage-buffer arrays",
           c->storage_buffer_array_dynamic_indexing ? "yes" : "no", c->max_per_stage_storage_buffers,
           c->max_push_descriptors);
    if (c->coopmat_khr) print_shapes("  KHR shapes", c->coopmat_khr_shapes, c->n_coopmat_khr_shapes);
    if (c->coopmat_nv) print_shapes("  NV shapes", c->coopmat_nv_shapes, c->n_coopmat_nv_shapes);
    printf("  %-28s %s\n", "push descriptors", c->push_descriptor ? "yes" : "no");
    printf("  %-28s %llu MiB\n", "max storage buffer range", (unsigned long long)(c->max_storage_buffer_range >> 20));
    printf("  %-28s %llu bytes\n", "storage offset alignment", (unsigned long long)c->min_storage_buffer_offset_alignment);
    printf("  %-28s %u KiB\n", "shared memory", c->max_shared_memory / 1024);
    printf("  %-28s %u\n", "max workgroup invocations", c->max_workgroup_invocations);
    for (uint32_t h = 0; h < c->n_heaps; h++)
        printf("  %-28s %.2f GiB%s\n", h ? "" : "memory heaps", c->heap_size[h] / 1073741824.0,
               c->heap_device_local[h] ? " device-local" : " host");
    printf("  %-28s %s\n", "device-local host-visible", c->device_local_host_visible ? "yes" : "no");
    if (c->timestamps) printf("  %-28s yes (period %.3g ns)\n", "timestamps", c->timestamp_period_ns);
    else printf("  %-28s no\n", "timestamps");
}

static void json_shapes(vkv_json_writer *w, const char *key, const vkv_coopmat_shape *s, uint32_t n)
{
    vkv_json_key(w, key);
    vkv_json_begin_array(w);
    for (uint32_t i = 0; i < n; i++) {
        vkv_json_begin_object(w);
        vkv_json_key(w, "m"); vkv_json_uint(w, s[i].m);
        vkv_json_key(w, "n"); vkv_json_uint(w, s[i].n);
        vkv_json_key(w, "k"); vkv_json_uint(w, s[i].k);
        vkv_json_key(w, "a"); vkv_json_str(w, component_name(s[i].a_type));
        vkv_json_key(w, "b"); vkv_json_str(w, component_name(s[i].b_type));
        vkv_json_key(w, "c"); vkv_json_str(w, component_name(s[i].c_type));
        vkv_json_end_object(w);
    }
    vkv_json_end_array(w);
}

static void print_json(vkv_json_writer *w, const vkv_caps *c, uint32_t i, bool preferred)
{
#define KB(k, v) (vkv_json_key(w, k), vkv_json_bool(w, v))
#define KU(k, v) (vkv_json_key(w, k), vkv_json_uint(w, v))
    vkv_json_begin_object(w);
    KU("index", i);
    vkv_json_key(w, "name"); vkv_json_str(w, c->name);
    vkv_json_key(w, "type"); vkv_json_str(w, device_type_name(c->type));
    vkv_json_key(w, "driver"); vkv_json_str(w, c->driver_name);
    vkv_json_key(w, "driver_info"); vkv_json_str(w, c->driver_info);
    KB("default", preferred);
    KU("vendor_id", c->vendor_id); KU("device_id", c->device_id);
    char ver[32];
    snprintf(ver, sizeof ver, "%u.%u.%u", VK_API_VERSION_MAJOR(c->api_version), VK_API_VERSION_MINOR(c->api_version),
             VK_API_VERSION_PATCH(c->api_version));
    vkv_json_key(w, "vulkan"); vkv_json_str(w, ver);
    KU("subgroup_size", c->subgroup_size); KU("subgroup_min_size", c->subgroup_min_size);
    KU("subgroup_max_size", c->subgroup_max_size);
    KB("subgroup_arithmetic", c->subgroup_arithmetic); KB("subgroup_shuffle", c->subgroup_shuffle);
    KB("subgroup_ballot", c->subgroup_ballot); KB("subgroup_size_control", c->subgroup_size_control);
    KB("shader_float16", c->shader_float16); KB("shader_int8", c->shader_int8);
    KB("shader_int16", c->shader_int16); KB("shader_int64", c->shader_int64);
    KB("storage_16bit", c->storage_16bit); KB("storage_8bit", c->storage_8bit);
    KB("integer_dot_product", c->integer_dot_product);
    KB("integer_dot_product_4x8_accelerated", c->integer_dot_product_4x8_accelerated);
    KB("bfloat16", c->bfloat16); KB("push_descriptor", c->push_descriptor);
    KB("storage_buffer_array_dynamic_indexing", c->storage_buffer_array_dynamic_indexing);
    KU("max_per_stage_storage_buffers", c->max_per_stage_storage_buffers);
    KU("max_push_descriptors", c->max_push_descriptors);
    KB("cooperative_matrix_khr", c->coopmat_khr); KB("cooperative_matrix_nv", c->coopmat_nv);
    KB("cooperative_matrix2_nv", c->coopmat2_nv);
    json_shapes(w, "cooperative_matrix_khr_shapes", c->coopmat_khr_shapes, c->n_coopmat_khr_shapes);
    json_shapes(w, "cooperative_matrix_nv_shapes", c->coopmat_nv_shapes, c->n_coopmat_nv_shapes);
    KU("max_storage_buffer_range", c->max_storage_buffer_range);
    KU("min_storage_buffer_offset_alignment", c->min_storage_buffer_offset_alignment);
    KU("max_shared_memory", c->max_shared_memory);
    KU("max_workgroup_invocations", c->max_workgroup_invocations);
    KU("max_memory_allocation", c->max_memory_allocation);
    vkv_json_key(w, "heaps");
    vkv_json_begin_array(w);
    for (uint32_t h = 0; h < c->n_heaps; h++) {
        vkv_json_begin_object(w);
        KU("size", c->heap_size[h]);
        KB("device_local", c->heap_device_local[h]);
        vkv_json_end_object(w);
    }
    vkv_json_end_array(w);
    KB("device_local_host_visible", c->device_local_host_visible);
    KB("timestamps", c->timestamps);
    vkv_json_key(w, "timestamp_period_ns"); vkv_json_num(w, c->timestamp_period_ns);
    vkv_json_end_object(w);
#undef KB
#undef KU
}

int cmd_devices(int argc, char **argv)
{
    bool json = false;
    const cli_opt opts[] = {
        {.type = CLI_FLAG, .names = "--json", .dest = &json, .help = "the same as a JSON array, one object per device"},
    };
    int parsed = cli_parse("devices", USAGE, opts, CLI_N(opts), argc, argv);
    if (parsed != CLI_OK) return parsed == CLI_HELP ? 0 : 2;
    vkv_instance *inst;
    vkv_status st = vkv_instance_create(vkv_validation_requested(), false, &inst);
    if (st) return cli_fail("devices", st);
    uint32_t n = vkv_instance_n_devices(inst), pref = vkv_instance_preferred_device(inst);
    if (json) {
        vkv_json_writer w;
        vkv_json_init(&w, stdout, true);
        vkv_json_begin_array(&w);
        for (uint32_t i = 0; i < n; i++) print_json(&w, vkv_instance_caps(inst, i), i, i == pref);
        vkv_json_end_array(&w);
    } else {
        for (uint32_t i = 0; i < n; i++) {
            if (i) printf("\n");
            print_text(vkv_instance_caps(inst, i), i, i == pref);
        }
    }
    uint32_t verr = vkv_instance_validation_errors(inst);
    vkv_instance_destroy(inst);
    if (verr) {
        fprintf(stderr, "vkvector devices: %u validation error(s)\n", verr);
        return 1;
    }
    return 0;
}
