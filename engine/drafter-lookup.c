/* Prompt lookup drafting: the text about to be written often already
 * appeared (code being edited, a quoted passage, a list that repeats). The
 * history's last n tokens are looked up in the history itself, longest n
 * first, most recent occurrence first; what followed that occurrence is the
 * draft. A continuation that runs into the end of the history keeps reading
 * from the draft being written, so a repeating pattern of period p drafts
 * as far as asked rather than stopping after p tokens. */
#include "tn-internal.h"
#include "tn-spec.h"

#include <stdlib.h>

typedef struct lookup {
    int32_t ngram_min, ngram_max;
} lookup;

int32_t tn_lookup_propose(const int32_t *h, int32_t n, int32_t ngram_min, int32_t ngram_max,
                          int32_t max_draft, int32_t *draft) {
    if (max_draft <= 0 || n < 2)
        return 0;
    for (int32_t g = ngram_max < n - 1 ? ngram_max : n - 1; g >= ngram_min && g >= 1; g--) {
        const int32_t *key = h + n - g;
        /* An earlier occurrence starts at i: h[i .. i + g) == key, i + g < n. */
        for (int32_t i = n - g - 1; i >= 0; i--) {
            int32_t m = 0;
            while (m < g && h[i + m] == key[m])
                m++;
            if (m < g)
                continue;
            int32_t nd = 0;
            for (; nd < max_draft; nd++) {
                const int32_t at = i + g + nd; /* < n + nd: earlier history or draft */
                draft[nd] = at < n ? h[at] : draft[at - n];
            }
            return nd;
        }
    }
    return 0;
}

static int32_t lookup_propose(void *self, const int32_t *history, int32_t n_history,
                              int32_t max_draft, int32_t *draft, tn_error *err) {
    (void)err;
    const lookup *l = self;
    return tn_lookup_propose(history, n_history, l->ngram_min, l->ngram_max, max_draft, draft);
}

static void lookup_free(void *self) { free(self); }

int tn_drafter_new_lookup(tn_drafter_params p, tn_drafter **out, tn_error *err) {
    if (!out)
        return tn_fail(err, TN_ERR_INVALID, "tn_drafter_new_lookup: out is NULL");
    *out = NULL;
    if (p.ngram_min <= 0)
        p.ngram_min = 2;
    if (p.ngram_max <= 0)
        p.ngram_max = 5;
    if (p.ngram_min > p.ngram_max || p.ngram_max > 64)
        return tn_fail(err, TN_ERR_INVALID,
                       "lookup drafter: n-gram lengths %d..%d (need 1 <= min <= max <= 64)",
                       p.ngram_min, p.ngram_max);
    lookup *l = malloc(sizeof *l);
    if (!l)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    l->ngram_min = p.ngram_min;
    l->ngram_max = p.ngram_max;
    static const tn_drafter_ops ops = {
        .propose = lookup_propose,
        .free = lookup_free,
    };
    return tn_drafter_wrap("lookup", &ops, NULL, l, p.draft_max > 0 ? p.draft_max : 10, NULL,
                           out, err);
}
