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

/* What a load asks of the repack cache before it reads anything, asked
 * once per load (tn_repack_cache_outlook_init) and handed to each question
 * (the load's estimates, then tn_repack_cache_prepare; NULL: each asks
 * afresh): whether a file made from the model is there, and the file
 * system's space for the room rule on a mixture's experts (statvfs of the
 * cache directory, at the first question that needs it). Asked apart, a
 * load read the cache file's header twice and the file system three times
 * for the same answers. */
typedef struct tn_repack_cache_outlook {
    bool likely;      /* tn_repack_cache_likely(g, NULL) */
    bool space_asked; /* statvfs was asked: the fields below hold its answer */
    bool space_known; /* it answered */
    uint64_t space_size, space_avail;
} tn_repack_cache_outlook;
void tn_repack_cache_outlook_init(tn_repack_cache_outlook *o, const tn_gguf *g);
/* Tests: fn is called with "likely" at each read of a cache file's header
 * by tn_repack_cache_likely, and "statvfs" at each question to the file
 * system for the room rule (NULL: none). */
void tn_repack_cache_ask_hook(void (*fn)(const char *what, void *user), void *user);

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
    /* A decision of the default setting the user should hear of, one line
     * (any outcome): the cache's pages found to be 4 KiB, or no room for a
     * mixture's experts. "" when none. */
    char note[640];
    /* A cache file made by an earlier load was mapped (its key matched):
     * that load checked the weights for NaN/Inf, so this one may skip the
     * experts' check (model.c). PRIVATE may still have map set: a
     * mixture's experts kept in the file while the dense matrices were
     * copied out (4 KiB pages, docs/QUANT.md). */
    bool hit;
    /* map is the file at path (HIT, WRITTEN, and PRIVATE with a mixture's
     * experts kept in it); not the unlinked temporary file of a failed
     * write. */
    bool in_file;
    /* TN_ERR_IO: the model file (or the cache file) shrank while a pass
     * read it (tn_guarded_read); the load's error. Nothing is then mapped or
     * allocated, and the weights are garbage. */
    tn_error fault;
} tn_repack_cache_result;

/* Repacks ws[0..n) (all from the mapped file g, as tn_weights_repack with
 * release_originals) through the cache in `dir` (NULL: tn_repack_cache_config's,
 * with the default setting's checks of the pages and of the room for
 * experts when TERN_REPACK_CACHE is unset; a dir given is used as asked).
 * The last n_file_only of them (a mixture's experts: more than memory can
 * hold twice) are repacked only into the cache file: without one they stay
 * as they are.
 * Never fails the load for the cache's sake: any problem with the cache
 * (unwritable directory, full disk, a FIFO, a directory or garbage where
 * the file belongs, a file for another model) ends in a private repack
 * (outcome PRIVATE, with the reason in why) or a rebuilt file. Returns
 * TN_ERR_NOMEM only when even the private repack has no memory (the
 * weights are then as they were), TN_ERR_IO (res->fault says it) when a
 * file shrank under the repack or the check of a cache file: a truncated
 * model is no cache problem, and no private repack could read it either.
 * o: the load's outlook (NULL, or a dir given: the room is asked now). */
int tn_repack_cache_prepare(tn_weight *const *ws, int n, int n_file_only, const tn_gguf *g,
                            const char *dir, tn_repack_cache_outlook *o,
                            tn_repack_cache_result *res);
/* True when dir (NULL: tn_repack_cache_dir) holds a cache file made from
 * the model file g as it is now (size, times, inode, device): a load will
 * most likely map it. Reads one header, no weight. */
bool tn_repack_cache_likely(const tn_gguf *g, const char *dir);
/* Whether a load of g hands a mixture's experts to the repack cache's file
 * (they are repacked), as far as it is known before anything is read: a
 * cache directory is set, and not the default's 4 KiB pages (its verdict
 * in DIR/pages, or the test hook's) with the model file on another file
 * system, where they stay in the model file's rows; in the default
 * setting, room for a new file of dense (the matrices) and experts
 * repacked bytes (TERN_REPACK_CACHE_MAX_MB, the space kept free:
 * docs/QUANT.md, "Experts"). The one answer for the
 * load's progress estimate (engine/model.c) and for the cache's own choice
 * (tn_repack_cache_prepare), so that the bar counts the work done; a
 * directory not checked yet counts them in (its check may then leave them
 * out: a step forward of the bar, that once). */
bool tn_repack_cache_takes_experts(const tn_gguf *g, uint64_t dense, uint64_t experts,
                                   tn_repack_cache_outlook *o);
/* What the passes after the repack that writes a new cache file (its
 * checksum, in 4 KiB pages the copy of the dense matrices out of it) will
 * count in the load's progress, for a payload of dense (the matrices) and
 * experts (a mixture's) repacked bytes; 0 where the load will write no
 * file, as far as that is known before anything is read: the cache off, a
 * file there that will most likely map (tn_repack_cache_likely), or 4 KiB
 * pages with nothing to keep in a file. The experts count where
 * tn_repack_cache_takes_experts says so. The same rule as the pass's own
 * total (build_file), so that an estimate made with it is the work done;
 * a directory never checked counts as 2 MiB pages (no copy; its check may
 * add the copy's share when the repack begins). */
uint64_t tn_repack_cache_new_file_work(const tn_gguf *g, uint64_t dense, uint64_t experts,
                                       tn_repack_cache_outlook *o);
void tn_repack_cache_unmap(void *map, size_t bytes);
/* tn_repack_cache_prune that never removes `keep` (the file just made). */
int tn_repack_cache_prune_dir(const char *dir, uint64_t max_bytes, const char *keep,
                              uint64_t *freed);

/* How TERN_REPACK_CACHE sets the cache (docs/QUANT.md, "Where"). *dir
 * (may be NULL) gets the directory, malloc'd, or NULL when off or no
 * variable gives a place. */
typedef enum tn_repack_cache_setting {
    TN_REPACK_CACHE_DEFAULT = 0, /* unset or empty: on at the XDG place, with the checks */
    TN_REPACK_CACHE_ASKED,       /* "1", "on" or an absolute directory: on, no checks */
    TN_REPACK_CACHE_OFF_ASKED,   /* "0" or "off" */
    TN_REPACK_CACHE_NOT_UNDERSTOOD, /* anything else: off */
} tn_repack_cache_setting;
tn_repack_cache_setting tn_repack_cache_config(char **dir);

/* What a load found about the pages of the cache directory's files on
 * this kernel (docs/QUANT.md, "Pages"), remembered in DIR/pages for the
 * directory's file system (device, type) and the kernel release. */
typedef enum tn_repack_pages {
    TN_REPACK_PAGES_UNKNOWN = 0, /* not checked on this kernel and file system */
    TN_REPACK_PAGES_2M,          /* mapped in 2 MiB pages */
    TN_REPACK_PAGES_4K,          /* in 4 KiB pages only */
} tn_repack_pages;
tn_repack_pages tn_repack_cache_pages(const char *dir);
/* Tests: the page check's answer instead of the kernel's (UNKNOWN: the
 * kernel's again). Forced, it also applies where THP is off. */
void tn_repack_cache_force_pages(tn_repack_pages v);

/* The file name (without directory) that the cache uses for the model file
 * at `model_path` on this CPU: 32 hex digits and ".x16". */
int tn_repack_cache_name(const char *model_path, char *out, size_t size);

#endif
