/* libFuzzer target for what the repack cache's housekeeping reads from the
 * files in its directory (engine/repack-cache.c: tern-cli cache list,
 * prune after every load that writes a file): the header of any file
 * named *.x16 (format docs/QUANT.md, "The repack cache"), whoever put it
 * there. (A load maps a file only after its whole header is found equal,
 * byte for byte, to the one this model would get: that path has its own
 * unit tests, test-repack-cache.)
 *
 * Input: the file's bytes, written as DIR/<32 hex>.x16 in a temporary
 * folder made once per process. When the input holds the magic, bytes 8
 * to 11 are set to the format version the reader takes (else nearly every
 * input stops there).
 *
 * Promises:
 *  - the listing reports that one file, with its size, and a model path
 *    that is "" or the header's name bytes (at 128 + 16 * n, L of them,
 *    read only when the file holds them), NUL-terminated, shorter than
 *    PATH_MAX;
 *  - a prune removes the file (its model is not there: stale) and
 *    counts its bytes.
 *
 * Seeds: tests/fuzz/corpus/repack-cache/.
 * Run:   build-fuzz/tests/fuzz/fuzz-repack-cache tests/fuzz/corpus/repack-cache
 */
#include "tern.h"
#include "tn-repack-cache.h"
#include "fuzz-promise.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];
static char path[160];

static void cleanup(void) {
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    snprintf(dir, sizeof dir, "%s", "/tmp/tern-fuzz-repack-XXXXXX");
    PROMISE(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/0123456789abcdef0123456789abcdef.x16", dir);
    atexit(cleanup);
    return 0;
}

typedef struct seen {
    int n;
    uint64_t bytes;
    char model[PATH_MAX + 1];
} seen;

static void on_entry(const tn_repack_cache_entry *e, void *user) {
    seen *s = user;
    s->n++;
    PROMISE(e->file && !strcmp(e->file, path));
    PROMISE(e->model != NULL);
    const size_t L = strlen(e->model);
    PROMISE(L < PATH_MAX);
    memcpy(s->model, e->model, L + 1);
    s->bytes = e->bytes;
}

static uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *file = malloc(size ? size : 1);
    PROMISE(file != NULL);
    if (size)
        memcpy(file, data, size);
    if (size >= 12 && !memcmp(file, TN_REPACK_CACHE_MAGIC, 8)) {
        const uint32_t v = TN_REPACK_CACHE_VERSION;
        memcpy(file + 8, &v, 4);
    }
    FILE *f = fopen(path, "wb");
    PROMISE(f != NULL);
    PROMISE(size == 0 || fwrite(file, 1, size, f) == size);
    PROMISE(fclose(f) == 0);

    seen s = {0};
    PROMISE(tn_repack_cache_list(dir, on_entry, &s) == TN_OK);
    PROMISE(s.n == 1 && s.bytes == size);
    if (s.model[0]) {
        /* Only from a header that holds it. */
        PROMISE(size >= TN_REPACK_CACHE_FIXED && !memcmp(file, TN_REPACK_CACHE_MAGIC, 8));
        const uint64_t n = rd32(file + 12), L = rd32(file + 112);
        const uint64_t at = TN_REPACK_CACHE_FIXED + 16 * n;
        PROMISE(L > 0 && L < PATH_MAX && at + L <= size);
        const size_t len = strlen(s.model);
        PROMISE(len <= L && !memcmp(s.model, file + at, len));
    }

    uint64_t freed = 0;
    PROMISE(tn_repack_cache_prune_dir(dir, 0, NULL, &freed) == TN_OK);
    PROMISE(freed == size && access(path, F_OK) != 0);
    free(file);
    return 0;
}
