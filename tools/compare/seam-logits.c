/* Every logit of a fixed run, as raw float bytes on standard output, for
 * bitwise before/after comparisons of the engine (tools/compare/
 * seam-identity.sh, docs/BACKENDS.md): a 48-token prefill with all rows'
 * logits, then 16 greedy one-token steps, at 1 and at N threads; then the
 * KV state snapshot bytes; or a vision projector's image embeddings. Uses
 * only tern.h, so the same source builds against an older libtern.
 *
 *   seam-logits MODEL [THREADS] > out.bin
 *   seam-logits --vision MMPROJ > out.bin */
#include "tern.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int run(const char *path, int threads, FILE *out) {
    tn_error err = {0};
    tn_model *m = NULL;
    if (tn_model_load(path, tn_model_default_params(), &m, &err) != TN_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    tn_ctx *ctx = NULL;
    if (tn_ctx_new(m, 128, threads, &ctx, &err) != TN_OK) {
        fprintf(stderr, "%s\n", err.message);
        tn_model_free(m);
        return 1;
    }
    fprintf(stderr, "%s: %s, %d threads\n", path, tn_model_arithmetic(m), tn_ctx_n_threads(ctx));
    const int32_t V = tn_model_n_vocab(m), P = 48, G = 16;
    int32_t tok[48];
    uint64_t s = 12345;
    for (int i = 0; i < P; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        tok[i] = (int32_t)((s >> 33) % (uint64_t)V);
    }
    float *logits = malloc(sizeof(float) * (size_t)V * P);
    int rc = logits ? 0 : 1;
    if (!rc && tn_ctx_decode(ctx, tok, P, TN_LOGITS_ALL, logits, &err) != TN_OK)
        rc = 1;
    if (!rc)
        fwrite(logits, sizeof(float), (size_t)V * P, out);
    const float *last = logits + (size_t)V * (P - 1);
    for (int g = 0; !rc && g < G; g++) {
        int32_t best = 0;
        for (int32_t t = 1; t < V; t++)
            if (last[t] > last[best])
                best = t;
        if (tn_ctx_decode(ctx, &best, 1, TN_LOGITS_LAST, logits, &err) != TN_OK) {
            rc = 1;
            break;
        }
        last = logits;
        fwrite(logits, sizeof(float), (size_t)V, out);
    }
    if (!rc) {
        const int32_t n = P + G;
        const uint64_t bytes = tn_ctx_kv_state_bytes(ctx, n);
        void *kv = malloc(bytes);
        if (!kv || tn_ctx_kv_state_save(ctx, n, kv, bytes, &err) != TN_OK)
            rc = 1;
        else
            fwrite(kv, 1, bytes, out);
        free(kv);
    }
    if (rc)
        fprintf(stderr, "%s: %s\n", path, err.message);
    free(logits);
    tn_ctx_free(ctx);
    tn_model_free(m);
    return rc;
}

/* The image embeddings of a fixed picture at the native budget and at 16
 * tokens. SEAM_OLD_VISION: the tn_vision_encode of before the seam, which
 * took a thread pool (NULL: the calling thread; the result does not depend
 * on the threads). */
static int vision(const char *path, FILE *out) {
    tn_error err = {0};
    tn_vision *v = NULL;
    if (tn_vision_load(path, &v, &err) != TN_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    const int W = 90, H = 70;
    float *rgb = malloc(sizeof(float) * W * H * 3);
    const tn_vision_info *I = tn_vision_get_info(v);
    float *emb = malloc(sizeof(float) * (size_t)I->n_image_tokens * (size_t)I->n_embd_text);
    int rc = rgb && emb ? 0 : 1;
    for (int i = 0; !rc && i < W * H * 3; i++)
        rgb[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
    const int budgets[2] = {0, 16};
    for (int b = 0; !rc && b < 2; b++) {
        int n = 0;
#ifdef SEAM_OLD_VISION
        rc = tn_vision_encode(v, rgb, W, H, budgets[b], emb, &n, NULL, &err) != TN_OK;
#else
        rc = tn_vision_encode(v, rgb, W, H, budgets[b], emb, &n, 1, &err) != TN_OK;
#endif
        if (!rc)
            fwrite(emb, sizeof(float), (size_t)n * (size_t)I->n_embd_text, out);
    }
    if (rc)
        fprintf(stderr, "%s: %s\n", path, err.message);
    free(rgb);
    free(emb);
    tn_vision_free(v);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: seam-logits MODEL [THREADS] > out.bin\n"
                        "       seam-logits --vision MMPROJ > out.bin\n");
        return 2;
    }
    if (!strcmp(argv[1], "--vision") && argc > 2)
        return vision(argv[2], stdout);
    const int threads = argc > 2 ? atoi(argv[2]) : 2;
    return run(argv[1], 1, stdout) || run(argv[1], threads, stdout);
}
