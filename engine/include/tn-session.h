/* Internals of the session (session.c) and of the pin snapshots on disk
 * (pin-store.c), shared with their tests. */
#ifndef TN_SESSION_H
#define TN_SESSION_H

#include "tern.h"

/* ------------------------------------------------------------ hashing */

/* SHA-256 (tern.h) is also the snapshot keys' hash: a collision would load
 * a wrong KV state, so the key gets a cryptographic hash; the payload a fast
 * checksum. Tests: true hashes with the scalar reference only (not the SHA
 * extensions), false again by the CPU. */
void tn_sha256_force_scalar(bool on);

/* A fast 64-bit checksum of a snapshot's payload: catches flipped bits and
 * truncation, at memory speed. Not a defence against a deliberate forgery
 * (the cache directory belongs to the user). */
uint64_t tn_checksum64(const void *data, size_t n, uint64_t seed);
/* The same sum over pieces of about `piece` bytes, after(user, bytes)
 * called after each: a pass over gigabytes that reports its progress and
 * can stop (from after) where it is. The result equals tn_checksum64's. */
uint64_t tn_checksum64_pieces(const void *data, size_t n, uint64_t seed, size_t piece,
                              void (*after)(void *user, size_t bytes), void *user);

/* ---------------------------------------------------- pin snapshots */

#define TN_PIN_MAGIC "TERNPIN\0"
#define TN_PIN_FORMAT_VERSION 1u
#define TN_PIN_HEADER_BYTES 128u
#define TN_PIN_DEFAULT_MAX_BYTES (4ull << 30)

typedef struct tn_pin_key {
    uint8_t b[32];
} tn_pin_key;

/* The snapshot key of the KV state that `tokens` leave in a context of this
 * model: SHA-256 over the engine version, the snapshot format, the model
 * file's identity (resolved path, size, modification time), its shape, and
 * the tokens (which already carry the rendered template). */
int tn_pin_key_compute(const tn_model *model, const int32_t *tokens, int32_t n_tokens,
                       tn_pin_key *key, tn_error *err);
/* 64 hex digits and a NUL. */
void tn_pin_key_hex(const tn_pin_key *key, char out[65]);

/* $XDG_CACHE_HOME/tern/pins, else $HOME/.cache/tern/pins; malloc'd, NULL
 * when neither variable is set. */
char *tn_pin_cache_default_dir(void);

/* DIR/HEX.pin, malloc'd. */
char *tn_pin_path(const char *dir, const tn_pin_key *key);

/* Loads the snapshot of `tokens` into ctx (kv_len becomes n_tokens).
 * TN_ERR_NOT_FOUND when there is none; TN_ERR_FORMAT (with a message naming
 * the file and what is wrong) when one exists but is corrupt, truncated or
 * made for something else: the file is then removed so that a fresh one
 * replaces it. On any failure the KV is untouched (it is written only after
 * every check passed), but one: TN_ERR_IO "pin snapshot ignored (it shrank
 * while it was being read)" when the file was cut short in place while it
 * was read (a SIGBUS caught, engine/error.c); when that happened during the
 * copy of its rows, the context's KV is emptied (tn_ctx_kv_len 0: its rows
 * were partly overwritten), and the caller recomputes the pin. A hit
 * refreshes the file's time (LRU). */
int tn_pin_store_load(const char *dir, const tn_pin_key *key, tn_ctx *ctx,
                      const int32_t *tokens, int32_t n_tokens, tn_error *err);

/* Writes rows [0, n_tokens) of ctx atomically (temp file, fsync, rename,
 * fsync of the directory), creating the directory, then evicts the least
 * recently used snapshots until the directory holds at most max_bytes.
 * TN_ERR_OVERFLOW (nothing written) when the snapshot alone exceeds it. */
int tn_pin_store_save(const char *dir, const tn_pin_key *key, const tn_ctx *ctx,
                      const int32_t *tokens, int32_t n_tokens, uint64_t max_bytes,
                      tn_error *err);

/* Removes the oldest *.pin files (by modification time) until the total is
 * at most max_bytes; `keep` (a file name, may be NULL) is never removed.
 * Also removes a save's temporary file untouched for an hour (its writer
 * was killed before the rename). Returns the number of files removed, or a
 * negative status. */
int tn_pin_store_evict(const char *dir, uint64_t max_bytes, const char *keep);

/* ------------------------------------------------- session internals */

/* The context a session runs on (tests read the KV through it). */
tn_ctx *tn_session_ctx(tn_session *s);
/* The tokens the session believes are in the KV, [kv_len]. */
const int32_t *tn_session_kv_tokens(const tn_session *s, int32_t *n);
/* The pinned system tokens, [n_pin]. */
const int32_t *tn_session_pinned_tokens(const tn_session *s, int32_t *n);

#endif
