/* Set-up figures shared by run and bench -m (load_report.h). */
#include "cli/load_report.h"

#include <string.h>

uint64_t cli_peak_host_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6) && sscanf(line + 6, "%llu", &kib) == 1) break;
    fclose(f);
    return (uint64_t)kib * 1024;
}

void cli_print_load_report(FILE *f, double load_seconds, uint64_t weight_bytes, const vkv_gpu *gpu)
{
    fprintf(f, "load:       model %.3f s (%.2f MiB of weights)\n", load_seconds, weight_bytes / 1048576.0);
    vkv_pipeline_stats ps = vkv_gpu_pipeline_stats(gpu);
    fprintf(f, "pipelines:  %u built in %.3f s", ps.n_created, ps.seconds);
    if (ps.hits_reported) fprintf(f, ", %u of them pipeline-cache hits as the driver reports", ps.n_from_cache);
    if (!ps.cache_path) fprintf(f, " (pipeline cache not kept on disk)\n");
    else if (!ps.cache_bytes_loaded) fprintf(f, " (new pipeline cache %s)\n", ps.cache_path);
    else fprintf(f, " (pipeline cache %s, %llu bytes read)\n", ps.cache_path, (unsigned long long)ps.cache_bytes_loaded);
    fprintf(f, "host memory: peak %.2f MiB resident (VmHWM)\n", cli_peak_host_bytes() / 1048576.0);
}
