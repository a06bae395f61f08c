/* tern-cli bench: how fast this machine runs a model, and how close that is
 * to what its memory allows.
 *
 *   model mode    pp (prompt tokens/s), tg (generated tokens/s), the cost of
 *                 one B-token verify step against a 1-token step, the
 *                 machine's streaming read bandwidth, the decode bound
 *                 (bandwidth / bytes read per token) and peak RSS
 *   --kernels     matrix-product throughput per weight type and batch at the
 *                 Llama-3.2-1B shapes, no model file needed
 *
 * Figures are medians over repetitions, with the min-max spread. */
#include "cli.h"
#include "tn-doctor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void usage(FILE *out) {
    fprintf(out,
            _("usage: tern-cli bench -m MODEL [-p 512] [-n 128] [--verify 16] [-t N] [-r REPS]\n"
              "                      [--json]\n"
              "       tern-cli bench --kernels [--types q4_0,q8_0,...] [--shapes 2048x2048,...]\n"
              "                      [--batch 1,2,4,8,16] [--isa best|all|scalar|avx2|avx512]\n"
              "                      [-t N] [-r REPS] [--json]\n"
              "       tern-cli bench --sampler [-m MODEL] (tern-cli bench --sampler --help)\n"
              "       tern-cli bench --pin -m MODEL ... (tern-cli bench --pin --help)\n"
              "       tern-cli bench --spec S -m MODEL ... (tern-cli bench --spec S --help)\n"
              "       --backend auto|cpu|xrt [--no-fallback] with any of them: xrt cannot run\n"
              "       yet, the CPU runs instead (or, with --no-fallback, exit status 3)\n\n"
              "Model mode: pp = prompt tokens/s (one P-token decode), tg = generated tokens/s\n"
              "(N 1-token decodes from an empty context), verify = time of one B-token step\n"
              "over a 1-token step for B = 2, 4, 8, ... up to --verify, measured memory\n"
              "bandwidth, decode bound = bandwidth / bytes read per token, peak RSS.\n"
              "--kernels: matmul time per call for ROWSxCOLS weights and B activation rows,\n"
              "in the fastest prefetch mode (pf: none, near or far) and, at B = 1, weight\n"
              "streams per thread (st: 1 or 2), as a context chooses.\n"
              "-t: threads (default: physical cores). -r: repetitions (default 3).\n"
              "TERN_ISA=scalar|avx2 in the environment caps the kernels, TERN_REPACK=0 keeps\n"
              "the file's row layout (no interleaving): the before/after switches.\n"
              "TERN_DECODE_PREFETCH=0, =near or =1 sets every weight type's decode prefetch\n"
              "to none, near or far, TERN_TWO_STREAMS=0 or =1 its decode weight streams per\n"
              "thread to one or two; unset, each context measures them and chooses per type.\n"));
}

/* Peak resident set (VmHWM) in bytes, 0 if unknown. */
static uint64_t peak_rss(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) {
            kb = strtoull(line + 6, NULL, 10);
            break;
        }
    fclose(f);
    return kb * 1024;
}

static size_t llc_bytes(void) {
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    long c = l3 > 0 ? l3 : l2 > 0 ? l2 : 32L << 20;
    /* A VM may report its host's whole L3 (508 MB on an EPYC here), of
     * which a few cores see one CCD's 32 MB: 16 such "caches" made the
     * bandwidth buffer 8 GB and the kernel copies 4 GB a matrix, minutes
     * of copying and RSS a 24 GB machine cannot spare. No cache one core
     * reaches is beyond 128 MiB today. */
    if (c > (128L << 20))
        c = 128L << 20;
    return (size_t)c;
}

/* Streaming read bandwidth through a pool of the given size over a buffer
 * 16x the LLC (at least 512 MiB). */
typedef struct {
    tn_probe *probe;
    uint8_t *buf;
    size_t bytes;
} bw_probe;

static bool bw_probe_open(bw_probe *p, int threads) {
    p->bytes = llc_bytes() * 16;
    if (p->bytes < (512u << 20))
        p->bytes = 512u << 20;
    p->probe = tn_probe_new(threads);
    /* In 2 MiB pages, as the repacked weights are (engine/cpu/repack.c):
     * with 4 KiB pages the TLB misses cost a fifth of the rate, and the bound
     * would sit below what decode reaches. */
    const size_t huge_page = (size_t)2 << 20;
    p->bytes = (p->bytes + huge_page - 1) / huge_page * huge_page;
    p->buf = aligned_alloc(huge_page, p->bytes);
#ifdef MADV_HUGEPAGE
    if (p->buf)
        madvise(p->buf, p->bytes, MADV_HUGEPAGE); /* a hint: without THP nothing changes */
#endif
    if (!p->probe || !p->buf) {
        tn_probe_free(p->probe);
        free(p->buf);
        p->probe = NULL;
        p->buf = NULL;
        return false;
    }
    memset(p->buf, 1, p->bytes); /* fault every page in first */
    tn_probe_read_bandwidth(p->probe, p->buf, p->bytes);
    return true;
}

/* GB/s: the median of three passes (a single pass is at the mercy of
 * other work on the machine; the best of several catches bursts the memory
 * does not sustain). */
static double bw_probe_sample(bw_probe *p) {
    double r[3];
    for (int i = 0; i < 3; i++)
        r[i] = tn_probe_read_bandwidth(p->probe, p->buf, p->bytes) / 1e9;
    return cli_spread_of(r, 3).median;
}

static void bw_probe_close(bw_probe *p) {
    tn_probe_free(p->probe);
    free(p->buf);
    p->probe = NULL;
    p->buf = NULL;
}

/* ---------------------------------------------------------------- kernels */

typedef struct {
    int64_t rows, cols;
} shape;

static bool parse_list(const char *opt, const char *s, char items[][32], int max, int *n) {
    *n = 0;
    if (!*s) {
        /* One empty item, which each list's own check refuses with what it
         * takes (--batch ''); no items at all was an exit 1 without a word. */
        items[0][0] = '\0';
        *n = 1;
        return true;
    }
    while (*s) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 0 || len >= 32 || *n >= max) {
            cli_error(_("bench: %s: bad list '%s'"), opt, s);
            return false;
        }
        memcpy(items[*n], s, len);
        items[*n][len] = 0;
        (*n)++;
        s += len + (e ? 1 : 0);
    }
    return *n > 0;
}

/* tn_prefetch_mode by name */
static const char *const prefetch_mode_names[TN_PREFETCH_MODES] = {"none", "near", "far"};

static int bench_kernels(const char *types_s, const char *shapes_s, const char *batch_s,
                         const char *isa_s, int threads, int reps, bool json) {
    char items[32][32];
    int n_types = 0, n_shapes = 0, n_batch = 0, n_isa = 0;
    uint32_t types[32];
    shape shapes[32];
    int batches[32];
    int isas[32];

    if (!parse_list("--types", types_s, items, 32, &n_types))
        return CLI_EXIT_USAGE;
    for (int i = 0; i < n_types; i++) {
        int t = tn_type_from_name(items[i]);
        if (t < 0 || !tn_type_supported((uint32_t)t)) {
            cli_error(_("bench: --types: unknown or unsupported type '%s'"), items[i]);
            return CLI_EXIT_USAGE;
        }
        types[i] = (uint32_t)t;
    }
    if (!parse_list("--shapes", shapes_s, items, 32, &n_shapes))
        return CLI_EXIT_USAGE;
    for (int i = 0; i < n_shapes; i++) {
        long long r, c;
        char tail;
        if (sscanf(items[i], "%lldx%lld%c", &r, &c, &tail) != 2 || r <= 0 || c <= 0 ||
            r > (1LL << 24) || c > (1LL << 20)) {
            cli_error(_("bench: --shapes: '%s' is not ROWSxCOLS"), items[i]);
            return CLI_EXIT_USAGE;
        }
        shapes[i] = (shape){r, c};
    }
    if (!parse_list("--batch", batch_s, items, 32, &n_batch))
        return CLI_EXIT_USAGE;
    for (int i = 0; i < n_batch; i++) {
        long b;
        if (!cli_parse_long("--batch", items[i], 1, 4096, &b))
            return CLI_EXIT_USAGE;
        batches[i] = (int)b;
    }
    if (!strcmp(isa_s, "best")) {
        isas[n_isa++] = tn_cpu_kernels_best();
    } else if (!strcmp(isa_s, "all")) {
        for (int i = 0; i < tn_cpu_kernels_count() && n_isa < 32; i++)
            if (tn_cpu_kernels_available(i))
                isas[n_isa++] = i;
    } else {
        if (!parse_list("--isa", isa_s, items, 32, &n_isa))
            return CLI_EXIT_USAGE;
        if (n_isa > tn_cpu_kernels_count()) {
            /* It ended with status 1 and not a word. */
            cli_error(_("bench: --isa takes at most %d families (scalar, avx2, avx512; 'all': "
                        "each this CPU runs), not %d"),
                      tn_cpu_kernels_count(), n_isa);
            return CLI_EXIT_USAGE;
        }
        for (int i = 0; i < n_isa; i++) {
            int k = 0;
            while (k < tn_cpu_kernels_count() && strcmp(items[i], tn_cpu_kernels_name(k)))
                k++;
            if (k == tn_cpu_kernels_count()) {
                cli_error(_("bench: --isa: unknown family '%s' (scalar, avx2, avx512)"), items[i]);
                return CLI_EXIT_USAGE;
            }
            if (!tn_cpu_kernels_available(k)) {
                cli_error(_("bench: --isa: this CPU or build cannot run %s"), items[i]);
                return CLI_EXIT_BAD_INPUT;
            }
            isas[i] = k;
        }
    }

    tn_probe *cpu = tn_probe_new(threads);
    if (!cpu) {
        cli_error(_("bench: cannot start %d threads"), threads);
        return CLI_EXIT_BAD_INPUT;
    }
    int max_b = 1;
    for (int i = 0; i < n_batch; i++)
        max_b = batches[i] > max_b ? batches[i] : max_b;
    int64_t max_rows = 1, max_cols = 1;
    for (int i = 0; i < n_shapes; i++) {
        max_rows = shapes[i].rows > max_rows ? shapes[i].rows : max_rows;
        max_cols = shapes[i].cols > max_cols ? shapes[i].cols : max_cols;
    }
    float *x = malloc(sizeof(float) * (size_t)max_b * (size_t)max_cols);
    float *y = malloc(sizeof(float) * (size_t)max_b * (size_t)max_rows);
    double *samples = calloc((size_t)reps, sizeof *samples);
    if (!x || !y || !samples) {
        free(x);
        free(y);
        free(samples);
        tn_probe_free(cpu);
        cli_error(_("bench: out of memory"));
        return CLI_EXIT_BAD_INPUT;
    }
    /* At B = 1 a product streams its weights: each B = 1 figure is set
     * against the machine's streaming read measured right after it (the
     * issue's "% of the measured bandwidth"), which moves by a tenth from
     * minute to minute on a shared machine. */
    bool any_b1 = false;
    for (int i = 0; i < n_batch; i++)
        any_b1 = any_b1 || batches[i] == 1;
    bw_probe bwp = {0};
    const bool have_bw = any_b1 && bw_probe_open(&bwp, threads);
    uint64_t seed = 42;
    for (size_t i = 0; i < (size_t)max_b * (size_t)max_cols; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)(seed >> 40) / (float)(1 << 24) - 0.5f;
    }

    if (json)
        printf("{\"threads\": %d, \"reps\": %d, \"results\": [", tn_probe_threads(cpu), reps);
    else
        printf("threads %d, %d reps, medians (min-max); GB/s = weight bytes per second\n"
               "%-7s %-6s %-4s %-4s %-2s %-12s %5s %10s %16s %9s %9s %8s %s\n",
               tn_probe_threads(cpu), reps, "isa", "type", "lay", "pf", "st", "shape", "batch", "ms/call",
               "(min-max)", "GB/s", "GFLOP/s", "vs b=1", have_bw ? "  of read bandwidth" : "");
    bool first = true;
    int rc = CLI_EXIT_OK;
    /* Each row is flushed as it is measured; the first that cannot be
     * written ends the run (main says so) rather than minutes of figures
     * that go nowhere. */
    for (int ti = 0; ti < n_types && rc == CLI_EXIT_OK && !cli_stdout_error(); ti++)
        for (int si = 0; si < n_shapes && rc == CLI_EXIT_OK && !cli_stdout_error(); si++) {
            tn_probe_matrix *m = NULL;
            int mrc = tn_probe_matrix_new(types[ti], shapes[si].rows, shapes[si].cols,
                                          llc_bytes() * 8, &seed, &m);
            const size_t block = tn_type_block_size(types[ti]);
            if (mrc == TN_ERR_INVALID && block > 1 && shapes[si].cols % (int64_t)block) {
                /* "invalid argument" did not say which */
                cli_error(_("bench: a %s row holds whole blocks of %zu values: %lld columns are "
                            "not a multiple of %zu"),
                          tn_type_name(types[ti]), block, (long long)shapes[si].cols, block);
                rc = CLI_EXIT_BAD_INPUT;
                break;
            }
            if (mrc != TN_OK) {
                cli_error(_("bench: cannot make a %s %lldx%lld matrix (%s)"),
                          tn_type_name(types[ti]), (long long)shapes[si].rows,
                          (long long)shapes[si].cols, tn_status_name(mrc));
                rc = CLI_EXIT_BAD_INPUT;
                break;
            }
            for (int ii = 0; ii < n_isa && !cli_stdout_error(); ii++) {
                tn_probe_set_kernels(cpu, isas[ii]);
                double t1 = 0;
                for (int bi = 0; bi < n_batch && !cli_stdout_error(); bi++) {
                    int b = batches[bi];
                    /* Enough calls per sample for ~0.1 s, in whole passes over
                     * the copies. */
                    const int copies = tn_probe_matrix_copies(m);
                    double t0 = cli_now_s();
                    tn_probe_matmul(cpu, m, 0, x, b, y); /* warm-up, and a time estimate */
                    double est = cli_now_s() - t0;
                    int calls = est > 0 ? (int)(0.1 / est) : 1;
                    calls = (calls + copies - 1) / copies * copies;
                    if (calls < copies)
                        calls = copies;
                    if (calls > 20000)
                        calls = 20000;
                    /* Every prefetch mode a context may choose at this batch
                     * (decode: the one TERN_DECODE_PREFETCH forces, if set), in
                     * turn within each repetition; the fastest median is
                     * reported, as a context keeps its fastest. */
                    const bool batch = b >= 4;
                    const int forced = batch ? -1 : tn_probe_decode_prefetch_forced();
                    int modes[TN_PREFETCH_MODES], n_modes = 0;
                    if (forced >= 0)
                        modes[n_modes++] = forced;
                    else
                        for (int md = batch ? TN_PREFETCH_NEAR : TN_PREFETCH_NONE; md < TN_PREFETCH_MODES; md++)
                            modes[n_modes++] = md;
                    /* At one row, each in one and two weight streams per
                     * thread too (the count TERN_TWO_STREAMS forces, if set). */
                    const int forced_streams = tn_probe_decode_streams_forced();
                    const int streams_from = b == 1 && forced_streams < 0 ? 1 : 2;
                    cli_spread s = {0};
                    int s_mode = modes[0], s_streams = 2;
                    for (int st = streams_from; st <= 2; st++) {
                        const int streams = forced_streams > 0 ? forced_streams : st;
                        tn_probe_set_decode_streams(cpu, streams);
                        for (int mi = 0; mi < n_modes; mi++) {
                            tn_probe_set_prefetch(cpu, batch, (tn_prefetch_mode)modes[mi]);
                            for (int r = 0; r < reps; r++) {
                                double ts = cli_now_s();
                                for (int c = 0; c < calls; c++)
                                    tn_probe_matmul(cpu, m, c % copies, x, b, y);
                                samples[r] = (cli_now_s() - ts) / calls;
                            }
                            cli_spread sm = cli_spread_of(samples, reps);
                            if ((st == streams_from && mi == 0) || sm.median < s.median) {
                                s = sm;
                                s_mode = modes[mi];
                                s_streams = streams;
                            }
                        }
                    }
                    if (b == 1 || t1 == 0)
                        t1 = b == 1 ? s.median : t1;
                    double gbs = (double)tn_probe_matrix_bytes(m) / s.median / 1e9;
                    double bw = b == 1 && have_bw ? bw_probe_sample(&bwp) : 0;
                    double gflops = 2.0 * (double)shapes[si].rows * (double)shapes[si].cols * b /
                                    s.median / 1e9;
                    char shp[64];
                    snprintf(shp, sizeof shp, "%lldx%lld", (long long)shapes[si].rows,
                             (long long)shapes[si].cols);
                    if (json) {
                        printf("%s\n  {\"isa\": \"%s\", \"type\": \"%s\", \"rows\": %lld, "
                               "\"cols\": %lld, \"batch\": %d, \"ms\": %.4f, \"ms_min\": %.4f, "
                               "\"ms_max\": %.4f, \"weight_gbs\": %.2f, \"gflops\": %.2f, \"layout\": \"%s\", "
                               "\"prefetch\": \"%s\"",
                               first ? "" : ",", tn_cpu_kernels_name(isas[ii]),
                               tn_type_name(types[ti]), (long long)shapes[si].rows,
                               (long long)shapes[si].cols, b, s.median * 1e3, s.min * 1e3,
                               s.max * 1e3, gbs, gflops,
                               tn_probe_matrix_layout(m), prefetch_mode_names[s_mode]);
                        if (b == 1)
                            printf(", \"streams\": %d", s_streams);
                        if (bw > 0)
                            printf(", \"read_gbs\": %.2f, \"of_read_bandwidth\": %.3f", bw,
                                   gbs / bw);
                        printf("}");
                        first = false;
                    } else {
                        char spread[64], rel[16] = "";
                        snprintf(spread, sizeof spread, "(%.3f-%.3f)", s.min * 1e3, s.max * 1e3);
                        if (t1 > 0)
                            snprintf(rel, sizeof rel, "%.2fx", s.median / t1);
                        char of_bw[48] = "";
                        if (bw > 0)
                            snprintf(of_bw, sizeof of_bw, "  %5.1f%% of %.1f GB/s",
                                     100.0 * gbs / bw, bw);
                        printf("%-7s %-6s %-4s %-4s %-2s %-12s %5d %10.3f %16s %9.1f %9.1f %8s%s\n",
                               tn_cpu_kernels_name(isas[ii]), tn_type_name(types[ti]),
                               tn_probe_matrix_layout(m), prefetch_mode_names[s_mode],
                               b == 1 ? (s_streams == 1 ? "1" : "2") : "-", shp, b,
                               s.median * 1e3, spread, gbs, gflops, rel, of_bw);
                    }
                    fflush(stdout);
                }
            }
            tn_probe_matrix_free(m);
        }
    if (json)
        printf("\n]}\n");
    bw_probe_close(&bwp);
    free(x);
    free(y);
    free(samples);
    tn_probe_free(cpu);
    return rc;
}

/* ------------------------------------------------------------------ model */

typedef struct {
    const char *path;
    long n_prompt, n_gen, verify, threads, reps;
    bool json;
} model_opts;

static int decode_or_fail(tn_ctx *ctx, const int32_t *tok, int32_t n, tn_logits_mode mode,
                          float *logits) {
    tn_error err;
    memset(&err, 0, sizeof err);
    int rc = tn_ctx_decode(ctx, tok, n, mode, logits, &err);
    if (rc != TN_OK)
        cli_error("bench: %s", err.message[0] ? cli_engine_message(&err) : tn_status_name(rc));
    return rc;
}

static const char *tuning_source(const tn_prefetch_tuning *t) {
    return t->state == TN_DECODE_TUNE_FORCED    ? "environment"
           : t->state == TN_DECODE_TUNE_CHOSEN ? "measurement"
                                                : "default";
}

static bool type_measured(const tn_prefetch_tuning *t, int type) {
    for (int m = 0; m < TN_PREFETCH_MODES; m++)
        if (t->type_ms[m][type] > 0)
            return true;
    return false;
}

/* What a tn_prefetch_tuning measured: the prefetch modes, or the stream
 * counts (indexed by the count). */
typedef struct {
    const char *label; /* the text line's first word */
    const char *env;   /* the variable that forces it */
    const char *const *names;
} tuning_kind;
static const char *const stream_count_names[TN_PREFETCH_MODES] = {"", "one", "two"};
static const tuning_kind prefetch_kind = {"prefetch", "TERN_DECODE_PREFETCH", prefetch_mode_names};
static const tuning_kind streams_kind = {"streams ", "TERN_TWO_STREAMS", stream_count_names};

/* {"chosen_by": ..., "ms": {"far": ..}, "types": [{"type": .., "mode": .., "ms": {..},
 * "wins": {..}}]};
 * types only once measured. */
static void print_prefetch_json(const tuning_kind *kind, const tn_prefetch_tuning *t) {
    const char *const *names = kind->names;
    printf("{\"chosen_by\": \"%s\", \"samples\": %d, \"ms\": {", tuning_source(t), t->samples);
    for (int m = 0, k = 0; m < TN_PREFETCH_MODES; m++)
        if (t->tried[m] && t->ms[m] > 0)
            printf("%s\"%s\": %.4f", k++ ? ", " : "", names[m], t->ms[m]);
    printf("}, \"types\": [");
    for (int type = 0, k = 0; type < TN_TYPE_COUNT_; type++) {
        if (!type_measured(t, type))
            continue;
        printf("%s{\"type\": \"%s\", \"mode\": \"%s\", \"ms\": {", k++ ? ", " : "",
               tn_type_name((uint32_t)type), names[t->mode[type] % TN_PREFETCH_MODES]);
        for (int m = 0, j = 0; m < TN_PREFETCH_MODES; m++)
            if (t->tried[m])
                printf("%s\"%s\": %.4f", j++ ? ", " : "", names[m], t->type_ms[m][type]);
        printf("}, \"wins\": {");
        for (int m = 0, j = 0; m < TN_PREFETCH_MODES; m++)
            if (t->tried[m])
                printf("%s\"%s\": %d", j++ ? ", " : "", names[m], t->wins[m][type]);
        printf("}}");
    }
    printf("]}");
}

/* One line: the medians per mode (batch: per row) and each type's choice. */
static void print_prefetch_text(const tuning_kind *kind, const char *what,
                                const tn_prefetch_tuning *t, bool relevant) {
    const char *const *names = kind->names;
    if (!relevant)
        return;
    if (t->state != TN_DECODE_TUNE_CHOSEN) {
        printf("%s   %s: %s%s\n", kind->label, what,
               t->state == TN_DECODE_TUNE_FORCED ? "set by " : "the defaults, not measured",
               t->state == TN_DECODE_TUNE_FORCED ? kind->env : "");
        return;
    }
    printf("%s   %s steps:", kind->label, what);
    for (int m = TN_PREFETCH_MODES - 1; m >= 0; m--)
        if (t->tried[m])
            printf(" %s %.2f ms", names[m], t->ms[m]);
    printf("; per type:");
    for (int type = 0; type < TN_TYPE_COUNT_; type++) {
        if (!type_measured(t, type))
            continue;
        printf(" %s %s (", tn_type_name((uint32_t)type), names[t->mode[type] % TN_PREFETCH_MODES]);
        for (int m = TN_PREFETCH_MODES - 1, j = 0; m >= 0; m--)
            if (t->tried[m])
                printf("%s%.2f", j++ ? "/" : "", t->type_ms[m][type]);
        printf(")");
    }
    printf("\n");
}

static int bench_model(const model_opts *o) {
    tn_error err;
    memset(&err, 0, sizeof err);
    tn_model_params mp = tn_model_default_params();
    mp.load_tokenizer = false;
    tn_model *model = NULL;
    if (tn_model_load(o->path, mp, &model, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        return CLI_EXIT_BAD_INPUT;
    }
    cli_backend_note(model);
    /* Positions past the training context are still valid work to time. */
    long need = (o->n_prompt > o->n_gen ? o->n_prompt : o->n_gen) + o->verify + 65;
    tn_ctx *ctx = NULL;
    if (tn_ctx_new(model, (int32_t)need, (int32_t)o->threads, &ctx, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        tn_model_free(model);
        return CLI_EXIT_BAD_INPUT;
    }
    const int32_t n_vocab = tn_model_n_vocab(model);
    const long n_tok = need;
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)n_tok);
    float *logits = malloc(sizeof(float) * (size_t)n_vocab * (size_t)(o->verify + 1));
    double *v = calloc((size_t)(o->reps * 8 + 16), sizeof *v);
    int rc = CLI_EXIT_OK;
    if (!tokens || !logits || !v) {
        cli_error(_("bench: out of memory"));
        rc = CLI_EXIT_BAD_INPUT;
        goto out;
    }
    uint64_t seed = 7;
    for (long i = 0; i < n_tok; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        tokens[i] = (int32_t)((seed >> 33) % (uint64_t)n_vocab);
    }
    const int threads = tn_ctx_n_threads(ctx);
    if (!o->json)
        fprintf(stderr, _("bench: %s, %d threads, %s kernels\n"), tn_model_description(model),
                threads, tn_cpu_kernels());

    /* Warm-up: page the weights in and grow every scratch buffer. */
    if (decode_or_fail(ctx, tokens, 1, TN_LOGITS_LAST, logits) ||
        tn_ctx_kv_truncate(ctx, 0) != TN_OK) {
        rc = CLI_EXIT_BAD_INPUT;
        goto out;
    }

    /* The context chooses its prefetch modes and stream counts on its first one-token decodes
     * and on its first steps of 4 to 32 rows (tn_decode_tuning): let it do
     * so here, so that every timed step below runs with its choice. */
    tn_decode_tuning tune;
    tn_ctx_decode_tuning(ctx, &tune);
    for (long i = 0; (tune.decode.state == TN_DECODE_TUNE_MEASURING ||
                      tune.streams.state == TN_DECODE_TUNE_MEASURING) &&
                     i < 64 && i < need - 1;
         i++) {
        if (decode_or_fail(ctx, tokens + i, 1, TN_LOGITS_LAST, logits)) {
            rc = CLI_EXIT_BAD_INPUT;
            goto out;
        }
        tn_ctx_decode_tuning(ctx, &tune);
    }
    tn_ctx_kv_truncate(ctx, 0);
    /* the rows of the timed steps that are batch samples: verify, else a short prompt */
    const int32_t tune_rows = o->verify >= 4                       ? (int32_t)(o->verify < 32 ? o->verify : 32)
                              : o->n_prompt >= 4 && o->n_prompt <= 32 ? (int32_t)o->n_prompt
                                                                     : 0;
    for (int i = 0; tune_rows && tune.batch.state == TN_DECODE_TUNE_MEASURING && i < 64; i++) {
        if (decode_or_fail(ctx, tokens, tune_rows, o->verify >= 4 ? TN_LOGITS_ALL : TN_LOGITS_LAST,
                           logits)) {
            rc = CLI_EXIT_BAD_INPUT;
            goto out;
        }
        tn_ctx_kv_truncate(ctx, 0);
        tn_ctx_decode_tuning(ctx, &tune);
    }

    cli_spread pp = {0}, tg = {0};
    if (o->n_prompt > 0) {
        for (long r = 0; r < o->reps; r++) {
            tn_ctx_kv_truncate(ctx, 0);
            double t0 = cli_now_s();
            if (decode_or_fail(ctx, tokens, (int32_t)o->n_prompt, TN_LOGITS_LAST, logits)) {
                rc = CLI_EXIT_BAD_INPUT;
                goto out;
            }
            v[r] = (double)o->n_prompt / (cli_now_s() - t0);
        }
        pp = cli_spread_of(v, (int)o->reps);
    }
    /* Verify steps at the end of a prompt: B tokens with every row's logits,
     * then the rows are dropped again. Each sample times B = 1, 2, 4, ...
     * and --verify back to back, so that a change of the machine's load
     * moves numerator and denominator of a ratio alike. */
    int n_vb = 0;
    int vb[16];
    cli_spread vt[16], vr[16];
    if (o->verify > 0) {
        int32_t base = (int32_t)(o->n_prompt < 64 ? o->n_prompt : 64);
        tn_ctx_kv_truncate(ctx, 0);
        if (base > 0 && decode_or_fail(ctx, tokens, base, TN_LOGITS_NONE, NULL)) {
            rc = CLI_EXIT_BAD_INPUT;
            goto out;
        }
        for (int b = 1; n_vb < 16; b = b * 2 < o->verify ? b * 2 : (int)o->verify) {
            vb[n_vb++] = b;
            if (b >= o->verify)
                break;
        }
        const int samples = (int)o->reps * 5;
        double *t = calloc((size_t)samples * ((size_t)n_vb + 1), sizeof *t);
        if (!t) {
            cli_error(_("bench: out of memory"));
            rc = CLI_EXIT_BAD_INPUT;
            goto out;
        }
        for (int r = 0; r < samples && rc == CLI_EXIT_OK; r++)
            for (int i = 0; i < n_vb; i++) {
                double t0 = cli_now_s();
                if (decode_or_fail(ctx, tokens + base, vb[i], TN_LOGITS_ALL, logits)) {
                    rc = CLI_EXIT_BAD_INPUT;
                    break;
                }
                t[(size_t)i * samples + r] = cli_now_s() - t0;
                tn_ctx_kv_truncate(ctx, base);
            }
        if (rc == CLI_EXIT_OK) {
            double *ratio = t + (size_t)samples * (size_t)n_vb;
            for (int i = 0; i < n_vb; i++) {
                for (int r = 0; r < samples; r++)
                    ratio[r] = t[(size_t)i * samples + r] / t[r];
                vr[i] = cli_spread_of(ratio, samples);
            }
            for (int i = 0; i < n_vb; i++)
                vt[i] = cli_spread_of(t + (size_t)i * samples, samples);
        }
        free(t);
        if (rc != CLI_EXIT_OK)
            goto out;
    }
    /* The model's peak, before the bandwidth probe's buffer adds to it. */
    uint64_t rss = peak_rss();

    /* Bytes per generated token: the weights, plus the KV cache read at the
     * average position of the tg run. */
    uint64_t wbytes = tn_doctor_weight_bytes_per_token(tn_model_gguf(model));
    double kv = (double)tn_model_kv_bytes_per_token(model) * (double)o->n_gen / 2.0;
    double per_tok = (double)wbytes + kv;

    /* tg, each repetition between two bandwidth samples through a pool of
     * the same size: the decode bound of a repetition is what the memory
     * delivered around it (the machine may be shared). */
    cli_spread bw = {0}, pctst = {0};
    bw_probe probe;
    bool have_bw = bw_probe_open(&probe, threads);
    if (!have_bw)
        fprintf(stderr, "%s", _("bench: could not measure the memory bandwidth\n"));
    double *bws = calloc((size_t)o->reps * 2, sizeof *bws);
    if (!bws) {
        cli_error(_("bench: out of memory"));
        rc = CLI_EXIT_BAD_INPUT;
        bw_probe_close(&probe);
        goto out;
    }
    double *pcts = bws + o->reps;
    for (long r = 0; r < o->reps && rc == CLI_EXIT_OK; r++) {
        double b0 = have_bw ? bw_probe_sample(&probe) : 0;
        tn_ctx_kv_truncate(ctx, 0);
        double t0 = cli_now_s();
        for (long i = 0; i < o->n_gen; i++)
            if (decode_or_fail(ctx, tokens + i, 1, TN_LOGITS_LAST, logits)) {
                rc = CLI_EXIT_BAD_INPUT;
                break;
            }
        v[r] = o->n_gen > 0 ? (double)o->n_gen / (cli_now_s() - t0) : 0;
        double b1 = have_bw ? bw_probe_sample(&probe) : 0;
        bws[r] = o->n_gen > 0 ? 0.5 * (b0 + b1) : b1;
        pcts[r] = bws[r] > 0 ? 100.0 * v[r] / (bws[r] * 1e9 / per_tok) : 0;
    }
    tg = cli_spread_of(v, (int)o->reps);
    bw = cli_spread_of(bws, (int)o->reps);
    pctst = cli_spread_of(pcts, (int)o->reps);
    free(bws);
    bw_probe_close(&probe);
    if (rc != CLI_EXIT_OK)
        goto out;
    double bound = bw.median > 0 ? bw.median * 1e9 / per_tok : 0;
    double pct = pctst.median;

    if (o->json) {
        fputs("{\"model\": ", stdout);
        cli_json_string(stdout, tn_model_path(model), strlen(tn_model_path(model)));
        printf(", \"threads\": %d, \"backend\": \"%s\", \"isa\": \"%s\",\n"
               " \"arithmetic\": \"%s\", \"repacked_bytes\": %llu, \"repack_source\": \"%s\",\n"
               " \"reps\": %ld,\n",
               threads, tn_model_backend(model), tn_cpu_kernels(),
               tn_model_arithmetic(model), (unsigned long long)tn_model_repacked_bytes(model),
               tn_model_repack_source(model), o->reps);
        printf(" \"pp\": {\"tokens\": %ld, \"tps\": %.2f, \"tps_min\": %.2f, \"tps_max\": %.2f},\n",
               o->n_prompt, pp.median, pp.min, pp.max);
        printf(" \"tg\": {\"tokens\": %ld, \"tps\": %.2f, \"tps_min\": %.2f, \"tps_max\": %.2f},\n",
               o->n_gen, tg.median, tg.min, tg.max);
        printf(" \"verify\": [");
        for (int i = 0; i < n_vb; i++)
            printf("%s{\"batch\": %d, \"ms\": %.3f, \"ms_min\": %.3f, \"ms_max\": %.3f, "
                   "\"vs_1\": %.3f}",
                   i ? ", " : "", vb[i], vt[i].median * 1e3, vt[i].min * 1e3, vt[i].max * 1e3,
                   vr[i].median);
        printf("],\n \"bandwidth_gbs\": {\"median\": %.2f, \"min\": %.2f, \"max\": %.2f},\n",
               bw.median, bw.min, bw.max);
        printf(" \"weight_bytes_per_token\": %llu, \"kv_bytes_per_token\": %.0f,\n"
               " \"decode_bound_tps\": %.2f, \"decode_pct_of_bound\": %.1f,\n"
               " \"decode_pct_min\": %.1f, \"decode_pct_max\": %.1f, \"peak_rss_bytes\": %llu,\n"
               " \"decode_prefetch\": ",
               (unsigned long long)wbytes, kv, bound, pct, pctst.min, pctst.max,
               (unsigned long long)rss);
        print_prefetch_json(&prefetch_kind, &tune.decode);
        printf(",\n \"batch_prefetch\": ");
        print_prefetch_json(&prefetch_kind, &tune.batch);
        printf(",\n \"decode_streams\": ");
        print_prefetch_json(&streams_kind, &tune.streams);
        printf("}\n");
    } else {
        printf("model      %s\n", tn_model_description(model));
        printf("threads    %d (%s kernels), %ld reps: median (min-max)\n", threads,
               tn_model_arithmetic(model), o->reps);
        const char *src = tn_model_repack_source(model);
        printf("repacked   %8.1f MB     (%s)\n", (double)tn_model_repacked_bytes(model) / 1e6,
               !strcmp(src, "cache")       ? "mapped from the repack cache, shared"
               : !strcmp(src, "cache-new") ? "written to the repack cache, mapped, shared"
                                           : "copied at load; the file's pages of them dropped");
        if (o->n_prompt > 0)
            printf("pp%-5ld    %8.2f tok/s  (%.2f-%.2f)\n", o->n_prompt, pp.median, pp.min,
                   pp.max);
        if (o->n_gen > 0)
            printf("tg%-5ld    %8.2f tok/s  (%.2f-%.2f)\n", o->n_gen, tg.median, tg.min, tg.max);
        for (int i = 0; i < n_vb; i++)
            printf("verify %-3d %8.2f ms     (%.2f-%.2f)  %.2fx a 1-token step (%.2f-%.2f)\n",
                   vb[i], vt[i].median * 1e3, vt[i].min * 1e3, vt[i].max * 1e3, vr[i].median,
                   vr[i].min, vr[i].max);
        printf("bandwidth  %8.2f GB/s   (%.2f-%.2f), streaming read, %d threads, around each tg\n",
               bw.median, bw.min, bw.max, threads);
        printf("per token  %8.1f MB     (weights %.1f MB + KV %.1f MB at the mean tg position)\n",
               per_tok / 1e6, (double)wbytes / 1e6, kv / 1e6);
        printf("bound      %8.2f tok/s  decode at %.1f%% of it (%.1f-%.1f, per repetition)\n",
               bound, pct, pctst.min, pctst.max);
        print_prefetch_text(&prefetch_kind, "decode", &tune.decode, tune_rows > 0 || o->n_gen > 0);
        print_prefetch_text(&prefetch_kind, "batch", &tune.batch, tune_rows > 0);
        print_prefetch_text(&streams_kind, "decode", &tune.streams, o->n_gen > 0);
        printf("peak RSS   %8.1f MB\n", (double)rss / 1e6);
    }
out:
    free(tokens);
    free(logits);
    free(v);
    tn_ctx_free(ctx);
    tn_model_free(model);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    const int backend = cli_backend_take(&argc, argv); /* cli/backend-args.c */
    if (backend)
        return backend;
    for (int i = 1; i < argc; i++) if (!strcmp(argv[i], "--pin")) return cmd_bench_pin(argc, argv); /* cli/cmd-bench-pin.c */
    for (int i = 1; i < argc; i++) if (!strcmp(argv[i], "--spec")) return cmd_bench_spec(argc, argv); /* cli/bench-spec.c */
    for (int i = 1; i < argc; i++) if (!strcmp(argv[i], "--sampler")) return cmd_bench_sampler(argc, argv); /* cli/bench-sampler.c */
    model_opts o = {.n_prompt = 512, .n_gen = 128, .verify = 16, .threads = 0, .reps = 3};
    bool kernels = false;
    const char *types = "q4_0,q8_0,q4_K,q5_K,q6_K,f16,bf16,f32";
    const char *shapes = "2048x2048,8192x2048,2048x8192,128256x2048";
    const char *batch = "1,2,4,8,16";
    const char *isa = "best";
    const char *kernels_only = NULL; /* the first option that only --kernels reads */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cli_print_help(usage);
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "--json")) {
            o.json = true;
            continue;
        }
        if (!strcmp(a, "--kernels")) {
            kernels = true;
            continue;
        }
        if (i + 1 >= argc) {
            cli_error(_("bench: option '%s' needs a value (see --help)"), a);
            return CLI_EXIT_USAGE;
        }
        const char *val = argv[++i];
        bool ok = true;
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            o.path = val;
        else if (!strcmp(a, "-p"))
            ok = cli_parse_long(a, val, 0, 1 << 20, &o.n_prompt);
        else if (!strcmp(a, "-n"))
            ok = cli_parse_long(a, val, 0, 1 << 20, &o.n_gen);
        else if (!strcmp(a, "--verify"))
            ok = cli_parse_long(a, val, 0, 4096, &o.verify);
        else if (!strcmp(a, "-t"))
            ok = cli_parse_long(a, val, 1, 512, &o.threads);
        else if (!strcmp(a, "-r"))
            ok = cli_parse_long(a, val, 1, 1000, &o.reps);
        else if (!strcmp(a, "--types"))
            types = val;
        else if (!strcmp(a, "--shapes"))
            shapes = val;
        else if (!strcmp(a, "--batch"))
            batch = val;
        else if (!strcmp(a, "--isa"))
            isa = val;
        else {
            cli_error(_("bench: unknown option '%s' (see --help)"), a);
            return CLI_EXIT_USAGE;
        }
        if (!kernels_only && (!strcmp(a, "--types") || !strcmp(a, "--shapes") ||
                              !strcmp(a, "--batch") || !strcmp(a, "--isa")))
            kernels_only = a;
        if (!ok)
            return CLI_EXIT_USAGE;
    }
    /* Without --kernels they were dropped without a word: a user who asked
     * for --batch 8 took the model's figures for batch 8. */
    if (!kernels && kernels_only) {
        cli_error(_("bench: %s needs --kernels (the model's batched steps are --verify B)"),
                  kernels_only);
        return CLI_EXIT_USAGE;
    }
    if (kernels)
        return bench_kernels(types, shapes, batch, isa, (int)o.threads, (int)o.reps, o.json);
    if (!o.path) {
        cli_error(_("bench: give a model with -m MODEL, or --kernels (see --help)"));
        return CLI_EXIT_USAGE;
    }
    return bench_model(&o);
}
