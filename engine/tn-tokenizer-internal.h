/* Internals shared by the tokenizer (tokenizer.c, pretokenize.c) and the
 * Hugging Face vocabulary converter (mk/vocab-convert.c): hash maps keyed by
 * byte strings and by token pairs, the GPT-2 byte map, the pre-tokenizer
 * splitters, token types. */
#ifndef TN_TOKENIZER_INTERNAL_H
#define TN_TOKENIZER_INTERNAL_H

#include "tern.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- hashing */

static inline uint64_t tn_hash_bytes(const void *data, size_t len) {
    const unsigned char *p = data;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (len * 0xFF51AFD7ED558CCDull);
    while (len >= 8) {
        uint64_t k;
        memcpy(&k, p, 8);
        h = (h ^ (k * 0xC2B2AE3D27D4EB4Full)) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
        p += 8;
        len -= 8;
    }
    uint64_t k = 0;
    for (size_t i = 0; i < len; i++)
        k |= (uint64_t)p[i] << (8 * i);
    h = (h ^ (k * 0xC2B2AE3D27D4EB4Full)) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    return h;
}

static inline uint64_t tn_hash_u64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 33;
    return x;
}

/* -------------------------------------------- string -> int32 hash map */

/* Keys are borrowed (ptr, len): the storage must outlive the map. */
typedef struct tn_strmap_slot {
    const char *key;
    uint32_t len;
    int32_t value;
} tn_strmap_slot;

typedef struct tn_strmap {
    tn_strmap_slot *slots;
    size_t mask; /* capacity - 1; capacity is a power of two */
    size_t count;
} tn_strmap;

static inline bool tn_strmap_init(tn_strmap *m, size_t expected) {
    size_t cap = 16;
    while (cap < expected * 2 + 2)
        cap <<= 1;
    m->slots = calloc(cap, sizeof *m->slots);
    m->mask = cap - 1;
    m->count = 0;
    return m->slots != NULL;
}

static inline void tn_strmap_free(tn_strmap *m) {
    free(m->slots);
    m->slots = NULL;
    m->count = 0;
}

/* -1 when absent. */
static inline int32_t tn_strmap_get(const tn_strmap *m, const char *key, size_t len) {
    if (!m->slots)
        return -1;
    size_t i = (size_t)tn_hash_bytes(key, len) & m->mask;
    for (;;) {
        const tn_strmap_slot *s = &m->slots[i];
        if (!s->key)
            return -1;
        if (s->len == len && memcmp(s->key, key, len) == 0)
            return s->value;
        i = (i + 1) & m->mask;
    }
}

static inline bool tn_strmap_grow(tn_strmap *m) {
    size_t cap = (m->mask + 1) * 2;
    tn_strmap_slot *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return false;
    for (size_t j = 0; j <= m->mask; j++) {
        tn_strmap_slot *s = &m->slots[j];
        if (!s->key)
            continue;
        size_t i = (size_t)tn_hash_bytes(s->key, s->len) & (cap - 1);
        while (slots[i].key)
            i = (i + 1) & (cap - 1);
        slots[i] = *s;
    }
    free(m->slots);
    m->slots = slots;
    m->mask = cap - 1;
    return true;
}

/* Inserts, or keeps the existing value when the key is present (first
 * insertion wins). Returns the value now stored, or INT32_MIN when out of
 * memory. The empty key is allowed (a non-NULL pointer is stored). */
static inline int32_t tn_strmap_put(tn_strmap *m, const char *key, size_t len, int32_t value) {
    if ((m->count + 1) * 2 > m->mask + 1 && !tn_strmap_grow(m))
        return INT32_MIN;
    size_t i = (size_t)tn_hash_bytes(key, len) & m->mask;
    for (;;) {
        tn_strmap_slot *s = &m->slots[i];
        if (!s->key) {
            s->key = key ? key : "";
            s->len = (uint32_t)len;
            s->value = value;
            m->count++;
            return value;
        }
        if (s->len == len && memcmp(s->key, key, len) == 0)
            return s->value;
        i = (i + 1) & m->mask;
    }
}

/* ----------------------------------------------- token pair -> merge map */

typedef struct tn_pairmap_slot {
    uint64_t key;   /* (left << 32) | right, plus one so that 0 means empty */
    int32_t rank;
    int32_t result;
} tn_pairmap_slot;

typedef struct tn_pairmap {
    tn_pairmap_slot *slots;
    size_t mask;
    size_t count;
} tn_pairmap;

static inline uint64_t tn_pair_key(int32_t left, int32_t right) {
    return (((uint64_t)(uint32_t)left << 32) | (uint32_t)right) + 1;
}

static inline bool tn_pairmap_init(tn_pairmap *m, size_t expected) {
    size_t cap = 16;
    while (cap < expected * 2 + 2)
        cap <<= 1;
    m->slots = calloc(cap, sizeof *m->slots);
    m->mask = cap - 1;
    m->count = 0;
    return m->slots != NULL;
}

static inline void tn_pairmap_free(tn_pairmap *m) {
    free(m->slots);
    m->slots = NULL;
}

/* First insertion of a pair wins (the lowest rank, when inserted in order).
 * The map never grows: init it with the final count. */
static inline bool tn_pairmap_put(tn_pairmap *m, int32_t left, int32_t right, int32_t rank,
                                  int32_t result) {
    if ((m->count + 1) * 2 > m->mask + 1)
        return false;
    uint64_t key = tn_pair_key(left, right);
    size_t i = (size_t)tn_hash_u64(key) & m->mask;
    while (m->slots[i].key) {
        if (m->slots[i].key == key)
            return true;
        i = (i + 1) & m->mask;
    }
    m->slots[i].key = key;
    m->slots[i].rank = rank;
    m->slots[i].result = result;
    m->count++;
    return true;
}

static inline const tn_pairmap_slot *tn_pairmap_get(const tn_pairmap *m, int32_t left,
                                                    int32_t right) {
    if (!m->slots)
        return NULL;
    uint64_t key = tn_pair_key(left, right);
    size_t i = (size_t)tn_hash_u64(key) & m->mask;
    for (;;) {
        const tn_pairmap_slot *s = &m->slots[i];
        if (!s->key)
            return NULL;
        if (s->key == key)
            return s;
        i = (i + 1) & m->mask;
    }
}

/* ------------------------------------------------------- GPT-2 byte map */

/* GPT-2 maps every byte to a printable code point so byte-level tokens are
 * readable strings: printable Latin-1 bytes map to themselves, the others
 * (control characters, space, ...) to U+0100 upwards in byte order. */
static inline uint32_t tn_gpt2_byte_to_cp(unsigned char b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)
        return b;
    /* Rank of b among the unprintable bytes. */
    uint32_t rank;
    if (b <= 0x20)
        rank = b;                      /* 0x00..0x20: 33 bytes */
    else if (b <= 0xA0)
        rank = 33 + (b - 0x7F);        /* 0x7F..0xA0: 34 bytes */
    else
        rank = 33 + 34;                /* 0xAD */
    return 0x100 + rank;
}

/* Inverse: the byte for a code point of the map, -1 for others. */
static inline int tn_gpt2_cp_to_byte(uint32_t cp) {
    if (cp < 0x100)
        return ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || cp >= 0xAE)
                   ? (int)cp
                   : -1;
    if (cp < 0x100 + 33)
        return (int)(cp - 0x100);
    if (cp < 0x100 + 67)
        return (int)(0x7F + (cp - 0x100 - 33));
    if (cp == 0x100 + 67)
        return 0xAD;
    return -1;
}

/* ------------------------------------------------------ pre-tokenizers */

typedef enum tn_pretok {
    TN_PRETOK_NONE = 0,   /* SentencePiece style: no split */
    TN_PRETOK_GPT2,       /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    TN_PRETOK_LLAMA3,     /* (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
    TN_PRETOK_QWEN2,      /* as LLAMA3 with \p{N} one digit at a time */
    TN_PRETOK_GPT4O,      /* o200k (gpt-oss): letters split by case, pretokenize.c */
} tn_pretok;

/* Length in bytes of the next piece of text[0..len) under the split
 * expression (len > 0; the result is >= 1). Pieces cover the text: calling
 * it repeatedly from the end of the previous piece partitions the input
 * exactly as the regular expression's successive matches do. Bytes that are
 * not valid UTF-8 are units of their own, classified like U+FFFD. */
size_t tn_pretok_next(tn_pretok kind, const char *text, size_t len);

/* The pre-tokenizer named by tokenizer.ggml.pre for a byte-level vocabulary,
 * or -1 when Tern does not know it. */
int tn_pretok_from_name(const char *name, size_t len);

/* The regular expressions as Hugging Face tokenizer.json files spell them,
 * so the converter can name the pre-tokenizer it sees. */
extern const char tn_pretok_regex_gpt2[];
extern const char tn_pretok_regex_llama3[];
extern const char tn_pretok_regex_qwen2[];
extern const char tn_pretok_regex_gpt4o[];

#endif
