/* A tiny test harness: CHECK records a failure and goes on; a test binary
 * exits non-zero when any check failed or its data is missing. */
#ifndef TN_TEST_H
#define TN_TEST_H

#include "tern.h"

#include <stdio.h>
#include <stdlib.h>

extern int tn_test_failures;
extern int tn_test_checks;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        tn_test_checks++;                                                            \
        if (!(cond)) {                                                               \
            tn_test_failures++;                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                            \
    } while (0)

#define CHECKF(cond, ...)                                                    \
    do {                                                                     \
        tn_test_checks++;                                                    \
        if (!(cond)) {                                                       \
            tn_test_failures++;                                              \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, \
                    #cond);                                                  \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)

/* mkmodel parameters of the tests' tiny model: Q8_0, 64 wide, 2 layers of
 * 2 heads of 32 sharing one KV head, a feed-forward of 128, 2048 positions,
 * written on 2 threads; no tokenizer (the arch's default). */
tn_mkmodel_params tn_test_tiny_model(const char *arch, uint64_t seed);

/* Prints a summary and returns the exit status for main(). */
int tn_test_finish(const char *name);
/* Exit 1 with a reason: data the test needs is missing (a vocabulary that
 * `make test` fetches, a file of tests/data/). Never a skip: a skipped test
 * would hide a broken setup behind a green run. */
_Noreturn void tn_test_missing(const char *why);

/* A scratch directory for this test binary (created, unique per process). */
const char *tn_test_tmpdir(void);
/* Path of the fetched vocabulary dir for one tokenizer ("qwen3"), or NULL. */
const char *tn_test_vocab(const char *name);

/* Deterministic random numbers for tests (splitmix64). */
uint64_t tn_test_rand(uint64_t *state);
float tn_test_randf(uint64_t *state); /* uniform in [-1, 1) */

/* Every value of g's tensor name, dequantized, as doubles (*n: how many,
 * if n), or NULL when g has no such tensor; the caller frees it. */
double *tn_test_tensor(const tn_gguf *g, const char *name, int64_t *n);
/* The tiny model of arch "gemma3" (tn_test_tiny_model with seed) with the
 * real Gemma 3 vocabulary, whose image tokens let it take images, written to
 * tn_test_tmpdir()/file and its path put in path (cap bytes). Exits through
 * tn_test_missing when the vocabulary is not fetched. One check (the
 * mkmodel); false when it failed. */
bool tn_test_gemma3_model(const char *file, uint64_t seed, char *path, size_t cap);
/* n rows of width floats in [-1, 1) from seed (tn_test_randf, row after
 * row): image embeddings that stand in for a projector's. The caller frees
 * them. */
float *tn_test_image_rows(int32_t n, int32_t width, uint64_t seed);
/* The tests' session parameters: n_ctx positions, n_threads threads, no
 * pin cache on disk. For a test that checks the creation its own way (a
 * hostile model's session may fail, with a message). */
tn_session_params tn_test_session_params(int32_t n_ctx, int32_t n_threads);
/* A session of tn_test_session_params(n_ctx, 2) on m. One check (its
 * creation); NULL when it failed. */
tn_session *tn_test_session(const tn_model *m, int32_t n_ctx);
/* A hash of the KV rows of s's pin: 0 when they cannot be saved. */
uint64_t tn_test_pinned_rows_hash(tn_session *s);

/* Copies the file from to the file to (created or truncated); false on
 * any error. */
bool tn_test_copy_file(const char *from, const char *to);

/* Entries of dir (hidden_only: those whose name starts with '.'), 0 when
 * it does not exist, -1 when it cannot be read. For /proc/self/fd (open
 * descriptors) the one opendir itself holds is not counted. */
int tn_test_count_entries(const char *dir, bool hidden_only);
/* Removes the files in dir (not folders: a repack cache holds none). */
void tn_test_empty_dir(const char *dir);

/* Writes a copy of the GGUF src to dst, its tensors as they are and each
 * metadata value through edit (which may change *v in place, e.g. shorten
 * an array, or write the key itself to w and return true to skip the copy;
 * NULL: none). False when a step failed. */
typedef bool (*tn_test_kv_edit)(const char *key, tn_gguf_value *v, tn_gguf_writer *w, void *user);
bool tn_test_clone_gguf(const char *src, const char *dst, tn_test_kv_edit edit, void *user);

/* One tensor as the copy will write it: the edit may change any field
 * (e.g. halve ne[1] and nbytes to cut the tensor short). */
typedef struct tn_test_tensor_copy {
    const char *name;
    uint32_t type, n_dims;
    uint64_t ne[TN_MAX_DIMS];
    const void *data;
    uint64_t nbytes;
} tn_test_tensor_copy;

/* Every change a test makes to a GGUF copy, each optional: kv as above;
 * after_kv writes keys of its own once the file's are copied (a key set
 * twice keeps the last value); tensor may change *t in place, or return
 * true to leave the tensor out (after writing its own to w, if it wants);
 * after_tensors adds tensors at the end. False from a hook: the copy
 * fails. */
typedef struct tn_test_gguf_edits {
    tn_test_kv_edit kv;
    bool (*after_kv)(tn_gguf_writer *w, void *user);
    bool (*tensor)(tn_test_tensor_copy *t, tn_gguf_writer *w, void *user);
    bool (*after_tensors)(tn_gguf_writer *w, void *user);
    void *user;
} tn_test_gguf_edits;
bool tn_test_clone_gguf_edited(const char *src, const char *dst, const tn_test_gguf_edits *edits);

/* The length of the UTF-8 character at p (n bytes there), 0 when the
 * bytes are not one, by the rule written out byte range by byte range:
 * the reference for tn_utf8_char_len and the checks that use it. */
size_t tn_test_utf8_len_reference(const unsigned char *p, size_t n);
#endif
