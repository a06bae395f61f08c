/* A systematic sweep of hostile metadata and tensors over every architecture
 * the loader reads: for each tiny model tn_mkmodel writes (llama, qwen3,
 * gemma3, gemma4 dense with per-layer inputs and shared KV, gemma4 MoE,
 * qwen3moe, gpt-oss with MXFP4 experts, DFlash drafts (Qwen3-style, Gemma-style
 * with a reduced vocabulary, windowed for a gemma4 target), gemma4-assistant MTP
 * drafters, both vision projectors), every metadata key is rewritten with
 * edge values (0, 1, -1, the type's maximum, 1 << 20, NaN, Inf, the wrong
 * GGUF type; arrays empty, shortened, lengthened, of the wrong element type,
 * full of edge values) and every tensor gets a changed dimension or type.
 * Each variant must load and run, or fail with a one-line message: never a
 * crash, a sanitizer report, a hang or a huge allocation (the ASan build
 * caps one allocation at 256 MiB, see __asan_default_options below).
 *
 * Every key gets every change, and every tensor is dropped once. Tensors
 * outside the layers and those of layer 0 get every change; the other
 * layers' tensors (read by the same code) two changes each, rotating
 * through the list, so that the sweep stays within the CI budget under
 * ASan (TERN_HOSTILE_ALL=1: every change of every tensor). Non-finite
 * logits are allowed (counted): a tensor given another type rereads the
 * old bytes, finite but extreme values that overflow in the forward pass.
 * `test-model-hostile NAME` sweeps one base model (names in bases[]);
 * TERN_HOSTILE_VERBOSE=1 prints every variant and refusal. */
#include "tn-test.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* An allocation the loader would make of a hostile size fails the run (a
 * legitimately tiny model needs far less). Read by ASan at startup; harmless
 * in other builds. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
    return "max_allocation_size_mb=256:allocator_may_return_null=0";
}

typedef enum { BASE_MODEL, BASE_DFLASH, BASE_MTP, BASE_VISION } base_kind;

typedef struct base {
    const char *name;
    base_kind kind;
    char path[4096];
    tn_model *target;   /* drafters: the model they draft for */
    tn_session *sess;   /* drafters: a session of the target */
    int variants, loaded, refused, nonfinite;
    bool must_run; /* the valid file: it must load and run (refusals printed) */
    bool chat;     /* a tokenizer key changed: a chat turn through a session too */
} base;

/* The variant being tried, for the watchdog's message. */
static char current[512];
/* TERN_HOSTILE_VERBOSE set: every variant and refusal printed (to read the
 * messages, or to find the variant before a UBSan report). */
static bool verbose;

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test-model-hostile: a variant ran for over 60 s (a hang): ";
    ssize_t r = write(2, msg, sizeof msg - 1);
    r = write(2, current, strnlen(current, sizeof current));
    r = write(2, "\n", 1);
    (void)r;
    _exit(1);
}

/* Sanitizer builds: name the variant in the report's aftermath. */
void __sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));
static void on_death(void) {
    fprintf(stderr, "test-model-hostile: the report above came from: %s\n", current);
}

static const char *tmp(const char *file) {
    static char bufs[4][4096];
    static int k;
    char *b = bufs[k++ & 3];
    snprintf(b, 4096, "%s/%s", tn_test_tmpdir(), file);
    return b;
}

/* ---------------------------------------------------------- base models */

static tn_mkmodel_params tiny(const char *arch, uint64_t seed) {
    tn_mkmodel_params p = tn_test_tiny_model(arch, seed);
    p.n_threads = 1;
    p.n_ctx = 256;
    if (!strcmp(arch, "gemma3"))
        p.sliding_window = 8;
    return p;
}

/* gemma4 as test-spec's: sliding, sliding, full, ...; the last layers reuse
 * earlier KV; full layers with twice the head size; per-layer inputs;
 * double-wide shared FFNs; values = keys on the full layers. */
static tn_mkmodel_params tiny_gemma4(uint64_t seed, bool moe) {
    tn_mkmodel_params p = tiny("gemma4", seed);
    p.n_head = 2;
    p.n_head_kv = 1;
    p.n_layer = moe ? 3 : 4;
    p.swa_period = 3;
    p.n_shared_kv = moe ? 0 : 1;
    p.head_dim = 64;
    p.head_dim_swa = 32;
    p.n_embd_per_layer = moe ? 0 : 32;
    p.double_wide_ffn = !moe;
    p.k_eq_v = !moe;
    p.tied_output = true;
    if (moe) {
        p.n_expert = 4;
        p.n_expert_used = 2;
        p.n_ff_exp = 32;
    }
    return p;
}

static int make_base(base *b, tn_error *err) {
    snprintf(b->path, sizeof b->path, "%s", tmp(b->name));
    strncat(b->path, ".gguf", sizeof b->path - strlen(b->path) - 1);
    const char *n = b->name;
    if (!strcmp(n, "gemma4") || !strcmp(n, "gemma4moe")) {
        tn_mkmodel_params p = tiny_gemma4(11, !strcmp(n, "gemma4moe"));
        return tn_mkmodel(&p, b->path, err);
    }
    if (!strcmp(n, "qwen3moe") || !strcmp(n, "gpt-oss")) {
        tn_mkmodel_params p = tiny(n, 12);
        p.n_layer = 2;
        p.n_expert = 4;
        p.n_expert_used = 2;
        p.n_ff_exp = 32;
        if (!strcmp(n, "gpt-oss"))
            p.type = "mxfp4";
        return tn_mkmodel(&p, b->path, err);
    }
    if (b->kind == BASE_MODEL) {
        tn_mkmodel_params p = tiny(n, 13);
        return tn_mkmodel(&p, b->path, err);
    }
    if (b->kind == BASE_VISION) {
        tn_mkmodel_vision_params p = tn_mkmodel_vision_default_params();
        p.projector = !strcmp(n, "vision-gemma4v") ? "gemma4v" : "gemma3";
        p.image_size = !strcmp(n, "vision-gemma4v") ? 64 : 56;
        p.patch_size = !strcmp(n, "vision-gemma4v") ? 16 : 14;
        p.n_embd = 32;
        p.n_ff = 64;
        p.n_layer = 1;
        p.n_head = 2;
        p.seed = 14;
        return tn_mkmodel_vision(&p, b->path, err);
    }
    /* Drafters: the target first, then the draft for it. */
    const bool mtp = b->kind == BASE_MTP;
    /* dflash-swa: a gemma4 target, whose window and per-layer pattern the
     * draft takes (its sliding_window keys) */
    const bool g4 = mtp || !strcmp(n, "dflash-swa");
    char tpath[sizeof b->path + sizeof "-target.gguf"]; /* always fits: -Wformat-truncation at -O0 */
    snprintf(tpath, sizeof tpath, "%s-target.gguf", b->path);
    tn_mkmodel_params tp = g4 ? tiny_gemma4(15, false) : tiny("qwen3", 15);
    if (g4) {
        /* the assistant reads the target's last sliding and full layers'
         * memory: sliding, sliding, full */
        tp.n_layer = 3;
        tp.n_shared_kv = 0;
    }
    int rc = tn_mkmodel(&tp, tpath, err);
    if (rc == TN_OK)
        rc = tn_model_load(tpath, tn_model_default_params(), &b->target, err);
    if (rc != TN_OK)
        return rc;
    if ((rc = tn_session_new(b->target, tn_test_session_params(128, 1), &b->sess, err)) != TN_OK)
        return rc;
    if (mtp) {
        tn_mkmodel_mtp_params p = tn_mkmodel_mtp_default_params();
        p.target = tpath;
        p.n_embd = 32;
        p.n_layer = 2;
        p.n_head = 2;
        p.n_ff = 64;
        p.seed = 16;
        return tn_mkmodel_mtp(&p, b->path, err);
    }
    tn_mkmodel_dflash_params p = tn_mkmodel_dflash_default_params();
    p.target = tpath;
    p.block_size = 4;
    p.seed = 17;
    if (!strcmp(n, "dflash-gemma")) {
        /* the other published shape: Gemma-style layers, a reduced head
         * mapped back through d2t */
        p.n_layer = 2;
        p.gemma_layers = true;
        p.draft_vocab = tn_model_n_vocab(b->target) / 2;
    }
    return tn_mkmodel_dflash(&p, b->path, err);
}

/* ------------------------------------------------------------- running */

/* A message fit to show: non-empty, one line. */
static bool one_line(const tn_error *err) {
    return err->message[0] && !strchr(err->message, '\n') && !strchr(err->message, '\r');
}

/* A step after a successful open: it works, or (a hostile file only)
 * fails with a one-line message. */
static bool ran(const base *b, int rc, const tn_error *err) {
    return rc == TN_OK || (!b->must_run && one_line(err));
}

/* The tokenizer a hostile file's tokenizer.* keys made (if it loaded):
 * text with control tokens through it and back, and its special ids. */
static void exercise_tokenizer(const tn_tokenizer *tok) {
    if (!tok)
        return;
    static const char text[] = "<|im_start|>user\nHello, w\xc3\xb6rld! 123 <bos>\xff\n\n";
    tn_tokens ids = {0};
    tn_error err = {0};
    int rc = tn_tokenize(tok, text, sizeof text - 1, TN_TOKENIZE_SPECIAL | TN_TOKENIZE_ADD_BOS,
                         &ids, &err);
    CHECKF(rc == TN_OK || one_line(&err), "%s: tokenize: '%s'", current, err.message);
    tn_buf out = {0};
    if (rc == TN_OK) {
        rc = tn_detokenize(tok, ids.ids, ids.n, TN_DETOKENIZE_SPECIAL, &out, &err);
        CHECKF(rc == TN_OK || one_line(&err), "%s: detokenize: '%s'", current, err.message);
    }
    const int32_t special[] = {tn_tokenizer_bos(tok), tn_tokenizer_eos(tok),
                               tn_tokenizer_eot(tok), tn_tokenizer_unk(tok),
                               tn_tokenizer_pad(tok)};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
        size_t len = 0;
        const char *piece = tn_token_piece(tok, special[i], &len);
        CHECKF(special[i] < 0 || piece, "%s: special id %d has no piece", current, special[i]);
        (void)tn_token_is_eog(tok, special[i]);
    }
    tn_buf_free(&out);
    tn_tokens_free(&ids);
}

/* One short chat turn (template, tokenizer, sampling, stop tokens) on a
 * model whose tokenizer.* metadata is hostile. */
static void exercise_session(const base *b, const tn_model *m) {
    tn_session *s = NULL;
    tn_error err = {0};
    int rc = tn_session_new(m, tn_test_session_params(64, 1), &s, &err);
    CHECKF(ran(b, rc, &err), "%s: session: '%s'", current, err.message);
    if (rc != TN_OK)
        return;
    tn_gen_params g = tn_gen_default_params();
    g.max_tokens = 2;
    tn_session_stats st;
    rc = tn_session_ask(s, "Hi <|im_end|> <end_of_turn>", &g, NULL, NULL, &st, &err);
    CHECKF(ran(b, rc, &err), "%s: ask: '%s'", current, err.message);
    tn_session_free(s);
}

/* Opens path as b's kind and, if it opens, runs it briefly. Returns the
 * status of the open; checks every message on the way. */
static int try_variant(base *b, const char *path) {
    tn_error err = {0};
    int rc;
    if (verbose) /* a UBSan report has no death callback: it follows this line */
        fprintf(stderr, "trying %s\n", current);
    alarm(60);
    if (b->kind == BASE_MODEL) {
        tn_model *m = NULL;
        rc = tn_model_load(path, tn_model_default_params(), &m, &err);
        CHECKF(rc == TN_OK ? m != NULL : m == NULL && one_line(&err), "%s: load: rc %d, '%s'",
               current, rc, err.message);
        if (rc == TN_OK && m) {
            tn_ctx *ctx = NULL;
            int r2 = tn_ctx_new(m, 32, 1, &ctx, &err);
            CHECKF(ran(b, r2, &err), "%s: ctx: '%s'", current, err.message);
            if (r2 == TN_OK) {
                const int32_t nv = tn_model_n_vocab(m);
                float *lg = malloc(sizeof(float) * (size_t)(nv > 0 ? nv : 1));
                const int32_t toks[2] = {nv > 1 ? 1 : 0, nv > 2 ? 2 : 0};
                r2 = tn_ctx_decode(ctx, toks, 2, TN_LOGITS_LAST, lg, &err);
                CHECKF(ran(b, r2, &err), "%s: decode: '%s'", current, err.message);
                bool finite = true;
                for (int32_t t = 0; r2 == TN_OK && t < nv; t++)
                    finite = finite && isfinite(lg[t]);
                /* allowed: weights of a changed type are the old bytes
                 * reread, finite but extreme enough to overflow */
                b->nonfinite += !finite;
                CHECKF(finite || !b->must_run, "%s: non-finite logits", current);
                free(lg);
                tn_ctx_free(ctx);
            }
            exercise_tokenizer(tn_model_tokenizer(m));
            if (b->chat)
                exercise_session(b, m);
            tn_model_free(m);
        }
    } else if (b->kind == BASE_VISION) {
        tn_vision *v = NULL;
        rc = tn_vision_load(path, &v, &err);
        CHECKF(rc == TN_OK ? v != NULL : v == NULL && one_line(&err), "%s: load: rc %d, '%s'",
               current, rc, err.message);
        if (rc == TN_OK && v) {
            /* a small picture at the smallest budget: runs the tower */
            float rgb[20 * 16 * 3];
            for (size_t i = 0; i < sizeof rgb / sizeof rgb[0]; i++)
                rgb[i] = (float)(i % 7) / 7.0f;
            const int *list = NULL;
            const int budget = tn_vision_budgets(v, &list) > 0 ? list[0] : 4;
            float *rows = NULL;
            int nt = 0;
            int r2 = tn_vision_encode_new(v, rgb, 20, 16, budget, 1, &rows, &nt, &err);
            CHECKF(ran(b, r2, &err), "%s: encode: '%s'", current, err.message);
            free(rows);
            tn_vision_free(v);
        }
    } else {
        tn_drafter_params dp = tn_drafter_default_params();
        dp.n_threads = 1;
        tn_drafter *d = NULL;
        rc = b->kind == BASE_MTP ? tn_drafter_new_mtp(b->target, path, dp, &d, &err)
                                 : tn_drafter_new_dflash(b->target, path, dp, &d, &err);
        CHECKF(rc == TN_OK ? d != NULL : d == NULL && one_line(&err), "%s: load: rc %d, '%s'",
               current, rc, err.message);
        if (rc == TN_OK && d) {
            tn_gen_params g = tn_gen_default_params();
            g.max_tokens = 3;
            g.drafter = d;
            g.sampler.temperature = 0;
            tn_session_stats st;
            tn_session_reset(b->sess);
            int r2 = tn_session_ask(b->sess, "hi", &g, NULL, NULL, &st, &err);
            CHECKF(ran(b, r2, &err), "%s: ask: '%s'", current, err.message);
            tn_drafter_free(d);
        }
    }
    alarm(0);
    if ((b->must_run || verbose) && rc != TN_OK)
        fprintf(stderr, "%s: %s\n", current, err.message);
    /* a refusal names the file, so that a user knows which one to replace */
    CHECKF(rc == TN_OK || strstr(err.message, path), "%s: the message does not name the file: '%s'",
           current, err.message);
    b->variants++;
    if (rc == TN_OK)
        b->loaded++;
    else
        b->refused++;
    return rc;
}

/* ------------------------------------------------------------ variants */

enum {
    /* scalars */
    OP_ZERO, OP_ONE, OP_NEG1, OP_I32MAX, OP_U32MAX, OP_BIG, OP_PLUS1,
    OP_NAN, OP_INF, OP_NEGINF, OP_NEG, OP_HUGE, OP_TINY,
    OP_AS_STR, OP_AS_I32NEG, OP_AS_F32, OP_AS_U32, OP_FLIP, OP_EMPTY_STR,
    /* arrays */
    OP_ARR_EMPTY, OP_ARR_ONE, OP_ARR_PLUS, OP_ARR_MINUS, OP_ARR_WRONG,
    OP_ARR_ALL0, OP_ARR_ALLNEG1, OP_ARR_ALLBIG, OP_ARR_ALLNAN, OP_ARR_ALLTRUE,
    OP_ARR_ALLEMPTY, OP_DROP,
    OP_KEY_COUNT_
};

static const char *const op_names[OP_KEY_COUNT_] = {
    "0", "1", "-1", "INT32_MAX", "UINT32_MAX", "1<<20", "+1",
    "NaN", "Inf", "-Inf", "negative", "1e30", "1e-30",
    "a string", "i32 -1", "f32", "u32", "flipped", "empty string",
    "empty", "one element", "length+1", "length-1", "wrong element type",
    "all 0", "all -1", "all 1<<20", "all NaN", "all true",
    "all empty strings", "missing",
};

static bool is_uint(tn_gguf_type t) {
    return t == TN_GGUF_U8 || t == TN_GGUF_U16 || t == TN_GGUF_U32 || t == TN_GGUF_U64;
}
static bool is_sint(tn_gguf_type t) {
    return t == TN_GGUF_I8 || t == TN_GGUF_I16 || t == TN_GGUF_I32 || t == TN_GGUF_I64;
}
static bool is_float(tn_gguf_type t) { return t == TN_GGUF_F32 || t == TN_GGUF_F64; }

/* Writes integer x as type t (truncated as a cast would). */
static void set_int(tn_gguf_writer *w, const char *key, tn_gguf_type t, int64_t x) {
    switch (t) {
    case TN_GGUF_U8: tn_gguf_writer_set_u8(w, key, (uint8_t)x); break;
    case TN_GGUF_I8: tn_gguf_writer_set_i8(w, key, (int8_t)x); break;
    case TN_GGUF_U16: tn_gguf_writer_set_u16(w, key, (uint16_t)x); break;
    case TN_GGUF_I16: tn_gguf_writer_set_i16(w, key, (int16_t)x); break;
    case TN_GGUF_U32: tn_gguf_writer_set_u32(w, key, (uint32_t)x); break;
    case TN_GGUF_I32: tn_gguf_writer_set_i32(w, key, (int32_t)x); break;
    case TN_GGUF_U64: tn_gguf_writer_set_u64(w, key, (uint64_t)x); break;
    case TN_GGUF_I64: tn_gguf_writer_set_i64(w, key, x); break;
    default: break;
    }
}

/* Fills one element of type t with integer x or float f. */
static void put_elem(uint8_t *dst, tn_gguf_type t, int64_t x, double f) {
    switch (t) {
    case TN_GGUF_F32: { float v = (float)f; memcpy(dst, &v, 4); break; }
    case TN_GGUF_F64: memcpy(dst, &f, 8); break;
    case TN_GGUF_BOOL: *dst = x != 0; break;
    default: {
        uint64_t u = (uint64_t)x; /* little-endian hosts only, as the writer */
        memcpy(dst, &u, tn_gguf_type_size(t));
    }
    }
}

/* Whether op applies to a value of v's type; if w, writes key with it. */
static bool apply_key(tn_gguf_writer *w, const char *key, const tn_gguf_value *v, int op) {
    if (op == OP_DROP)
        return true; /* rewrite leaves the key out */
    const tn_gguf_type t = v->type;
    const bool num = is_uint(t) || is_sint(t);
    int64_t orig = is_uint(t) ? (int64_t)v->v.u64 : is_sint(t) ? v->v.i64 : 0;
    if (num) {
        static const int64_t vals[] = {
            [OP_ZERO] = 0, [OP_ONE] = 1, [OP_NEG1] = -1, [OP_I32MAX] = INT32_MAX,
            [OP_U32MAX] = UINT32_MAX, [OP_BIG] = 1 << 20};
        if (op <= OP_BIG) {
            if (op == OP_U32MAX && tn_gguf_type_size(t) < 4)
                return false;
            if (w)
                set_int(w, key, t, vals[op]);
            return true;
        }
        if (op == OP_PLUS1) {
            if (w)
                set_int(w, key, t, orig + 1);
            return true;
        }
        if (op == OP_AS_STR || op == OP_AS_F32 || (op == OP_AS_I32NEG && is_uint(t))) {
            if (w) {
                if (op == OP_AS_STR)
                    tn_gguf_writer_set_str(w, key, "1");
                else if (op == OP_AS_F32)
                    tn_gguf_writer_set_f32(w, key, (float)orig + 0.5f);
                else
                    tn_gguf_writer_set_i32(w, key, -1);
            }
            return true;
        }
        return false;
    }
    if (is_float(t)) {
        double x;
        switch (op) {
        case OP_ZERO: x = 0; break;
        case OP_NEG1: x = -1; break;
        case OP_NAN: x = NAN; break;
        case OP_INF: x = INFINITY; break;
        case OP_NEGINF: x = -INFINITY; break;
        case OP_HUGE: x = 1e30; break;
        case OP_TINY: x = 1e-30; break;
        case OP_AS_STR: if (w) tn_gguf_writer_set_str(w, key, "1.0"); return true;
        case OP_AS_U32:
            if (w)
                tn_gguf_writer_set_u32(w, key, (uint32_t)(v->v.f64 > 1 ? v->v.f64 : 1));
            return true;
        default: return false;
        }
        if (w) {
            if (t == TN_GGUF_F32)
                tn_gguf_writer_set_f32(w, key, (float)x);
            else
                tn_gguf_writer_set_f64(w, key, x);
        }
        return true;
    }
    if (t == TN_GGUF_BOOL) {
        if (op != OP_FLIP && op != OP_AS_U32 && op != OP_AS_STR)
            return false;
        if (w) {
            if (op == OP_FLIP)
                tn_gguf_writer_set_bool(w, key, !v->v.u64);
            else if (op == OP_AS_U32)
                tn_gguf_writer_set_u32(w, key, 2);
            else
                tn_gguf_writer_set_str(w, key, "true");
        }
        return true;
    }
    if (t == TN_GGUF_STRING) {
        if (op != OP_EMPTY_STR && op != OP_AS_U32)
            return false;
        if (w) {
            if (op == OP_EMPTY_STR)
                tn_gguf_writer_set_str(w, key, "");
            else
                tn_gguf_writer_set_u32(w, key, 1);
        }
        return true;
    }
    if (t != TN_GGUF_ARRAY)
        return false;
    const tn_gguf_type et = v->v.arr.type;
    const uint64_t n = v->v.arr.n;
    const size_t es = tn_gguf_type_size(et);
    if (et == TN_GGUF_STRING) {
        uint64_t m;
        switch (op) {
        case OP_ARR_EMPTY: m = 0; break;
        case OP_ARR_ONE: m = 1; break;
        case OP_ARR_PLUS: m = n + 1; break;
        case OP_ARR_MINUS: if (n == 0) return false; m = n - 1; break;
        case OP_ARR_ALLEMPTY: m = n; break;
        case OP_ARR_WRONG: {
            if (w) {
                int32_t *z = calloc(n ? n : 1, sizeof *z);
                tn_gguf_writer_set_arr(w, key, TN_GGUF_I32, z, n);
                free(z);
            }
            return true;
        }
        default: return false;
        }
        if (!w)
            return true;
        /* strings copied NUL-terminated; an element past the end repeats
         * the last (or is "x") */
        char **s = calloc(m ? m : 1, sizeof *s);
        for (uint64_t i = 0; i < m; i++) {
            if (op == OP_ARR_ALLEMPTY || n == 0) {
                s[i] = strdup(op == OP_ARR_ALLEMPTY ? "" : "x");
                continue;
            }
            const tn_str e = v->v.arr.items[i < n ? i : n - 1].v.str;
            s[i] = strndup(e.ptr, e.len);
        }
        tn_gguf_writer_set_arr_str(w, key, (const char *const *)s, m);
        for (uint64_t i = 0; i < m; i++)
            free(s[i]);
        free(s);
        return true;
    }
    if (!es) { /* arrays of arrays: only emptied */
        if (op != OP_ARR_EMPTY)
            return false;
        if (w)
            tn_gguf_writer_set_arr(w, key, TN_GGUF_I32, NULL, 0);
        return true;
    }
    uint64_t m = n;
    switch (op) {
    case OP_ARR_EMPTY: m = 0; break;
    case OP_ARR_ONE: m = 1; break;
    case OP_ARR_PLUS: m = n + 1; break;
    case OP_ARR_MINUS: if (n == 0) return false; m = n - 1; break;
    case OP_ARR_WRONG: {
        if (w) {
            const char **s = calloc(n ? n : 1, sizeof *s);
            for (uint64_t i = 0; i < n; i++)
                s[i] = "0";
            tn_gguf_writer_set_arr_str(w, key, s, n);
            free(s);
        }
        return true;
    }
    case OP_ARR_ALL0: case OP_ARR_ALLNEG1: case OP_ARR_ALLBIG:
        if (et == TN_GGUF_BOOL || is_float(et)) return false;
        break;
    case OP_ARR_ALLNAN: if (!is_float(et)) return false; break;
    case OP_ARR_ALLTRUE: if (et != TN_GGUF_BOOL) return false; break;
    default: return false;
    }
    if (!w)
        return true;
    uint8_t *d = calloc(m ? m : 1, es);
    for (uint64_t i = 0; i < m; i++) {
        uint8_t *dst = d + i * es;
        if (op == OP_ARR_ALL0) put_elem(dst, et, 0, 0);
        else if (op == OP_ARR_ALLNEG1) put_elem(dst, et, -1, 0);
        else if (op == OP_ARR_ALLBIG) put_elem(dst, et, 1 << 20, 0);
        else if (op == OP_ARR_ALLNAN) put_elem(dst, et, 0, NAN);
        else if (op == OP_ARR_ALLTRUE) put_elem(dst, et, 1, 0);
        else if (n) memcpy(dst, v->v.arr.data + (i < n ? i : n - 1) * es, es);
    }
    tn_gguf_writer_set_arr(w, key, et, d, m);
    free(d);
    return true;
}

/* Tensor changes: dimension d + 1 (a block for ne[0] of a block type),
 * halved, zero; or another type. */
enum { TOP_PLUS, TOP_HALF, TOP_ZERO, TOP_TYPE, TOP_DROP };
static const char *const top_names[] = {"+1", "/2", "0"};

/* The types a tensor is changed to (one variant each, where a row of the
 * tensor's length is whole blocks of it). */
static const uint32_t other_types[] = {TN_TYPE_F32, TN_TYPE_F16, TN_TYPE_BF16, TN_TYPE_Q8_0,
                                       TN_TYPE_Q4_0, TN_TYPE_Q4_K, TN_TYPE_Q6_K, TN_TYPE_MXFP4,
                                       TN_TYPE_Q8_K};
#define N_OTHER_TYPES (sizeof other_types / sizeof other_types[0])

/* New shape and type of t under (op, dim); false if not applicable. For
 * TOP_TYPE, dim indexes other_types. */
static bool apply_tensor(const tn_gguf_tensor *t, int op, uint32_t dim, uint64_t ne[4],
                         uint32_t *type) {
    for (int i = 0; i < 4; i++)
        ne[i] = t->ne[i];
    *type = t->type;
    if (op == TOP_DROP)
        return true;
    if (op == TOP_TYPE) {
        if (dim >= N_OTHER_TYPES || other_types[dim] == t->type ||
            !tn_type_row_bytes(other_types[dim], t->ne[0]))
            return false;
        *type = other_types[dim];
        return true;
    }
    if (dim >= t->n_dims)
        return false;
    const uint64_t step = dim == 0 ? tn_type_block_size(t->type) : 1;
    if (!step)
        return false;
    if (op == TOP_PLUS)
        ne[dim] += step;
    else if (op == TOP_HALF) {
        ne[dim] = ne[dim] / 2 / step * step;
        if (!ne[dim] || ne[dim] == t->ne[dim])
            return false;
    } else
        ne[dim] = 0;
    return true;
}

/* Copies src to dst with key `key` changed by op (key_op >= 0) or tensor
 * number `ti` changed by (t_op, dim). */
static int rewrite(const tn_gguf *g, const char *dst, int64_t ki, int key_op, int64_t ti,
                   int t_op, uint32_t dim) {
    tn_gguf_writer *w = tn_gguf_writer_new();
    for (int64_t i = 0; i < tn_gguf_n_kv(g); i++) {
        tn_str k = tn_gguf_kv_key(g, i);
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)k.len, k.ptr);
        if (i == ki && key_op == OP_DROP)
            continue;
        if (i == ki)
            apply_key(w, key, tn_gguf_kv_value(g, i), key_op);
        else
            tn_gguf_writer_set_value(w, key, tn_gguf_kv_value(g, i));
    }
    int rc = TN_OK;
    for (int64_t i = 0; i < tn_gguf_n_tensors(g) && rc == TN_OK; i++) {
        const tn_gguf_tensor *t = tn_gguf_tensor_at(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        uint64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        uint32_t type = t->type;
        if (i == ti)
            apply_tensor(t, t_op, dim, ne, &type);
        if (i == ti && t_op == TOP_DROP)
            continue;
        if (i != ti) {
            rc = tn_gguf_writer_add_tensor_data(w, name, type, t->n_dims, ne, t->data, t->nbytes);
            continue;
        }
        uint64_t rows = 1;
        for (uint32_t d = 1; d < t->n_dims; d++)
            rows *= ne[d];
        const uint64_t nbytes = tn_type_row_bytes(type, ne[0]) * rows;
        /* the original bytes over and over: plausible values of the old
         * type, garbage of a new one */
        uint8_t *data = malloc(nbytes ? nbytes : 1);
        for (uint64_t o = 0; o < nbytes; o += t->nbytes) {
            const uint64_t c = nbytes - o < t->nbytes ? nbytes - o : t->nbytes;
            memcpy(data + o, t->data, c);
        }
        rc = tn_gguf_writer_add_tensor_data(w, name, type, t->n_dims, ne, data, nbytes);
        free(data);
    }
    tn_error err = {0};
    if (rc == TN_OK)
        rc = tn_gguf_writer_write(w, dst, &err);
    tn_gguf_writer_free(w);
    return rc;
}

static void sweep(base *b) {
    tn_error err = {0};
    const clock_t t0 = clock();
    int rc = make_base(b, &err);
    CHECKF(rc == TN_OK, "%s: the base model: %s", b->name, err.message);
    if (rc != TN_OK)
        return;
    /* 1. the file as written loads and runs */
    snprintf(current, sizeof current, "%s as written", b->name);
    b->must_run = true;
    b->chat = b->kind == BASE_MODEL;
    CHECKF(try_variant(b, b->path) == TN_OK, "%s: the valid file is refused", b->name);
    b->must_run = false;
    b->chat = false;

    tn_gguf *g = NULL;
    rc = tn_gguf_open(b->path, &g, &err);
    CHECKF(rc == TN_OK, "%s: %s", b->name, err.message);
    if (rc != TN_OK)
        return;
    /* Thousands of variants, each written with an fsync: in memory when
     * the machine has /dev/shm (a few times faster on a disk). */
    char dst[4096];
    if (access("/dev/shm", W_OK) == 0)
        snprintf(dst, sizeof dst, "/dev/shm/tern-hostile-%ld.gguf", (long)getpid());
    else
        snprintf(dst, sizeof dst, "%s", tmp("variant.gguf"));
    /* 2. every change of every key */
    for (int64_t i = 0; i < tn_gguf_n_kv(g); i++) {
        tn_str k = tn_gguf_kv_key(g, i);
        const tn_gguf_value *v = tn_gguf_kv_value(g, i);
        /* the layout's own key: the writer lays the file out by it (and
         * test-gguf-corrupt feeds the reader bad ones) */
        if (tn_str_eq(k, "general.alignment"))
            continue;
        for (int op = 0; op < OP_KEY_COUNT_; op++) {
            if (!apply_key(NULL, NULL, v, op))
                continue;
            snprintf(current, sizeof current, "%s: %.*s = %s", b->name, (int)k.len, k.ptr,
                     op_names[op]);
            rc = rewrite(g, dst, i, op, -1, 0, 0);
            CHECKF(rc == TN_OK, "%s: cannot write the variant", current);
            b->chat = b->kind == BASE_MODEL && k.len > 10 && !memcmp(k.ptr, "tokenizer.", 10);
            if (rc == TN_OK)
                try_variant(b, dst);
            b->chat = false;
        }
    }
    /* 3. tensors: each one missing, each dimension + 1, halved and zero,
     * each other type. All of them for the tensors outside the layers and
     * those of layer 0; for the other layers (the same code reads them)
     * two of those changes per tensor, rotating through the list, unless
     * TERN_HOSTILE_ALL is set. */
    const bool all = getenv("TERN_HOSTILE_ALL") != NULL;
    int64_t turn = 0;
    for (int64_t i = 0; i < tn_gguf_n_tensors(g); i++) {
        const tn_gguf_tensor *t = tn_gguf_tensor_at(g, i);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        const bool every = all || strncmp(name, "blk.", 4) || !strncmp(name, "blk.0.", 6);
        snprintf(current, sizeof current, "%s: tensor %s missing", b->name, name);
        rc = rewrite(g, dst, -1, 0, i, TOP_DROP, 0);
        CHECKF(rc == TN_OK, "%s: cannot write the variant", current);
        if (rc == TN_OK)
            try_variant(b, dst);
        /* (op, dim) pairs: dims 0-3 of the three shape changes, then the types */
        const int n_pairs = 3 * 4 + (int)N_OTHER_TYPES;
        int done = 0;
        for (int k = 0; k < n_pairs && (every || done < 2); k++) {
            const int pair = every ? k : (int)((turn + k) % n_pairs);
            const int op = pair < 12 ? pair / 4 : TOP_TYPE;
            const uint32_t dim = (uint32_t)(pair < 12 ? pair % 4 : pair - 12);
            uint64_t ne[4];
            uint32_t type;
            if (!apply_tensor(t, op, dim, ne, &type))
                continue;
            if (op == TOP_TYPE)
                snprintf(current, sizeof current, "%s: tensor %s: type %s", b->name, name,
                         tn_type_name(type));
            else
                snprintf(current, sizeof current, "%s: tensor %s: ne[%u] %s", b->name, name, dim,
                         top_names[op]);
            if (rewrite(g, dst, -1, 0, i, op, dim) != TN_OK)
                continue; /* a shape the writer will not store */
            try_variant(b, dst);
            done++;
        }
        turn += 2;
    }
    tn_gguf_close(g);
    remove(dst);
    remove(b->path);
    char tpath[sizeof b->path + sizeof "-target.gguf"]; /* always fits: -Wformat-truncation at -O0 */
    snprintf(tpath, sizeof tpath, "%s-target.gguf", b->path);
    remove(tpath);
    fprintf(stderr,
            "%-16s %4d variants: %4d load and run (%d to non-finite logits), %4d refused "
            "(%.1f s cpu)\n",
            b->name, b->variants, b->loaded, b->nonfinite, b->refused,
            (double)(clock() - t0) / CLOCKS_PER_SEC);
}

int main(int argc, char **argv) {
    /* every variant is a new file: nothing to gain from the repack cache */
    setenv("TERN_REPACK_CACHE", "0", 1);
    signal(SIGALRM, on_alarm);
    verbose = getenv("TERN_HOSTILE_VERBOSE") != NULL;
    if (__sanitizer_set_death_callback)
        __sanitizer_set_death_callback(on_death);
    base bases[] = {
        {.name = "llama", .kind = BASE_MODEL},
        {.name = "qwen3", .kind = BASE_MODEL},
        {.name = "gemma3", .kind = BASE_MODEL},
        {.name = "gemma4", .kind = BASE_MODEL},
        {.name = "gemma4moe", .kind = BASE_MODEL},
        {.name = "qwen3moe", .kind = BASE_MODEL},
        {.name = "gpt-oss", .kind = BASE_MODEL},
        {.name = "dflash", .kind = BASE_DFLASH},
        {.name = "dflash-gemma", .kind = BASE_DFLASH},
        {.name = "dflash-swa", .kind = BASE_DFLASH},
        {.name = "mtp", .kind = BASE_MTP},
        {.name = "vision-gemma3", .kind = BASE_VISION},
        {.name = "vision-gemma4v", .kind = BASE_VISION},
    };
    const size_t nb = sizeof bases / sizeof bases[0];
    int ran = 0;
    for (size_t i = 0; i < nb; i++) {
        if (argc > 1 && strcmp(argv[1], bases[i].name))
            continue;
        sweep(&bases[i]);
        ran++;
        tn_session_free(bases[i].sess);
        tn_model_free(bases[i].target);
    }
    CHECKF(ran > 0, "no base model is named %s", argc > 1 ? argv[1] : "");
    return tn_test_finish("model-hostile");
}
