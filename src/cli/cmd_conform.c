/* vkvector conform: the conformance suite (src/conform/) on every Vulkan
 * device, or one: a table per device, optionally JSON. Users run it on their
 * own GPUs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "conform/conform.h"
#include "core/json_write.h"
#include "core/out_file.h"

static void write_json_device(vkv_json_writer *w, const vkv_caps *caps, uint32_t index, const conform_result *results,
                              size_t n_results, const char *error, uint32_t validation_errors)
{
    vkv_json_begin_object(w);
    vkv_json_key(w, "device_index"); vkv_json_uint(w, index);
    vkv_json_key(w, "device"); vkv_json_str(w, caps->name);
    vkv_json_key(w, "driver"); vkv_json_str(w, caps->driver_name);
    vkv_json_key(w, "driver_info"); vkv_json_str(w, caps->driver_info);
    vkv_json_key(w, "validation_errors"); vkv_json_uint(w, validation_errors);
    vkv_json_key(w, "error");
    if (error) vkv_json_str(w, error);
    else vkv_json_null(w);
    vkv_json_key(w, "results");
    vkv_json_begin_array(w);
    for (size_t i = 0; i < n_results; i++) {
        const conform_result *r = &results[i];
        vkv_json_begin_object(w);
        vkv_json_key(w, "op"); vkv_json_str(w, r->op);
        vkv_json_key(w, "type"); vkv_json_str(w, r->type);
        vkv_json_key(w, "shape"); vkv_json_str(w, r->shape);
        vkv_json_key(w, "nmse"); vkv_json_num(w, r->nmse);
        vkv_json_key(w, "threshold"); vkv_json_num(w, r->threshold);
        vkv_json_key(w, "pass"); vkv_json_bool(w, r->pass);
        vkv_json_key(w, "skipped"); vkv_json_bool(w, r->skipped);
        vkv_json_key(w, "gpu_ms"); vkv_json_num(w, r->gpu_ms);
        vkv_json_key(w, "note"); vkv_json_str(w, r->note);
        vkv_json_end_object(w);
    }
    vkv_json_end_array(w);
    vkv_json_end_object(w);
}

/* The device's table; counts its passed, failed and skipped cases. */
static void print_device(uint32_t d, const vkv_caps *caps, const conform_result *results, size_t n_results,
                         size_t *pass, size_t *fail, size_t *skip)
{
    printf("\ndevice %u: %s  (driver %s, %s)\n", d, caps->name, caps->driver_name, caps->driver_info);
    printf("%-24s %-6s %-52s %11s %9s %-5s %10s\n", "op", "type", "shape", "NMSE", "threshold", "pass", "GPU ms");
    for (size_t i = 0; i < n_results; i++) {
        const conform_result *r = &results[i];
        if (r->skipped) {
            printf("%-24s %-6s %-52s %11s %9s %-5s %10s  %s\n", r->op, r->type, r->shape, "-", "-", "skip", "-", r->note);
            ++*skip;
            continue;
        }
        printf("%-24s %-6s %-52s %11.3e %9.0e %-5s %10.3f%s%s\n", r->op, r->type, r->shape, r->nmse, r->threshold,
               r->pass ? "yes" : "NO", r->gpu_ms, r->note[0] ? "  " : "", r->note);
        if (r->pass) ++*pass;
        else ++*fail;
    }
}

int cmd_conform(int argc, char **argv)
{
    const char *json_path = NULL, *filter = NULL;
    int32_t device = cli_device_index_from_env();
    bool no_big = false;
    uint64_t seed = 1;
    const cli_opt opts[] = {
        {.type = CLI_I32, .names = "--device", .metavar = "N", .dest = &device, .min = 0, .max = 1024,
         .help = "only device N (default: all devices; also VKVECTOR_DEVICE)"},
        {.type = CLI_STR, .names = "--op", .metavar = "NAME", .dest = &filter,
         .help = "only ops whose name contains NAME (get_rows, rms_norm, matvec,\n"
                 "matmul_tiled, matmul_coopmat, rope, softmax, silu_mul, add, argmax, kv_store,\n"
                 "kv_store_paged, kv_convert, attn_prefill, attn_decode, attn_paged, topk_select,\n"
                 "mask_row_counts, vector_pool_extend, press_<scorer>, gram)"},
        {.type = CLI_STR, .names = "--json", .metavar = "FILE", .dest = &json_path, .help = "also write the results as JSON"},
        {.type = CLI_FLAG, .names = "--no-big", .dest = &no_big, .help = "skip the cases with a weight over 128 MiB"},
        {.type = CLI_U64, .names = "--seed", .metavar = "S", .dest = &seed, .min = 0, .max = (double)UINT64_MAX,
         .help = "random seed (default 1)"},
    };
    int parsed = cli_parse("conform", "vkvector conform [--device N] [--op NAME] [--json FILE] [--no-big] [--seed S]\n\n"
                           "Runs every GPU op on every Vulkan device (or device N) against its CPU reference and\n"
                           "prints a table per device. Exit status is 1 when any case fails or any validation\n"
                           "error is reported (VKVECTOR_VALIDATE=1 enables the validation layers).",
                           opts, CLI_N(opts), argc, argv);
    if (parsed != CLI_OK) return parsed == CLI_HELP ? 0 : 2;
    const bool big = !no_big;
    vkv_status st;
    if (json_path && (st = vkv_out_check("--json", json_path))) return cli_fail("conform", st);
    vkv_instance *inst;
    st = vkv_instance_create(vkv_validation_requested(), vkv_validation_requested(), &inst);
    if (st) return cli_fail("conform", st);
    uint32_t n_dev = vkv_instance_n_devices(inst);
    if (device >= (int)n_dev) {
        vkv_instance_destroy(inst);
        fprintf(stderr, "vkvector conform: device %d does not exist (%u device(s); see 'vkvector devices')\n", device, n_dev);
        return 1;
    }
    vkv_out out = {0};
    FILE *jf = NULL;
    vkv_json_writer jw;
    if (json_path) {
        if ((st = vkv_out_open(&out, json_path))) {
            vkv_instance_destroy(inst);
            return cli_fail("conform", st);
        }
        jf = out.f;
        vkv_json_init(&jw, jf, true);
        vkv_json_begin_object(&jw);
        vkv_json_key(&jw, "validation_layers"); vkv_json_bool(&jw, vkv_instance_validation_enabled(inst));
        vkv_json_key(&jw, "devices");
        vkv_json_begin_array(&jw);
    }
    printf("vkvector conform: %u device(s), validation layers %s\n", n_dev,
           vkv_instance_validation_enabled(inst) ? "on" : "off");
    size_t total_fail = 0, total_pass = 0, total_skip = 0;
    bool any_error = false;
    for (uint32_t d = 0; d < n_dev; d++) {
        if (device >= 0 && (uint32_t)device != d) continue;
        const vkv_caps *caps = vkv_instance_caps(inst, d);
        uint32_t verr_before = vkv_instance_validation_errors(inst);
        char error[1024] = "";
        conform_result *results = NULL;
        size_t n_results = 0;
        vkv_gpu *gpu = NULL;
        st = vkv_gpu_create(inst, (int)d, &gpu);
        if (!st) {
            vkv_gpu_set_profiling(gpu, true);
            st = vkv_conform_device(gpu, caps, seed, filter, big, &results, &n_results);
        }
        if (st) snprintf(error, sizeof error, "%s: %s", vkv_status_name(st), vkv_last_error());
        vkv_gpu_destroy(gpu);
        uint32_t verr = vkv_instance_validation_errors(inst) - verr_before;

        size_t fail = 0, pass = 0, skip = 0;
        print_device(d, caps, results, n_results, &pass, &fail, &skip);
        if (error[0]) {
            printf("ERROR on device %u: %s\n", d, error);
            any_error = true;
        }
        if (verr) printf("%u validation error(s) on device %u\n", verr, d);
        printf("device %u: %zu passed, %zu failed, %zu skipped%s\n", d, pass, fail, skip,
               caps->timestamps ? "" : " (no GPU timestamps)");
        total_fail += fail + (verr ? 1 : 0);
        total_pass += pass;
        total_skip += skip;
        if (jf) write_json_device(&jw, caps, d, results, n_results, error[0] ? error : NULL, verr);
        free(results);
    }
    if (jf) {
        vkv_json_end_array(&jw);
        vkv_json_end_object(&jw);
        if ((st = vkv_out_commit(&out))) {
            fprintf(stderr, "vkvector conform: %s\n", vkv_last_error());
            any_error = true;
        }
    }
    vkv_instance_destroy(inst);
    printf("\nconform: %zu passed, %zu failed, %zu skipped\n", total_pass, total_fail + (any_error ? 1 : 0), total_skip);
    return total_fail || any_error ? 1 : 0;
}
