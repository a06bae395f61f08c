/* meson test --benchmark json-fallback: the per-token cost of constrained
 * sampling when none of the best candidates is allowed and the whole
 * vocabulary is checked, at the 262,144 tokens of Gemma 3's vocabulary,
 * with and without the first-byte index (tn_sampler_set_allow_groups) that
 * the session builds. The filter is the session's (a token is allowed when
 * its bytes continue the text) over the tokenizer.json's token bytes ("▁"
 * as a space, <0xNN> as the byte), at points where none of the best
 * candidates is allowed: after {"name":"a" (',', '}' or whitespace next)
 * and after {"age":- (a digit next), for json_object and for a schema. Normal random logits (sd 2); CPU time of tn_sampler_sample, best
 * of the calls. docs/SERVER.md lists the results.
 *
 *   bench-json-fallback [CALLS]   (default 30) */
#include "tn-test.h"
#include "tn-json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct vocab {
    int32_t n;
    char **piece;
    size_t *len;
} vocab;

typedef struct filter {
    const vocab *v;
    const tn_json_schema *schema;
    tn_json_schema_state st;
    tn_json_prefix p;
} filter;

static bool allow(int32_t t, void *user) {
    const filter *f = user;
    if (f->v->len[t] == 0)
        return false;
    if (f->schema) {
        tn_json_schema_state q = f->st;
        return tn_json_schema_feed(&q, f->v->piece[t], f->v->len[t]) == f->v->len[t];
    }
    tn_json_prefix q = f->p;
    return tn_json_prefix_feed(&q, f->v->piece[t], f->v->len[t]) == f->v->len[t];
}

static bool first_ok(int g, void *user) {
    const filter *f = user;
    const char b = (char)g;
    if (f->schema) {
        tn_json_schema_state q = f->st;
        return tn_json_schema_feed(&q, &b, 1) == 1;
    }
    tn_json_prefix q = f->p;
    return tn_json_prefix_feed(&q, &b, 1) == 1;
}

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A piece of tokenizer.json's vocabulary as bytes. */
static void decode(const char *key, size_t n, char **out, size_t *len) {
    char *b = malloc(n + 1);
    size_t m = 0;
    unsigned byte;
    if (n == 6 && sscanf(key, "<0x%2X>", &byte) == 1) {
        b[m++] = (char)byte;
    } else {
        for (size_t i = 0; i < n; i++) {
            if (i + 2 < n && !memcmp(key + i, "\xE2\x96\x81", 3)) {
                b[m++] = ' ';
                i += 2;
            } else {
                b[m++] = key[i];
            }
        }
    }
    *out = b;
    *len = m;
}

int main(int argc, char **argv) {
    const int calls = argc > 1 ? atoi(argv[1]) : 30;
    const char *dir = tn_test_vocab("gemma3");
    if (!dir)
        tn_test_missing("no gemma3 vocabulary (tools/fetch-vocab.sh)");
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    tn_json_doc *doc = NULL;
    tn_error err;
    memset(&err, 0, sizeof err);
    if (tn_json_parse_file(path, &doc, &err) != TN_OK)
        tn_test_missing(err.message);
    const tn_json *vj = tn_json_get(tn_json_get(tn_json_root(doc), "model"), "vocab");
    vocab v = {0};
    int64_t max_id = -1;
    for (size_t i = 0; i < tn_json_count(vj); i++) {
        int64_t id;
        if (tn_json_int(&vj->v.items[i], &id) && id > max_id)
            max_id = id;
    }
    v.n = (int32_t)(max_id + 1);
    v.piece = calloc((size_t)v.n, sizeof *v.piece);
    v.len = calloc((size_t)v.n, sizeof *v.len);
    for (size_t i = 0; i < tn_json_count(vj); i++) {
        int64_t id;
        const tn_json *m = &vj->v.items[i];
        if (tn_json_int(m, &id) && id >= 0)
            decode(m->key, m->key_len, &v.piece[id], &v.len[id]);
    }
    tn_json_free(doc);
    CHECK(v.n >= 262144);

    /* The index the session builds: tokens by first byte. */
    int32_t *start = calloc(257, sizeof *start);
    int32_t *tokens = malloc((size_t)v.n * sizeof *tokens);
    int32_t k = 0;
    for (int g = 0; g < 256; g++) {
        start[g] = k;
        for (int32_t t = 0; t < v.n; t++)
            if (v.len[t] > 0 && (uint8_t)v.piece[t][0] == g)
                tokens[k++] = t;
    }
    start[256] = k;

    const char *schema_text = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                              "\"age\":{\"type\":\"integer\"}},\"required\":[\"name\"]}";
    tn_json_schema *schema = NULL;
    CHECK(tn_json_schema_compile(schema_text, strlen(schema_text), &schema, &err) == TN_OK);
    /* After a value, where whitespace (the first byte of half of Gemma's
     * tokens) may come; after a minus sign, where only a digit may. */
    const char *const texts[] = {"{\"name\":\"a\"", "{\"age\":-"};

    float *logits = malloc((size_t)v.n * sizeof *logits);
    uint64_t rng = 5;
    for (int32_t t = 0; t < v.n; t++) { /* Box-Muller, sd 2 */
        const double u1 = (tn_test_randf(&rng) + 1.0) / 2.0 + 1e-12;
        const double u2 = (tn_test_randf(&rng) + 1.0) / 2.0;
        logits[t] = (float)(2.0 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
    for (int at = 0; at < 4; at++) {
        const int which = at % 2;
        const char *text = texts[at / 2];
        filter f = {.v = &v, .schema = which ? schema : NULL};
        tn_json_prefix_init(&f.p);
        tn_json_schema_init(&f.st, schema);
        if (which)
            CHECK(tn_json_schema_feed(&f.st, text, strlen(text)) == strlen(text));
        else
            CHECK(tn_json_prefix_feed(&f.p, text, strlen(text)) == strlen(text));
        for (int temp = 0; temp < 2; temp++) {
            double best[2] = {1e30, 1e30};
            int32_t picked[2] = {-1, -1};
            for (int indexed = 0; indexed < 2; indexed++) {
                tn_sampler_params p = tn_sampler_default_params();
                p.temperature = temp ? 1.0f : 0.0f;
                p.seed = 1;
                tn_sampler *s = NULL;
                CHECK(tn_sampler_new(v.n, p, &s, &err) == TN_OK);
                tn_sampler_set_allow(s, allow, &f);
                if (indexed)
                    tn_sampler_set_allow_groups(s, start, tokens, first_ok);
                for (int c = 0; c < calls; c++) {
                    const double t0 = cpu_ms();
                    const int32_t t = tn_sampler_sample(s, logits);
                    const double ms = cpu_ms() - t0;
                    if (ms < best[indexed])
                        best[indexed] = ms;
                    if (c == 0)
                        picked[indexed] = t;
                    CHECK(t >= 0 && allow(t, &f));
                }
                tn_sampler_free(s);
            }
            CHECK(picked[0] == picked[1]); /* the index changes no pick */
            printf("%-11s after %-12s %-13s whole-vocabulary check: %7.3f ms a token, "
                   "indexed %7.3f ms (x%.1f)\n",
                   which ? "json_schema" : "json_object", text, temp ? "temperature 1" : "greedy",
                   best[0], best[1], best[0] / best[1]);
        }
    }
    for (int32_t t = 0; t < v.n; t++)
        free(v.piece[t]);
    free(v.piece);
    free(v.len);
    free(start);
    free(tokens);
    free(logits);
    tn_json_schema_free(schema);
    return tn_test_finish("bench-json-fallback");
}
