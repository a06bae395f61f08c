/* Pin snapshots: the KV state of a pinned system prompt, kept on disk so
 * that a restart skips the prefill.
 *
 * One file per pin, DIR/<sha256 key>.pin, little-endian:
 *
 *   0   magic "TERNPIN\0"
 *   8   u32 format version (1; a newer one is refused, naming it; one more
 *           than 100 ahead is refused as damage)
 *   12  u32 header bytes (128)
 *   16  u8  key[32]            the file name, again: a renamed file is refused
 *   48  u32 n_tokens
 *   52  u32 n_layer, n_head_kv, head_dim, n_vocab
 *   68  u32 KV element type (1: bf16, what tn_ctx_kv_state_save writes; 0
 *           was f32, before session 3)
 *   72  u64 KV bytes
 *   80  u64 payload checksum   (tokens then KV)
 *   88  char engine version[16]
 *   104 u8  reserved[16]       zero (else refused: a format this build does
 *                              not know)
 *   120 u64 header checksum    (bytes 0..119)
 *   128 i32 tokens[n_tokens]
 *   ... KV state bytes
 *
 * The key already covers the model, the tokens and the engine version; the
 * header repeats the shape, the tokens and the engine version so that a
 * mismatch is reported in words rather than as a bad checksum or key, and
 * the checksums catch disk damage.
 * The file's modification time is its last use: eviction removes the oldest.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tn-internal.h"
#include "cpu/tn-cpu.h"
#include "tn-session.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------- SHA-256 */

const uint32_t tn_sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
};

static inline uint32_t ror32(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha256_block(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t S1 = ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = hh + S1 + ch + tn_sha256_k[i] + w[i];
        uint32_t S0 = ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = S0 + maj;
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

static atomic_bool sha256_scalar_only;

void tn_sha256_force_scalar(bool on) { atomic_store(&sha256_scalar_only, on); }

/* Runs of whole blocks: with the SHA extensions where the CPU has them
 * (5-6x the scalar rate), else the reference above. */
static void sha256_blocks(uint32_t h[8], const uint8_t *p, size_t n_blocks) {
    if (n_blocks > 0 && !atomic_load_explicit(&sha256_scalar_only, memory_order_relaxed) &&
        tn_cpu_has_sha()) {
        tn_sha256_blocks_shani(h, p, n_blocks);
        return;
    }
    for (size_t i = 0; i < n_blocks; i++)
        sha256_block(h, p + 64 * i);
}

void tn_sha256_init(tn_sha256 *c) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, iv, sizeof iv);
    c->n_bytes = 0;
    c->n_block = 0;
}

void tn_sha256_update(tn_sha256 *c, const void *data, size_t n) {
    const uint8_t *p = data;
    c->n_bytes += n;
    while (n > 0) {
        if (c->n_block == 0 && n >= 64) {
            const size_t blocks = n / 64;
            sha256_blocks(c->h, p, blocks);
            p += 64 * blocks;
            n -= 64 * blocks;
            continue;
        }
        size_t take = 64 - c->n_block;
        if (take > n)
            take = n;
        memcpy(c->block + c->n_block, p, take);
        c->n_block += (uint32_t)take;
        p += take;
        n -= take;
        if (c->n_block == 64) {
            sha256_blocks(c->h, c->block, 1);
            c->n_block = 0;
        }
    }
}

void tn_sha256_final(tn_sha256 *c, uint8_t out[32]) {
    const uint64_t bits = c->n_bytes * 8;
    uint8_t pad[72] = {0x80};
    size_t npad = (c->n_block < 56 ? 56 : 120) - c->n_block;
    for (int i = 0; i < 8; i++)
        pad[npad + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
    tn_sha256_update(c, pad, npad + 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(c->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)c->h[i];
    }
}

/* ------------------------------------------------------------ checksum */

#define CK_M1 0x9E3779B97F4A7C15ull
#define CK_M2 0xD6E8FEB86659FD93ull

/* Each step is a bijection of the lane for a fixed word and of the word for
 * a fixed lane, so a change confined to one word always changes the result;
 * four independent lanes keep the multiplier busy. */
static inline uint64_t ck_step(uint64_t acc, uint64_t w) {
    acc = (acc ^ w) * CK_M1;
    return acc ^ (acc >> 29);
}

static inline uint64_t ck_final(uint64_t h) {
    h ^= h >> 32;
    h *= CK_M2;
    h ^= h >> 29;
    h *= CK_M1;
    h ^= h >> 32;
    return h;
}

/* The four lanes over whole 32-byte blocks, the part of the sum that a
 * caller may cut into pieces (tn_checksum64_pieces). */
static void ck_lanes(uint64_t lane[4], const uint8_t *p, size_t n) {
    uint64_t a = lane[0], b = lane[1], c = lane[2], d = lane[3];
    for (size_t i = 0; i + 32 <= n; i += 32) {
        a = ck_step(a, tn_rd_u64(p + i));
        b = ck_step(b, tn_rd_u64(p + i + 8));
        c = ck_step(c, tn_rd_u64(p + i + 16));
        d = ck_step(d, tn_rd_u64(p + i + 24));
    }
    lane[0] = a, lane[1] = b, lane[2] = c, lane[3] = d;
}

static void ck_begin(uint64_t lane[4], uint64_t seed) {
    lane[0] = seed ^ 0x243F6A8885A308D3ull;
    lane[1] = seed ^ 0x13198A2E03707344ull;
    lane[2] = seed ^ 0xA4093822299F31D0ull;
    lane[3] = seed ^ 0x082EFA98EC4E6C89ull;
}

/* The lanes' result, then the bytes after the last whole block (tail:
 * fewer than 32 of them) and the length. */
static uint64_t ck_end(const uint64_t lane[4], const uint8_t *tail, size_t n) {
    const size_t left = n % 32;
    uint64_t h = (uint64_t)n * CK_M2;
    for (int k = 0; k < 4; k++)
        h = ck_step(h, ck_final(lane[k]));
    size_t i = 0;
    for (; i + 8 <= left; i += 8)
        h = ck_step(h, tn_rd_u64(tail + i));
    if (i < left) {
        uint64_t w = 0;
        for (size_t j = 0; i + j < left; j++)
            w |= (uint64_t)tail[i + j] << (8 * j);
        h = ck_step(h, w ^ 0xFF00000000000000ull);
    }
    return ck_final(h);
}

uint64_t tn_checksum64(const void *data, size_t n, uint64_t seed) {
    return tn_checksum64_pieces(data, n, seed, SIZE_MAX, NULL, NULL);
}

uint64_t tn_checksum64_pieces(const void *data, size_t n, uint64_t seed, size_t piece,
                              void (*after)(void *user, size_t bytes), void *user) {
    const uint8_t *p = data;
    uint64_t lane[4];
    ck_begin(lane, seed);
    /* Pieces of whole blocks: the lanes cannot tell where one ended. */
    piece = piece < 32 ? 32 : piece / 32 * 32;
    const size_t blocks = n / 32 * 32;
    for (size_t i = 0; i < blocks;) {
        const size_t k = blocks - i < piece ? blocks - i : piece;
        ck_lanes(lane, p + i, k);
        i += k;
        if (after)
            after(user, k);
    }
    return ck_end(lane, p + blocks, n);
}

/* ------------------------------------------------------------- the key */

static void sha_u64(tn_sha256 *c, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    tn_sha256_update(c, b, 8);
}

static void sha_str(tn_sha256 *c, const char *s) {
    sha_u64(c, strlen(s));
    tn_sha256_update(c, s, strlen(s));
}

int tn_pin_key_compute(const tn_model *model, const int32_t *tokens, int32_t n_tokens,
                       tn_pin_key *key, tn_error *err) {
    if (!model || !key || n_tokens < 0 || (n_tokens > 0 && !tokens))
        return tn_fail(err, TN_ERR_INVALID, "tn_pin_key_compute: bad arguments");
    const char *path = tn_model_path(model);
    tn_sha256 c;
    tn_sha256_init(&c);
    sha_str(&c, "tern pin");
    sha_str(&c, TN_VERSION_STRING);
    sha_u64(&c, TN_PIN_FORMAT_VERSION);
    /* The file's identity: a model re-downloaded or regenerated in place
     * gets a new mtime, so its old pins stop matching. */
    char resolved[PATH_MAX];
    const char *id_path = path && realpath(path, resolved) ? resolved : (path ? path : "");
    sha_str(&c, id_path);
    struct stat st;
    if (path && stat(path, &st) == 0) {
        sha_u64(&c, (uint64_t)st.st_size);
        sha_u64(&c, (uint64_t)st.st_mtim.tv_sec);
        sha_u64(&c, (uint64_t)st.st_mtim.tv_nsec);
        sha_u64(&c, (uint64_t)st.st_ino);
    } else {
        sha_u64(&c, UINT64_MAX);
    }
    sha_u64(&c, (uint64_t)tn_model_arch(model));
    sha_u64(&c, (uint64_t)tn_model_n_vocab(model));
    sha_u64(&c, (uint64_t)tn_model_n_embd(model));
    sha_u64(&c, (uint64_t)tn_model_n_layer(model));
    sha_u64(&c, (uint64_t)tn_model_n_head(model));
    sha_u64(&c, (uint64_t)tn_model_n_head_kv(model));
    sha_u64(&c, (uint64_t)tn_model_head_dim(model));
    sha_u64(&c, tn_model_weight_bytes(model));
    /* Another kernel family or weight layout rounds differently: its KV
     * would not be the one this machine's prefill makes. */
    sha_str(&c, tn_model_arithmetic(model));
    sha_u64(&c, (uint64_t)n_tokens);
    for (int32_t i = 0; i < n_tokens; i++)
        sha_u64(&c, (uint64_t)(uint32_t)tokens[i]);
    tn_sha256_final(&c, key->b);
    return TN_OK;
}

void tn_pin_key_hex(const tn_pin_key *key, char out[65]) {
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[key->b[i] >> 4];
        out[2 * i + 1] = hex[key->b[i] & 15];
    }
    out[64] = '\0';
}

/* ---------------------------------------------------------- locations */

static char *str_concat(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    if (!s)
        return NULL;
    memcpy(s, a, la);
    memcpy(s + la, b, lb + 1);
    return s;
}

char *tn_pin_cache_default_dir(void) {
    const char *xdg = getenv("XDG_CACHE_HOME");
    /* The XDG spec says a relative value is to be ignored. */
    if (xdg && xdg[0] == '/')
        return str_concat(xdg, "/tern/pins");
    const char *home = getenv("HOME");
    if (home && home[0])
        return str_concat(home, "/.cache/tern/pins");
    return NULL;
}

char *tn_pin_path(const char *dir, const tn_pin_key *key) {
    char hex[65];
    tn_pin_key_hex(key, hex);
    size_t n = strlen(dir) + 1 + 64 + 4 + 1;
    char *s = malloc(n);
    if (!s)
        return NULL;
    snprintf(s, n, "%s/%s.pin", dir, hex);
    return s;
}

/* mkdir -p */
static int make_dirs(const char *dir, tn_error *err) {
    char *p = strdup(dir);
    if (!p)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char saved = *s;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST) {
            int e = errno;
            int rc = tn_fail(err, TN_ERR_IO, "%s: cannot create the pin cache directory: %s", p,
                             strerror(e));
            free(p);
            return rc;
        }
        *s = saved;
        if (saved == '\0')
            break;
    }
    free(p);
    return TN_OK;
}

/* ------------------------------------------------------------- header */

#define TN_PIN_KV_BF16 1u

typedef struct pin_header {
    uint32_t n_tokens;
    uint32_t n_layer, n_head_kv, head_dim, n_vocab;
    uint32_t kv_type;
    uint64_t kv_bytes;
    uint64_t payload_checksum;
    uint8_t key[32];
} pin_header;

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static void header_encode(const pin_header *h, uint8_t out[TN_PIN_HEADER_BYTES]) {
    memset(out, 0, TN_PIN_HEADER_BYTES);
    memcpy(out, TN_PIN_MAGIC, 8);
    put_u32(out + 8, TN_PIN_FORMAT_VERSION);
    put_u32(out + 12, TN_PIN_HEADER_BYTES);
    memcpy(out + 16, h->key, 32);
    put_u32(out + 48, h->n_tokens);
    put_u32(out + 52, h->n_layer);
    put_u32(out + 56, h->n_head_kv);
    put_u32(out + 60, h->head_dim);
    put_u32(out + 64, h->n_vocab);
    put_u32(out + 68, h->kv_type);
    put_u64(out + 72, h->kv_bytes);
    put_u64(out + 80, h->payload_checksum);
    strncpy((char *)out + 88, TN_VERSION_STRING, 15);
    put_u64(out + 120, tn_checksum64(out, 120, 0));
}

/* The checksums say the file is as its writer left it, not that the writer
 * was Tern: every bf16 value must have a magnitude below 2^16 (exponent
 * field below 0x8F), which excludes infinities and NaNs. Larger values
 * overflow attention's dot products, and the next decode gives non-finite
 * logits. Real models' rows stay below: llama.cpp keeps them in half
 * precision by default, whose largest value is 65504. */
#define PIN_KV_MAX_BITS 0x477Fu /* 65280, the largest bf16 below 2^16 */

/* The largest magnitude (sign bit cleared) among the bf16 values in kv[0..bytes),
 * or worst if that is larger. */
static uint16_t kv_worst(const uint8_t *kv, size_t bytes, uint16_t worst) {
    for (size_t i = 0; i + 2 <= bytes; i += 2) {
        const uint16_t v = (uint16_t)(tn_rd_u16(kv + i) & 0x7FFFu);
        worst = v > worst ? v : worst;
    }
    return worst;
}

typedef struct kv_scan {
    const uint8_t *kv;
    size_t done;
    uint16_t worst;
} kv_scan;

/* Called by the checksum after each piece it summed: the range check
 * reads the piece while it is still in the cache. */
static void kv_scan_piece(void *user, size_t bytes) {
    kv_scan *s = user;
    s->worst = kv_worst(s->kv + s->done, bytes, s->worst);
    s->done += bytes;
}

/* Small enough to stay in a core's L2 between the two reads. */
#define PIN_SCAN_PIECE ((size_t)64 << 10)

/* The payload checksum (tokens then KV bytes), and whether every KV value
 * is in range, in one read of the KV: a second pass over a large pin's rows
 * (hundreds of MB, beyond any cache) cost as much again as the first. */
static uint64_t payload_checksum(const int32_t *tokens, uint32_t n_tokens, const void *kv,
                                 uint64_t kv_bytes, bool *in_range) {
    const uint64_t h = tn_checksum64(tokens, (size_t)n_tokens * sizeof(int32_t), 1);
    kv_scan s = {.kv = kv};
    const uint64_t sum =
        tn_checksum64_pieces(kv, (size_t)kv_bytes, h, PIN_SCAN_PIECE, kv_scan_piece, &s);
    /* The checksum's tail (under 32 bytes) comes in no piece. */
    s.worst = kv_worst(s.kv + s.done, (size_t)kv_bytes - s.done, s.worst);
    *in_range = s.worst <= PIN_KV_MAX_BITS;
    return sum;
}

/* ---------------------------------------------------------------- load */

/* Why a snapshot is refused where the message names the file alone. */
enum {
    PIN_READ, /* not refused */
    PIN_NOT_REGULAR,
    PIN_SHORT,
    PIN_NOT_A_PIN,
    PIN_OTHER_VERSION,
    PIN_NEWER_VERSION,
    PIN_FORMAT_DAMAGED,
    PIN_OTHER_ENGINE,
    PIN_HEADER_DAMAGED,
    PIN_RESERVED,
    PIN_OTHER_KEY,
    PIN_OTHER_MODEL,
    PIN_CHANGED,
    PIN_DAMAGED,
    PIN_OTHER_TOKENS,
    PIN_OUT_OF_RANGE,
};

/* Format versions further ahead of this build's than Tern could have come
 * (one a release at the very most) are not a newer Tern's: the word was
 * damaged, and saying "written by a newer Tern" would send the user looking
 * for an upgrade that does not exist. */
#define PIN_FORMAT_AHEAD_MAX 100u

/* The engine version in a header's bytes 88..103, as it can be shown: up
 * to its first NUL, anything but printable ASCII as '?' (the header
 * checksum only says the writer put these bytes there), none as "?". */
static void shown_engine_version(const uint8_t *h, char out[16]) {
    int i = 0;
    for (; i < 15 && h[88 + i] != 0; i++)
        out[i] = h[88 + i] >= 0x20 && h[88 + i] < 0x7F ? (char)h[88 + i] : '?';
    if (i == 0)
        out[i++] = '?';
    out[i] = 0;
}

/* The refusal's message, one whole format per reason so that each is
 * translated as a sentence (docs/TRANSLATING.md); and the file goes: a bad
 * snapshot would be refused again at every start, so it is removed for the
 * recomputed pin to take its place. h: the header, when it was read. */
static int refuse(const char *path, int why, const uint8_t *h, tn_error *err) {
    int rc = TN_ERR_FORMAT;
    char version[16];
    switch (why) {
    case PIN_NOT_REGULAR:
        rc = tn_fail(err, rc, "%s: pin snapshot ignored (not a regular file); recomputing the pin",
                     path);
        break;
    case PIN_SHORT:
        rc = tn_fail(err, rc,
                     "%s: pin snapshot ignored (truncated: shorter than its header); "
                     "recomputing the pin",
                     path);
        break;
    case PIN_NOT_A_PIN:
        rc = tn_fail(err, rc,
                     "%s: pin snapshot ignored (not a Tern pin snapshot); recomputing the pin",
                     path);
        break;
    case PIN_OTHER_VERSION:
        rc = tn_fail(err, rc,
                     "%s: pin snapshot ignored (made by another version of Tern); "
                     "recomputing the pin",
                     path);
        break;
    case PIN_NEWER_VERSION:
        rc = tn_fail(err, rc,
                     "%s: pin snapshot ignored (written by a newer Tern, in snapshot format %u; "
                     "this one reads format %u); recomputing the pin",
                     path, tn_rd_u32(h + 8), TN_PIN_FORMAT_VERSION);
        break;
    case PIN_FORMAT_DAMAGED:
        rc = tn_fail(err, rc,
                     "%s: pin snapshot ignored (damaged header: snapshot format %u cannot be "
                     "Tern's, this one reads format %u); recomputing the pin",
                     path, tn_rd_u32(h + 8), TN_PIN_FORMAT_VERSION);
        break;
    case PIN_OTHER_ENGINE:
        shown_engine_version(h, version);
        rc = tn_fail(err, rc,
                     "%s: pin snapshot ignored (made by Tern %s, this is Tern %s); "
                     "recomputing the pin",
                     path, version, TN_VERSION_STRING);
        break;
    case PIN_RESERVED:
        rc = tn_fail(err, rc,
                     "%s: pin snapshot ignored (its header's reserved bytes are not zero: a "
                     "format this version of Tern does not know); recomputing the pin",
                     path);
        break;
    case PIN_HEADER_DAMAGED:
        rc = tn_fail(err, rc,
                     "%s: pin snapshot ignored (damaged header: checksum mismatch); "
                     "recomputing the pin",
                     path);
        break;
    case PIN_OTHER_KEY:
        rc = tn_fail(err, rc,
                     "%s: pin snapshot ignored (its key does not match its name); "
                     "recomputing the pin",
                     path);
        break;
    case PIN_OTHER_MODEL:
        rc = tn_fail(err, rc,
                     "%s: pin snapshot ignored (made for another model or prompt); "
                     "recomputing the pin",
                     path);
        break;
    case PIN_CHANGED:
        rc = tn_fail(err, rc,
                     "%s: pin snapshot ignored (changed while it was read); recomputing the pin",
                     path);
        break;
    case PIN_DAMAGED:
        rc = tn_fail(err, rc,
                     "%s: pin snapshot ignored (damaged data: checksum mismatch); "
                     "recomputing the pin",
                     path);
        break;
    case PIN_OUT_OF_RANGE:
        rc = tn_fail(err, rc,
                     "%s: pin snapshot ignored (damaged data: KV values out of range); "
                     "recomputing the pin",
                     path);
        break;
    case PIN_OTHER_TOKENS:
        rc = tn_fail(err, rc,
                     "%s: pin snapshot ignored (made for other system-prompt tokens); "
                     "recomputing the pin",
                     path);
        break;
    }
    unlink(path);
    return rc;
}

/* The header as read, against the snapshot that this context and these
 * tokens want: PIN_READ, or why it is refused. */
static int check_header(const uint8_t h[TN_PIN_HEADER_BYTES], const tn_pin_key *key,
                        const tn_ctx *ctx, int32_t n_tokens) {
    if (memcmp(h, TN_PIN_MAGIC, 8) != 0)
        return PIN_NOT_A_PIN;
    /* The version before anything it governs: a newer format may put its
     * fields, the header checksum among them, elsewhere. Such a file is
     * removed like any other refused one: the name is this build's alone
     * (the key covers the engine and the format version), so it was not
     * a newer Tern's to keep. */
    if (tn_rd_u32(h + 8) > TN_PIN_FORMAT_VERSION + PIN_FORMAT_AHEAD_MAX)
        return PIN_FORMAT_DAMAGED;
    if (tn_rd_u32(h + 8) > TN_PIN_FORMAT_VERSION)
        return PIN_NEWER_VERSION;
    if (tn_rd_u32(h + 8) != TN_PIN_FORMAT_VERSION || tn_rd_u32(h + 12) != TN_PIN_HEADER_BYTES)
        return PIN_OTHER_VERSION;
    if (tn_rd_u64(h + 120) != tn_checksum64(h, 120, 0))
        return PIN_HEADER_DAMAGED;
    /* Written as zero: anything else is a field of a format this build
     * does not know, whose meaning it would ignore. */
    for (int i = 104; i < 120; i++)
        if (h[i] != 0)
            return PIN_RESERVED;
    /* The key covers the engine version, so another version's snapshot is
     * never looked for under this name; one copied or renamed to it would
     * be refused by the key below all the same, but as a key that does not
     * match its name. Compared first, the message names both versions. */
    char engine[16] = {0};
    strncpy(engine, TN_VERSION_STRING, 15);
    if (memcmp(h + 88, engine, 16) != 0)
        return PIN_OTHER_ENGINE;
    if (memcmp(h + 16, key->b, 32) != 0)
        return PIN_OTHER_KEY;
    const uint64_t want_kv = tn_ctx_kv_state_bytes(ctx, n_tokens);
    const tn_model *model = tn_ctx_model(ctx);
    if (tn_rd_u32(h + 48) != (uint32_t)n_tokens ||
        tn_rd_u32(h + 52) != (uint32_t)tn_model_n_layer(model) ||
        tn_rd_u32(h + 56) != (uint32_t)tn_model_n_head_kv(model) ||
        tn_rd_u32(h + 60) != (uint32_t)tn_model_head_dim(model) ||
        tn_rd_u32(h + 64) != (uint32_t)tn_model_n_vocab(model) ||
        tn_rd_u32(h + 68) != TN_PIN_KV_BF16 || tn_rd_u64(h + 72) != want_kv || want_kv == 0)
        return PIN_OTHER_MODEL;
    return PIN_READ;
}

/* The parts of a load that read the mapped snapshot, the checks and then
 * the copy of its rows into the context, each run under tn_guarded_read:
 * they allocate nothing and take no lock (the messages are the caller's,
 * after them), so a jump out of one loses nothing. */
typedef struct pin_pass {
    const uint8_t *map;
    const uint8_t *h; /* the header as pread before the mapping */
    uint32_t n;
    uint64_t kv_bytes;
    const int32_t *tokens;
    tn_ctx *ctx;
    int32_t n_tokens;
    tn_error *err;
    int rc;      /* tn_ctx_kv_state_load's */
    int refused; /* PIN_READ, or why the snapshot is refused */
} pin_pass;

static void pin_check_run(void *arg) {
    pin_pass *pp = arg;
    const uint8_t *m = pp->map;
    if (memcmp(m, pp->h, TN_PIN_HEADER_BYTES) != 0) { /* replaced between the read and the map */
        pp->refused = PIN_CHANGED;
        return;
    }
    const uint8_t *tok_bytes = m + TN_PIN_HEADER_BYTES;
    const uint8_t *kv = tok_bytes + (size_t)pp->n * 4;
    bool in_range = false;
    if (payload_checksum((const int32_t *)tok_bytes, pp->n, kv, pp->kv_bytes, &in_range) !=
        tn_rd_u64(pp->h + 80)) {
        pp->refused = PIN_DAMAGED;
        return;
    }
    if (memcmp(tok_bytes, pp->tokens, (size_t)pp->n * 4) != 0) {
        pp->refused = PIN_OTHER_TOKENS;
        return;
    }
    if (!in_range)
        pp->refused = PIN_OUT_OF_RANGE;
}

static void pin_copy_run(void *arg) {
    pin_pass *pp = arg;
    const uint8_t *kv = pp->map + TN_PIN_HEADER_BYTES + (size_t)pp->n * 4;
    pp->rc = tn_ctx_kv_state_load(pp->ctx, pp->n_tokens, kv, pp->kv_bytes, pp->err);
}

int tn_pin_store_load(const char *dir, const tn_pin_key *key, tn_ctx *ctx,
                      const int32_t *tokens, int32_t n_tokens, tn_error *err) {
    if (!dir || !key || !ctx || n_tokens <= 0 || !tokens)
        return tn_fail(err, TN_ERR_INVALID, "tn_pin_store_load: bad arguments");
    char *path = tn_pin_path(dir, key);
    if (!path)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    int rc = TN_OK;
    void *map = MAP_FAILED;
    size_t map_size = 0;
    /* O_NONBLOCK: a FIFO (or a device) put where a snapshot belongs would
     * block open() for ever; its type is checked before anything is read. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        rc = e == ENOENT ? tn_fail(err, TN_ERR_NOT_FOUND, "%s: no pin snapshot", path)
                         : tn_fail(err, TN_ERR_IO, "%s: cannot open the pin snapshot: %s", path,
                                   strerror(e));
        goto done;
    }
    struct stat st;
    /* The header alone first: a file that is not a snapshot for this model
     * and prompt (whatever its size) is refused without reading the rest. */
    uint8_t h[TN_PIN_HEADER_BYTES];
    int why = PIN_READ;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        why = PIN_NOT_REGULAR;
    else if ((uint64_t)st.st_size < TN_PIN_HEADER_BYTES ||
             pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h)
        why = PIN_SHORT;
    else
        why = check_header(h, key, ctx, n_tokens);
    if (why != PIN_READ) {
        rc = refuse(path, why, h, err);
        goto done;
    }
    const uint32_t n = tn_rd_u32(h + 48);
    const uint64_t kv_bytes = tn_rd_u64(h + 72);
    uint64_t expect_size = TN_PIN_HEADER_BYTES + (uint64_t)n * 4 + kv_bytes;
    if ((uint64_t)st.st_size != expect_size) {
        if ((uint64_t)st.st_size < expect_size)
            rc = tn_fail(err, TN_ERR_FORMAT,
                         "%s: pin snapshot ignored (truncated: %llu bytes, expected %llu); "
                         "recomputing the pin",
                         path, (unsigned long long)st.st_size, (unsigned long long)expect_size);
        else
            rc = tn_fail(err, TN_ERR_FORMAT,
                         "%s: pin snapshot ignored (trailing bytes: %llu bytes, expected %llu); "
                         "recomputing the pin",
                         path, (unsigned long long)st.st_size, (unsigned long long)expect_size);
        unlink(path); /* refused as above */
        goto done;
    }
    map_size = (size_t)st.st_size;
    map = mmap(NULL, map_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED) {
        int e = errno;
        rc = tn_fail(err, TN_ERR_IO, "%s: cannot map the pin snapshot: %s", path, strerror(e));
        goto done;
    }
    /* Every read of the mapping is in one of two guarded passes, the checks
     * and then the copy of the rows into the context: a snapshot cut short
     * in place meanwhile (only another program does that: Tern renames
     * whole files into place) refuses the pin with TN_ERR_IO instead of a
     * SIGBUS. The file is left alone (whoever is rewriting it may finish). */
    pin_pass pp = {.map = map, .h = h, .n = n, .kv_bytes = kv_bytes, .tokens = tokens,
                   .ctx = ctx, .n_tokens = n_tokens, .err = err, .rc = TN_OK};
    const tn_read_span span = {.base = map, .size = map_size, .path = path};
    tn_error fault = {0}; /* "'PATH' shrank ...": the message below says what follows */
    int grc = tn_guarded_read(&span, 1, "pin-check", pin_check_run, &pp, &fault);
    if (grc == TN_OK && pp.refused == PIN_READ) {
        grc = tn_guarded_read(&span, 1, "pin-copy", pin_copy_run, &pp, &fault);
        /* The copy had begun: the context's rows are partly the
         * snapshot's, so none of them count (the caller recomputes the pin
         * from what tn_ctx_kv_len says is left). */
        if (grc != TN_OK)
            tn_ctx_kv_truncate(ctx, 0);
    }
    if (grc != TN_OK) {
        rc = tn_fail(err, TN_ERR_IO,
                     "%s: pin snapshot ignored (it shrank while it was being read); "
                     "recomputing the pin",
                     path);
        goto done;
    }
    if (pp.refused != PIN_READ) {
        rc = refuse(path, pp.refused, h, err);
        goto done;
    }
    rc = pp.rc;
    if (rc == TN_OK)
        futimens(fd, NULL); /* last use, for LRU eviction */
done:
    if (map != MAP_FAILED)
        munmap(map, map_size);
    if (fd >= 0)
        close(fd);
    free(path);
    return rc;
}

/* ---------------------------------------------------------------- save */

static int write_all(int fd, const void *data, size_t n) {
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int tn_pin_store_save(const char *dir, const tn_pin_key *key, const tn_ctx *ctx,
                      const int32_t *tokens, int32_t n_tokens, uint64_t max_bytes,
                      tn_error *err) {
    if (!dir || !dir[0] || !key || !ctx || n_tokens <= 0 || !tokens ||
        n_tokens > tn_ctx_kv_len(ctx))
        return tn_fail(err, TN_ERR_INVALID, "tn_pin_store_save: bad arguments");
    if (max_bytes == 0)
        max_bytes = TN_PIN_DEFAULT_MAX_BYTES;
    const uint64_t kv_bytes = tn_ctx_kv_state_bytes(ctx, n_tokens);
    const uint64_t file_bytes = TN_PIN_HEADER_BYTES + (uint64_t)n_tokens * 4 + kv_bytes;
    if (file_bytes > max_bytes)
        return tn_fail(err, TN_ERR_OVERFLOW,
                       "%s: a pin snapshot of %.1f MiB exceeds the cache bound of %.1f MiB; not "
                       "saved",
                       dir, (double)file_bytes / (1 << 20), (double)max_bytes / (1 << 20));
    if (kv_bytes > SIZE_MAX)
        return tn_fail(err, TN_ERR_NOMEM, "out of memory");
    int rc = make_dirs(dir, err);
    if (rc != TN_OK)
        return rc;
    void *kv = malloc((size_t)kv_bytes);
    char *path = tn_pin_path(dir, key);
    char *tmp = path ? str_concat(path, ".tmp-XXXXXX") : NULL;
    int fd = -1;
    if (!kv || !path || !tmp) {
        rc = tn_fail(err, TN_ERR_NOMEM, "out of memory");
        goto done;
    }
    rc = tn_ctx_kv_state_save(ctx, n_tokens, kv, kv_bytes, err);
    if (rc != TN_OK)
        goto done;
    bool in_range = false;
    const uint64_t sum = payload_checksum(tokens, (uint32_t)n_tokens, kv, kv_bytes, &in_range);
    /* A snapshot the load would refuse (out of range) is not written: it
     * would be read, refused and removed at every start, and saved again. */
    if (!in_range) {
        rc = tn_fail(err, TN_ERR_INVALID,
                     "%s: the pinned prompt's keys or values reach 2^16 or more, which a pin "
                     "snapshot does not keep; not saved (the pin is recomputed at each start)",
                     dir);
        goto done;
    }
    pin_header ph = {
        .n_tokens = (uint32_t)n_tokens,
        .n_layer = (uint32_t)tn_model_n_layer(tn_ctx_model(ctx)),
        .n_head_kv = (uint32_t)tn_model_n_head_kv(tn_ctx_model(ctx)),
        .head_dim = (uint32_t)tn_model_head_dim(tn_ctx_model(ctx)),
        .n_vocab = (uint32_t)tn_model_n_vocab(tn_ctx_model(ctx)),
        .kv_type = TN_PIN_KV_BF16,
        .kv_bytes = kv_bytes,
        .payload_checksum = sum,
    };
    memcpy(ph.key, key->b, 32);
    uint8_t header[TN_PIN_HEADER_BYTES];
    header_encode(&ph, header);
    fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        rc = tn_fail_write(err, dir, e);
        goto done;
    }
    const int test_errno = tn_test_write_errno(path); /* tn_test_fail_writes */
    if (test_errno || write_all(fd, header, sizeof header) != 0 ||
        write_all(fd, tokens, (size_t)n_tokens * 4) != 0 ||
        write_all(fd, kv, (size_t)kv_bytes) != 0 || fsync(fd) != 0) {
        int e = test_errno ? test_errno : errno;
        rc = tn_fail_write(err, tmp, e);
        goto done;
    }
    if (close(fd) != 0) {
        fd = -1;
        int e = errno;
        rc = tn_fail_write(err, tmp, e);
        goto done;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        int e = errno;
        rc = tn_fail(err, TN_ERR_IO, "%s: cannot rename into place: %s", path, strerror(e));
        goto done;
    }
    free(tmp);
    tmp = NULL;
    /* The rename is durable only once the directory is. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    const char *name = strrchr(path, '/');
    tn_pin_store_evict(dir, max_bytes, name ? name + 1 : path);
done:
    if (fd >= 0)
        close(fd);
    if (tmp)
        unlink(tmp);
    free(tmp);
    free(path);
    free(kv);
    return rc;
}

/* ------------------------------------------------------------ eviction */

typedef struct pin_file {
    char *name;
    uint64_t size;
    int64_t mtime_ns;
} pin_file;

static int by_age(const void *a, const void *b) {
    const pin_file *x = a, *y = b;
    if (x->mtime_ns != y->mtime_ns)
        return x->mtime_ns < y->mtime_ns ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* A snapshot this store wrote: tn_pin_path's name (64 lowercase hex digits
 * and ".pin") and the format's magic. The directory may be one the user
 * named (--pin-cache) and holds files of theirs: any "*.pin" used to be
 * evicted, a 5 GB disk-image.pin among them. */
static bool is_snapshot(int dfd, const char *name) {
    if (strlen(name) != 64 + 4 || strcmp(name + 64, ".pin") != 0)
        return false;
    for (int i = 0; i < 64; i++)
        if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
            return false;
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return false;
    char magic[8];
    const bool ok = read(fd, magic, sizeof magic) == (ssize_t)sizeof magic &&
                    memcmp(magic, TN_PIN_MAGIC, sizeof magic) == 0;
    close(fd);
    return ok;
}

/* A snapshot's temporary, left by a writer that was killed before its
 * rename (tn_pin_store_save's "<name>.pin.tmp-XXXXXX": a second Ctrl-C
 * while the server stops, a crash, a power cut). Nothing else would ever
 * remove it, and it is not counted under the bound: up to a whole
 * snapshot's size of disk each time. One still being written is younger
 * than an hour: its writes touch it. */
#define ORPHAN_AGE_S (60 * 60)

static bool is_orphan(const char *name, const struct stat *st, time_t now) {
    if (strlen(name) != 64 + 4 + 5 + 6 || strncmp(name + 64, ".pin.tmp-", 9) != 0)
        return false;
    for (int i = 0; i < 64; i++)
        if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
            return false;
    return st->st_mtim.tv_sec < now - ORPHAN_AGE_S;
}

int tn_pin_store_evict(const char *dir, uint64_t max_bytes, const char *keep) {
    if (!dir)
        return TN_ERR_INVALID;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return errno == ENOENT ? 0 : TN_ERR_IO;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return TN_ERR_IO;
    }
    pin_file *files = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    int rc = 0;
    struct dirent *de;
    const time_t now = time(NULL);
    while ((de = readdir(d)) != NULL) {
        struct stat st;
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (is_orphan(de->d_name, &st, now)) {
            if (unlinkat(dfd, de->d_name, 0) == 0)
                rc++;
            continue;
        }
        if (!is_snapshot(dfd, de->d_name))
            continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 16;
            pin_file *nf = realloc(files, nc * sizeof *nf);
            if (!nf) {
                rc = TN_ERR_NOMEM;
                goto done;
            }
            files = nf;
            cap = nc;
        }
        files[n].name = strdup(de->d_name);
        if (!files[n].name) {
            rc = TN_ERR_NOMEM;
            goto done;
        }
        files[n].size = (uint64_t)st.st_size;
        files[n].mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        total += files[n].size;
        n++;
    }
    if (n > 1)
        qsort(files, n, sizeof *files, by_age);
    for (size_t i = 0; i < n && total > max_bytes; i++) {
        if (keep && strcmp(files[i].name, keep) == 0)
            continue;
        if (unlinkat(dfd, files[i].name, 0) == 0) {
            total -= files[i].size;
            rc++;
        }
    }
done:
    for (size_t i = 0; i < n; i++)
        free(files[i].name);
    free(files);
    closedir(d);
    return rc;
}
