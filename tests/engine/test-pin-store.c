/* Pin snapshots on disk: SHA-256 and the payload checksum, the key, the
 * save/load round trip (the restored KV continues bit for bit like the
 * original), every kind of damage (flipped bytes anywhere, truncation,
 * trailing bytes, a file renamed to another key, another model) rejected
 * with the file removed and the KV untouched, atomic writes, the size bound
 * and least-recently-used eviction. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cpu/tn-cpu.h"
#include "tn-internal.h"
#include "tn-session.h"
#include "tn-test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char *hex32(const uint8_t b[32], char out[65]) {
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    return out;
}

static void sha_vec(const void *data, size_t n, const char *want) {
    uint8_t d[32];
    char hex[65];
    tn_sha256 c;
    tn_sha256_init(&c);
    tn_sha256_update(&c, data, n);
    tn_sha256_final(&c, d);
    CHECKF(!strcmp(hex32(d, hex), want), "sha256 of %zu bytes: %s, want %s", n, hex, want);
    /* The same fed in uneven pieces. */
    tn_sha256_init(&c);
    const uint8_t *p = data;
    size_t off = 0, step = 1;
    while (off < n) {
        size_t m = n - off < step ? n - off : step;
        tn_sha256_update(&c, p + off, m);
        off += m;
        step = step * 3 % 97 + 1;
    }
    tn_sha256_final(&c, d);
    CHECKF(!strcmp(hex32(d, hex), want), "sha256 in pieces of %zu bytes: %s", n, hex);
}

static void sha_of(const uint8_t *p, size_t n, size_t piece, uint8_t d[32]) {
    tn_sha256 c;
    tn_sha256_init(&c);
    for (size_t off = 0; off < n; off += piece)
        tn_sha256_update(&c, p + off, n - off < piece ? n - off : piece);
    tn_sha256_final(&c, d);
}

/* The SHA extensions' compression (engine/cpu/sha256-shani.c) against the
 * scalar reference: every length up to a few blocks past 1 KiB, fed whole
 * and in pieces that split blocks anywhere, from unaligned starts, and a
 * 5 MB run of whole blocks. */
static void test_sha_paths(void) {
    const size_t big = 5u << 20;
    uint8_t *buf = malloc(big + 64);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < big + 64; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        buf[i] = (uint8_t)(s >> 56);
    }
    int differ = 0, tried = 0;
    for (size_t n = 0; n <= 1100; n += n < 200 ? 1 : 7)
        for (size_t start = 0; start < 3; start++) {
            const size_t piece = n % 5 == 0 ? 1 + n / 3 : n + 1;
            uint8_t want[32], got[32];
            tn_sha256_force_scalar(true);
            sha_of(buf + start, n, piece, want);
            tn_sha256_force_scalar(false);
            sha_of(buf + start, n, piece, got);
            differ += memcmp(want, got, 32) != 0;
            tried++;
        }
    for (size_t start = 0; start < 2; start++) {
        uint8_t want[32], got[32];
        tn_sha256_force_scalar(true);
        sha_of(buf + start, big, big, want);
        tn_sha256_force_scalar(false);
        sha_of(buf + start, big, 1u << 20, got);
        differ += memcmp(want, got, 32) != 0;
        tried++;
    }
    CHECKF(differ == 0, "sha256: %d of %d inputs hash differently with the SHA extensions", differ,
           tried);
    fprintf(stderr, "pin-store: sha256 with the SHA extensions %s (%d inputs compared)\n",
            tn_cpu_has_sha() ? "compared with the scalar reference" : "absent: scalar only", tried);
    free(buf);
}

static void test_hashes(void) {
    test_sha_paths();
    /* The vectors through the scalar reference too. */
    tn_sha256_force_scalar(true);
    sha_vec("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha_vec("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    tn_sha256_force_scalar(false);
    sha_vec("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha_vec("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *s448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha_vec(s448, strlen(s448),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *mill = malloc(1000000);
    memset(mill, 'a', 1000000);
    sha_vec(mill, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(mill);
    uint8_t buf[1000];
    for (int i = 0; i < 1000; i++)
        buf[i] = (uint8_t)(i * 7 % 251);
    sha_vec(buf, sizeof buf, "59425e4412e296fc74736673ce067027f384203f59c0d2c3e6be7b13347b3ffc");

    /* The checksum sees every single flipped bit, and every truncation. */
    const uint64_t base = tn_checksum64(buf, sizeof buf, 7);
    int missed = 0;
    for (size_t bit = 0; bit < sizeof buf * 8; bit++) {
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        missed += tn_checksum64(buf, sizeof buf, 7) == base;
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    CHECKF(missed == 0, "%d single-bit flips not detected", missed);
    missed = 0;
    for (size_t n = 0; n < sizeof buf; n++)
        missed += tn_checksum64(buf, n, 7) == base;
    CHECKF(missed == 0, "%d truncations not detected", missed);
    CHECK(tn_checksum64(buf, sizeof buf, 8) != base);
    CHECK(tn_checksum64(buf, sizeof buf, 7) == base);

    /* Pin files and repack cache files on disk hold these sums: the
     * checksum is a file format. Values of the code that wrote them
     * (before tn_checksum64_pieces), every tail length's kind. */
    static const struct {
        size_t n;
        uint64_t sum;
    } known[] = {{0, 0xa87b7eae2ac55564ull},   {1, 0x018fefe6886ed769ull},
                 {7, 0x37ed6e7c3cbcf4eeull},   {8, 0x3816b50a106c7bfeull},
                 {31, 0xc2780e21802a8bd4ull},  {32, 0x200883add2a63c02ull},
                 {33, 0x8504e8e1418efbe3ull},  {63, 0xcc0ed2aa405f0bc7ull},
                 {64, 0x4133664fb9c5401bull},  {100, 0x5025c813049a1a66ull},
                 {999, 0x510c0a511aadde42ull}, {1000, 0xdba73aca638e2b55ull}};
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        CHECKF(tn_checksum64(buf, known[k].n, 7) == known[k].sum,
               "tn_checksum64 of %zu bytes changed: files on disk would stop matching",
               known[k].n);
}

typedef struct piece_count {
    size_t calls, bytes, largest;
} piece_count;

static void count_piece(void *user, size_t bytes) {
    piece_count *c = user;
    c->calls++;
    c->bytes += bytes;
    if (bytes > c->largest)
        c->largest = bytes;
}

/* The sum in pieces (a load's progress and cancel points) is the same sum,
 * wherever the pieces end. */
static void test_checksum_pieces(void) {
    uint8_t buf[1000];
    for (int i = 0; i < 1000; i++)
        buf[i] = (uint8_t)(i * 13 % 253);
    int differ = 0, miscounted = 0;
    const size_t pieces[] = {0, 1, 31, 32, 33, 64, 100, 333, 999, 1000, 4096};
    for (size_t n = 0; n <= sizeof buf; n++)
        for (size_t k = 0; k < sizeof pieces / sizeof pieces[0]; k++) {
            piece_count c = {0};
            differ += tn_checksum64_pieces(buf, n, 3, pieces[k], count_piece, &c) !=
                      tn_checksum64(buf, n, 3);
            /* Every whole block is told once, in pieces no larger than asked. */
            const size_t step = pieces[k] < 32 ? 32 : pieces[k] / 32 * 32;
            miscounted += c.bytes != n / 32 * 32 || c.largest > step ||
                          c.calls != (n / 32 * 32 + step - 1) / step;
        }
    CHECKF(differ == 0, "%d sums in pieces differ from the whole sum", differ);
    CHECKF(miscounted == 0, "%d piece counts wrong", miscounted);
    CHECK(tn_checksum64_pieces(buf, sizeof buf, 3, 64, NULL, NULL) ==
          tn_checksum64(buf, sizeof buf, 3));
}

/* --------------------------------------------------------------- models */

static char *make_model(const char *name, const char *arch, uint64_t seed) {
    static char paths[8][4096];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, 4096, "%s/%s.gguf", tn_test_tmpdir(), name);
    tn_mkmodel_params p = tn_test_tiny_model(arch, seed);
    p.n_ctx = 512;
    tn_error err = {0};
    int rc = tn_mkmodel(&p, path, &err);
    CHECKF(rc == TN_OK, "mkmodel: %s", err.message);
    return rc == TN_OK ? path : NULL;
}

static tn_model *load(const char *path) {
    tn_model *m = NULL;
    tn_error err = {0};
    tn_model_params mp = tn_model_default_params();
    int rc = tn_model_load(path, mp, &m, &err);
    CHECKF(rc == TN_OK, "load %s: %s", path, err.message);
    return m;
}

static tn_ctx *new_ctx(const tn_model *m) {
    tn_ctx *c = NULL;
    tn_error err = {0};
    int rc = tn_ctx_new(m, 128, 2, &c, &err);
    CHECKF(rc == TN_OK, "ctx: %s", err.message);
    return c;
}

static void prefill(tn_ctx *c, const int32_t *t, int32_t n) {
    tn_error err = {0};
    int rc = tn_ctx_decode(c, t, n, TN_LOGITS_NONE, NULL, &err);
    CHECKF(rc == TN_OK, "decode: %s", err.message);
}

static int count_files(const char *dir, const char *suffix_or_part) {
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strstr(de->d_name, suffix_or_part))
            n++;
    closedir(d);
    return n;
}

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz + 1);
    *n = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

static void write_file(const char *path, const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK(fwrite(b, 1, n, f) == n);
    fclose(f);
}

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---------------------------------------------------------- round trip */

#define NTOK 40

static void test_round_trip(const tn_model *m, const tn_model *other, const char *dir) {
    int32_t tokens[NTOK];
    for (int i = 0; i < NTOK; i++)
        tokens[i] = 5 + (i * 37) % (tn_model_n_vocab(m) - 5);
    tn_pin_key key, key2, key_other;
    CHECK(tn_pin_key_compute(m, tokens, NTOK, &key, NULL) == TN_OK);
    CHECK(tn_pin_key_compute(m, tokens, NTOK, &key2, NULL) == TN_OK);
    CHECK(memcmp(key.b, key2.b, 32) == 0);
    CHECK(tn_pin_key_compute(m, tokens, NTOK - 1, &key2, NULL) == TN_OK);
    CHECK(memcmp(key.b, key2.b, 32) != 0);
    tokens[3]++;
    CHECK(tn_pin_key_compute(m, tokens, NTOK, &key2, NULL) == TN_OK);
    tokens[3]--;
    CHECK(memcmp(key.b, key2.b, 32) != 0);
    CHECK(tn_pin_key_compute(other, tokens, NTOK, &key_other, NULL) == TN_OK);
    CHECK(memcmp(key.b, key_other.b, 32) != 0);

    tn_ctx *a = new_ctx(m), *b = new_ctx(m);
    if (!a || !b)
        goto out;
    prefill(a, tokens, NTOK);
    tn_error err = {0};
    CHECK(tn_pin_store_load(dir, &key, b, tokens, NTOK, &err) == TN_ERR_NOT_FOUND);
    int rc = tn_pin_store_save(dir, &key, a, tokens, NTOK, 0, &err);
    CHECKF(rc == TN_OK, "save: %s", err.message);
    char *path = tn_pin_path(dir, &key);
    CHECK(file_exists(path));
    CHECKF(count_files(dir, ".tmp-") == 0, "a temporary file was left behind");
    size_t n_file = 0;
    uint8_t *orig = read_file(path, &n_file);
    CHECK(n_file == TN_PIN_HEADER_BYTES + NTOK * 4 + tn_ctx_kv_state_bytes(a, NTOK));

    rc = tn_pin_store_load(dir, &key, b, tokens, NTOK, &err);
    CHECKF(rc == TN_OK, "load: %s", err.message);
    CHECK(tn_ctx_kv_len(b) == NTOK);
    /* The restored context continues exactly like the original. */
    const int32_t nv = tn_model_n_vocab(m);
    float *la = malloc((size_t)nv * sizeof(float)), *lb = malloc((size_t)nv * sizeof(float));
    int32_t next[3] = {7, 11, 13};
    CHECK(tn_ctx_decode(a, next, 3, TN_LOGITS_LAST, la, NULL) == TN_OK);
    CHECK(tn_ctx_decode(b, next, 3, TN_LOGITS_LAST, lb, NULL) == TN_OK);
    CHECK(memcmp(la, lb, (size_t)nv * sizeof(float)) == 0);
    free(la);
    free(lb);

    /* A wrong token list under the right key (cannot happen by name, but
     * the header check must still catch it) and a wrong length. */
    int32_t wrong[NTOK];
    memcpy(wrong, tokens, sizeof wrong);
    wrong[NTOK - 1] ^= 1;
    tn_ctx_kv_truncate(b, 5);
    rc = tn_pin_store_load(dir, &key, b, wrong, NTOK, &err);
    CHECK(rc == TN_ERR_FORMAT);
    CHECK(tn_ctx_kv_len(b) == 5);
    CHECK(!file_exists(path)); /* rejected snapshots are removed */

    /* Damage: a flipped byte in each region, truncation, trailing bytes. */
    struct {
        const char *what;
        size_t offset; /* byte to flip, or SIZE_MAX */
        long resize;   /* bytes to add (or remove, negative) */
    } cases[] = {
        {"magic", 0, 0},
        {"version", 8, 0},
        {"key", 20, 0},
        {"n_tokens", 48, 0},
        {"dims", 56, 0},
        {"header checksum", 121, 0},
        {"payload checksum", 82, 0},
        {"reserved", 110, 0},
        {"tokens", TN_PIN_HEADER_BYTES + 9, 0},
        {"kv start", TN_PIN_HEADER_BYTES + NTOK * 4 + 1, 0},
        {"kv end", n_file - 1, 0},
        {"kv middle", n_file / 2 + 3, 0},
        {"truncated by 1", SIZE_MAX, -1},
        {"truncated to the header", SIZE_MAX, -(long)(n_file - TN_PIN_HEADER_BYTES)},
        {"truncated inside the header", SIZE_MAX, -(long)(n_file - 50)},
        {"empty", SIZE_MAX, -(long)n_file},
        {"trailing byte", SIZE_MAX, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = (size_t)((long)n_file + cases[i].resize);
        uint8_t *bad = calloc(n + 1, 1);
        memcpy(bad, orig, n < n_file ? n : n_file);
        if (cases[i].offset != SIZE_MAX)
            bad[cases[i].offset] ^= 0x40;
        write_file(path, bad, n);
        free(bad);
        tn_ctx_kv_truncate(b, 5);
        tn_error e = {0};
        rc = tn_pin_store_load(dir, &key, b, tokens, NTOK, &e);
        CHECKF(rc == TN_ERR_FORMAT, "%s: load gave %d (%s)", cases[i].what, rc, e.message);
        CHECKF(strstr(e.message, "ignored") != NULL, "%s: message '%s'", cases[i].what,
               e.message);
        CHECKF(tn_ctx_kv_len(b) == 5, "%s: the KV changed", cases[i].what);
        CHECKF(!file_exists(path), "%s: the damaged file was kept", cases[i].what);
    }
    /* Not a regular file: a FIFO must not block the load (open() on it waits
     * for a writer for ever unless O_NONBLOCK; SIGALRM ends a hang here),
     * and a directory is refused too. */
    unlink(path);
    if (mkfifo(path, 0600) == 0) {
        alarm(20);
        tn_ctx_kv_truncate(b, 5);
        tn_error e = {0};
        rc = tn_pin_store_load(dir, &key, b, tokens, NTOK, &e);
        alarm(0);
        CHECKF(rc == TN_ERR_FORMAT && strstr(e.message, "regular"), "a FIFO: %d (%s)", rc,
               e.message);
        CHECK(tn_ctx_kv_len(b) == 5);
        CHECK(!file_exists(path));
    }
    unlink(path);
    if (mkdir(path, 0700) == 0) {
        tn_error e = {0};
        rc = tn_pin_store_load(dir, &key, b, tokens, NTOK, &e);
        CHECKF(rc != TN_OK, "a directory: %d (%s)", rc, e.message);
        rmdir(path);
    }
    /* A 1 GiB file (sparse) that is not a snapshot: refused from its header,
     * and removed. */
    int big = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (big >= 0 && write(big, "not a pin", 9) == 9 && ftruncate(big, 1L << 30) == 0) {
        close(big);
        tn_error e = {0};
        rc = tn_pin_store_load(dir, &key, b, tokens, NTOK, &e);
        CHECKF(rc == TN_ERR_FORMAT && strstr(e.message, "not a Tern pin snapshot"),
               "a 1 GiB non-snapshot: %d (%s)", rc, e.message);
        CHECK(!file_exists(path));
    } else if (big >= 0) {
        close(big);
    }

    /* Undamaged again: loads. */
    write_file(path, orig, n_file);
    rc = tn_pin_store_load(dir, &key, b, tokens, NTOK, &err);
    CHECKF(rc == TN_OK, "reload: %s", err.message);

    /* A snapshot of this model put where another model's pin would be. */
    char *other_path = tn_pin_path(dir, &key_other);
    write_file(other_path, orig, n_file);
    tn_ctx *c = new_ctx(other);
    if (c) {
        rc = tn_pin_store_load(dir, &key_other, c, tokens, NTOK, &err);
        CHECKF(rc == TN_ERR_FORMAT, "another model's snapshot: %d", rc);
        CHECK(tn_ctx_kv_len(c) == 0);
        CHECK(!file_exists(other_path));
    }
    tn_ctx_free(c);
    free(other_path);

    /* Bound smaller than the snapshot: refused, nothing written. */
    unlink(path);
    rc = tn_pin_store_save(dir, &key, a, tokens, NTOK, 1000, &err);
    CHECK(rc == TN_ERR_OVERFLOW);
    CHECK(!file_exists(path));
    CHECK(count_files(dir, ".tmp-") == 0);

    /* An unwritable place: a clear error, no crash. */
    char bad_dir[4200];
    snprintf(bad_dir, sizeof bad_dir, "%s/pinfile/sub", tn_test_tmpdir());
    char blocker[4200];
    snprintf(blocker, sizeof blocker, "%s/pinfile", tn_test_tmpdir());
    write_file(blocker, (const uint8_t *)"x", 1);
    rc = tn_pin_store_save(bad_dir, &key, a, tokens, NTOK, 0, &err);
    CHECK(rc == TN_ERR_IO);
    CHECKF(strstr(err.message, "pinfile") != NULL, "message names the place: %s", err.message);

    /* A snapshot past the file size limit (ulimit -f; SIGXFSZ ignored, as
     * tern-cli does): the cause in the words every file Tern writes uses,
     * not strerror's "File too large". */
    struct rlimit fsize;
    if (getrlimit(RLIMIT_FSIZE, &fsize) == 0) {
        void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
        struct rlimit small = {.rlim_cur = 1, .rlim_max = fsize.rlim_max};
        unlink(path);
        tn_error_clear(&err);
        rc = setrlimit(RLIMIT_FSIZE, &small) == 0
                 ? tn_pin_store_save(dir, &key, a, tokens, NTOK, 0, &err)
                 : TN_ERR_INVALID;
        setrlimit(RLIMIT_FSIZE, &fsize);
        signal(SIGXFSZ, was);
        CHECKF(rc == TN_ERR_IO, "past ulimit -f: %d", rc);
        CHECKF(strstr(err.message, ": cannot write: the file is too large for this file system") !=
                   NULL,
               "past ulimit -f: %s", err.message);
        CHECK(!file_exists(path));
        CHECK(count_files(dir, ".tmp-") == 0);
    }

    /* A full disk and a used-up quota (tn_test_fail_writes: neither can be
     * made without root): the cause in tn_write_cause's words and in the
     * message's format, where a translation covers it. */
    const int full[] = {ENOSPC, EDQUOT};
    for (size_t i = 0; i < sizeof full / sizeof full[0]; i++) {
        unlink(path);
        tn_error_clear(&err);
        tn_test_fail_writes(".pin", full[i]);
        rc = tn_pin_store_save(dir, &key, a, tokens, NTOK, 0, &err);
        tn_test_fail_writes(NULL, 0);
        const char *cause = tn_write_cause(full[i]);
        CHECKF(rc == TN_ERR_IO && strstr(err.message, ": cannot write: ") &&
                   strstr(err.message, cause),
               "errno %d: %d: %s", full[i], rc, err.message);
        CHECKF(err.format && strstr(err.format, cause), "errno %d: the cause is not in '%s'",
               full[i], err.format ? err.format : "(none)");
        CHECK(!file_exists(path));
        CHECK(count_files(dir, ".tmp-") == 0);
    }

    free(orig);
    free(path);
out:
    tn_ctx_free(a);
    tn_ctx_free(b);
}

/* -------------------------------------------------- forged KV values */

/* A snapshot whose checksums are right (its writer computed them: a buggy
 * program, or not Tern) but whose KV rows hold values no prefill makes:
 * infinities, NaNs, finite values too large for attention's dot products
 * (a decode after loading one gave non-finite logits; found by fuzz-pin).
 * Refused like damage, the KV untouched; the largest value taken still
 * loads and decodes to finite logits. */
static void forge(uint8_t *file, size_t n_file, size_t at, uint16_t v) {
    memcpy(file + at, &v, 2);
    uint32_t n;
    memcpy(&n, file + 48, 4);
    const uint8_t *tok = file + TN_PIN_HEADER_BYTES, *kv = tok + (size_t)n * 4;
    const uint64_t h = tn_checksum64(tok, (size_t)n * 4, 1);
    const uint64_t sum = tn_checksum64(kv, n_file - (size_t)(kv - file), h);
    memcpy(file + 80, &sum, 8);
    const uint64_t hsum = tn_checksum64(file, 120, 0);
    memcpy(file + 120, &hsum, 8);
}

static void test_forged_values(const tn_model *m, const char *dir) {
    int32_t tokens[NTOK];
    for (int i = 0; i < NTOK; i++)
        tokens[i] = 3 + (i * 11) % 50;
    tn_pin_key key;
    CHECK(tn_pin_key_compute(m, tokens, NTOK, &key, NULL) == TN_OK);
    tn_ctx *a = new_ctx(m), *b = new_ctx(m);
    char *path = tn_pin_path(dir, &key);
    const int32_t nv = tn_model_n_vocab(m);
    float *logits = malloc((size_t)nv * sizeof *logits);
    if (!a || !b || !path || !logits)
        goto out;
    prefill(a, tokens, NTOK);
    prefill(b, tokens, 5);
    tn_error err = {0};
    CHECKF(tn_pin_store_save(dir, &key, a, tokens, NTOK, 0, &err) == TN_OK, "save: %s",
           err.message);
    size_t n_file = 0;
    uint8_t *orig = read_file(path, &n_file);
    const uint64_t rows5 = tn_ctx_kv_state_bytes(b, 5);
    uint8_t *want = malloc(rows5), *got = malloc(rows5);
    CHECK(tn_ctx_kv_state_save(b, 5, want, rows5, NULL) == TN_OK);
    const size_t kv0 = TN_PIN_HEADER_BYTES + NTOK * 4;
    struct {
        const char *what;
        uint16_t v;
        bool ok;
    } cases[] = {
        {"+inf", 0x7F80, false},         {"-inf", 0xFF80, false},
        {"NaN", 0x7FC1, false},          {"4e36", 0x7C3E, false},
        {"-1e15", 0xD963, false},        {"65536", 0x4780, false},
        {"-65536", 0xC780, false},       {"65280 (largest taken)", 0x477F, true},
        {"-65280", 0xC77F, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* In the first and in the last row of values (V is the second half). */
        for (int where = 0; where < 2; where++) {
            uint8_t *bad = malloc(n_file);
            memcpy(bad, orig, n_file);
            forge(bad, n_file, where == 0 ? kv0 + 6 : n_file - 2, cases[i].v);
            write_file(path, bad, n_file);
            free(bad);
            tn_ctx_kv_truncate(b, 5);
            tn_error e = {0};
            const int rc = tn_pin_store_load(dir, &key, b, tokens, NTOK, &e);
            if (cases[i].ok) {
                CHECKF(rc == TN_OK, "%s: load gave %d (%s)", cases[i].what, rc, e.message);
                const int32_t next = 7;
                CHECK(tn_ctx_decode(b, &next, 1, TN_LOGITS_LAST, logits, NULL) == TN_OK);
                int bad_logits = 0;
                for (int32_t k = 0; k < nv; k++)
                    bad_logits += !isfinite(logits[k]);
                CHECKF(bad_logits == 0, "%s: %d non-finite logits", cases[i].what, bad_logits);
                unlink(path);
                continue;
            }
            CHECKF(rc == TN_ERR_FORMAT, "%s at %d: load gave %d (%s)", cases[i].what, where, rc,
                   e.message);
            CHECKF(strstr(e.message, "out of range") != NULL, "%s: message '%s'", cases[i].what,
                   e.message);
            CHECKF(tn_ctx_kv_len(b) == 5, "%s: the KV changed", cases[i].what);
            CHECK(tn_ctx_kv_state_save(b, 5, got, rows5, NULL) == TN_OK);
            CHECKF(memcmp(want, got, rows5) == 0, "%s: the rows changed", cases[i].what);
            CHECKF(!file_exists(path), "%s: the forged file was kept", cases[i].what);
        }
    }
    /* Nor is such a snapshot written: a context whose rows hold such a
     * value (put there through the KV state) saves nothing, where it wrote
     * a file that every later load refused. */
    {
        const uint64_t rows = tn_ctx_kv_state_bytes(a, NTOK);
        uint8_t *state = malloc(rows);
        CHECK(state && tn_ctx_kv_state_save(a, NTOK, state, rows, NULL) == TN_OK);
        const uint16_t huge = 0x7C3E; /* 4e36 */
        memcpy(state + rows - 2, &huge, 2);
        CHECK(tn_ctx_kv_state_load(b, NTOK, state, rows, NULL) == TN_OK);
        unlink(path);
        tn_error e = {0};
        const int rc = tn_pin_store_save(dir, &key, b, tokens, NTOK, 0, &e);
        CHECKF(rc == TN_ERR_INVALID && strstr(e.message, "not saved") != NULL,
               "a context with 4e36 in its rows: save gave %d (%s)", rc, e.message);
        CHECKF(!file_exists(path), "a snapshot the load refuses was written");
        free(state);
    }
    free(want);
    free(got);
    free(orig);
out:
    free(logits);
    free(path);
    tn_ctx_free(a);
    tn_ctx_free(b);
}

/* ------------------------------------------------- the header's fields */

/* A header whose checksum is right but which this build cannot read: a
 * newer format version (refused with a message that names it, never read
 * as this one), and reserved bytes that are not zero (a format this build
 * does not know). Both loaded, or were refused as "another version",
 * before the load compared them. A format version far beyond any Tern's
 * is damage, not a newer Tern (it was called one). Another engine version
 * (a snapshot copied over this one's name) is named with this one: it was
 * "its key does not match its name". The KV is untouched and the file goes. */
static void test_header_fields(const tn_model *m, const char *dir) {
    int32_t tokens[NTOK];
    for (int i = 0; i < NTOK; i++)
        tokens[i] = 4 + (i * 7) % 40;
    tn_pin_key key;
    CHECK(tn_pin_key_compute(m, tokens, NTOK, &key, NULL) == TN_OK);
    tn_ctx *a = new_ctx(m), *b = new_ctx(m);
    char *path = tn_pin_path(dir, &key);
    if (!a || !b || !path)
        goto out;
    prefill(a, tokens, NTOK);
    tn_error err = {0};
    CHECKF(tn_pin_store_save(dir, &key, a, tokens, NTOK, 0, &err) == TN_OK, "save: %s",
           err.message);
    size_t n_file = 0;
    uint8_t *orig = read_file(path, &n_file);
    if (!orig || n_file < TN_PIN_HEADER_BYTES)
        goto out;
    const uint32_t newer = TN_PIN_FORMAT_VERSION + 1, newest = TN_PIN_FORMAT_VERSION + 100,
                   damaged = TN_PIN_FORMAT_VERSION + 101, much_damaged = 0x10000;
    char newer_text[16], newest_text[16], damaged_text[16], much_damaged_text[16];
    snprintf(newer_text, sizeof newer_text, "%u", newer);
    snprintf(newest_text, sizeof newest_text, "%u", newest);
    snprintf(damaged_text, sizeof damaged_text, "%u", damaged);
    snprintf(much_damaged_text, sizeof much_damaged_text, "%u", much_damaged);
    const char *this_tern = "this is Tern " TN_VERSION_STRING ")";
    struct {
        const char *what;
        size_t at;
        uint32_t v;
        const char *says, *says_too;
        const char *engine; /* written over bytes 88..103 instead of v */
    } cases[] = {
        {"a newer format version", 8, newer, "newer", newer_text, NULL},
        {"the newest plausible format version", 8, newest, "newer", newest_text, NULL},
        {"a format version beyond any Tern's", 8, damaged, "damaged header", damaged_text, NULL},
        {"a much damaged format version", 8, much_damaged, "damaged header", much_damaged_text,
         NULL},
        {"an older format version", 8, 0, "another version", NULL, NULL},
        {"the first reserved byte", 104, 1, "reserved", NULL, NULL},
        {"the last reserved byte", 119, 0x80, "reserved", NULL, NULL},
        {"a reserved word", 112, 0xFFFFFFFFu, "reserved", NULL, NULL},
        {"another engine version", 88, 0, "made by Tern 9.9.9,", this_tern, "9.9.9"},
        {"an engine version of 15 characters", 88, 0, "made by Tern 0.1.0-123456789,",
         this_tern, "0.1.0-1234567890"},
        {"no engine version", 88, 0, "made by Tern ?,", this_tern, ""},
        {"an engine version with control bytes", 88, 0, "made by Tern ?[31m1?,", this_tern,
         "\x1b[31m1\x7f"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *bad = malloc(n_file);
        memcpy(bad, orig, n_file);
        if (cases[i].engine) {
            /* As the writer lays it: NUL-padded, the 16th byte always NUL. */
            memset(bad + 88, 0, 16);
            memcpy(bad + 88, cases[i].engine, strnlen(cases[i].engine, 15));
        } else if (cases[i].at == 119)
            bad[119] = (uint8_t)cases[i].v;
        else
            memcpy(bad + cases[i].at, &cases[i].v, 4);
        const uint64_t hsum = tn_checksum64(bad, 120, 0);
        memcpy(bad + 120, &hsum, 8);
        write_file(path, bad, n_file);
        free(bad);
        tn_ctx_kv_truncate(b, 0);
        prefill(b, tokens, 5);
        tn_error e = {0};
        const int rc = tn_pin_store_load(dir, &key, b, tokens, NTOK, &e);
        CHECKF(rc == TN_ERR_FORMAT && strstr(e.message, "ignored") &&
                   strstr(e.message, cases[i].says) &&
                   (!cases[i].says_too || strstr(e.message, cases[i].says_too)),
               "%s: load gave %d (%s)", cases[i].what, rc, e.message);
        CHECKF(tn_ctx_kv_len(b) == 5, "%s: the KV changed", cases[i].what);
        CHECKF(!file_exists(path), "%s: the file was kept", cases[i].what);
    }
    /* The header as written loads. */
    write_file(path, orig, n_file);
    CHECKF(tn_pin_store_load(dir, &key, b, tokens, NTOK, &err) == TN_OK, "reload: %s",
           err.message);
    unlink(path);
    free(orig);
out:
    free(path);
    tn_ctx_free(a);
    tn_ctx_free(b);
}

/* ------------------------------------------------------------ eviction */

/* A snapshot cut short in place while it is read (by another program:
 * Tern renames whole files into place), in the checks and in the copy of
 * its rows: TN_ERR_IO "pin snapshot ignored (it shrank ...)" naming the
 * file instead of a SIGBUS. Cut in the checks, the KV is untouched; cut in
 * the copy, it is emptied (its rows were partly overwritten), so that the
 * caller recomputes the pin. A whole snapshot loads after. */
static struct {
    const char *pass, *path;
    int fired;
} pin_cut;

static void pin_cut_hook(const char *pass, void *user) {
    (void)user;
    if (pin_cut.fired || !pin_cut.pass || strcmp(pass, pin_cut.pass))
        return;
    pin_cut.fired = 1;
    if (truncate(pin_cut.path, TN_PIN_HEADER_BYTES) != 0)
        perror("truncate");
}

static void test_shrink(const tn_model *m, const char *dir) {
    int32_t tokens[NTOK];
    for (int i = 0; i < NTOK; i++)
        tokens[i] = 9 + (i * 13) % (tn_model_n_vocab(m) - 9);
    tn_pin_key key;
    CHECK(tn_pin_key_compute(m, tokens, NTOK, &key, NULL) == TN_OK);
    char *path = tn_pin_path(dir, &key);
    tn_ctx *a = new_ctx(m), *b = new_ctx(m);
    if (!a || !b || !path)
        goto out;
    prefill(a, tokens, NTOK);
    CHECKF(tn_ctx_kv_state_bytes(a, NTOK) > 8192, "the rows fit the first page: %llu bytes",
           (unsigned long long)tn_ctx_kv_state_bytes(a, NTOK));
    tn_test_read_guard_hook(pin_cut_hook, NULL);
    const char *passes[] = {"pin-check", "pin-copy"};
    for (int i = 0; i < 2; i++) {
        tn_error err = {0};
        unlink(path);
        CHECKF(tn_pin_store_save(dir, &key, a, tokens, NTOK, 0, &err) == TN_OK, "save: %s",
               err.message);
        tn_ctx_kv_truncate(b, 0);
        prefill(b, tokens, 5);
        pin_cut.pass = passes[i];
        pin_cut.path = path;
        pin_cut.fired = 0;
        int rc = tn_pin_store_load(dir, &key, b, tokens, NTOK, &err);
        pin_cut.pass = NULL;
        CHECKF(pin_cut.fired, "%s: the pass never ran", passes[i]);
        CHECKF(rc == TN_ERR_IO && strstr(err.message, "shrank while it was being read") &&
                   strstr(err.message, path),
               "%s: gave %d: %s", passes[i], rc, err.message);
        CHECKF(tn_ctx_kv_len(b) == (i == 0 ? 5 : 0), "%s: %d rows left", passes[i],
               tn_ctx_kv_len(b));
    }
    tn_test_read_guard_hook(NULL, NULL);
    /* The cut file is left to whoever rewrites it; a whole one loads. */
    tn_error err = {0};
    unlink(path);
    CHECK(tn_pin_store_save(dir, &key, a, tokens, NTOK, 0, &err) == TN_OK);
    CHECKF(tn_pin_store_load(dir, &key, b, tokens, NTOK, &err) == TN_OK &&
               tn_ctx_kv_len(b) == NTOK,
           "a whole snapshot after the faults: %s", err.message);
out:
    tn_ctx_free(a);
    tn_ctx_free(b);
    free(path);
}

static void set_age(const char *path, time_t t) {
    struct timespec ts[2] = {{t, 0}, {t, 0}};
    utimensat(AT_FDCWD, path, ts, 0);
}

static void test_eviction(const tn_model *m, const char *dir) {
    tn_ctx *a = new_ctx(m);
    if (!a)
        return;
    int32_t tokens[NTOK];
    for (int i = 0; i < NTOK; i++)
        tokens[i] = 9 + i;
    prefill(a, tokens, NTOK);
    const uint64_t one = TN_PIN_HEADER_BYTES + 16 * 4 + tn_ctx_kv_state_bytes(a, 16);
    char *paths[6];
    tn_pin_key keys[6];
    time_t base = time(NULL) - 10000;
    /* Six snapshots of 16 tokens each (different prefixes), aged 0..5. */
    for (int i = 0; i < 6; i++) {
        int32_t t[16];
        memcpy(t, tokens, sizeof t);
        t[0] = 100 + i; /* only the key matters here */
        tn_pin_key_compute(m, t, 16, &keys[i], NULL);
        tn_error err = {0};
        int rc = tn_pin_store_save(dir, &keys[i], a, tokens, 16, 100 * one, &err);
        CHECKF(rc == TN_OK, "save %d: %s", i, err.message);
        paths[i] = tn_pin_path(dir, &keys[i]);
        set_age(paths[i], base + i * 100);
    }
    CHECK(count_files(dir, ".pin") == 6);
    /* Files of the user's in a folder they named: a "*.pin" of theirs and
     * a snapshot-like name without the format's magic, both the oldest,
     * are never evicted (any "*.pin" was). */
    char *user_pin = malloc(strlen(dir) + 32), *fake = malloc(strlen(dir) + 80);
    sprintf(user_pin, "%s/disk-image.pin", dir);
    sprintf(fake, "%s/%064d.pin", dir, 0);
    for (int f = 0; f < 2; f++) {
        FILE *u = fopen(f ? fake : user_pin, "wb");
        CHECK(u != NULL);
        if (u) {
            for (int k = 0; k < 64; k++)
                fwrite(tokens, 1, sizeof tokens, u);
            fclose(u);
        }
        set_age(f ? fake : user_pin, base - 5000);
    }
    /* Using #1 makes it the most recent. */
    tn_ctx *b = new_ctx(m);
    int32_t t1[16];
    memcpy(t1, tokens, sizeof t1);
    tn_error err = {0};
    /* The stored token list is `tokens`; the load checks it. */
    int rc = tn_pin_store_load(dir, &keys[1], b, tokens, 16, &err);
    CHECKF(rc == TN_OK, "load: %s", err.message);
    tn_ctx_free(b);
    /* Room for three: #0, #2 and #3 (the oldest but #1) go. */
    int removed = tn_pin_store_evict(dir, 3 * one, NULL);
    CHECKF(removed == 3, "removed %d", removed);
    CHECK(!file_exists(paths[0]) && file_exists(paths[1]) && !file_exists(paths[2]) &&
          !file_exists(paths[3]) && file_exists(paths[4]) && file_exists(paths[5]));
    /* `keep` survives even when it is the oldest. */
    set_age(paths[5], base - 1000);
    const char *name5 = strrchr(paths[5], '/') + 1;
    removed = tn_pin_store_evict(dir, one, name5);
    CHECKF(removed == 2, "removed %d", removed);
    CHECK(file_exists(paths[5]) && !file_exists(paths[1]) && !file_exists(paths[4]));
    CHECK(file_exists(user_pin) && file_exists(fake));
    unlink(user_pin);
    unlink(fake);
    free(user_pin);
    free(fake);
    /* Saving evicts too: a bound of two snapshots keeps the newest two. */
    for (int i = 0; i < 3; i++) {
        rc = tn_pin_store_save(dir, &keys[i], a, tokens, 16, 2 * one, &err);
        CHECK(rc == TN_OK);
        set_age(paths[i], time(NULL) + i);
    }
    CHECKF(count_files(dir, ".pin") <= 2, "%d snapshots over a bound of 2",
           count_files(dir, ".pin"));
    CHECK(file_exists(paths[2]));
    for (int i = 0; i < 6; i++)
        free(paths[i]);
    tn_ctx_free(a);
}

/* A save cut short (the server killed by a second Ctrl-C while it stops,
 * a crash) leaves its temporary: the next save removes it once it is an
 * hour old, as nothing else would, and it is not counted under the bound.
 * A younger one may be another server's save in progress, and names that
 * are not a snapshot's temporary are the user's. */
static void test_orphans(const tn_model *m, const char *dir) {
    tn_ctx *a = new_ctx(m);
    if (!a)
        return;
    int32_t tokens[NTOK];
    for (int i = 0; i < NTOK; i++)
        tokens[i] = 9 + i;
    prefill(a, tokens, NTOK);
    tn_pin_key key;
    CHECK(tn_pin_key_compute(m, tokens, 16, &key, NULL) == TN_OK);
    char *path = tn_pin_path(dir, &key);
    if (!path) {
        tn_ctx_free(a);
        return;
    }
    tn_error err = {0};
    CHECKF(tn_pin_store_save(dir, &key, a, tokens, 16, 0, &err) == TN_OK, "save: %s",
           err.message);
    const size_t len = strlen(path) + 32;
    char *old = malloc(len), *young = malloc(len), *user = malloc(len), *shorter = malloc(len);
    snprintf(old, len, "%s.tmp-a1B2c3", path);
    snprintf(young, len, "%s.tmp-Zz9Yy8", path);
    snprintf(user, len, "%s/notes.pin.tmp-a1B2c3", dir);
    snprintf(shorter, len, "%s.tmp-a1B2", path);
    const char *all[] = {old, young, user, shorter};
    for (int f = 0; f < 4; f++) {
        FILE *u = fopen(all[f], "wb");
        CHECK(u != NULL);
        if (u) {
            fwrite(tokens, 1, sizeof tokens, u);
            fclose(u);
        }
        if (f != 1)
            set_age(all[f], time(NULL) - 2 * 60 * 60);
    }
    set_age(young, time(NULL) - 10 * 60);
    CHECKF(tn_pin_store_save(dir, &key, a, tokens, 16, 0, &err) == TN_OK, "save again: %s",
           err.message);
    CHECK(file_exists(path));
    CHECKF(!file_exists(old), "an abandoned temporary two hours old is still there: %s", old);
    CHECKF(file_exists(young), "a temporary ten minutes old was removed: %s", young);
    CHECKF(file_exists(user) && file_exists(shorter),
           "a file that is no snapshot's temporary was removed");
    /* tn_pin_store_evict counts it among the files it removed. */
    set_age(young, time(NULL) - 2 * 60 * 60);
    CHECKF(tn_pin_store_evict(dir, UINT64_MAX, NULL) == 1 && !file_exists(young),
           "evict: the second orphan");
    for (int f = 0; f < 4; f++)
        unlink(all[f]);
    free(old);
    free(young);
    free(user);
    free(shorter);
    free(path);
    tn_ctx_free(a);
}

static void test_default_dir(void) {
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    char *d = tn_pin_cache_default_dir();
    CHECK(d && !strcmp(d, "/x/cache/tern/pins"));
    free(d);
    setenv("XDG_CACHE_HOME", "relative", 1);
    setenv("HOME", "/home/u", 1);
    d = tn_pin_cache_default_dir();
    CHECK(d && !strcmp(d, "/home/u/.cache/tern/pins"));
    free(d);
}

int main(void) {
    test_hashes();
    test_checksum_pieces();
    char dir[4200], dir2[4200];
    snprintf(dir, sizeof dir, "%s/cache/tern/pins", tn_test_tmpdir());
    snprintf(dir2, sizeof dir2, "%s/evict", tn_test_tmpdir());
    const char *pa = make_model("a", "llama", 1), *pb = make_model("b", "llama", 2);
    tn_model *a = pa ? load(pa) : NULL, *b = pb ? load(pb) : NULL;
    if (a && b) {
        test_round_trip(a, b, dir);
        test_shrink(a, dir);
        test_forged_values(a, dir);
        test_header_fields(a, dir);
        test_eviction(a, dir2);
        test_orphans(a, dir2);
    }
    /* Layers that differ in their KV: Gemma 4's sliding layers (a window
     * shorter than the pinned prompt) and full layers of twice the head
     * size, its last layers with no KV of their own (they reuse earlier
     * layers'), per-layer inputs; with experts; gpt-oss (experts, every
     * other layer sliding). A snapshot restores each exactly, and damage
     * and forged values are refused as in llama's single layout. */
    static const char *const archs[] = {"gemma4", "gemma4moe", "gpt-oss"};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        const char *pm = make_model(archs[i], archs[i], 10 + i);
        tn_model *m = pm ? load(pm) : NULL;
        if (m && a) {
            test_round_trip(m, a, dir);
            test_forged_values(m, dir);
            test_header_fields(m, dir);
        }
        tn_model_free(m);
    }
    tn_model_free(a);
    tn_model_free(b);
    test_default_dir();
    return tn_test_finish("pin-store");
}
