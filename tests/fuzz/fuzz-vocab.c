/* libFuzzer target for the vocabulary converter (engine/mk/vocab-convert.c):
 * the Hugging Face tokenizer.json and tokenizer_config.json a user points
 * `tern-cli convert` (and tn_mkmodel's tokenizer) at, downloaded from
 * anyone's repository, turned into a GGUF's tokenizer.* metadata.
 *
 * Input: the tokenizer.json text; after a 0x1e byte, if any, the
 * tokenizer_config.json text written beside it. Both go to a temporary
 * folder made once per process.
 *
 * Promises:
 *  - a refusal says why (a message) and counts no tokens;
 *  - what the converter accepts, the engine loads: the GGUF written from
 *    it opens and tn_tokenizer_load takes it, with the converter's count
 *    of tokens (a vocabulary the converter writes and the loader refuses
 *    would be found only when the user opens the model);
 *  - the loaded tokenizer encodes a fixed text into ids inside the
 *    vocabulary and decodes them without error.
 *
 * Seeds: tests/fuzz/corpus/vocab/.
 * Run:   build-fuzz/tests/fuzz/fuzz-vocab tests/fuzz/corpus/vocab
 */
#include "tern.h"
#include "fuzz-promise.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];
static char tj_path[128], cfg_path[128], gguf_path[128];

static void write_file(const char *path, const uint8_t *p, size_t n) {
    FILE *f = fopen(path, "wb");
    PROMISE(f != NULL);
    PROMISE(n == 0 || fwrite(p, 1, n, f) == n);
    PROMISE(fclose(f) == 0);
}

static void cleanup(void) {
    unlink(tj_path);
    unlink(cfg_path);
    unlink(gguf_path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    snprintf(dir, sizeof dir, "%s", "/tmp/tern-fuzz-vocab-XXXXXX");
    PROMISE(mkdtemp(dir) != NULL);
    snprintf(tj_path, sizeof tj_path, "%s/tokenizer.json", dir);
    snprintf(cfg_path, sizeof cfg_path, "%s/tokenizer_config.json", dir);
    snprintf(gguf_path, sizeof gguf_path, "%s/vocab.gguf", dir);
    atexit(cleanup);
    return 0;
}

static void use_tokenizer(const tn_tokenizer *tok, int32_t n_vocab) {
    static const char text[] = "Hello, world! <|im_start|>user\n caf\xC3\xA9 12345 \xE6\x97\xA5\n\n";
    for (unsigned flags = 0; flags <= TN_TOKENIZE_SPECIAL; flags += TN_TOKENIZE_SPECIAL) {
        tn_tokens ids = {0};
        tn_error err = {0};
        if (tn_tokenize(tok, text, sizeof text - 1, flags, &ids, &err) != TN_OK) {
            /* A vocabulary without the pieces (nor an unknown token, nor
             * byte fallback) for some text may refuse it, saying so. */
            PROMISE(err.message[0] != '\0');
            continue;
        }
        for (size_t i = 0; i < ids.n; i++)
            PROMISE(ids.ids[i] >= 0 && ids.ids[i] < n_vocab);
        tn_buf dec = {0};
        PROMISE(tn_detokenize(tok, ids.ids, ids.n, TN_DETOKENIZE_SPECIAL, &dec, &err) == TN_OK);
        tn_buf_free(&dec);
        tn_tokens_free(&ids);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *sep = memchr(data, 0x1e, size);
    const size_t tj_len = sep ? (size_t)(sep - data) : size;
    write_file(tj_path, data, tj_len);
    if (sep)
        write_file(cfg_path, sep + 1, size - tj_len - 1);
    else
        unlink(cfg_path);

    tn_gguf_writer *w = tn_gguf_writer_new();
    PROMISE(w != NULL);
    tn_error err = {0};
    int64_t n_vocab = -1;
    const int rc = tn_vocab_convert_hf(tj_path, w, &n_vocab, &err);
    if (rc != TN_OK) {
        PROMISE(err.code == rc && err.message[0] != '\0');
        PROMISE(n_vocab == 0);
        tn_gguf_writer_free(w);
        return 0;
    }
    PROMISE(n_vocab > 0 && n_vocab <= INT32_MAX);
    PROMISE(tn_gguf_writer_set_str(w, "general.architecture", "llama") == TN_OK);
    PROMISE(tn_gguf_writer_write(w, gguf_path, &err) == TN_OK);
    tn_gguf_writer_free(w);

    tn_gguf *g = NULL;
    PROMISE(tn_gguf_open(gguf_path, &g, &err) == TN_OK);
    tn_tokenizer *tok = NULL;
    if (tn_tokenizer_load(g, &tok, &err) != TN_OK) {
        fprintf(stderr, "fuzz-vocab: converted, then refused by the loader: %s\n", err.message);
        __builtin_trap();
    }
    PROMISE(tn_tokenizer_n_vocab(tok) == n_vocab);
    use_tokenizer(tok, (int32_t)n_vocab);
    tn_tokenizer_free(tok);
    tn_gguf_close(g);
    return 0;
}
