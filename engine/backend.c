/* Backend registry and selection (tn-backend.h, docs/BACKENDS.md). */
#include "tn-backend.h"
#include "tn-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every backend this build knows, the CPU first. A new backend adds its
 * table here (docs/BACKENDS.md, "Adding a backend"); "auto" tries the
 * others in this order and keeps the first that opens. */
static const tn_backend_ops *const registry[] = {
    &tn_backend_cpu_ops,
    &tn_backend_xrt_ops, /* AMD NPU (engine/backend-xrt.c): by name only for now */
};
#define N_REGISTRY ((int)(sizeof registry / sizeof registry[0]))

static const tn_backend_ops *find(const tn_backend_ops *const *table, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(table[i]->name, name))
            return table[i];
    return NULL;
}

int tn_backend_count(void) { return N_REGISTRY; }

const char *tn_backend_name(int i) { return i >= 0 && i < N_REGISTRY ? registry[i]->name : NULL; }

/* A backend's own matmul, item by item: the CPU's group would run the CPU's
 * kernels on weights in that backend's layout. */
static int matmul_each(const tn_backend *be, tn_cpu *pool, const tn_matmul_item *items, int n) {
    for (int i = 0; i < n; i++) {
        int rc = be->run.matmul(be, pool, items[i].w, items[i].x, items[i].n, items[i].y);
        if (rc != TN_OK)
            return rc;
    }
    return TN_OK;
}

/* The table callers use: the backend's entries, the CPU's in the gaps. */
static void resolve(tn_backend *be) {
    const tn_backend_ops *o = be->ops, *c = &tn_backend_cpu_ops;
    be->run = *c;
    be->run.name = o->name;
    be->run.open = o->open;
    be->run.close = o->close;
#define TAKE(f) if (o->f) be->run.f = o->f
    TAKE(prepare_weights);
    TAKE(arith_name);
    TAKE(parallel_for);
    TAKE(matmul);
    if (o->matmul)
        be->run.matmul_group = o->matmul_group ? o->matmul_group : matmul_each;
    TAKE(weight_row);
    TAKE(kv_store);
    TAKE(kv_copy);
    TAKE(attention);
#undef TAKE
}

/* Opens ops for be, or says why not in err. */
static int try_open(tn_backend *be, const tn_backend_ops *ops, tn_error *err) {
    if ((ops->matmul || ops->attention) && !ops->arith_name)
        return tn_fail(err, TN_ERR_UNSUPPORTED,
                       "the backend computes but does not name its arithmetic");
    be->ops = ops;
    be->state = NULL;
    int rc = ops->open ? ops->open(be, err) : TN_OK;
    if (rc != TN_OK) {
        be->ops = &tn_backend_cpu_ops;
        be->state = NULL;
        return rc;
    }
    return TN_OK;
}

/* A refusal is not an error: the model runs on the CPU and says why. The
 * first reason is kept (the backend asked for, or the first "auto" tried). */
static void note_refusal(tn_backend *be, const char *name, const tn_error *why, bool asked) {
    if (be->refused_by[0])
        return;
    be->refused_asked = asked;
    snprintf(be->refused_by, sizeof be->refused_by, "%s", name);
    be->refusal = *why;
    if (!be->refusal.message[0])
        snprintf(be->refusal.message, sizeof be->refusal.message, "%s",
                 tn_status_name(why->code));
}

/* NULL (the params' default) lets TERN_BACKEND choose, as TERN_ISA and
 * TERN_REPACK do for the CPU's kernels and layout: one switch for every
 * caller (the app, the server, each tern-cli command). */
int tn_backend_open(tn_backend *be, const char *name, tn_error *err) {
    if (!name)
        name = getenv("TERN_BACKEND");
    return tn_backend_open_from(be, name, registry, N_REGISTRY, err);
}

int tn_backend_open_from(tn_backend *be, const char *name, const tn_backend_ops *const *table,
                         int n, tn_error *err) {
    memset(be, 0, sizeof *be);
    be->ops = &tn_backend_cpu_ops;
    be->isa = tn_isa_best();
    const bool any = !name || !*name || !strcmp(name, "auto");
    const tn_backend_ops *want = any ? NULL : find(table, n, name);
    if (!any && !want) {
        /* The name as a user can read it back: printable ASCII, short
         * enough to leave room for the list (it comes from the environment
         * or a command line, and may be anything). */
        char shown[40];
        size_t k = 0;
        for (const char *c = name; *c && k + 4 < sizeof shown; c++)
            shown[k++] = *c >= 0x20 && *c < 0x7f ? *c : '?';
        if (strlen(name) > k)
            shown[k++] = '.', shown[k++] = '.', shown[k++] = '.';
        shown[k] = 0;
        char names[128] = "auto";
        for (int i = 0; i < n; i++) {
            size_t used = strlen(names);
            snprintf(names + used, sizeof names - used, ", %s", table[i]->name);
        }
        return tn_fail(err, TN_ERR_INVALID, "unknown compute backend '%s' (known: %s)", shown,
                       names);
    }
    int rc = tn_backend_cpu_ops.open(be, err);
    if (rc != TN_OK)
        return rc;
    for (int i = 0; i < n; i++) {
        if (table[i] == &tn_backend_cpu_ops || (!any && table[i] != want) ||
            (any && table[i]->by_name_only))
            continue;
        tn_error why = {0};
        if (try_open(be, table[i], &why) == TN_OK)
            break;
        note_refusal(be, table[i]->name, &why, !any);
    }
    resolve(be);
    return TN_OK;
}

int tn_backend_prepare(tn_backend *be, tn_weight *const *ws, int n, int n_file_only,
                       bool file_mapped, const char *path, tn_error *err) {
    int rc = be->run.prepare_weights(be, ws, n, n_file_only, file_mapped, path,
                                     &be->prepared_bytes, err);
    if (rc != TN_OK)
        return rc;
    be->run.arith_name(be, be->arith, sizeof be->arith);
    return TN_OK;
}

void tn_backend_close(tn_backend *be) {
    if (!be || !be->ops)
        return;
    if (be->ops != &tn_backend_cpu_ops && be->ops->close)
        be->ops->close(be);
    tn_backend_cpu_ops.close(be);
    be->ops = NULL;
}

tn_cpu *tn_backend_pool_new(const tn_backend *be, int n_threads) {
    tn_cpu *pool = tn_cpu_new(n_threads);
    /* The family fixed at open (the arithmetic string names it), not
     * whatever the environment says now. */
    if (pool)
        tn_cpu_set_isa(pool, be->isa);
    return pool;
}
