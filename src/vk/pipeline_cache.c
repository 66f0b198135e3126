/* The persistent pipeline cache and the cost of building pipelines.
 *
 * One file per device (README.md, "Device choice") holds a VkPipelineCache's
 * data behind a header naming the device, the driver version, the driver's
 * pipelineCacheUUID and a hash of every SPIR-V blob in the binary, plus a
 * checksum of the data. Nothing reaches the driver unless all of these and
 * the data's own VkPipelineCacheHeaderVersionOne match: a corrupt, truncated
 * or foreign file is ignored with one warning and overwritten at teardown.
 *
 * Some drivers (lavapipe) compile a compute pipeline only at its first
 * dispatch. Each new pipeline is therefore dispatched once, with no
 * workgroups, on the transfer command buffer, so that the compilation is paid
 * and timed here rather than inside the first prefill. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vk/vk_internal.h"
#include "core/out_file.h"

const vkv_spirv *vkv_spirv_table(size_t *count); /* generated: shaders_spirv.c */

/* Far beyond what the driver writes for every kernel of this binary. */
#define MAX_CACHE_FILE_BYTES ((size_t)64 << 20)
#define CACHE_FORMAT_VERSION 1u

typedef struct cache_file_header {
    char magic[8];                  /* "vkvpipe\0" */
    uint32_t format_version;        /* CACHE_FORMAT_VERSION */
    uint32_t vendor_id, device_id, driver_version;
    uint8_t pipeline_cache_uuid[VK_UUID_SIZE];
    uint64_t spirv_hash;            /* every embedded SPIR-V blob and its name */
    uint64_t data_size, data_hash;  /* the Vulkan pipeline-cache data that follows */
} cache_file_header;
_Static_assert(sizeof(cache_file_header) == 64, "the cache file header has no padding");

static const char cache_magic[8] = "vkvpipe";

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_OFFSET 0xcbf29ce484222325ull

static uint64_t spirv_hash(void)
{
    size_t n;
    const vkv_spirv *t = vkv_spirv_table(&n);
    uint64_t h = FNV_OFFSET;
    for (size_t i = 0; i < n; i++) {
        h = fnv1a(h, t[i].name, strlen(t[i].name) + 1);
        h = fnv1a(h, t[i].code, t[i].size_bytes);
    }
    return h;
}

static uint32_t read_le32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

/* The directory the cache files live in (malloc'ed), or NULL when the cache
 * is off or no home directory is known. */
static char *cache_dir(void)
{
    const char *env = getenv("VKVECTOR_PIPELINE_CACHE");
    if (env && *env) {
        if (!strcmp(env, "off") || !strcmp(env, "0")) return NULL;
        return strdup(env);
    }
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char buf[4096];
    /* The XDG base directory specification ignores relative paths. */
    if (xdg && xdg[0] == '/') snprintf(buf, sizeof buf, "%s/vkvector", xdg);
    else if (home && *home) snprintf(buf, sizeof buf, "%s/.cache/vkvector", home);
    else return NULL;
    return strdup(buf);
}

/* mkdir -p, private to the user as the XDG specification asks. */
static bool make_dirs(const char *dir)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return false;
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0700) != 0 && errno != EEXIST) return false;
            *s = '/';
        }
    return mkdir(p, 0700) == 0 || errno == EEXIST;
}

static void cache_warning(const char *path, const char *why)
{
    fprintf(stderr, "vkvector: warning: ignoring the pipeline cache '%s': %s; it will be rebuilt\n", path, why);
}

static void fill_header(const vkv_gpu *gpu, const VkPhysicalDeviceProperties *props, cache_file_header *h)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, cache_magic, sizeof h->magic);
    h->format_version = CACHE_FORMAT_VERSION;
    h->vendor_id = props->vendorID;
    h->device_id = props->deviceID;
    h->driver_version = props->driverVersion;
    memcpy(h->pipeline_cache_uuid, props->pipelineCacheUUID, VK_UUID_SIZE);
    h->spirv_hash = gpu->pipeline_spirv_hash;
}

/* NULL when the file's bytes may be handed to the driver, else why not. */
static const char *check_file(const cache_file_header *want, const uint8_t *bytes, size_t len)
{
    cache_file_header h;
    if (len < sizeof h) return "it is truncated";
    memcpy(&h, bytes, sizeof h);
    if (memcmp(h.magic, want->magic, sizeof h.magic) || h.format_version != want->format_version)
        return "it is not a vkvector pipeline cache";
    if (h.vendor_id != want->vendor_id || h.device_id != want->device_id)
        return "it belongs to another device";
    if (h.driver_version != want->driver_version ||
        memcmp(h.pipeline_cache_uuid, want->pipeline_cache_uuid, VK_UUID_SIZE))
        return "it was written by another driver version";
    if (h.spirv_hash != want->spirv_hash) return "it was written by another vkvector build";
    if (h.data_size != len - sizeof h) return h.data_size > len - sizeof h ? "it is truncated" : "it has trailing bytes";
    const uint8_t *d = bytes + sizeof h;
    if (fnv1a(FNV_OFFSET, d, h.data_size) != h.data_hash) return "its checksum does not match (corrupt)";
    /* VkPipelineCacheHeaderVersionOne: little-endian whatever the host. */
    if (h.data_size < 16 + VK_UUID_SIZE) return "its Vulkan header is truncated";
    uint32_t header_size = read_le32(d), header_version = read_le32(d + 4);
    if (header_size < 16 + VK_UUID_SIZE || header_size > h.data_size ||
        header_version != VK_PIPELINE_CACHE_HEADER_VERSION_ONE || read_le32(d + 8) != want->vendor_id ||
        read_le32(d + 12) != want->device_id || memcmp(d + 16, want->pipeline_cache_uuid, VK_UUID_SIZE))
        return "its Vulkan header does not match this device";
    return NULL;
}

/* The file's bytes (malloc'ed), or NULL when it is absent or unreadable
 * (with a warning unless it is absent). */
static char *read_cache_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (errno != ENOENT) cache_warning(path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    char *bytes = NULL;
    const char *why = NULL;
    if (fstat(fd, &sb) != 0) why = strerror(errno);
    else if (!S_ISREG(sb.st_mode)) why = "it is not a regular file";
    else if ((uint64_t)sb.st_size > MAX_CACHE_FILE_BYTES) why = "it is larger than 64 MiB";
    else if (!(bytes = malloc(sb.st_size ? (size_t)sb.st_size : 1))) why = "out of host memory";
    else {
        size_t got = 0;
        ssize_t r = 1;
        while (got < (size_t)sb.st_size && (r = read(fd, bytes + got, (size_t)sb.st_size - got)) > 0) got += (size_t)r;
        if (r < 0) why = strerror(errno);
        *len = got;
    }
    close(fd);
    if (why) {
        cache_warning(path, why);
        free(bytes);
        return NULL;
    }
    return bytes;
}

void vkv_pipeline_cache_open(vkv_gpu *gpu)
{
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(gpu->phys, &props);
    gpu->pipeline_spirv_hash = spirv_hash();
    char *dir = cache_dir();
    if (dir) {
        size_t n = strlen(dir) + 64;
        if ((gpu->pipeline_cache_path = malloc(n)))
            snprintf(gpu->pipeline_cache_path, n, "%s/pipelines-%04x-%04x.bin", dir, props.vendorID, props.deviceID);
        free(dir);
    }
    const char *path = gpu->pipeline_cache_path;
    size_t len = 0;
    char *bytes = path ? read_cache_file(path, &len) : NULL;
    VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    if (bytes) {
        cache_file_header want;
        fill_header(gpu, &props, &want);
        const char *why = check_file(&want, (const uint8_t *)bytes, len);
        if (why) cache_warning(path, why);
        else {
            ci.initialDataSize = len - sizeof want;
            ci.pInitialData = bytes + sizeof want;
        }
    }
    VkResult r = vkCreatePipelineCache(gpu->device, &ci, NULL, &gpu->pipeline_cache);
    if (r != VK_SUCCESS && ci.initialDataSize) {
        cache_warning(path, "the driver refused its data");
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        r = vkCreatePipelineCache(gpu->device, &ci, NULL, &gpu->pipeline_cache);
    }
    if (r != VK_SUCCESS) gpu->pipeline_cache = VK_NULL_HANDLE; /* pipelines are built without one */
    else if (ci.initialDataSize) {
        gpu->pipeline_stats.cache_bytes_loaded = ci.initialDataSize;
        gpu->pipeline_cache_loaded_hash = fnv1a(FNV_OFFSET, ci.pInitialData, ci.initialDataSize);
    }
    gpu->pipeline_stats.cache_path = gpu->pipeline_cache_path;
    free(bytes);
}

static void write_warning(const char *path, const char *what, int err)
{
    fprintf(stderr, "vkvector: warning: cannot write the pipeline cache '%s': %s: %s\n", path, what, strerror(err));
}

/* Writes header + data to a temporary file beside path, then renames it over
 * path, so a reader never sees half a file. Failures only warn. */
static void write_atomically(const char *path, const cache_file_header *h, const void *data)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = 0;
        if (!make_dirs(dir)) {
            write_warning(path, "creating its directory", errno);
            return;
        }
    }
    /* the program's one output path (docs/ARCHITECTURE.md §6) */
    vkv_out out;
    if (vkv_out_open(&out, path)) {
        fprintf(stderr, "vkvector: warning: the pipeline cache: %s\n", vkv_last_error());
        return;
    }
    fwrite(h, sizeof *h, 1, out.f);
    fwrite(data, 1, h->data_size, out.f);
    if (vkv_out_commit(&out)) fprintf(stderr, "vkvector: warning: the pipeline cache: %s\n", vkv_last_error());
}

void vkv_pipeline_cache_close(vkv_gpu *gpu)
{
    const vkv_pipeline_stats *s = &gpu->pipeline_stats;
    /* Only pipelines the driver did not find in the cache can add to it. */
    bool new_pipelines = s->n_created > s->n_from_cache;
    void *data = NULL;
    size_t n = 0;
    if (gpu->pipeline_cache && gpu->pipeline_cache_path && new_pipelines &&
        vkGetPipelineCacheData(gpu->device, gpu->pipeline_cache, &n, NULL) == VK_SUCCESS && n &&
        (data = malloc(n)) && vkGetPipelineCacheData(gpu->device, gpu->pipeline_cache, &n, data) == VK_SUCCESS) {
        uint64_t hash = fnv1a(FNV_OFFSET, data, n);
        if (n + sizeof(cache_file_header) > MAX_CACHE_FILE_BYTES)
            fprintf(stderr, "vkvector: warning: the pipeline cache (%zu bytes) is over the %zu-byte limit of its file; "
                            "not saved\n", n, MAX_CACHE_FILE_BYTES);
        else if (n != s->cache_bytes_loaded || hash != gpu->pipeline_cache_loaded_hash) {
            VkPhysicalDeviceProperties props;
            vkGetPhysicalDeviceProperties(gpu->phys, &props);
            cache_file_header h;
            fill_header(gpu, &props, &h);
            h.data_size = n;
            h.data_hash = hash;
            write_atomically(gpu->pipeline_cache_path, &h, data);
        }
    }
    free(data);
    if (gpu->pipeline_cache) vkDestroyPipelineCache(gpu->device, gpu->pipeline_cache, NULL);
    gpu->pipeline_cache = VK_NULL_HANDLE;
    free(gpu->pipeline_cache_path);
    gpu->pipeline_cache_path = NULL;
    gpu->pipeline_stats.cache_path = NULL;
}

double vkv_pipeline_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One dispatch of no workgroups, so a driver that compiles at first use
 * compiles now. Every binding sees the staging buffer; nothing is read. */
static vkv_status prime(vkv_gpu *gpu, const vkv_pipeline *p, vkv_kernel k, const char *what)
{
    vkv_status st = VKV_OK;
    VkDescriptorSet set = VK_NULL_HANDLE;
    const uint32_t n_bindings = vkv_kernel_n_bindings(k), n_buffers = vkv_kernel_n_buffers(k);
    if (!gpu->caps->push_descriptor) {
        /* The fallback pool is shared with the open recording; skip when full. */
        if (gpu->desc_pool_used + vkv_pool_set_units(n_buffers) > gpu->desc_pool_capacity) return VKV_OK;
        VkDescriptorSetAllocateInfo dai = {
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
            .descriptorPool = gpu->desc_pool,
            .descriptorSetCount = 1,
            .pSetLayouts = &p->set_layout,
        };
        VK_CHECK(vkAllocateDescriptorSets(gpu->device, &dai, &set), what);
        gpu->desc_pool_used += vkv_pool_set_units(n_buffers);
    }
    /* Every buffer (each slot of an array) valid: the staging buffer's first bytes. */
    VkDescriptorBufferInfo bi[VKV_MAX_DESCRIPTORS];
    VkWriteDescriptorSet w[VKV_MAX_BINDINGS];
    for (uint32_t i = 0; i < n_buffers; i++) bi[i] = (VkDescriptorBufferInfo){gpu->staging->buffer, 0, 16};
    vkv_descriptor_writes(k, bi, w);
    for (uint32_t i = 0; i < n_bindings; i++) w[i].dstSet = set;
    if ((st = vkv_xfer_begin(gpu))) return st;
    vkCmdBindPipeline(gpu->xfer_cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    if (set) {
        vkUpdateDescriptorSets(gpu->device, n_bindings, w, 0, NULL);
        vkCmdBindDescriptorSets(gpu->xfer_cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0, NULL);
    } else {
        vkCmdPushDescriptorSetKHR(gpu->xfer_cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, n_bindings, w);
    }
    static const uint8_t zeros[128];
    vkCmdPushConstants(gpu->xfer_cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof zeros, zeros);
    vkCmdDispatch(gpu->xfer_cmd, 0, 0, 0);
    return vkv_xfer_end(gpu, what);
error:
    return st;
}

vkv_status vkv_pipeline_compile(vkv_gpu *gpu, VkComputePipelineCreateInfo *ci, vkv_pipeline *p, vkv_kernel k,
                                const char *what)
{
    vkv_status st = VKV_OK;
    /* Creation feedback (core in Vulkan 1.3) says whether the cache served it. */
    VkPipelineCreationFeedback fb = {0}, stage_fb = {0};
    VkPipelineCreationFeedbackCreateInfo fci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO,
        .pPipelineCreationFeedback = &fb,
        .pipelineStageCreationFeedbackCount = 1,
        .pPipelineStageCreationFeedbacks = &stage_fb,
    };
    bool feedback = gpu->caps->api_version >= VK_API_VERSION_1_3;
    const void *next = ci->pNext;
    if (feedback) {
        fci.pNext = next;
        ci->pNext = &fci;
    }
    VkResult r = vkCreateComputePipelines(gpu->device, gpu->pipeline_cache, 1, ci, NULL, &p->pipeline);
    ci->pNext = next;
    VK_CHECK(r, what);
    gpu->pipeline_stats.n_created++;
    if (feedback && (fb.flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT)) {
        gpu->pipeline_stats.hits_reported = true;
        if (fb.flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT)
            gpu->pipeline_stats.n_from_cache++;
    }
    return prime(gpu, p, k, what);
error:
    return st;
}

vkv_pipeline_stats vkv_gpu_pipeline_stats(const vkv_gpu *gpu) { return gpu->pipeline_stats; }
