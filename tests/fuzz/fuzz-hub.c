/* libFuzzer target for the Hugging Face Hub's answers (manager/tern-hub.c):
 * a search's list of models, and a repository's listing (its commit and
 * files), as tern-cli search / pull hf.co/... and the Models panel read
 * them. The Hub is whatever HF_ENDPOINT names, a mirror or a proxy.
 *
 * The first input byte picks what the rest is (% 3):
 *   0: a search answer, read with a limit of 1 + byte 1 % 100.
 *      Promises: models or an error; at most `limit` models, each an id
 *      "OWNER/REPO".
 *   1: the listing of owner/repo (tern_hub_list_quants). Promises: the
 *      quantizations or an error; a name of UTF-8 without control
 *      characters; a quantization with a reference has the tag of that
 *      reference, and resolving the reference against the same listing
 *      gives a catalog whose tag has exactly its files (count, and size
 *      when known).
 *   2: the listing, resolved for one of a few references (byte 1):
 *      Promises: a catalog or an error; its tag is the reference's.
 * In all, an error is of the manager's domain, UTF-8 without control
 * characters: a listing's names are shown escaped, never pasted.
 *
 * Byte 0 below 128: the answer came with HTTP 200. From 128 on, with the
 * status statuses[(byte 0 - 128) / 3 % N] (a gated repository's 401/403,
 * 404, 429, 5xx, a redirect libsoup did not follow...), and the answer's
 * first line (up to a newline or NUL) is the reason phrase, the rest the
 * body. Promises then: an error whatever the body says, never models or
 * a catalog; 404 of a repository is UNKNOWN_TAG; the reason phrase, any
 * bytes a server sent, reaches the message escaped. With byte 1's top bit
 * set, the same line is the Retry-After header too (429, 503: the wait
 * the message names), escaped as well.
 *
 * Built from the manager's source with GLib, libsoup and json-glib (the
 * fuzz build leaves the manager out).
 *
 * Seeds: tests/fuzz/corpus/hub/.
 * Run:   build-fuzz/tests/fuzz/fuzz-hub tests/fuzz/corpus/hub
 */
#include "tern-hub.h"
#include "tern-manager.h"
#include "fuzz-promise.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* UTF-8, no C0 control character, no DEL. */
static bool one_line(const char *m) {
    if (!m || !g_utf8_validate(m, -1, NULL))
        return false;
    for (const unsigned char *p = (const unsigned char *)m; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

static void check_error(GError *e) {
    PROMISE(e != NULL && e->domain == TERN_MANAGER_ERROR);
    if (!one_line(e->message))
        fprintf(stderr, "not one line: %s\n", e->message);
    PROMISE(one_line(e->message));
    g_error_free(e);
}

/* The status of this input, and the server's reason phrase with it. */
static guint status = 200;
static const char *reason = "OK";
static const char *retry_after = NULL;

static void search(guint limit, const char *answer, size_t len) {
    GError *e = NULL;
    GPtrArray *models = tern_hub_search_from_response(status, reason, retry_after, answer, len, limit, &e);
    PROMISE((models == NULL) != (e == NULL));
    PROMISE(status == 200 || !models);
    if (!models) {
        check_error(e);
        return;
    }
    PROMISE(models->len <= limit);
    for (guint i = 0; i < models->len; i++) {
        const TernHubModel *m = models->pdata[i];
        const char *slash = strchr(m->id, '/');
        PROMISE(slash && slash != m->id && slash[1] && !strchr(slash + 1, '/'));
        PROMISE(one_line(m->id));
    }
    g_ptr_array_unref(models);
}

/* The catalog tag that `ref` resolves to against the same answer. */
static void resolve(const char *ref, const char *answer, size_t len, const TernHubQuant *want) {
    GError *e = NULL;
    char *tag = NULL;
    TernCatalog *c = tern_hub_resolve_from_response(ref, status, reason, retry_after, answer, len, &tag, &e);
    PROMISE((c == NULL) != (e == NULL));
    PROMISE(status == 200 || !c);
    if (!c) {
        PROMISE(status != 404 || e->code == TERN_MANAGER_ERROR_UNKNOWN_TAG);
        if (want)
            fprintf(stderr, "%s does not resolve: %s\n", ref, e->message);
        PROMISE(!want);
        check_error(e);
        return;
    }
    char *ref_tag = tern_hub_tag_for_ref(ref, NULL);
    PROMISE(tag && ref_tag && strcmp(tag, ref_tag) == 0);
    const TernCatalogTag *t = tern_catalog_find_tag(c, tag);
    PROMISE(t != NULL);
    const TernCatalogPackage *base = t->packages[TERN_PACKAGE_ROLE_BASE];
    if (want) {
        PROMISE(strcmp(want->tag, tag) == 0);
        PROMISE(base->files->len == want->n_files);
        if (want->size)
            PROMISE(tern_catalog_package_size(base) == want->size);
    }
    g_free(ref_tag);
    g_free(tag);
    g_object_unref(c);
}

static void list_quants(const char *answer, size_t len) {
    GError *e = NULL;
    TernHubRepo *repo = tern_hub_list_quants_from_response("owner/repo", status, reason, retry_after, answer, len, &e);
    PROMISE((repo == NULL) != (e == NULL));
    PROMISE(status == 200 || !repo);
    if (!repo) {
        PROMISE(status != 404 || e->code == TERN_MANAGER_ERROR_UNKNOWN_TAG);
        check_error(e);
        return;
    }
    PROMISE(repo->quants != NULL && repo->commit != NULL);
    for (guint i = 0; i < repo->quants->len; i++) {
        const TernHubQuant *q = repo->quants->pdata[i];
        PROMISE(q->n_files > 0);
        PROMISE(one_line(q->name));
        PROMISE((q->ref == NULL) == (q->tag == NULL));
        if (q->ref)
            resolve(q->ref, answer, len, q);
    }
    tern_hub_repo_free(repo);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const refs[] = {
        "hf.co/owner/repo",
        "hf.co/owner/repo:Q8_0",
        "huggingface.co/owner/repo:f16",
        "https://huggingface.co/owner/repo/resolve/main/repo-Q4_K_M.gguf",
        "https://huggingface.co/owner/repo/resolve/main/dir/repo-00001-of-00002.gguf",
    };
    static const guint statuses[] = {
        200, 401, 403, 404, 429, 500, 502, 503, 504, 301, 302, 303, 307, 308,
        300, 304, 204, 206, 400, 407, 410, 451, 0,   100, 199, 299, 599, 999,
    };
    if (size < 2)
        return 0;
    /* The answer as the client has it: its own buffer, no NUL after it. */
    const char *answer = (const char *)data + 2;
    size_t len = size - 2;
    char *said = NULL;
    status = 200;
    reason = "OK";
    retry_after = NULL;
    if (data[0] >= 128) {
        size_t cut = 0;
        status = statuses[(data[0] - 128u) / 3 % G_N_ELEMENTS(statuses)];
        while (cut < len && answer[cut] != '\n' && answer[cut] != '\0')
            cut++;
        /* As libsoup hands it over: a C string, whatever its bytes. */
        said = g_strndup(answer, cut);
        reason = said;
        if (data[1] & 0x80)
            retry_after = said;
        answer += cut < len ? cut + 1 : cut;
        len -= cut < len ? cut + 1 : cut;
    }
    switch (data[0] % 3) {
    case 0:
        search(1 + data[1] % 100, answer, len);
        break;
    case 1:
        list_quants(answer, len);
        break;
    default:
        resolve(refs[data[1] % G_N_ELEMENTS(refs)], answer, len, NULL);
        break;
    }
    g_free(said);
    return 0;
}
