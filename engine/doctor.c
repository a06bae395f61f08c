/* The hardware doctor (tn-doctor.h). Every check reads files under the root
 * (the machine's /, or a test's fake tree) and writes one line; the ioctls
 * on the real device only add what no file holds.
 *
 * Where the facts come from (docs/DOCTOR.md):
 *   CPU model            ROOT/proc/cpuinfo, "model name"
 *   kernel family        CPUID (engine/cpu), not under the root
 *   NPU device           ROOT/dev/accel/accelN, the first whose
 *                        ROOT/sys/class/accel/accelN/device/vbnv exists
 *                        (amdxdna's sysfs attribute), else the first one
 *   who may open it      stat() of the node against ROOT/proc/self/status
 *                        (Uid, Gid, Groups), names from ROOT/etc/group and
 *                        ROOT/etc/passwd; on the machine, open() decides
 *   amdxdna              ROOT/sys/module/amdxdna (loaded); its version from
 *                        DRM_IOCTL_VERSION on the opened device, else
 *                        ROOT/sys/module/amdxdna/version (out-of-tree builds)
 *   firmware             DRM_IOCTL_AMDXDNA_GET_INFO with
 *                        DRM_AMDXDNA_QUERY_FIRMWARE_VERSION, else the
 *                        device's sysfs fw_version ("major.minor.patch.build")
 *   kernel               ROOT/proc/sys/kernel/osrelease
 *   memlock              ROOT/proc/self/limits, "Max locked memory" (soft)
 *   repack cache         TERN_REPACK_CACHE, its directory's files and the
 *                        page verdict a load left there (DIR/pages), on
 *                        the machine even with a fake root
 *   XRT                  engine/xrt (xclProbe, the plugin next to XRT) */
#include "tn-doctor.h"

#include "cpu/tn-cpu.h"
#include "tn-internal.h"
#include "tn-repack-cache.h"
#include "tn-xrt.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The DRM and amdxdna uapi (include/uapi/drm/drm.h, amdxdna_accel.h),
 * declared here: Debian's linux-libc-dev has no drm/ headers, and these
 * layouts are kernel ABI. */
struct tn_drm_version {
    int version_major;
    int version_minor;
    int version_patchlevel;
    size_t name_len;
    char *name;
    size_t date_len;
    char *date;
    size_t desc_len;
    char *desc;
};
struct tn_amdxdna_get_info {
    uint32_t param;
    uint32_t buffer_size;
    uint64_t buffer;
};
struct tn_amdxdna_fw_version {
    uint32_t major, minor, patch, build;
};
#define TN_DRM_IOCTL_VERSION _IOWR('d', 0x00, struct tn_drm_version)
#define TN_DRM_COMMAND_BASE 0x40
#define TN_AMDXDNA_GET_INFO 7
#define TN_AMDXDNA_QUERY_FIRMWARE_VERSION 8
#define TN_DRM_IOCTL_AMDXDNA_GET_INFO \
    _IOWR('d', TN_DRM_COMMAND_BASE + TN_AMDXDNA_GET_INFO, struct tn_amdxdna_get_info)

typedef struct {
    const tn_doctor_params *p;
    tn_doctor_report *r;
    const char *root; /* "" for the machine */
    bool fake;
} doc;

static tn_doctor_line *line_new(doc *d, const char *id, int group) {
    if (d->r->n_lines >= TN_DOCTOR_MAX_LINES)
        d->r->n_lines = TN_DOCTOR_MAX_LINES - 1; /* never: the checks are fewer */
    tn_doctor_line *l = &d->r->lines[d->r->n_lines++];
    memset(l, 0, sizeof *l);
    l->id = id;
    l->group = group;
    return l;
}

/* ROOT + path, read whole (at most cap - 1 bytes), trailing newlines cut. */
static bool read_file(const doc *d, const char *path, char *buf, size_t cap) {
    char full[1024];
    snprintf(full, sizeof full, "%s%s", d->root, path);
    FILE *f = fopen(full, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    /* What a file holds may go into a message: no control characters but
     * the line structure (and no NUL cutting it short). */
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)buf[i] < 0x20 && buf[i] != '\n' && buf[i] != '\t') || buf[i] == 0x7f)
            buf[i] = '?';
    return true;
}

static bool exists(const doc *d, const char *path) {
    char full[1024];
    snprintf(full, sizeof full, "%s%s", d->root, path);
    return access(full, F_OK) == 0;
}

/* The value after "key" and ':' on a line of a /proc file, or NULL. */
static const char *proc_field(const char *text, const char *key, char *out, size_t cap) {
    size_t kl = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, key, kl) != 0)
            continue;
        const char *q = p + kl;
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q != ':')
            continue;
        q++;
        while (*q == ' ' || *q == '\t')
            q++;
        size_t n = strcspn(q, "\n");
        if (n >= cap)
            n = cap - 1;
        memcpy(out, q, n);
        out[n] = '\0';
        return out;
    }
    return NULL;
}

static void human_bytes(uint64_t b, char *out, size_t cap) {
    if (b >= ((uint64_t)1 << 30))
        snprintf(out, cap, "%.1f GiB", (double)b / (double)((uint64_t)1 << 30));
    else if (b >= ((uint64_t)1 << 20))
        snprintf(out, cap, "%.0f MiB", (double)b / (double)((uint64_t)1 << 20));
    else
        snprintf(out, cap, "%.0f KiB", (double)b / 1024.0);
}

/* ----------------------------------------------------------------- CPU */

static void check_cpu_model(doc *d) {
    tn_doctor_line *l = line_new(d, "cpu.model", TN_DOCTOR_CPU);
    const size_t cap = 1 << 16;
    char *text = malloc(cap);
    char name[200];
    if (text && read_file(d, "/proc/cpuinfo", text, cap) &&
        proc_field(text, "model name", name, sizeof name) && name[0]) {
        tn_fail(&l->text, TN_OK, "CPU: %s", name);
    } else {
        l->status = TN_DOCTOR_INFO;
        tn_fail(&l->text, TN_OK, "CPU: unknown (no model name in /proc/cpuinfo)");
    }
    free(text);
}

/* TERN_ISA set to a name tn_isa_best does not know: it is ignored there,
 * so a typo ("avx-2", "AVX2") would go unnoticed. */
static bool isa_cap_unknown(const char *cap) {
    if (!cap || !*cap)
        return false;
    for (int i = 0; i < TN_ISA_COUNT_; i++)
        if (!strcmp(cap, tn_isa_name((tn_isa)i)))
            return false;
    return true;
}

static void check_cpu_kernels(doc *d) {
    tn_doctor_line *l = line_new(d, "cpu.kernels", TN_DOCTOR_CPU);
    tn_isa isa = tn_isa_best();
    const char *name = tn_isa_name(isa);
    const char *cap = getenv("TERN_ISA");
    if (isa_cap_unknown(cap)) {
        l->status = TN_DOCTOR_INFO;
        tn_fail(&l->text, TN_OK, "CPU kernels: %s; TERN_ISA=%.64s is not understood and is ignored",
                name, cap);
        tn_fail(&l->fix, TN_OK,
                "unset TERN_ISA, or set it to scalar, avx2 or avx512 to cap the kernels");
        return;
    }
    if (isa == TN_ISA_AVX512 && tn_isa_has_avx512_bf16())
        tn_fail(&l->text, TN_OK, "CPU kernels: %s with BF16", name);
    else
        tn_fail(&l->text, TN_OK, "CPU kernels: %s", name);
    if (isa == TN_ISA_SCALAR) {
        l->status = TN_DOCTOR_INFO;
        tn_fail(&l->fix, TN_OK,
                "the portable C kernels run several times slower than AVX2 ones: "
                "TERN_ISA=scalar in the environment, or a CPU without AVX2, chose them");
    }
}

static double measure_bandwidth(int threads) {
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    size_t llc = (size_t)(l3 > 0 ? l3 : l2 > 0 ? l2 : 32L << 20);
    /* 4x the last-level cache, within [256 MiB, 1 GiB]: a second or two,
     * where bench's 16x can reach gigabytes (a VM may report a huge L3). */
    size_t bytes = llc * 4;
    if (bytes < ((size_t)256 << 20))
        bytes = (size_t)256 << 20;
    if (bytes > ((size_t)1 << 30))
        bytes = (size_t)1 << 30;
    const size_t huge = (size_t)2 << 20;
    bytes = (bytes + huge - 1) / huge * huge;
    tn_cpu *cpu = tn_cpu_new(threads);
    uint8_t *buf = aligned_alloc(huge, bytes);
    double best = 0;
    if (cpu && buf) {
#ifdef MADV_HUGEPAGE
        madvise(buf, bytes, MADV_HUGEPAGE); /* as the repacked weights are */
#endif
        memset(buf, 1, bytes);
        double r[3];
        tn_cpu_read_bandwidth(cpu, buf, bytes); /* warm the pool */
        for (int i = 0; i < 3; i++)
            r[i] = tn_cpu_read_bandwidth(cpu, buf, bytes);
        /* The median: one pass is at the mercy of other work. */
        double lo = r[0] < r[1] ? r[0] : r[1], hi = r[0] < r[1] ? r[1] : r[0];
        best = r[2] < lo ? lo : r[2] > hi ? hi : r[2];
    }
    tn_cpu_free(cpu);
    free(buf);
    return best;
}

/* Bytes one decode step reads: every weight, except that only one row of
 * an untied embedding table (and of Gemma 4's per-layer token table) is
 * read, and of a mixture's 3-D expert tensors only the experts a token
 * uses ({arch}.expert_used_count of {arch}.expert_count). tern-cli bench's
 * bound uses the same count. */
uint64_t tn_doctor_weight_bytes_per_token(const tn_gguf *g) {
    bool tied = tn_gguf_find_tensor(g, "output.weight") == NULL;
    int64_t used = 0;
    tn_str arch;
    if (tn_gguf_get_str(g, "general.architecture", &arch) == TN_OK && arch.len < 64) {
        char key[128];
        snprintf(key, sizeof key, "%.*s.expert_used_count", (int)arch.len, arch.ptr);
        if (tn_gguf_get_int(g, key, &used) != TN_OK)
            used = 0;
    }
    uint64_t total = 0;
    for (int64_t i = 0; i < tn_gguf_n_tensors(g); i++) {
        const tn_gguf_tensor *t = tn_gguf_tensor_at(g, i);
        if ((tn_str_eq(t->name, "token_embd.weight") && !tied) ||
            tn_str_eq(t->name, "per_layer_token_embd.weight"))
            total += t->ne[1] ? t->nbytes / t->ne[1] : 0;
        else if (t->n_dims == 3 && t->ne[2] > 1 && used > 0 && (uint64_t)used < t->ne[2])
            total += t->nbytes / t->ne[2] * (uint64_t)used;
        else
            total += t->nbytes;
    }
    return total;
}

static uint64_t weight_bytes(const tn_gguf *g) {
    uint64_t total = 0;
    for (int64_t i = 0; i < tn_gguf_n_tensors(g); i++)
        total += tn_gguf_tensor_at(g, i)->nbytes;
    return total;
}

/* general.name, else the file name (as tn_model_name). */
static void model_name(const tn_gguf *g, char *out, size_t cap) {
    tn_str s;
    if (tn_gguf_get_str(g, "general.name", &s) == TN_OK && s.len > 0) {
        snprintf(out, cap, "%.*s", (int)(s.len < 200 ? s.len : 200), s.ptr);
        return;
    }
    const char *path = tn_gguf_path(g);
    const char *slash = path ? strrchr(path, '/') : NULL;
    snprintf(out, cap, "%s", slash ? slash + 1 : path ? path : "?");
}

static void check_cpu_bandwidth(doc *d) {
    tn_doctor_line *l = line_new(d, "cpu.bandwidth", TN_DOCTOR_CPU);
    double bw = 0;
    if (!d->p->measure_bandwidth) {
        l->status = TN_DOCTOR_INFO;
        tn_fail(&l->text, TN_OK, "memory bandwidth: not measured");
    } else if ((bw = measure_bandwidth(d->p->n_threads)) <= 0) {
        l->status = TN_DOCTOR_INFO;
        tn_fail(&l->text, TN_OK, "memory bandwidth: could not be measured (out of memory?)");
    } else {
        tn_fail(&l->text, TN_OK, "memory bandwidth: %.1f GB/s (streaming read)", bw / 1e9);
    }

    tn_doctor_line *b = line_new(d, "cpu.bound", TN_DOCTOR_CPU);
    const tn_gguf *m = d->p->model;
    if (!m) {
        b->status = TN_DOCTOR_INFO;
        tn_fail(&b->text, TN_OK,
                "decode bound: needs a model (load one, or tern-cli doctor -m MODEL)");
        return;
    }
    uint64_t per_tok = tn_doctor_weight_bytes_per_token(m);
    char name[256], per_tok_s[32];
    model_name(m, name, sizeof name);
    human_bytes(per_tok, per_tok_s, sizeof per_tok_s);
    if (bw <= 0 || per_tok == 0) {
        b->status = TN_DOCTOR_INFO;
        tn_fail(&b->text, TN_OK, "decode bound for %s: needs the bandwidth (%s read per token)",
                name, per_tok_s);
        return;
    }
    tn_fail(&b->text, TN_OK, "decode bound for %s: %.1f tokens/s (%s read per token)", name,
            bw / (double)per_tok, per_tok_s);
}

/* Whether a load could create and write the cache folder, without creating
 * it: 0, or the errno its mkdir -p would meet (a path component that is a
 * file, a dangling symbolic link, a folder this user cannot write). */
static int cache_dir_problem(const char *dir) {
    char *p = strdup(dir);
    int e = ENOMEM;
    while (p) {
        struct stat st;
        if (stat(p, &st) == 0) {
            e = !S_ISDIR(st.st_mode) ? ENOTDIR : access(p, W_OK | X_OK) != 0 ? errno : 0;
            break;
        }
        e = errno;
        if (e != ENOENT || lstat(p, &st) == 0) /* ENOENT with lstat: a dangling link */
            break;
        char *slash = strrchr(p, '/');
        if (!slash || slash == p) {
            e = 0; /* up to "/" nothing exists: nothing is in the way */
            break;
        }
        *slash = '\0';
    }
    free(p);
    return e;
}

/* The repack cache (docs/QUANT.md, "The repack cache"): where, how much,
 * and what a load found about its pages. Never a failure: without it
 * Tern repacks in memory as before. */
static void add_entry(const tn_repack_cache_entry *e, void *user) {
    uint64_t *t = user;
    t[0]++;
    t[1] += e->bytes;
}

static void check_repack_cache(doc *d) {
    tn_doctor_line *l = line_new(d, "cpu.repack_cache", TN_DOCTOR_CPU);
    char *dir = NULL;
    const tn_repack_cache_setting set = tn_repack_cache_config(&dir);
    const char *env = getenv("TERN_REPACK_CACHE");
    int e;
    l->status = TN_DOCTOR_INFO;
    if (set == TN_REPACK_CACHE_OFF_ASKED) {
        tn_fail(&l->text, TN_OK, "repack cache: off (TERN_REPACK_CACHE=%s)", env);
    } else if (set == TN_REPACK_CACHE_NOT_UNDERSTOOD) {
        tn_fail(&l->text, TN_OK, "repack cache: off: TERN_REPACK_CACHE=%s is not understood", env);
        tn_fail(&l->fix, TN_OK,
                "unset it for the default, or set 0 or off, 1 or on, or an absolute directory");
    } else if (!dir) {
        tn_fail(&l->text, TN_OK,
                "repack cache: off: neither XDG_CACHE_HOME nor HOME is an absolute path");
        tn_fail(&l->fix, TN_OK,
                "set HOME, or XDG_CACHE_HOME or TERN_REPACK_CACHE to an absolute folder this "
                "user can write");
    } else if ((e = cache_dir_problem(dir)) != 0) {
        tn_fail(&l->text, TN_OK,
                "repack cache: %s cannot be used (%s): every load repacks the weights in memory",
                dir, strerror(e));
        tn_fail(&l->fix, TN_OK,
                "set XDG_CACHE_HOME or TERN_REPACK_CACHE to a folder this user can write, or "
                "TERN_REPACK_CACHE=off");
    } else {
        uint64_t t[2] = {0, 0};
        tn_repack_cache_list(dir, add_entry, t);
        char size[32];
        human_bytes(t[1], size, sizeof size);
        const tn_repack_pages pages = tn_repack_cache_pages(dir);
        const bool asked = set == TN_REPACK_CACHE_ASKED;
        const unsigned long long n = (unsigned long long)t[0];
        l->status = pages == TN_REPACK_PAGES_4K ? TN_DOCTOR_INFO : TN_DOCTOR_OK;
        /* One whole format per case, not English words as arguments: each
         * is translated as a sentence (docs/TRANSLATING.md; the German
         * Hardware page showed the pages clause in English). */
        if (pages == TN_REPACK_PAGES_2M && asked)
            tn_fail(&l->text, TN_OK,
                    "repack cache: %s (TERN_REPACK_CACHE), files: %llu, %s; mapped in 2 MiB pages",
                    dir, n, size);
        else if (pages == TN_REPACK_PAGES_2M)
            tn_fail(&l->text, TN_OK,
                    "repack cache: %s (default), files: %llu, %s; mapped in 2 MiB pages", dir, n,
                    size);
        else if (pages == TN_REPACK_PAGES_4K && asked)
            tn_fail(&l->text, TN_OK,
                    "repack cache: %s (TERN_REPACK_CACHE), files: %llu, %s; 4 KiB pages on this "
                    "kernel and file system, used anyway",
                    dir, n, size);
        else if (pages == TN_REPACK_PAGES_4K)
            tn_fail(&l->text, TN_OK,
                    "repack cache: %s (default), files: %llu, %s; 4 KiB pages on this kernel and "
                    "file system: the weights stay in private memory",
                    dir, n, size);
        else if (asked)
            tn_fail(&l->text, TN_OK,
                    "repack cache: %s (TERN_REPACK_CACHE), files: %llu, %s; pages not checked yet "
                    "(a load of a model of 8 MiB or more checks)",
                    dir, n, size);
        else
            tn_fail(&l->text, TN_OK,
                    "repack cache: %s (default), files: %llu, %s; pages not checked yet (a load "
                    "of a model of 8 MiB or more checks)",
                    dir, n, size);
    }
    free(dir);
}

/* ------------------------------------------------------------- the NPU */

typedef struct {
    bool found;
    char path[64];  /* /dev/accel/accelN */
    char name[16];  /* accelN */
    struct stat st;
    bool openable;
    int fd;         /* the machine's device, opened; -1 */
    char driver[64]; /* its DRM driver's name (DRM_IOCTL_VERSION); "" unknown */
    int drm_major, drm_minor; /* its DRM driver's version; -1 unknown */
} npu_dev;

/* DRM_IOCTL_VERSION: every DRM driver answers it, so it is safe on any
 * accel node; the amdxdna ioctls are asked only of amdxdna. */
static void drm_version(npu_dev *dev) {
    if (dev->fd < 0)
        return;
    struct tn_drm_version v;
    memset(&v, 0, sizeof v);
    char name[64] = "";
    v.name = name;
    v.name_len = sizeof name - 1;
    if (ioctl(dev->fd, TN_DRM_IOCTL_VERSION, &v) != 0)
        return;
    name[v.name_len < sizeof name ? v.name_len : sizeof name - 1] = '\0';
    snprintf(dev->driver, sizeof dev->driver, "%s", name);
    dev->drm_major = v.version_major;
    dev->drm_minor = v.version_minor;
}

/* "amdxdna_accel_driver" in Linux's amdxdna_pci_drv.c; "amdxdna" elsewhere. */
static bool is_amdxdna(const char *driver) {
    return strncmp(driver, "amdxdna", 7) == 0;
}

static void find_device(doc *d, npu_dev *dev) {
    dev->fd = -1;
    dev->drm_major = dev->drm_minor = -1;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/dev/accel", d->root);
    DIR *dh = opendir(dir);
    if (!dh)
        return;
    int best = -1;
    bool best_xdna = false;
    struct dirent *e;
    while ((e = readdir(dh))) {
        char *end;
        if (strncmp(e->d_name, "accel", 5) != 0 || !isdigit((unsigned char)e->d_name[5]))
            continue;
        long n = strtol(e->d_name + 5, &end, 10);
        if (*end || n < 0 || n > 255)
            continue;
        char attr[96];
        snprintf(attr, sizeof attr, "/sys/class/accel/accel%ld/device/vbnv", n);
        bool xdna = exists(d, attr);
        if (best < 0 || (xdna && !best_xdna) || (xdna == best_xdna && n < best)) {
            best = (int)n;
            best_xdna = xdna;
        }
    }
    closedir(dh);
    if (best < 0)
        return;
    snprintf(dev->name, sizeof dev->name, "accel%d", best);
    snprintf(dev->path, sizeof dev->path, "/dev/accel/accel%d", best);
    char full[1200];
    snprintf(full, sizeof full, "%s%s", d->root, dev->path);
    dev->found = stat(full, &dev->st) == 0;
}

typedef struct {
    bool known;
    unsigned uid, gid;
    unsigned groups[256];
    int n_groups;
} creds;

static void read_creds(doc *d, creds *c) {
    memset(c, 0, sizeof *c);
    const size_t cap = 1 << 15;
    char *text = malloc(cap);
    char v[2048];
    unsigned r, e;
    if (!text || !read_file(d, "/proc/self/status", text, cap) ||
        !proc_field(text, "Uid", v, sizeof v) || sscanf(v, "%u %u", &r, &e) != 2) {
        free(text);
        return;
    }
    c->uid = e;
    if (!proc_field(text, "Gid", v, sizeof v) || sscanf(v, "%u %u", &r, &e) != 2) {
        free(text);
        return;
    }
    c->gid = e;
    c->known = true;
    if (proc_field(text, "Groups", v, sizeof v)) {
        char *p = v, *end;
        while (c->n_groups < 256) {
            unsigned long g = strtoul(p, &end, 10);
            if (end == p)
                break;
            c->groups[c->n_groups++] = (unsigned)g;
            p = end;
        }
    }
    free(text);
}

static bool creds_in_group(const creds *c, unsigned gid) {
    if (c->gid == gid)
        return true;
    for (int i = 0; i < c->n_groups; i++)
        if (c->groups[i] == gid)
            return true;
    return false;
}

/* Read and write, as a backend opens the device (O_RDWR). */
static bool creds_may_open(const creds *c, const struct stat *st) {
    if (c->uid == 0)
        return true;
    mode_t m = st->st_mode;
    if (c->uid == st->st_uid)
        return (m & 0600) == 0600;
    if (creds_in_group(c, st->st_gid))
        return (m & 0060) == 0060;
    return (m & 0006) == 0006;
}

/* The name of an id in ROOT/etc/group or ROOT/etc/passwd (field 3 is the
 * id in both); members: the group's member list (field 4), or "". */
static bool id_lookup(doc *d, const char *file, unsigned id, char *name, size_t cap,
                      char *members, size_t mcap, unsigned *primary_gid) {
    const size_t tcap = 1 << 18;
    char *text = malloc(tcap);
    if (!text || !read_file(d, file, text, tcap)) {
        free(text);
        return false;
    }
    for (char *p = text; p && *p;) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        char *f[5] = {p, NULL, NULL, NULL, NULL};
        for (int i = 1; i < 5 && f[i - 1]; i++) {
            char *colon = strchr(f[i - 1], ':');
            if (colon) {
                *colon = '\0';
                f[i] = colon + 1;
            }
        }
        char *end;
        if (f[2] && f[2][0] && strtoul(f[2], &end, 10) == id && *end == '\0') {
            snprintf(name, cap, "%s", f[0]);
            if (members)
                snprintf(members, mcap, "%s", f[3] ? f[3] : "");
            if (primary_gid)
                *primary_gid = f[3] ? (unsigned)strtoul(f[3], NULL, 10) : (unsigned)-1;
            free(text);
            return true;
        }
        p = nl ? nl + 1 : NULL;
    }
    free(text);
    return false;
}

static bool member_of(const char *members, const char *user) {
    size_t n = strlen(user);
    for (const char *p = members; *p;) {
        size_t k = strcspn(p, ",");
        if (k == n && !strncmp(p, user, n))
            return true;
        p += k;
        if (*p == ',')
            p++;
    }
    return false;
}

static void check_device(doc *d, npu_dev *dev) {
    tn_doctor_line *l = line_new(d, "npu.device", TN_DOCTOR_NPU);
    find_device(d, dev);
    if (!dev->found) {
        l->status = TN_DOCTOR_FAIL;
        tn_fail(&l->text, TN_OK, "NPU device: no /dev/accel/accel* node");
        if (exists(d, "/sys/module/amdxdna"))
            tn_fail(&l->fix, TN_OK,
                    "the amdxdna driver is loaded but made no device: 'sudo dmesg | grep "
                    "amdxdna' says why (usually firmware it cannot load, or whose protocol it "
                    "rejects)");
        else
            tn_fail(&l->fix, TN_OK,
                    "load the driver: 'sudo modprobe amdxdna' (in Linux 6.14 and newer; "
                    "older kernels need github.com/amd/xdna-driver). Without a Ryzen AI NPU "
                    "there is nothing to do: Tern runs on the CPU");
        return;
    }
    creds c;
    read_creds(d, &c);
    bool denied;
    int open_errno = 0;
    if (d->fake) {
        denied = c.known && !creds_may_open(&c, &dev->st);
    } else {
        dev->fd = open(dev->path, O_RDWR | O_CLOEXEC);
        open_errno = dev->fd < 0 ? errno : 0;
        denied = open_errno == EACCES || open_errno == EPERM;
    }
    if (!denied && open_errno == 0) {
        dev->openable = true;
        drm_version(dev);
        tn_fail(&l->text, TN_OK, "NPU device: %s opens", dev->path);
        return;
    }
    l->status = TN_DOCTOR_FAIL;
    if (!denied) {
        tn_fail(&l->text, TN_OK, "NPU device: %s does not open: %s", dev->path,
                strerror(open_errno));
        tn_fail(&l->fix, TN_OK,
                "'sudo dmesg | grep amdxdna' shows what the driver reported; another program "
                "may hold the NPU");
        return;
    }
    char group[64] = "", members[4096] = "", user[64] = "";
    unsigned primary = (unsigned)-1;
    bool named = id_lookup(d, "/etc/group", (unsigned)dev->st.st_gid, group, sizeof group,
                           members, sizeof members, NULL);
    if (!named)
        snprintf(group, sizeof group, "%u", (unsigned)dev->st.st_gid);
    if (c.known)
        id_lookup(d, "/etc/passwd", c.uid, user, sizeof user, NULL, 0, &primary);
    tn_fail(&l->text, TN_OK, "NPU device: %s is not open to this user (mode %04o, group %s)",
            dev->path, (unsigned)(dev->st.st_mode & 07777), group);
    if ((dev->st.st_mode & 0060) != 0060) {
        tn_fail(&l->fix, TN_OK,
                "its group may not open it either: add a udev rule, e.g. 'SUBSYSTEM==\"accel\", "
                "KERNEL==\"accel*\", GROUP=\"render\", MODE=\"0660\"' in "
                "/etc/udev/rules.d/70-amdxdna.rules, then 'sudo udevadm control --reload && "
                "sudo udevadm trigger'");
    } else if (user[0] && (member_of(members, user) || primary == (unsigned)dev->st.st_gid)) {
        tn_fail(&l->fix, TN_OK,
                "you are in the '%s' group, but this session started before you joined it: "
                "log out and in again",
                group);
    } else {
        tn_fail(&l->fix, TN_OK, "'sudo usermod -aG %s $USER', then log out and in again", group);
    }
}

static void check_driver(doc *d, const npu_dev *dev) {
    tn_doctor_line *l = line_new(d, "npu.driver", TN_DOCTOR_NPU);
    int major = dev->drm_major, minor = dev->drm_minor;
    if (dev->driver[0] && !is_amdxdna(dev->driver)) {
        /* Another accelerator (Intel's NPU is /dev/accel too). */
        l->status = TN_DOCTOR_FAIL;
        tn_fail(&l->text, TN_OK, "amdxdna driver: %s belongs to another driver (%s)", dev->path,
                dev->driver);
        tn_fail(&l->fix, TN_OK,
                "Tern's NPU backend is for AMD Ryzen AI NPUs (amdxdna); on this one Tern runs on "
                "the CPU");
        return;
    }
    char ver[64];
    if (major < 0 && read_file(d, "/sys/module/amdxdna/version", ver, sizeof ver) &&
        sscanf(ver, "%d.%d", &major, &minor) != 2)
        major = minor = -1;
    if (!exists(d, "/sys/module/amdxdna") && major < 0) {
        l->status = TN_DOCTOR_FAIL;
        tn_fail(&l->text, TN_OK, "amdxdna driver: not loaded");
        tn_fail(&l->fix, TN_OK,
                "'sudo modprobe amdxdna' (Linux 6.14 and newer have it; older kernels need "
                "github.com/amd/xdna-driver)");
        return;
    }
    if (major < 0) {
        l->status = TN_DOCTOR_INFO;
        tn_fail(&l->text, TN_OK,
                "amdxdna driver: loaded, version unknown (it is asked through the device, "
                "which did not open)");
        return;
    }
    if (major < TN_DOCTOR_XDNA_DRM_MIN_MAJOR ||
        (major == TN_DOCTOR_XDNA_DRM_MIN_MAJOR && minor < TN_DOCTOR_XDNA_DRM_MIN_MINOR)) {
        l->status = TN_DOCTOR_FAIL;
        tn_fail(&l->text, TN_OK, "amdxdna driver: version %d.%d is older than %d.%d", major,
                minor, TN_DOCTOR_XDNA_DRM_MIN_MAJOR, TN_DOCTOR_XDNA_DRM_MIN_MINOR);
        tn_fail(&l->fix, TN_OK,
                "install a newer amdxdna: a newer kernel, or the driver from "
                "github.com/amd/xdna-driver");
        return;
    }
    tn_fail(&l->text, TN_OK, "amdxdna driver: version %d.%d", major, minor);
}

static void check_firmware(doc *d, const npu_dev *dev) {
    tn_doctor_line *l = line_new(d, "npu.firmware", TN_DOCTOR_NPU);
    unsigned v[4] = {0, 0, 0, 0};
    bool have = false;
    if (dev->fd >= 0 && is_amdxdna(dev->driver)) {
        struct tn_amdxdna_fw_version fw;
        memset(&fw, 0, sizeof fw);
        struct tn_amdxdna_get_info q = {
            .param = TN_AMDXDNA_QUERY_FIRMWARE_VERSION,
            .buffer_size = sizeof fw,
            .buffer = (uint64_t)(uintptr_t)&fw,
        };
        if (ioctl(dev->fd, TN_DRM_IOCTL_AMDXDNA_GET_INFO, &q) == 0) {
            v[0] = fw.major, v[1] = fw.minor, v[2] = fw.patch, v[3] = fw.build;
            have = true;
        }
    }
    char attr[96], text[64];
    if (!have && dev->found) {
        snprintf(attr, sizeof attr, "/sys/class/accel/%s/device/fw_version", dev->name);
        have = read_file(d, attr, text, sizeof text) &&
               sscanf(text, "%u.%u.%u.%u", &v[0], &v[1], &v[2], &v[3]) == 4;
    }
    if (!have) {
        l->status = dev->found ? TN_DOCTOR_FAIL : TN_DOCTOR_INFO;
        tn_fail(&l->text, TN_OK, "NPU firmware: version unknown");
        if (dev->found)
            tn_fail(&l->fix, TN_OK,
                    "the driver reports no firmware version: 'sudo dmesg | grep amdxdna' says "
                    "whether the firmware loaded");
        return;
    }
    char ver[64];
    snprintf(ver, sizeof ver, "%u.%u.%u.%u", v[0], v[1], v[2], v[3]);
    if (v[0] < TN_DOCTOR_FW_MIN_MAJOR ||
        (v[0] == TN_DOCTOR_FW_MIN_MAJOR && v[1] < TN_DOCTOR_FW_MIN_MINOR)) {
        l->status = TN_DOCTOR_FAIL;
        tn_fail(&l->text, TN_OK, "NPU firmware: %s is older than %d.%d", ver,
                TN_DOCTOR_FW_MIN_MAJOR, TN_DOCTOR_FW_MIN_MINOR);
        tn_fail(&l->fix, TN_OK,
                "update linux-firmware (the amdnpu/ files) to the release your amdxdna driver "
                "names, then reboot");
    } else if (v[0] > TN_DOCTOR_FW_MAX_MAJOR) {
        l->status = TN_DOCTOR_FAIL;
        tn_fail(&l->text, TN_OK, "NPU firmware: %s is newer than the %d.x this check knows", ver,
                TN_DOCTOR_FW_MAX_MAJOR);
        tn_fail(&l->fix, TN_OK,
                "firmware and driver must speak the same protocol: install the amdxdna driver "
                "released with this firmware, or the firmware your driver names");
    } else {
        tn_fail(&l->text, TN_OK, "NPU firmware: %s", ver);
    }
}

static void check_kernel(doc *d) {
    tn_doctor_line *l = line_new(d, "npu.kernel", TN_DOCTOR_NPU);
    char rel[128];
    int a = 0, b = 0;
    if (!read_file(d, "/proc/sys/kernel/osrelease", rel, sizeof rel) ||
        sscanf(rel, "%d.%d", &a, &b) != 2) {
        l->status = TN_DOCTOR_INFO;
        tn_fail(&l->text, TN_OK, "Linux kernel: version unknown (/proc/sys/kernel/osrelease)");
        return;
    }
    if (a < TN_DOCTOR_KERNEL_MIN_MAJOR ||
        (a == TN_DOCTOR_KERNEL_MIN_MAJOR && b < TN_DOCTOR_KERNEL_MIN_MINOR)) {
        l->status = TN_DOCTOR_FAIL;
        tn_fail(&l->text, TN_OK, "Linux kernel: %s is older than %d.%d, which amdxdna needs", rel,
                TN_DOCTOR_KERNEL_MIN_MAJOR, TN_DOCTOR_KERNEL_MIN_MINOR);
        tn_fail(&l->fix, TN_OK,
                "install a newer kernel (Debian 12: linux-image-amd64 from bookworm-backports)");
        return;
    }
    tn_fail(&l->text, TN_OK, "Linux kernel: %s", rel);
}

static void check_memlock(doc *d) {
    tn_doctor_line *l = line_new(d, "npu.memlock", TN_DOCTOR_NPU);
    /* "Max locked memory   8388608   8388608   bytes": no colon, the soft
     * limit first. */
    char text[8192], soft[64] = "";
    const char *p = read_file(d, "/proc/self/limits", text, sizeof text)
                        ? strstr(text, "Max locked memory")
                        : NULL;
    if (!p || sscanf(p + 17, "%63s", soft) != 1) {
        l->status = TN_DOCTOR_INFO;
        tn_fail(&l->text, TN_OK, "memlock limit: unknown (/proc/self/limits)");
        return;
    }
    uint64_t need = TN_DOCTOR_MEMLOCK_DEFAULT_NEED;
    if (d->p->model)
        need = weight_bytes(d->p->model);
    char need_s[32];
    human_bytes(need, need_s, sizeof need_s);
    if (!strcmp(soft, "unlimited")) {
        tn_fail(&l->text, TN_OK, "memlock limit: unlimited");
        return;
    }
    char *end;
    unsigned long long lim = strtoull(soft, &end, 10);
    if (end == soft || *end) {
        l->status = TN_DOCTOR_INFO;
        tn_fail(&l->text, TN_OK, "memlock limit: unknown (/proc/self/limits)");
        return;
    }
    char lim_s[32];
    human_bytes(lim, lim_s, sizeof lim_s);
    if (lim >= need) {
        tn_fail(&l->text, TN_OK, "memlock limit: %s (needs %s)", lim_s, need_s);
        return;
    }
    l->status = TN_DOCTOR_FAIL;
    tn_fail(&l->text, TN_OK,
            "memlock limit: %s, below the %s the NPU's buffers pin", lim_s, need_s);
    tn_fail(&l->fix, TN_OK,
            "add '* soft memlock unlimited' and '* hard memlock unlimited' to "
            "/etc/security/limits.d/99-npu.conf and log in again (a systemd service: "
            "LimitMEMLOCK=infinity)");
}

static void check_xrt(doc *d, const npu_dev *dev) {
    tn_xrt_probe p;
    tn_xrt_probe_run(d->fake ? d->root : NULL, &p);
    tn_doctor_line *l = line_new(d, "npu.xrt", TN_DOCTOR_NPU);
    bool new_enough = p.major > TN_XRT_MIN_MAJOR ||
                      (p.major == TN_XRT_MIN_MAJOR && p.minor >= TN_XRT_MIN_MINOR);
    if (!p.built) {
        l->status = TN_DOCTOR_FAIL;
        tn_fail(&l->text, TN_OK, "XRT: not built into this Tern");
        tn_fail(&l->fix, TN_OK,
                "install XRT %d.%d or newer with its xdna plugin, then rebuild Tern with "
                "'meson setup -Dxrt=enabled'",
                TN_XRT_MIN_MAJOR, TN_XRT_MIN_MINOR);
    } else if (!new_enough) {
        l->status = TN_DOCTOR_FAIL;
        tn_fail(&l->text, TN_OK,
                "XRT: %s cannot open hardware contexts on the NPU; it needs %d.%d or newer "
                "with the xdna plugin",
                p.version, TN_XRT_MIN_MAJOR, TN_XRT_MIN_MINOR);
        tn_fail(&l->fix, TN_OK,
                "install XRT %d.%d or newer and the xdna plugin (github.com/amd/xdna-driver), "
                "then rebuild Tern against it",
                TN_XRT_MIN_MAJOR, TN_XRT_MIN_MINOR);
    } else {
        tn_fail(&l->text, TN_OK, "XRT: %s", p.version);
    }

    tn_doctor_line *s = line_new(d, "npu.xrt_device", TN_DOCTOR_NPU);
    if (!p.built) {
        s->status = TN_DOCTOR_INFO;
        tn_fail(&s->text, TN_OK, "XRT devices: not asked (no XRT)");
    } else if (p.n_devices > 0) {
        if (p.n_devices == 1)
            tn_fail(&s->text, TN_OK, "XRT devices: XRT sees 1 device");
        else
            tn_fail(&s->text, TN_OK, "XRT devices: XRT sees %d devices", p.n_devices);
    } else if (!dev->found) {
        s->status = TN_DOCTOR_FAIL;
        tn_fail(&s->text, TN_OK, "XRT devices: XRT sees none (there is no NPU device node)");
    } else if (p.lib_dir[0] && !p.plugin_found) {
        s->status = TN_DOCTOR_FAIL;
        tn_fail(&s->text, TN_OK,
                "XRT devices: XRT sees none although %s exists: its xdna plugin is missing",
                dev->path);
        tn_fail(&s->fix, TN_OK,
                "install the xdna plugin (%s, from github.com/amd/xdna-driver's packages) into %s",
                TN_XRT_XDNA_PLUGIN, p.lib_dir);
    } else {
        s->status = TN_DOCTOR_FAIL;
        tn_fail(&s->text, TN_OK, "XRT devices: XRT sees none although %s exists", dev->path);
        tn_fail(&s->fix, TN_OK,
                "XRT and its xdna plugin must come from the same release, %d.%d or newer: "
                "reinstall both",
                TN_XRT_MIN_MAJOR, TN_XRT_MIN_MINOR);
    }
}

static void check_manifest(doc *d) {
    tn_doctor_line *l = line_new(d, "npu.manifest", TN_DOCTOR_NPU);
    l->status = TN_DOCTOR_FAIL;
    const char *dir = d->p->xclbin_dir;
    if (!dir) {
        tn_fail(&l->text, TN_OK, "NPU kernels: the xclbins folder was not found");
        tn_fail(&l->fix, TN_OK, "reinstall Tern, or point TERN_XCLBIN_DIR at its xclbins folder");
        return;
    }
    tn_xrt_manifest *m = NULL;
    tn_error e;
    memset(&e, 0, sizeof e);
    int rc = tn_xrt_manifest_load(dir, &m, &e);
    if (rc == TN_ERR_NOT_FOUND) {
        tn_fail(&l->text, TN_OK, "NPU kernels: %s/manifest.json is missing", dir);
        tn_fail(&l->fix, TN_OK, "reinstall Tern, or point TERN_XCLBIN_DIR at its xclbins folder");
        return;
    }
    if (rc != TN_OK) {
        l->text = e;
        tn_fail(&l->fix, TN_OK, "reinstall Tern: its kernel manifest is damaged");
        return;
    }
    if (m->n_kernels == 0) {
        tn_fail(&l->text, TN_OK, "NPU kernels: no kernel images ship in %s yet", dir);
        tn_fail(&l->fix, TN_OK,
                "nothing to do: the NPU backend waits for its kernels, and Tern runs on the CPU");
        tn_xrt_manifest_free(m);
        return;
    }
    rc = tn_xrt_manifest_verify(m, dir, &e);
    int n = m->n_kernels;
    tn_xrt_manifest_free(m);
    if (rc != TN_OK) {
        l->text = e;
        tn_fail(&l->fix, TN_OK, "reinstall Tern: a kernel image does not match its checksum");
        return;
    }
    /* Verified, yet no code drives them: still no NPU backend. */
    if (n == 1)
        tn_fail(&l->text, TN_OK,
                "NPU kernels: 1 image verifies, but this Tern has no NPU compute path yet");
    else
        tn_fail(&l->text, TN_OK,
                "NPU kernels: %d images verify, but this Tern has no NPU compute path yet", n);
}

void tn_doctor_run(const tn_doctor_params *params, tn_doctor_report *report) {
    memset(report, 0, sizeof *report);
    tn_doctor_params none;
    memset(&none, 0, sizeof none);
    doc d = {.p = params ? params : &none, .r = report};
    d.fake = d.p->root && d.p->root[0];
    d.root = d.fake ? d.p->root : "";

    check_cpu_model(&d);
    check_cpu_kernels(&d);
    check_cpu_bandwidth(&d);
    check_repack_cache(&d);

    npu_dev dev;
    memset(&dev, 0, sizeof dev);
    dev.fd = -1;
    check_device(&d, &dev);
    check_driver(&d, &dev);
    check_firmware(&d, &dev);
    if (dev.fd >= 0)
        close(dev.fd);
    check_kernel(&d);
    check_memlock(&d);
    check_xrt(&d, &dev);
    check_manifest(&d);

    report->cpu_ok = true;
    report->npu_ok = true;
    for (int i = 0; i < report->n_lines; i++) {
        const tn_doctor_line *l = &report->lines[i];
        if (l->status == TN_DOCTOR_FAIL) {
            if (l->group == TN_DOCTOR_CPU)
                report->cpu_ok = false;
            else
                report->npu_ok = false;
        }
    }
    /* The manifest line never passes today; this keeps npu_ok honest even
     * if it did: the backend's own open decides. */
    if (report->npu_ok) {
        tn_error e;
        report->npu_ok = tn_xrt_open(d.fake ? d.root : NULL, d.p->xclbin_dir, NULL, &e) == TN_OK;
    }
}
