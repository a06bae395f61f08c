/* Teacher-forced top-1/top-2 logits of llama.cpp on a GGUF, for comparing
 * Tern's forward pass with llama.cpp's (tools/compare/gemma4-compare.sh).
 * Linked against the static libllama of a llama.cpp build; not part of
 * Tern's build.
 *
 * usage: llama-top2 MODEL TOKENS THREADS [GREEDY_N]
 *   TOKENS: a file of whitespace-separated token ids. Prints one line per
 *   position i: "i top1 logit1 top2 logit2" for the logits after token i.
 *   GREEDY_N > 0: then prints "greedy t1 t2 ..." for GREEDY_N greedy steps
 *   after the whole token list.
 * LLAMA_TOP2_ROUTER=NAME (e.g. ffn_moe_probs for gpt-oss: its biased logits,
 * ffn_moe_logits for qwen3moe): also prints, on stderr, "router IL POS l0
 * l1 ..." with every position's router logits of layer IL, taken from the
 * graph's tensors NAME-IL by an eval callback (Tern's TERN_DEBUG_ROUTER
 * prints the same lines). */
#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const char *name; /* the tensor name before "-IL" */
    int pos0;         /* position of the batch's first token */
    float *buf;
    size_t cap;
} router_dump;

static bool router_cb(struct ggml_tensor *t, bool ask, void *user) {
    router_dump *r = user;
    const size_t len = strlen(r->name);
    /* ne[0] < 2: a one-column tensor of the same name also shows up (seen
     * for gpt-oss's ffn_moe_probs); the router's rows are n_expert wide. */
    if (strncmp(t->name, r->name, len) || t->name[len] != '-' || t->type != GGML_TYPE_F32 ||
        t->ne[0] < 2)
        return false;
    if (ask)
        return true;
    if (!ggml_is_contiguous(t))
        return true;
    const size_t n = (size_t)ggml_nelements(t);
    if (n > r->cap) {
        float *b = realloc(r->buf, n * sizeof *b);
        if (!b)
            return true;
        r->buf = b;
        r->cap = n;
    }
    ggml_backend_tensor_get(t, r->buf, 0, n * sizeof(float));
    const int il = atoi(t->name + len + 1);
    for (int64_t i = 0; i < t->ne[1]; i++) {
        fprintf(stderr, "router %d %d", il, r->pos0 + (int)i);
        for (int64_t e = 0; e < t->ne[0]; e++)
            fprintf(stderr, " %.6f", (double)r->buf[i * t->ne[0] + e]);
        fputc('\n', stderr);
    }
    return true;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void top2(const float *l, int n, int *a, int *b) {
    *a = 0;
    *b = 1;
    if (l[1] > l[0]) {
        *a = 1;
        *b = 0;
    }
    for (int i = 2; i < n; i++) {
        if (l[i] > l[*a]) {
            *b = *a;
            *a = i;
        } else if (l[i] > l[*b]) {
            *b = i;
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: llama-top2 MODEL TOKENS THREADS [GREEDY_N]\n");
        return 2;
    }
    int threads = atoi(argv[3]), greedy = argc > 4 ? atoi(argv[4]) : 0;
    FILE *f = fopen(argv[2], "r");
    if (!f)
        return 2;
    int cap = 1 << 16, n = 0;
    llama_token *toks = malloc(sizeof *toks * (size_t)cap);
    while (n < cap && fscanf(f, "%d", &toks[n]) == 1)
        n++;
    fclose(f);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model)
        return 1;
    const int V = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n + greedy + 16);
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    router_dump rd = {.name = getenv("LLAMA_TOP2_ROUTER")};
    if (rd.name && *rd.name) {
        cp.cb_eval = router_cb;
        cp.cb_eval_user_data = &rd;
    }
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx)
        return 1;
    struct llama_batch batch = llama_batch_init(512, 0, 1);
    double t0 = now_s(), t_pp = 0;
    for (int p0 = 0; p0 < n; p0 += 512) {
        int m = n - p0 < 512 ? n - p0 : 512;
        batch.n_tokens = m;
        for (int i = 0; i < m; i++) {
            batch.token[i] = toks[p0 + i];
            batch.pos[i] = p0 + i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = 1;
        }
        double tb = now_s();
        rd.pos0 = p0;
        if (llama_decode(ctx, batch) != 0)
            return 1;
        t_pp += now_s() - tb;
        for (int i = 0; i < m; i++) {
            const float *l = llama_get_logits_ith(ctx, i);
            int a, b;
            top2(l, V, &a, &b);
            printf("%d %d %.6f %d %.6f\n", p0 + i, a, l[a], b, l[b]);
        }
    }
    (void)t0;
    double tg0 = now_s();
    if (greedy > 0) {
        const float *l = llama_get_logits_ith(ctx, -1);
        printf("greedy");
        for (int g = 0; g < greedy; g++) {
            int a, b;
            top2(l, V, &a, &b);
            printf(" %d", a);
            llama_token t = a;
            rd.pos0 = n + g;
            if (llama_decode(ctx, llama_batch_get_one(&t, 1)) != 0)
                return 1;
            l = llama_get_logits_ith(ctx, -1);
        }
        printf("\n");
    }
    fprintf(stderr, "timing: %d positions in %.2f s (%.2f tok/s, all logits); %d greedy steps in %.2f s (%.2f tok/s)\n",
            n, t_pp, n / t_pp, greedy, now_s() - tg0, greedy > 0 ? greedy / (now_s() - tg0) : 0.0);
    free(rd.buf);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
