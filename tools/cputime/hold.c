/* Loads a model, touches every weight (an 8-token prefill and 4 one-token
 * steps on one thread), prints "READY <pid> <repack source> <load s>" and
 * holds the model until its standard input closes: tools/repack-rss.py
 * reads /proc/PID/smaps_rollup of one or two of these. */
#include "tern.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: hold MODEL\n"); return 2; }
    tn_error err; tn_model *m; tn_ctx *c;
    tn_model_params p = tn_model_default_params(); p.load_tokenizer = false;
    double t0 = now();
    if (tn_model_load(argv[1], p, &m, &err)) { fprintf(stderr, "%s\n", err.message); return 1; }
    double t1 = now();
    if (tn_ctx_new(m, 256, 1, &c, &err)) { fprintf(stderr, "%s\n", err.message); return 1; }
    float *lg = malloc(sizeof(float) * tn_model_n_vocab(m));
    int32_t toks[8];
    for (int i = 0; i < 8; i++) toks[i] = 1 + (i * 7919) % (tn_model_n_vocab(m) - 1);
    tn_ctx_decode(c, toks, 8, TN_LOGITS_LAST, lg, &err);
    for (int i = 0; i < 4; i++) tn_ctx_decode(c, toks + i, 1, TN_LOGITS_LAST, lg, &err);
    printf("READY %d %s %.3f\n", (int)getpid(), tn_model_repack_source(m), t1 - t0);
    fflush(stdout);
    char buf[64];
    while (fread(buf, 1, sizeof buf, stdin) > 0) {}
    tn_ctx_free(c);
    tn_model_free(m);
    free(lg);
    return 0;
}
