/* Tern's side of tools/compare/gemma4v-compare.sh: the same image through
 * tn_vision_encode, compared with the embeddings mtmd-embd dumped (NMSE),
 * then the same prompt (mtmd-embd's text chunks as token ids, the image as
 * Tern's own rows) decoded and the next token's top-2 compared with
 * llama.cpp's under the near-tie rule.
 *
 * usage: tern-vision-embd TEXT.gguf MMPROJ.gguf PIXELS.rgb W H BUDGET THREADS PEER.f32 PEER.txt
 *   PEER.txt: mtmd-embd's stdout. Prints "tokens N nmse X max_abs_diff Y"
 *   and "top1 tern T llama L gap G: agree|near-tie|DISAGREE"; exits 1 when
 *   the NMSE is above 1e-4, the token counts differ, or the top-1 differs
 *   outside a near tie (llama.cpp's top-2 gap < 0.5). */
#include "tern.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int top(const float *l, int n, int *second) {
    int a = 0, b = 1;
    if (l[1] > l[0])
        a = 1, b = 0;
    for (int i = 2; i < n; i++) {
        if (l[i] > l[a])
            b = a, a = i;
        else if (l[i] > l[b])
            b = i;
    }
    *second = b;
    return a;
}

int main(int argc, char **argv) {
    if (argc != 10) {
        fprintf(stderr, "usage: tern-vision-embd TEXT MMPROJ PIXELS W H BUDGET THREADS PEER.f32 "
                        "PEER.txt\n");
        return 2;
    }
    const int w = atoi(argv[4]), h = atoi(argv[5]), budget = atoi(argv[6]);
    const int threads = atoi(argv[7]);
    unsigned char *px = malloc((size_t)w * h * 3);
    float *rgb = malloc((size_t)w * h * 3 * sizeof *rgb);
    FILE *f = fopen(argv[3], "rb");
    if (!px || !rgb || !f || fread(px, 1, (size_t)w * h * 3, f) != (size_t)w * h * 3)
        return 2;
    fclose(f);
    for (size_t i = 0; i < (size_t)w * h * 3; i++)
        rgb[i] = px[i] / 255.0f;
    tn_error err = {0};
    tn_vision *v = NULL;
    tn_model *m = NULL;
    tn_ctx *ctx = NULL;
    if (tn_vision_load(argv[2], &v, &err) || tn_model_load(argv[1], tn_model_default_params(), &m, &err) ||
        tn_ctx_new(m, 4096, threads, &ctx, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    const int T = tn_vision_get_info(v)->n_embd_text;
    const int n_img = tn_vision_image_tokens(v, budget, w, h, &err);
    if (n_img < 0) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    float *mine = malloc((size_t)n_img * T * sizeof *mine);
    int n = 0;
    if (!mine || tn_vision_encode(v, rgb, w, h, budget, mine, &n, threads, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    /* The peer's chunks. */
    FILE *pt = fopen(argv[9], "r");
    if (!pt)
        return 2;
    char line[1 << 16];
    int peer_n = -1, peer_e = 0, nc = 1, ok = 1, l_top1 = -1;
    double l_gap = 0;
    int32_t *toks = malloc(sizeof *toks * 65536);
    int32_t *seg_len = calloc(64, sizeof *seg_len);
    int seg_img[64] = {0}, n_seg = 0, n_tok = 0;
    while (fgets(line, sizeof line, pt) && n_seg < 64) {
        if (!strncmp(line, "text", 4)) {
            char *p = line + 4, *e;
            seg_img[n_seg] = 0;
            for (long t; (t = strtol(p, &e, 10)), e != p; p = e)
                toks[n_tok + seg_len[n_seg]++] = (int32_t)t;
            n_tok += seg_len[n_seg++];
        } else if (!strncmp(line, "image", 5)) {
            sscanf(line + 5, "%d %d %d", &peer_n, &peer_e, &nc);
            seg_img[n_seg++] = 1;
        } else if (!strncmp(line, "top2", 4)) {
            int b;
            double la, lb;
            sscanf(line + 4, "%d %lf %d %lf", &l_top1, &la, &b, &lb);
            l_gap = la - lb;
        }
    }
    fclose(pt);
    if (peer_n != n || peer_e != T) {
        printf("tokens tern %d x %d, llama.cpp %d x %d: DIFFERENT\n", n, T, peer_n, peer_e);
        return 1;
    }
    float *ref = malloc((size_t)n * T * sizeof *ref);
    FILE *pf = fopen(argv[8], "rb");
    if (!ref || !pf || fread(ref, sizeof *ref, (size_t)n * T, pf) != (size_t)n * T)
        return 2;
    fclose(pf);
    double num = 0, den = 0, mx = 0;
    for (size_t i = 0; i < (size_t)n * T; i++) {
        const double d = (double)mine[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
        if (fabs(d) > mx)
            mx = fabs(d);
    }
    const double nmse = num / (den > 0 ? den : 1);
    printf("tokens %d nmse %.3g max_abs_diff %.3g\n", n, nmse, mx);
    ok &= nmse <= 1e-4;
    /* The prompt through Tern's forward pass with its own image rows. */
    const int V = tn_model_n_vocab(m);
    float *lg = malloc((size_t)V * sizeof *lg);
    int at = 0;
    for (int s = 0; s < n_seg; s++) {
        const bool last = s == n_seg - 1;
        const tn_logits_mode mode = last ? TN_LOGITS_LAST : TN_LOGITS_NONE;
        int rc = seg_img[s] ? tn_ctx_decode_embd(ctx, mine, n, nc != 0, mode, lg, &err)
                            : tn_ctx_decode(ctx, toks + at, seg_len[s], mode, lg, &err);
        if (rc) {
            fprintf(stderr, "%s\n", err.message);
            return 1;
        }
        if (!seg_img[s])
            at += seg_len[s];
    }
    int t2;
    const int t1 = top(lg, V, &t2);
    const bool agree = t1 == l_top1, tie = l_gap < 0.5;
    printf("top1 tern %d (%.4f) llama %d gap %.4f: %s\n", t1, lg[t1], l_top1, l_gap,
           agree ? "agree" : tie ? "near-tie" : "DISAGREE");
    ok &= agree || tie;
    tn_ctx_free(ctx);
    tn_model_free(m);
    tn_vision_free(v);
    free(px), free(rgb), free(mine), free(ref), free(lg), free(toks), free(seg_len);
    return ok ? 0 : 1;
}
