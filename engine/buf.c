/* tn_buf, the growable byte buffer of the public API: the chat templates,
 * the tokenizer's pieces and the harmony parser all append to it, so it
 * belongs to none of them. */
#include "tern.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void tn_buf_free(tn_buf *b) {
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int tn_buf_append(tn_buf *b, const char *s, size_t n) {
    if (!b || (!s && n))
        return TN_ERR_INVALID;
    if (n > SIZE_MAX - b->len - 1)
        return TN_ERR_NOMEM;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap = cap > SIZE_MAX / 2 ? b->len + n + 1 : cap * 2;
        char *p = realloc(b->data, cap);
        if (!p)
            return TN_ERR_NOMEM;
        b->data = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return TN_OK;
}

int tn_buf_append_str(tn_buf *b, const char *s) {
    if (!s)
        return TN_ERR_INVALID;
    return tn_buf_append(b, s, strlen(s));
}
