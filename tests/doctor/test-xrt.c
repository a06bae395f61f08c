/* The XRT backend module (engine/xrt): on this machine (built against XRT
 * where libxrt-dev is installed, as in CI) its "no device" path, and the
 * kernel manifest reader fed valid, wrong and garbage manifests. */
#include "tn-test.h"

#include "tn-session.h"
#include "tn-xrt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[512];

static void write_file(const char *name, const char *text, size_t n) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK(fwrite(text, 1, n, f) == n);
    fclose(f);
}

static void write_manifest(const char *json) {
    write_file("manifest.json", json, strlen(json));
}

static int load(tn_error *e) {
    tn_xrt_manifest *m = NULL;
    memset(e, 0, sizeof *e);
    int rc = tn_xrt_manifest_load(dir, &m, e);
    CHECK((rc == TN_OK) == (m != NULL));
    tn_xrt_manifest_free(m);
    return rc;
}

static void test_machine(void) {
    tn_xrt_probe p;
    tn_xrt_probe_run(NULL, &p);
    printf("XRT built in: %s, version '%s', devices %d, lib_dir '%s', plugin %s\n",
           p.built ? "yes" : "no", p.version, p.n_devices, p.lib_dir,
           p.plugin_found ? "found" : "missing");
    CHECK(!p.faked);
    tn_error e;
    memset(&e, 0, sizeof e);
    tn_xrt_backend *b = (tn_xrt_backend *)&e;
    int rc = tn_xrt_open(NULL, dir, &b, &e);
    /* Never opens today, and says why in one line. */
    CHECK(rc == TN_ERR_UNSUPPORTED && b == NULL && e.message[0] && e.format);
    printf("tn_xrt_open: %s\n", e.message);
#ifdef TN_TEST_EXPECT_XRT
    /* meson found XRT: the probe must have asked it. */
    CHECK(p.built && p.major >= 2 && p.lib_dir[0] == '/');
#endif
    if (!p.built) {
        CHECK(strstr(e.message, "built without XRT") != NULL);
    } else if (p.n_devices == 0) {
        /* The machines Tern is tested on have no NPU: the "no device" path. */
        CHECKF(strstr(e.message, "finds no device") != NULL, "%s", e.message);
        CHECK(strstr(e.message, p.version) != NULL);
    }
}

static void test_fake(void) {
    char root[600];
    snprintf(root, sizeof root, "%s/root", dir);
    char path[700];
    snprintf(path, sizeof path, "%s/xrt.fake", root);
    remove(path);
    tn_xrt_probe p;
    tn_xrt_probe_run(root, &p);
    CHECK(p.faked && !p.built && p.n_devices == 0);

    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("version=2.18.1\ndevices=1\nlib_dir=/opt/xrt/lib\n", f);
    fclose(f);
    tn_xrt_probe_run(root, &p);
    CHECK(p.built && p.major == 2 && p.minor == 18 && p.n_devices == 1 && !p.plugin_found);
    CHECK(!strcmp(p.lib_dir, "/opt/xrt/lib"));
    /* Everything there but kernels: the manifest is the reason. */
    write_manifest("{\"format\": 1, \"kernels\": []}");
    tn_error e;
    memset(&e, 0, sizeof e);
    CHECK(tn_xrt_open(root, dir, NULL, &e) == TN_ERR_UNSUPPORTED);
    CHECKF(strstr(e.message, "no kernel images ship in") != NULL, "%s", e.message);

    f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("version=2.13.0\ndevices=1\n", f);
    fclose(f);
    CHECK(tn_xrt_open(root, dir, NULL, &e) == TN_ERR_UNSUPPORTED);
    CHECKF(!strcmp(e.message, "XRT 2.13 cannot open hardware contexts on the NPU; it needs 2.17 "
                              "or newer with the xdna plugin"),
           "%s", e.message);

    /* Garbage in the fake file: parsed as nothing, never trusted. */
    f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("version=\xff\xfe\ndevices=-5\ndevices=99999999999\nlib_dir=relative\n=\n\n", f);
    fclose(f);
    tn_xrt_probe_run(root, &p);
    CHECK(p.built && p.n_devices == 0 && p.major == 0 && !p.lib_dir[0]);
}

static void test_manifest(void) {
    tn_error e;
    /* Missing. */
    char path[700];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    remove(path);
    CHECK(load(&e) == TN_ERR_NOT_FOUND);
    CHECK(strstr(e.message, "manifest.json") != NULL);

    /* What ships: valid and empty. */
    write_manifest("{\"format\": 1, \"kernels\": []}");
    tn_xrt_manifest *m = NULL;
    CHECK(tn_xrt_manifest_load(dir, &m, &e) == TN_OK && m && m->n_kernels == 0);
    CHECK(tn_xrt_manifest_verify(m, dir, &e) == TN_OK);
    tn_xrt_manifest_free(m);

    /* One image with its right digest, then a wrong one. */
    const char image[] = "not really an xclbin";
    write_file("gemv_q4_0.xclbin", image, sizeof image - 1);
    tn_sha256 c;
    uint8_t d[32];
    tn_sha256_init(&c);
    tn_sha256_update(&c, image, sizeof image - 1);
    tn_sha256_final(&c, d);
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    char json[512];
    snprintf(json, sizeof json,
             "{\"format\": 1, \"kernels\": [{\"image\": \"gemv_q4_0.xclbin\", \"op\": "
             "\"matmul\", \"type\": \"q4_0\", \"sha256\": \"%s\"}]}",
             hex);
    write_manifest(json);
    m = NULL;
    CHECK(tn_xrt_manifest_load(dir, &m, &e) == TN_OK && m && m->n_kernels == 1);
    if (m) {
        CHECK(!strcmp(m->kernels[0].image, "gemv_q4_0.xclbin"));
        CHECK(!strcmp(m->kernels[0].op, "matmul") && !strcmp(m->kernels[0].type, "q4_0"));
        CHECK(tn_xrt_manifest_verify(m, dir, &e) == TN_OK);
        m->kernels[0].sha256[5] ^= 1;
        CHECK(tn_xrt_manifest_verify(m, dir, &e) == TN_ERR_FORMAT);
        CHECKF(strstr(e.message, "does not match the manifest") && strstr(e.message, hex),
               "%s", e.message);
        /* A FIFO named like the image ($TERN_XCLBIN_DIR is the user's to
         * set): refused at once, not waited on (meson's timeout ends a
         * hang). */
        char image_path[800];
        snprintf(image_path, sizeof image_path, "%s/gemv_q4_0.xclbin", dir);
        remove(image_path);
        CHECK(mkfifo(image_path, 0600) == 0);
        CHECK(tn_xrt_manifest_verify(m, dir, &e) == TN_ERR_IO);
        CHECKF(strstr(e.message, "is not a regular file (a FIFO, a device or a directory)"), "%s",
               e.message);
        remove(image_path);
        write_file("gemv_q4_0.xclbin", image, sizeof image - 1);
        tn_xrt_manifest_free(m);
    }
    /* The open verifies before anything else would use the images. */
    hex[0] = hex[0] == '0' ? '1' : '0';
    snprintf(json, sizeof json,
             "{\"format\": 1, \"kernels\": [{\"image\": \"gemv_q4_0.xclbin\", \"op\": "
             "\"matmul\", \"type\": \"q4_0\", \"sha256\": \"%s\"}]}",
             hex);
    write_manifest(json);
    char root[600];
    snprintf(root, sizeof root, "%s/root", dir);
    snprintf(path, sizeof path, "%s/xrt.fake", root);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("version=2.18.0\ndevices=1\n", f);
        fclose(f);
    }
    CHECK(tn_xrt_open(root, dir, NULL, &e) == TN_ERR_FORMAT);
    CHECKF(strstr(e.message, "gemv_q4_0.xclbin: sha256") != NULL, "%s", e.message);
    /* A missing image. */
    write_manifest("{\"format\": 1, \"kernels\": [{\"image\": \"gone.xclbin\", \"op\": "
                   "\"matmul\", \"type\": \"q8_0\", \"sha256\": "
                   "\"00000000000000000000000000000000000000000000000000000000000000ff\"}]}");
    CHECK(tn_xrt_open(root, dir, NULL, &e) == TN_ERR_IO);

    /* Garbage and wrong fields: each refused with a message, never a crash. */
    static const char *const bad[] = {
        "",
        "\xff\xfe\x00garbage",
        "[]",
        "{\"format\": 2, \"kernels\": []}",
        "{\"format\": 1}",
        "{\"format\": 1, \"kernels\": {}}",
        "{\"format\": \"1\", \"kernels\": []}",
        "{\"format\": 1, \"kernels\": [1]}",
        "{\"format\": 1, \"kernels\": [{\"image\": \"../x\", \"op\": \"matmul\", \"type\": "
        "\"q4_0\", \"sha256\": \"" 
        "0000000000000000000000000000000000000000000000000000000000000000\"}]}",
        "{\"format\": 1, \"kernels\": [{\"image\": \"..\", \"op\": \"matmul\", \"type\": "
        "\"q4_0\", \"sha256\": \""
        "0000000000000000000000000000000000000000000000000000000000000000\"}]}",
        "{\"format\": 1, \"kernels\": [{\"image\": \"a\", \"op\": \"conv\", \"type\": "
        "\"q4_0\", \"sha256\": \""
        "0000000000000000000000000000000000000000000000000000000000000000\"}]}",
        "{\"format\": 1, \"kernels\": [{\"image\": \"a\", \"op\": \"matmul\", \"type\": "
        "\"q9_9\", \"sha256\": \""
        "0000000000000000000000000000000000000000000000000000000000000000\"}]}",
        "{\"format\": 1, \"kernels\": [{\"image\": \"a\", \"op\": \"matmul\", \"type\": "
        "\"q4_0\", \"sha256\": \"abc\"}]}",
        "{\"format\": 1, \"kernels\": [{\"image\": \"a\", \"op\": \"matmul\", \"type\": "
        "\"q4_0\", \"sha256\": \""
        "000000000000000000000000000000000000000000000000000000000000000g\"}]}",
        "{\"format\": 1, \"kernels\": [{\"image\": \"a\", \"op\": \"matmul\", \"type\": "
        "\"q4_0\"}]}",
        "{\"format\": 1, \"kernels\": [], }",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_file("manifest.json", bad[i], i == 1 ? 10 : strlen(bad[i]));
        int rc = load(&e);
        CHECKF(rc == TN_ERR_FORMAT && e.message[0], "bad manifest %zu: rc %d", i, rc);
        CHECKF(strstr(e.message, "manifest.json") != NULL, "bad manifest %zu: %s", i, e.message);
    }
    /* Random bytes. */
    uint64_t seed = 7;
    for (int t = 0; t < 200; t++) {
        char junk[96];
        size_t n = (size_t)(tn_test_rand(&seed) % sizeof junk);
        for (size_t i = 0; i < n; i++)
            junk[i] = (char)tn_test_rand(&seed);
        write_file("manifest.json", junk, n);
        CHECK(load(&e) == TN_ERR_FORMAT);
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/xrt-test.%d", tn_test_tmpdir(), (int)getpid());
    mkdir(dir, 0755);
    char root[600];
    snprintf(root, sizeof root, "%s/root", dir);
    mkdir(root, 0755);
    test_manifest();
    test_fake();
    test_machine();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return tn_test_finish("xrt");
}
