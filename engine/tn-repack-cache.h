/* The on-disk cache of repacked weights (engine/repack-cache.c, issue 21
 * item 4; the format and its threat model: docs/QUANT.md, "The repack
 * cache").
 *
 * The X16 copy of a model's matrices (tn_weights_repack) is written once to
 * DIR/<name>.x16 and mapped read-only and shared by every process that
 * loads the same file on the same kind of CPU, so that two processes hold
 * one copy in the page cache instead of one private copy each. Private to
 * the engine; tern.h has what the CLI and the manager use (list, clear,
 * forget). */
#ifndef TN_REPACK_CACHE_H
#define TN_REPACK_CACHE_H

#include "cpu/tn-cpu.h"
#include "tern.h"

#include <stddef.h>

#define TN_REPACK_CACHE_MAGIC "TERNX16\0"
#define TN_REPACK_CACHE_VERSION 1u
#define TN_REPACK_CACHE_FIXED 128u /* bytes of the header before its tables */

/* What tn_repack_cache_prepare did. */
typedef enum tn_repack_cache_outcome {
    TN_REPACK_CACHE_OFF = 0, /* disabled, or nothing of the model is repacked here */
    TN_REPACK_CACHE_HIT,     /* mapped a cache file written earlier */
    TN_REPACK_CACHE_WRITTEN, /* repacked, wrote the cache file, mapped it */
    TN_REPACK_CACHE_PRIVATE, /* repacked in this process's memory: *why says why */
} tn_repack_cache_outcome;

typedef struct tn_repack_cache_result {
    tn_repack_cache_outcome outcome;
    void *map;        /* HIT, WRITTEN: the file's mapping (tn_repack_cache_unmap) */
    size_t map_bytes;
    void *storage;    /* PRIVATE: tn_weights_repack's allocation (free()) */
    size_t bytes;     /* bytes of repacked weights (either way) */
    char path[512];   /* the cache file (HIT, WRITTEN, and PRIVATE when it got that far) */
    char why[384];    /* PRIVATE: one line, "PATH: what went wrong" */
} tn_repack_cache_result;

/* Repacks ws[0..n) (all from the mapped file g, as tn_weights_repack with
 * release_originals) through the cache in `dir` (NULL: tn_repack_cache_dir).
 * The last n_file_only of them (a mixture's experts: more than memory can
 * hold twice) are repacked only into the cache file: without one they stay
 * as they are.
 * Never fails the load for the cache's sake: any problem with the cache
 * (unwritable directory, full disk, a FIFO, a directory or garbage where
 * the file belongs, a file for another model) ends in a private repack
 * (outcome PRIVATE, with the reason in why) or a rebuilt file. Returns
 * TN_ERR_NOMEM only when even the private repack has no memory (the
 * weights are then as they were). */
int tn_repack_cache_prepare(tn_weight *const *ws, int n, int n_file_only, const tn_gguf *g,
                            const char *dir, tn_repack_cache_result *res);
/* True when dir (NULL: tn_repack_cache_dir) holds a cache file made from
 * the model file g as it is now (size, times, inode, device): a load will
 * most likely map it. Reads one header, no weight. */
bool tn_repack_cache_likely(const tn_gguf *g, const char *dir);
void tn_repack_cache_unmap(void *map, size_t bytes);
/* tn_repack_cache_prune that never removes `keep` (the file just made). */
int tn_repack_cache_prune_dir(const char *dir, uint64_t max_bytes, const char *keep,
                              uint64_t *freed);

/* The file name (without directory) that the cache uses for the model file
 * at `model_path` on this CPU: 32 hex digits and ".x16". */
int tn_repack_cache_name(const char *model_path, char *out, size_t size);

#endif
