/* llama.cpp's side of tools/compare/gemma4v-compare.sh: one image through
 * libmtmd (the same projector file, the same 8-bit pixels), its embeddings
 * dumped, then the whole prompt evaluated and the top-2 of the next token
 * printed. Linked against a llama.cpp build; not part of Tern's build.
 *
 * usage: mtmd-embd TEXT.gguf MMPROJ.gguf PIXELS.rgb W H MAX_TOKENS THREADS OUT.f32 PROMPT
 *   PIXELS.rgb: w * h * 3 bytes, RGB rows. PROMPT holds mtmd's media marker
 *   "<__media__>" where the image goes. Prints one line per chunk,
 *   "text ID ID ..." or "image N_TOKENS N_EMBD NONCAUSAL", then
 *   "top2 ID LOGIT ID LOGIT" after the last token. OUT.f32: the image's
 *   N_TOKENS x N_EMBD floats. */
#include "llama.h"
#include "mtmd.h"
#include "mtmd-helper.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char **argv) {
    if (argc != 10) {
        fprintf(stderr, "usage: mtmd-embd TEXT MMPROJ PIXELS W H MAX_TOKENS THREADS OUT PROMPT\n");
        return 2;
    }
    const int w = atoi(argv[4]), h = atoi(argv[5]), max_tok = atoi(argv[6]);
    const int threads = atoi(argv[7]);
    std::vector<unsigned char> px((size_t)w * h * 3);
    FILE *f = fopen(argv[3], "rb");
    if (!f || fread(px.data(), 1, px.size(), f) != px.size()) {
        fprintf(stderr, "cannot read %s\n", argv[3]);
        return 2;
    }
    fclose(f);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model)
        return 1;
    mtmd_context_params cp = mtmd_context_params_default();
    cp.use_gpu = false;
    cp.n_threads = threads;
    cp.warmup = false;
    cp.print_timings = false;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.image_max_tokens = max_tok;
    mtmd_context *mctx = mtmd_init_from_file(argv[2], model, cp);
    if (!mctx)
        return 1;
    mtmd_bitmap *bmp = mtmd_bitmap_init((uint32_t)w, (uint32_t)h, px.data());
    mtmd_input_chunks *chunks = mtmd_input_chunks_init();
    mtmd_input_text text = {argv[9], strlen(argv[9]), true, true};
    const mtmd_bitmap *bmps[1] = {bmp};
    if (mtmd_tokenize(mctx, chunks, &text, bmps, 1) != 0)
        return 1;
    const int n_embd = llama_model_n_embd_inp(model);
    for (size_t c = 0; c < mtmd_input_chunks_size(chunks); c++) {
        const mtmd_input_chunk *ch = mtmd_input_chunks_get(chunks, c);
        if (mtmd_input_chunk_get_type(ch) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            size_t n = 0;
            const llama_token *t = mtmd_input_chunk_get_tokens_text(ch, &n);
            printf("text");
            for (size_t i = 0; i < n; i++)
                printf(" %d", t[i]);
            printf("\n");
            continue;
        }
        const size_t n = mtmd_input_chunk_get_n_tokens(ch);
        if (mtmd_encode_chunk(mctx, ch) != 0)
            return 1;
        const float *e = mtmd_get_output_embd(mctx);
        FILE *o = fopen(argv[8], "wb");
        if (!o || fwrite(e, sizeof(float), n * (size_t)n_embd, o) != n * (size_t)n_embd)
            return 1;
        fclose(o);
        printf("image %zu %d %d\n", n, n_embd, mtmd_decode_use_non_causal(mctx, ch) ? 1 : 0);
    }
    llama_context_params lp = llama_context_default_params();
    lp.n_ctx = 4096;
    lp.n_batch = 2048;
    lp.n_ubatch = 2048;
    lp.n_threads = threads;
    lp.n_threads_batch = threads;
    llama_context *lctx = llama_init_from_model(model, lp);
    if (!lctx)
        return 1;
    llama_pos past = 0;
    if (mtmd_helper_eval_chunks(mctx, lctx, chunks, 0, 0, 2048, true, &past) != 0)
        return 1;
    const float *l = llama_get_logits_ith(lctx, -1);
    const int V = llama_vocab_n_tokens(llama_model_get_vocab(model));
    int a = 0, b = 1;
    if (l[1] > l[0])
        a = 1, b = 0;
    for (int i = 2; i < V; i++) {
        if (l[i] > l[a])
            b = a, a = i;
        else if (l[i] > l[b])
            b = i;
    }
    printf("top2 %d %.6f %d %.6f\n", a, l[a], b, l[b]);
    mtmd_input_chunks_free(chunks);
    mtmd_bitmap_free(bmp);
    mtmd_free(mctx);
    llama_free(lctx);
    llama_model_free(model);
    return 0;
}
