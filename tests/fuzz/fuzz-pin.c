/* libFuzzer target for pin snapshots on disk (engine/pin-store.c,
 * tn_pin_store_load; format in docs/SESSION.md, "Pin snapshots on disk").
 * test-pin-store flips, cuts and extends real snapshots, and the checksums
 * refuse nearly all of that. What it cannot reach is the reading behind
 * right checksums: a header whose counts, shapes and sizes lie in a file
 * whose writer (buggy, or not Tern) also computed the sums.
 *
 * Input: byte 0 says what the fuzzer mends in the rest before it becomes
 * DIR/<key>.pin in a temporary folder made once per process:
 *   bit 0  the header checksum (bytes 120..127), computed last;
 *   bit 1  the payload checksum (80..87), over the tokens and KV bytes the
 *          header's own n_tokens (48) and KV byte count (72) name, when
 *          the file holds them;
 *   bit 2  the key (16..47): the one the load asks for (a real key names
 *          the model file's inode and mtime, so no stored input has it);
 *   bits 4-6  how many of the prompt's tokens the load asks for: 8 - k,
 *          or (k = 7) one more than the context holds;
 *   bits 3 and 7  which model (bit 3 the low bit of the shape's number):
 *          0 llama, one KV layout for every layer; 1 gemma4 dense as E2B
 *          and E4B are: sliding-window layers with a window shorter than
 *          the prompt, full layers of another head size, per-layer inputs,
 *          the last layers reusing earlier layers' KV (none of their own in
 *          the snapshot); 2 gemma4 with experts as 26B-A4B is, its full
 *          layers with keys that are the values and another KV head count;
 *          3 gpt-oss, experts and every other layer sliding.
 * The load goes into a context of that tiny model, made once (tn_mkmodel),
 * holding 3 rows of another prompt before each input.
 *
 * Promises:
 *  - refused: a one-line, non-empty message, and the context's KV as it
 *    was (its length and its rows, byte for byte);
 *  - loaded: the KV holds the tokens asked for (within the context size),
 *    and one more token decodes, with finite logits.
 *
 * Seeds: tests/fuzz/corpus/pin/, written by the real save path for each
 * model:
 *   TERN_FUZZ_PIN_SEEDS=tests/fuzz/corpus/pin build-fuzz/tests/fuzz/fuzz-pin
 * Run:   build-fuzz/tests/fuzz/fuzz-pin tests/fuzz/corpus/pin
 */
#include "tern.h"
#include "tn-session.h"
#include "fuzz-promise.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NTOK 8
#define NBEFORE 3
#define NCTX 32

#define NSHAPE 4

static char dir[64];
static char pin_dir[128];
static const int32_t prompt[NCTX + 1] = {5,  17, 9,  30, 12, 7,  21, 3,  8,  19, 4,
                                         33, 6,  14, 27, 2,  10, 25, 16, 31, 1,  22,
                                         13, 29, 18, 24, 11, 26, 15, 20, 28, 23, 32};
static const int32_t other[NBEFORE] = {40, 2, 11};

/* One model and its context, as every input finds it. */
typedef struct shape {
    char model_path[128];
    tn_model *model;
    tn_ctx *ctx;
    uint8_t *before; /* the context's rows before each input */
    uint64_t before_bytes;
    uint8_t *after;
    float *logits;
} shape;

static shape shapes[NSHAPE];

static void cleanup(void) {
    for (int i = 0; i < NSHAPE; i++) {
        tn_ctx_free(shapes[i].ctx);
        tn_model_free(shapes[i].model);
        unlink(shapes[i].model_path);
        free(shapes[i].before);
        free(shapes[i].after);
        free(shapes[i].logits);
    }
    rmdir(pin_dir);
    rmdir(dir);
}

/* The context as every input finds it: NBEFORE rows of another prompt. */
static void reset_ctx(const shape *sh) {
    PROMISE(tn_ctx_kv_truncate(sh->ctx, 0) == TN_OK);
    PROMISE(tn_ctx_kv_state_load(sh->ctx, NBEFORE, sh->before, sh->before_bytes, NULL) == TN_OK);
}

/* Byte 0's model bits for shape i. */
static uint8_t shape_bits(int i) { return (uint8_t)((i & 1) << 3 | (i & 2) << 6); }

/* Valid snapshots of each length and model by tn_pin_store_save, each with
 * byte 0 asking for the key and both checksums to be mended, and cut
 * variants. */
static void write_seeds(const char *out) {
    for (int s = 0; s < NSHAPE; s++)
        for (int32_t n = 2; n <= NTOK; n += 3) {
            const shape *sh = &shapes[s];
            PROMISE(tn_ctx_kv_truncate(sh->ctx, 0) == TN_OK);
            PROMISE(tn_ctx_decode(sh->ctx, prompt, n, TN_LOGITS_NONE, NULL, NULL) == TN_OK);
            tn_pin_key key;
            PROMISE(tn_pin_key_compute(sh->model, prompt, n, &key, NULL) == TN_OK);
            tn_error err = {0};
            PROMISE(tn_pin_store_save(pin_dir, &key, sh->ctx, prompt, n, 0, &err) == TN_OK);
            char *path = tn_pin_path(pin_dir, &key);
            PROMISE(path != NULL);
            FILE *f = fopen(path, "rb");
            PROMISE(f != NULL);
            static uint8_t buf[1 << 16];
            buf[0] = (uint8_t)(0x07 | (NTOK - n) << 4 | shape_bits(s));
            const size_t got = fread(buf + 1, 1, sizeof buf - 1, f);
            PROMISE(got > 128 && feof(f));
            fclose(f);
            unlink(path);
            free(path);
            const size_t cuts[] = {got + 1, 1 + 128, 1 + 128 + (size_t)n * 4, got};
            static const char *const what[] = {"", "-header-only", "-tokens-only", "-cut-1"};
            static const char *const model[NSHAPE] = {"", "gemma4-", "gemma4moe-", "gpt-oss-"};
            for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
                char name[4096];
                snprintf(name, sizeof name, "%s/saved-%s%dtok%s", out, model[s], n, what[c]);
                f = fopen(name, "wb");
                PROMISE(f != NULL);
                PROMISE(fwrite(buf, 1, cuts[c], f) == cuts[c]);
                PROMISE(fclose(f) == 0);
            }
        }
    exit(0);
}

static void make_shape(int i) {
    shape *sh = &shapes[i];
    tn_mkmodel_params p = tn_mkmodel_default_params();
    p.arch = "llama";
    p.type = "q8_0";
    p.n_embd = 64;
    p.n_layer = 2;
    p.n_head = 2;
    p.n_head_kv = 1;
    p.head_dim = 32;
    p.n_ff = 128;
    p.n_ctx = 256;
    p.seed = 44 + (uint64_t)i;
    p.n_threads = 1;
    if (i == 1 || i == 2) {
        /* sliding, sliding, full, ...: a window shorter than the prompts
         * (rows beyond it are still kept and restored); full layers with
         * twice the head size */
        p.arch = "gemma4";
        p.n_layer = 6;
        p.swa_period = 3;
        p.head_dim = 64;
        p.head_dim_swa = 32;
        p.sliding_window = 4;
    }
    if (i == 1) {
        /* layers 3-5 reuse the KV of layers 1 and 2; per-layer inputs */
        p.n_shared_kv = 3;
        p.n_embd_per_layer = 32;
        p.double_wide_ffn = true;
    }
    if (i == 2) {
        p.n_expert = 8;
        p.n_expert_used = 2;
        p.n_ff_exp = 64;
        p.k_eq_v = true;
        p.n_head_kv_full = 2;
    }
    if (i == 3) {
        p.arch = "gpt-oss";
        p.type = "mxfp4";
        p.n_expert = 8;
        p.n_expert_used = 2;
        p.n_ff_exp = 64;
        p.sliding_window = 4;
    }
    snprintf(sh->model_path, sizeof sh->model_path, "%s/tiny%d.gguf", dir, i);
    tn_error err = {0};
    PROMISE(tn_mkmodel(&p, sh->model_path, &err) == TN_OK);
    tn_model_params mp = tn_model_default_params();
    PROMISE(tn_model_load(sh->model_path, mp, &sh->model, &err) == TN_OK);
    PROMISE(tn_ctx_new(sh->model, NCTX, 1, &sh->ctx, &err) == TN_OK);
    sh->logits = malloc((size_t)tn_model_n_vocab(sh->model) * sizeof *sh->logits);
    PROMISE(sh->logits != NULL);
    PROMISE(tn_ctx_decode(sh->ctx, other, NBEFORE, TN_LOGITS_NONE, NULL, &err) == TN_OK);
    sh->before_bytes = tn_ctx_kv_state_bytes(sh->ctx, NBEFORE);
    sh->before = malloc(sh->before_bytes);
    sh->after = malloc(sh->before_bytes);
    PROMISE(sh->before && sh->after);
    PROMISE(tn_ctx_kv_state_save(sh->ctx, NBEFORE, sh->before, sh->before_bytes, &err) == TN_OK);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    snprintf(dir, sizeof dir, "%s", "/tmp/tern-fuzz-pin-XXXXXX");
    PROMISE(mkdtemp(dir) != NULL);
    snprintf(pin_dir, sizeof pin_dir, "%s/pins", dir);
    PROMISE(mkdir(pin_dir, 0700) == 0);
    atexit(cleanup);
    for (int i = 0; i < NSHAPE; i++)
        make_shape(i);

    const char *seeds = getenv("TERN_FUZZ_PIN_SEEDS");
    if (seeds && seeds[0])
        write_seeds(seeds);
    return 0;
}

static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t rd_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t rd_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    const uint8_t flags = data[0];
    const int k = flags >> 4 & 7;
    const int32_t n_load = k == 7 ? NCTX + 1 : NTOK - k;
    const shape *sh = &shapes[(flags >> 3 & 1) | (flags >> 6 & 2)];
    tn_model *model = sh->model;
    tn_ctx *ctx = sh->ctx;
    size--;
    uint8_t *file = malloc(size ? size : 1);
    PROMISE(file != NULL);
    if (size)
        memcpy(file, data + 1, size);

    tn_pin_key key;
    PROMISE(tn_pin_key_compute(model, prompt, n_load, &key, NULL) == TN_OK);
    if (flags & 4 && size >= 48)
        memcpy(file + 16, key.b, 32);
    if (flags & 2 && size >= 88) {
        const uint64_t n = rd_u32(file + 48), kv = rd_u64(file + 72);
        if (kv <= size && n <= size && 128 + 4 * n + kv <= size) {
            const uint64_t h = tn_checksum64(file + 128, (size_t)n * 4, 1);
            put_u64(file + 80, tn_checksum64(file + 128 + 4 * n, (size_t)kv, h));
        }
    }
    if (flags & 1 && size >= 128)
        put_u64(file + 120, tn_checksum64(file, 120, 0));

    char *path = tn_pin_path(pin_dir, &key);
    PROMISE(path != NULL);
    FILE *f = fopen(path, "wb");
    PROMISE(f != NULL);
    PROMISE(size == 0 || fwrite(file, 1, size, f) == size);
    PROMISE(fclose(f) == 0);

    reset_ctx(sh);
    tn_error err = {0};
    const int rc = tn_pin_store_load(pin_dir, &key, ctx, prompt, n_load, &err);
    if (rc != TN_OK) {
        PROMISE(err.message[0] != '\0' && !strchr(err.message, '\n'));
        PROMISE(tn_ctx_kv_len(ctx) == NBEFORE);
        PROMISE(tn_ctx_kv_state_save(ctx, NBEFORE, sh->after, sh->before_bytes, NULL) == TN_OK);
        PROMISE(memcmp(sh->before, sh->after, sh->before_bytes) == 0);
    } else {
        PROMISE(tn_ctx_kv_len(ctx) == n_load && n_load <= NCTX);
        const int32_t next = 13;
        PROMISE(tn_ctx_decode(ctx, &next, 1, TN_LOGITS_LAST, sh->logits, &err) == TN_OK);
        PROMISE(tn_ctx_kv_len(ctx) == n_load + 1);
        for (int32_t i = 0; i < tn_model_n_vocab(model); i++)
            PROMISE(isfinite(sh->logits[i]));
    }
    unlink(path);
    free(path);
    free(file);
    return 0;
}
