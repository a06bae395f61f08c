/* The XRT backend's probe, manifest and (refusing) open: engine/include/tn-xrt.h.
 *
 * The only XRT call is xclProbe(), XRT's C entry point that counts the
 * devices its drivers enumerate: with XRT 2.17+ the xdna plugin registers
 * the NPU there, so a count of 0 while /dev/accel/accel0 opens means XRT
 * lacks the plugin. Anything more (xrtDeviceOpen, hardware contexts) waits
 * for kernels to exist: opening a device only to refuse would print XRT's
 * own errors on stderr and prove nothing. */
#include "tn-xrt.h"

#include "tn-internal.h"
#include "tn-json.h"
#include "tn-session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef TN_HAVE_XRT
#include <dlfcn.h>
#include <xrt/version.h>
#include <xrt/xrt.h>
#endif

struct tn_xrt_backend {
    int unused;
};

static void copy_str(char *dst, size_t cap, const char *src) {
    snprintf(dst, cap, "%s", src ? src : "");
}

static void parse_version(tn_xrt_probe *p) {
    int a = 0, b = 0;
    if (sscanf(p->version, "%d.%d", &a, &b) == 2 && a >= 0 && b >= 0) {
        p->major = a;
        p->minor = b;
    }
}

static void plugin_look(tn_xrt_probe *p, const char *root) {
    if (!p->lib_dir[0])
        return;
    char path[1200];
    snprintf(path, sizeof path, "%s%s/%s", root ? root : "", p->lib_dir, TN_XRT_XDNA_PLUGIN);
    /* XRT loads the versioned name too (libxrt_driver_xdna.so.2); the
     * development link is what its packages always install. */
    p->plugin_found = access(path, F_OK) == 0;
}

/* ROOT/xrt.fake: key=value lines standing in for the XRT library. */
static void probe_fake(const char *root, tn_xrt_probe *p) {
    char path[1024];
    snprintf(path, sizeof path, "%s/xrt.fake", root);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    p->built = true;
    char line[600];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        const char *v = eq + 1;
        if (!strcmp(line, "version")) {
            copy_str(p->version, sizeof p->version, v);
        } else if (!strcmp(line, "devices")) {
            char *end;
            long n = strtol(v, &end, 10);
            p->n_devices = (end != v && n >= 0 && n < 1000) ? (int)n : 0;
        } else if (!strcmp(line, "lib_dir") && v[0] == '/') {
            copy_str(p->lib_dir, sizeof p->lib_dir, v);
        }
    }
    fclose(f);
    parse_version(p);
}

void tn_xrt_probe_run(const char *root, tn_xrt_probe *out) {
    memset(out, 0, sizeof *out);
    if (root) {
        out->faked = true;
        probe_fake(root, out);
        plugin_look(out, root);
        return;
    }
#ifdef TN_HAVE_XRT
    out->built = true;
    copy_str(out->version, sizeof out->version, xrt_build_version);
    parse_version(out);
    out->n_devices = (int)xclProbe();
    Dl_info info;
    if (dladdr((void *)(uintptr_t)xclProbe, &info) && info.dli_fname) {
        copy_str(out->lib_dir, sizeof out->lib_dir, info.dli_fname);
        char *slash = strrchr(out->lib_dir, '/');
        if (slash)
            *slash = '\0';
        else
            out->lib_dir[0] = '\0';
    }
    plugin_look(out, NULL);
#endif
}

/* ------------------------------------------------------------ manifest */

static const char *const known_ops[] = {"matmul", "attention"};

static int hex_digest(const char *s, uint8_t out[32]) {
    if (!s || strlen(s) != 64)
        return -1;
    for (int i = 0; i < 32; i++) {
        unsigned v = 0;
        for (int k = 0; k < 2; k++) {
            char c = s[2 * i + k];
            v <<= 4;
            if (c >= '0' && c <= '9')
                v |= (unsigned)(c - '0');
            else if (c >= 'a' && c <= 'f')
                v |= (unsigned)(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F')
                v |= (unsigned)(c - 'A' + 10);
            else
                return -1;
        }
        out[i] = (uint8_t)v;
    }
    return 0;
}

static void digest_hex(const uint8_t d[32], char out[65]) {
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

int tn_xrt_manifest_load(const char *dir, tn_xrt_manifest **out, tn_error *err) {
    if (!dir || !out)
        return tn_fail(err, TN_ERR_INVALID, "tn_xrt_manifest_load: no folder");
    *out = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (access(path, F_OK) != 0)
        return tn_fail(err, TN_ERR_NOT_FOUND, "%s: no kernel manifest (xclbins/README.md)", path);
    tn_json_doc *doc = NULL;
    int rc = tn_json_parse_file(path, &doc, err);
    if (rc != TN_OK)
        return rc;
    const tn_json *root = tn_json_root(doc);
    const tn_json *kernels = tn_json_get(root, "kernels");
    int64_t format = 0;
    if (!tn_json_is(root, TN_JSON_OBJECT) || !tn_json_int(tn_json_get(root, "format"), &format) ||
        format != 1 || !tn_json_is(kernels, TN_JSON_ARRAY)) {
        tn_json_free(doc);
        return tn_fail(err, TN_ERR_FORMAT,
                       "%s: not a kernel manifest of format 1 (an object with \"format\": 1 and a "
                       "\"kernels\" array)",
                       path);
    }
    size_t n = tn_json_count(kernels);
    tn_xrt_manifest *m = calloc(1, sizeof *m);
    if (!m || (n && !(m->kernels = calloc(n, sizeof *m->kernels)))) {
        free(m);
        tn_json_free(doc);
        return tn_fail(err, TN_ERR_NOMEM, "%s: out of memory", path);
    }
    for (size_t i = 0; i < n; i++) {
        const tn_json *e = tn_json_at(kernels, i);
        const char *image = tn_json_str(tn_json_get(e, "image"));
        const char *op = tn_json_str(tn_json_get(e, "op"));
        const char *type = tn_json_str(tn_json_get(e, "type"));
        const char *sha = tn_json_str(tn_json_get(e, "sha256"));
        tn_xrt_kernel *k = &m->kernels[i];
        if (!image || !image[0] || strchr(image, '/') || strlen(image) >= sizeof k->image ||
            !strcmp(image, ".") || !strcmp(image, "..")) {
            rc = tn_fail(err, TN_ERR_FORMAT,
                         "%s: kernel %zu: \"image\" must be a file name in the manifest's folder",
                         path, i);
            goto fail;
        }
        bool op_ok = false;
        for (size_t j = 0; op && j < sizeof known_ops / sizeof *known_ops; j++)
            op_ok |= !strcmp(op, known_ops[j]);
        if (!op_ok) {
            rc = tn_fail(err, TN_ERR_FORMAT,
                         "%s: kernel %zu (%s): \"op\" must be \"matmul\" or \"attention\"", path,
                         i, image);
            goto fail;
        }
        int t = type ? tn_type_from_name(type) : -1;
        if (t < 0 || strlen(type) >= sizeof k->type) {
            rc = tn_fail(err, TN_ERR_FORMAT,
                         "%s: kernel %zu (%s): \"type\" is not a tensor type Tern knows", path, i,
                         image);
            goto fail;
        }
        if (hex_digest(sha, k->sha256) != 0) {
            rc = tn_fail(err, TN_ERR_FORMAT,
                         "%s: kernel %zu (%s): \"sha256\" must be 64 hexadecimal digits", path, i,
                         image);
            goto fail;
        }
        copy_str(k->image, sizeof k->image, image);
        copy_str(k->op, sizeof k->op, op);
        copy_str(k->type, sizeof k->type, type);
        m->n_kernels++;
    }
    tn_json_free(doc);
    *out = m;
    return TN_OK;
fail:
    tn_json_free(doc);
    tn_xrt_manifest_free(m);
    return rc;
}

void tn_xrt_manifest_free(tn_xrt_manifest *m) {
    if (!m)
        return;
    free(m->kernels);
    free(m);
}

int tn_xrt_manifest_verify(const tn_xrt_manifest *m, const char *dir, tn_error *err) {
    if (!m || !dir)
        return tn_fail(err, TN_ERR_INVALID, "tn_xrt_manifest_verify: no manifest");
    for (int i = 0; i < m->n_kernels; i++) {
        const tn_xrt_kernel *k = &m->kernels[i];
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, k->image);
        /* $TERN_XCLBIN_DIR names the folder: a FIFO or a device named like
         * a kernel image is refused, not waited on or hashed without end. */
        int fd;
        const int opened = tn_open_regular_file(path, &fd, NULL, err);
        if (opened == TN_ERR_NOT_FOUND)
            return tn_fail(err, TN_ERR_IO, "%s: cannot read the kernel image: %s", path,
                           strerror(ENOENT));
        if (opened != TN_OK)
            return opened;
        FILE *f = fdopen(fd, "rb");
        if (!f) {
            int e = errno;
            close(fd);
            return tn_fail(err, TN_ERR_IO, "%s: cannot read the kernel image: %s", path,
                           strerror(e));
        }
        tn_sha256 c;
        tn_sha256_init(&c);
        uint8_t buf[1 << 14];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, f)) > 0)
            tn_sha256_update(&c, buf, got);
        bool bad = ferror(f);
        fclose(f);
        if (bad)
            return tn_fail(err, TN_ERR_IO, "%s: read error", path);
        uint8_t d[32];
        tn_sha256_final(&c, d);
        if (memcmp(d, k->sha256, 32) != 0) {
            char want[65], have[65];
            digest_hex(k->sha256, want);
            digest_hex(d, have);
            return tn_fail(err, TN_ERR_FORMAT,
                           "%s: sha256 %s does not match the manifest's %s (a damaged or "
                           "replaced kernel image: reinstall Tern)",
                           path, have, want);
        }
    }
    return TN_OK;
}

/* ---------------------------------------------------------------- open */

int tn_xrt_open(const char *root, const char *xclbin_dir, tn_xrt_backend **out, tn_error *err) {
    if (out)
        *out = NULL;
    tn_xrt_probe p;
    tn_xrt_probe_run(root, &p);
    if (!p.built)
        return tn_fail(err, TN_ERR_UNSUPPORTED,
                       "this Tern was built without XRT (rebuild with libxrt-dev installed, "
                       "meson -Dxrt=enabled)");
    if (p.n_devices == 0) {
        if (p.lib_dir[0] && !p.plugin_found)
            return tn_fail(err, TN_ERR_UNSUPPORTED,
                           "XRT %s finds no device, and its xdna plugin (%s) is not in %s",
                           p.version, TN_XRT_XDNA_PLUGIN, p.lib_dir);
        return tn_fail(err, TN_ERR_UNSUPPORTED, "XRT %s finds no device", p.version);
    }
    if (p.major < TN_XRT_MIN_MAJOR ||
        (p.major == TN_XRT_MIN_MAJOR && p.minor < TN_XRT_MIN_MINOR))
        return tn_fail(err, TN_ERR_UNSUPPORTED,
                       "XRT %d.%d cannot open hardware contexts on the NPU; it needs %d.%d or "
                       "newer with the xdna plugin",
                       p.major, p.minor, TN_XRT_MIN_MAJOR, TN_XRT_MIN_MINOR);
    if (!xclbin_dir)
        return tn_fail(err, TN_ERR_UNSUPPORTED, "no kernel images ship in xclbins/ yet");
    tn_xrt_manifest *m = NULL;
    int rc = tn_xrt_manifest_load(xclbin_dir, &m, err);
    if (rc == TN_ERR_NOT_FOUND || (rc == TN_OK && m->n_kernels == 0)) {
        tn_xrt_manifest_free(m);
        return tn_fail(err, TN_ERR_UNSUPPORTED, "no kernel images ship in %s yet", xclbin_dir);
    }
    if (rc != TN_OK)
        return rc;
    rc = tn_xrt_manifest_verify(m, xclbin_dir, err);
    tn_xrt_manifest_free(m);
    if (rc != TN_OK)
        return rc;
    /* Verified images, but no code in Tern drives them yet: refusing here
     * keeps the promise that nothing pretends to compute. */
    return tn_fail(err, TN_ERR_UNSUPPORTED,
                   "the kernel images verify, but this Tern has no NPU compute path yet");
}

void tn_xrt_close(tn_xrt_backend *b) {
    free(b);
}
