/* libFuzzer target for tn_json_prefix (engine/json-prefix.c), the checker
 * that JSON-constrained sampling runs on every candidate token: a byte it
 * wrongly accepts lets a model write what is not JSON, or walk into a
 * prefix that no text completes (the answer then runs to max_tokens); a
 * byte it wrongly refuses bends the answer away from valid JSON.
 *
 * Input: the whole input is the text (any JSON file is a seed as it is).
 *
 * Promises, against the engine's strict reader (tn_json_check at the
 * checker's depth, TN_JSON_PREFIX_MAX_DEPTH):
 *  (a) the checker takes every byte and says complete: the reader accepts
 *      the text and its first non-space byte is '{' (or the reader refuses
 *      an unpaired surrogate escape, which JSON's grammar allows: tern.h);
 *  (b) the reader accepts the text as one object, no deeper than the
 *      checker's depth and with no whitespace run outside strings longer
 *      than TN_JSON_PREFIX_MAX_SPACE: the checker takes every byte and
 *      says complete;
 *  (c) a refused byte leaves the state byte for byte as it was: the bytes
 *      taken, fed again to a fresh checker in one call, are all taken and
 *      end in the same state; fed in pieces (split where the input says),
 *      the same;
 *  (d) once complete, only whitespace is taken;
 *  (e) every prefix taken can still be finished: the closing this target
 *      derives from the state makes, appended, a text the reader accepts
 *      (the same surrogate exception as (a)).
 *
 * Seeds: tests/fuzz/corpus/json-prefix/.
 * Run:   build-fuzz/tests/fuzz/fuzz-json-prefix tests/fuzz/corpus/json-prefix
 */
#include "tn-json.h"
#include "tn-internal.h"
#include "fuzz-promise.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* The reader's verdict on text as one object within the checker's depth;
 * *surrogate: it refused an unpaired surrogate escape. */
static bool reader_object(const uint8_t *text, size_t n, bool *surrogate) {
    tn_error err;
    memset(&err, 0, sizeof err);
    *surrogate = false;
    if (tn_json_check((const char *)text, n, NULL, TN_JSON_PREFIX_MAX_DEPTH, 0, &err) != TN_OK) {
        *surrogate = strstr(err.message, "surrogate") != NULL;
        return false;
    }
    size_t lead = 0;
    while (lead < n && is_ws(text[lead]))
        lead++;
    return lead < n && text[lead] == '{';
}

/* The longest whitespace run outside strings of a text the reader took. */
static size_t longest_space(const uint8_t *text, size_t n) {
    size_t run = 0, longest = 0;
    bool in_str = false, esc = false;
    for (size_t i = 0; i < n; i++) {
        const uint8_t c = text[i];
        if (in_str) {
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"')
                in_str = false;
            continue;
        }
        if (is_ws(c)) {
            if (++run > longest)
                longest = run;
            continue;
        }
        run = 0;
        in_str = c == '"';
    }
    return longest;
}

/* Appends to out the bytes that finish the text whose state is p (mode
 * numbers as in engine/json-prefix.c: the enum's order). */
enum {
    M_START, M_DONE, M_OBJ_FIRST, M_KEY, M_COLON, M_ARR_FIRST, M_VALUE, M_AFTER,
    M_STR, M_ESC, M_HEX, M_UTF8, M_NUM_MINUS, M_NUM_ZERO, M_NUM_INT, M_NUM_DOT,
    M_NUM_FRAC, M_NUM_E, M_NUM_ESIGN, M_NUM_EXP, M_LIT,
};

static size_t finish(const tn_json_prefix *p, uint8_t *out) {
    static const char *const literals[] = {"true", "false", "null"};
    size_t n = 0;
    unsigned mode = p->mode;
    bool key = p->key;
    switch (mode) {
    case M_START:
        out[n++] = '{';
        out[n++] = '}';
        return n;
    case M_DONE:
        return 0;
    case M_UTF8:
        out[n++] = p->lo;
        for (unsigned i = 1; i < p->aux; i++)
            out[n++] = 0x80;
        out[n++] = '"';
        mode = key ? M_COLON : M_AFTER;
        break;
    case M_ESC:
        out[n++] = 'n';
        out[n++] = '"';
        mode = key ? M_COLON : M_AFTER;
        break;
    case M_HEX:
        for (unsigned i = 0; i < p->aux; i++)
            out[n++] = '0';
        out[n++] = '"';
        mode = key ? M_COLON : M_AFTER;
        break;
    case M_STR:
        out[n++] = '"';
        mode = key ? M_COLON : M_AFTER;
        break;
    case M_KEY:
        memcpy(out + n, "\"k\":0", 5);
        n += 5;
        mode = M_AFTER;
        break;
    case M_VALUE:
        out[n++] = '0';
        mode = M_AFTER;
        break;
    case M_NUM_MINUS:
    case M_NUM_DOT:
    case M_NUM_E:
    case M_NUM_ESIGN:
        out[n++] = '1';
        mode = M_AFTER;
        break;
    case M_LIT: {
        const char *rest = literals[p->lit] + p->aux;
        memcpy(out + n, rest, strlen(rest));
        n += strlen(rest);
        mode = M_AFTER;
        break;
    }
    default:
        break;
    }
    if (mode == M_COLON) {
        memcpy(out + n, ":0", 2);
        n += 2;
    }
    for (int d = p->depth; d > 0; d--)
        out[n++] = (p->stack >> (d - 1)) & 1u ? '}' : ']';
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096)
        return 0;
    uint8_t *kept = malloc(size + 1);
    uint8_t *text = malloc(size + 160);
    PROMISE(kept && text);

    /* Byte by byte, the refused ones skipped. */
    tn_json_prefix p;
    tn_json_prefix_init(&p);
    size_t n_kept = 0;
    bool whole = true, every_prefix_checked = size <= 512;
    for (size_t i = 0; i < size; i++) {
        const tn_json_prefix before = p;
        const bool was_complete = tn_json_prefix_complete(&p);
        const size_t got = tn_json_prefix_feed(&p, (const char *)data + i, 1);
        PROMISE(got <= 1);
        if (got == 0) {
            PROMISE(memcmp(&before, &p, sizeof p) == 0); /* (c) */
            whole = false;
            continue;
        }
        if (was_complete)
            PROMISE(is_ws(data[i]) && tn_json_prefix_complete(&p)); /* (d) */
        kept[n_kept++] = data[i];
        PROMISE(p.depth <= TN_JSON_PREFIX_MAX_DEPTH);
        PROMISE(p.space <= TN_JSON_PREFIX_MAX_SPACE);
        if (every_prefix_checked || i + 1 == size) { /* (e) */
            memcpy(text, kept, n_kept);
            const size_t m = n_kept + finish(&p, text + n_kept);
            bool surrogate;
            PROMISE(reader_object(text, m, &surrogate) || surrogate);
        }
    }

    /* (c) the bytes taken, again, in one call and in pieces. */
    tn_json_prefix q;
    tn_json_prefix_init(&q);
    PROMISE(tn_json_prefix_feed(&q, (const char *)kept, n_kept) == n_kept);
    PROMISE(memcmp(&q, &p, sizeof p) == 0);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 1099511628211ull;
    tn_json_prefix_init(&q);
    for (size_t at = 0; at < n_kept;) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        size_t len = 1 + (size_t)(h >> 59);
        if (len > n_kept - at)
            len = n_kept - at;
        PROMISE(tn_json_prefix_feed(&q, (const char *)kept + at, len) == len);
        at += len;
    }
    PROMISE(memcmp(&q, &p, sizeof p) == 0);

    /* (a) and (b) on the input as it is. */
    const bool ours = whole && tn_json_prefix_complete(&p);
    bool surrogate;
    const bool theirs = reader_object(data, size, &surrogate);
    if (ours)
        PROMISE(theirs || surrogate);
    if (theirs && longest_space(data, size) <= TN_JSON_PREFIX_MAX_SPACE)
        PROMISE(ours);

    free(kept);
    free(text);
    return 0;
}
