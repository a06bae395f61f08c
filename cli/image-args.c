/* Images for vision prompts on the command line: --image PATH (repeatable),
 * --image-tokens N, --mmproj PATH; decoding (imageio/tern-image) and
 * encoding (tn_vision) before the session gets the embeddings.
 *
 * Without --mmproj the projector is looked for next to the model the way
 * the ecosystem ships them (llama.cpp, LM Studio, Ollama imports): a
 * "*mmproj*.gguf" file in the model's directory. Exactly one is used (and
 * named on stderr); none or several is an error asking for --mmproj. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef TERN_HAVE_IMAGEIO
#include "tern-image.h"
#endif

int cli_images_parse_arg(cli_images *ci, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const bool image = !strcmp(a, "--image"), tokens = !strcmp(a, "--image-tokens"),
               mmproj = !strcmp(a, "--mmproj");
    if (!image && !tokens && !mmproj)
        return 0;
    if (*i + 1 >= argc) {
        cli_error(_("%s needs a value"), a);
        return -1;
    }
    const char *v = argv[++*i];
    if (image) {
        if (ci->n >= CLI_MAX_IMAGES) {
            cli_error(_("at most %d images per request"), CLI_MAX_IMAGES);
            return -1;
        }
        ci->paths[ci->n++] = v;
    } else if (tokens) {
        long n;
        if (!cli_parse_long("--image-tokens", v, 1, 65536, &n))
            return -1;
        ci->budget = n;
    } else {
        ci->mmproj = v;
    }
    return 1;
}

void cli_encoded_free(cli_encoded *e) {
    if (!e)
        return;
    for (int i = 0; i < e->n; i++)
        free((void *)e->images[i].embd);
    free(e->images);
    memset(e, 0, sizeof *e);
}

/* The projector beside the model (tn_vision_projectors_beside): 0 and a
 * malloc'd path (NULL: none and not required), or an exit status. Not
 * required (serve): none is fine, and several leave images off with a note. */
static int find_mmproj(const char *model_path, bool required, char **out) {
    *out = NULL;
    char *first = NULL, *second = NULL;
    tn_error err = {0};
    const int found = tn_vision_projectors_beside(model_path, &first, &second, &err);
    int status = CLI_EXIT_OK;
    if (found < 0) {
        if (required) {
            cli_error(_("%s; pass --mmproj PATH"), cli_engine_message(&err));
            status = CLI_EXIT_BAD_INPUT;
        }
    } else if (found == 0) {
        if (required) {
            cli_error(_("%s: no vision projector (*mmproj*.gguf) next to the model; pass --mmproj "
                      "PATH"),
                      model_path);
            status = CLI_EXIT_BAD_INPUT;
        }
    } else if (found > 1) {
        if (required) {
            cli_error(_("%s: %d vision projectors next to the model (%s, %s, ...); choose one with "
                      "--mmproj PATH"),
                      model_path, found, first, second);
            status = CLI_EXIT_BAD_INPUT;
        } else {
            fprintf(stderr,
                    _("tern-cli: note: %s: %d vision projectors next to the model (%s, %s, ...); "
                    "images are off unless --mmproj PATH chooses one\n"),
                    model_path, found, first, second);
        }
    } else {
        *out = first;
        first = NULL;
    }
    free(first);
    free(second);
    return status;
}

int cli_vision_open(const char *mmproj, const char *model_path, const tn_model *m,
                    bool required, bool quiet, tn_vision **out) {
    *out = NULL;
    char *found = NULL;
    /* A projector the user named, or one run --image needs, must work; one
     * that serve merely found beside the model only turns images off. */
    const bool fatal = mmproj || required;
    if (!mmproj) {
        int st = find_mmproj(model_path, required, &found);
        if (st != CLI_EXIT_OK || !found)
            return st;
        mmproj = found;
        if (!quiet)
            fprintf(stderr, _("vision projector: %s\n"), mmproj);
    }
    tn_error err = {0};
    tn_vision *v = NULL;
    int status = CLI_EXIT_OK;
    if (tn_vision_load(mmproj, &v, &err) != TN_OK) {
        if (fatal)
            cli_error("%s", cli_engine_message(&err));
        else
            fprintf(stderr, _("tern-cli: note: %s; images are off\n"), cli_engine_message(&err));
        status = fatal ? CLI_EXIT_BAD_INPUT : CLI_EXIT_OK;
    } else if (tn_vision_get_info(v)->n_embd_text != tn_model_n_embd(m)) {
        if (fatal)
            cli_error(_("%s: the projector feeds a text model %d wide; %s is %d wide (a projector "
                      "for another model)"),
                      mmproj, tn_vision_get_info(v)->n_embd_text, model_path, tn_model_n_embd(m));
        else
            fprintf(stderr,
                    _("tern-cli: note: %s feeds a text model %d wide, not this %d-wide one; "
                    "images are off\n"),
                    mmproj, tn_vision_get_info(v)->n_embd_text, tn_model_n_embd(m));
        tn_vision_free(v);
        v = NULL;
        status = fatal ? CLI_EXIT_BAD_INPUT : CLI_EXIT_OK;
    } else if (!fatal && !tn_model_takes_images(m)) {
        /* The server refuses such a projector at start: one merely found
         * beside the model stopped it (exit 2) instead of leaving images off.
         * A named one is refused there, with the model's name. */
        fprintf(stderr,
                _("tern-cli: note: %s is a vision projector, but this model's vocabulary has "
                  "no image tokens; images are off\n"),
                mmproj);
        tn_vision_free(v);
        v = NULL;
    }
    free(found);
    *out = v;
    return status;
}

int cli_images_encode(const cli_images *ci, const char *model_path, const tn_model *m,
                      int32_t n_ctx, int n_threads, bool quiet, cli_encoded *out) {
    memset(out, 0, sizeof *out);
    if (ci->n == 0)
        return CLI_EXIT_OK;
#ifndef TERN_HAVE_IMAGEIO
    (void)model_path;
    (void)m;
    (void)n_ctx;
    (void)n_threads;
    (void)quiet;
    cli_error(_("--image: this tern-cli was built without image support (gdk-pixbuf)"));
    return CLI_EXIT_BAD_INPUT;
#else
    /* Before the projector is looked for and any image read: the session
     * would refuse the images only once they were decoded and encoded (a
     * 64-megapixel picture costs seconds to decode), and without a
     * projector beside the model the user was sent looking for one. */
    if (!tn_model_takes_images(m)) {
        cli_error(_("%s: this model takes no images (its vocabulary has no image tokens); --image "
                    "needs a vision model"),
                  model_path);
        return CLI_EXIT_BAD_INPUT;
    }
    tn_vision *v = NULL;
    int st = cli_vision_open(ci->mmproj, model_path, m, true, quiet, &v);
    if (st != CLI_EXIT_OK)
        return st;
    tn_error err = {0};
    const tn_vision_info *I = tn_vision_get_info(v);
    const bool g4 = I->kind == TN_VISION_GEMMA4;
    /* Gemma 4's flash default is the seed's 70 tokens; otherwise llama.cpp's
     * (up to 1120, as the image's size needs). */
    const int budget = ci->budget > 0 ? (int)ci->budget : g4 && ci->flash ? 70 : 0;
    if (tn_vision_check_budget(v, budget, &err) != TN_OK) {
        cli_error("%s", cli_engine_message(&err));
        tn_vision_free(v);
        return CLI_EXIT_USAGE;
    }
    const int n_tok = tn_vision_tokens(v, budget);
    if (!quiet && !g4 && budget > 0 && n_tok < budget)
        fprintf(stderr, _("image tokens: %d (the largest square grid within %d)\n"), n_tok, budget);
    out->images = calloc((size_t)ci->n, sizeof *out->images);
    TernImage **imgs = calloc((size_t)ci->n, sizeof *imgs);
    int status = out->images && imgs ? CLI_EXIT_OK : CLI_EXIT_BAD_INPUT;
    if (status != CLI_EXIT_OK)
        cli_error(_("out of memory"));
    const TernImageOptions io = {.fit_side = tn_vision_input_side(v, budget)};
    /* Every image is decoded and counted before any is encoded: the count
     * is known from the size alone, and encoding is the slow part (8
     * images that could never fit a -c 300 context took 20 s to encode
     * before the session refused them). Decoded pictures are kept for the
     * encoding up to a bound: Gemma 4's are unscaled, up to 64 megapixels
     * (768 MB of floats) each; past it a picture is decoded again. */
    long long n_image_tokens = 0;
    size_t kept_bytes = 0;
    const size_t keep_max = (size_t)256 << 20;
    for (int i = 0; i < ci->n && status == CLI_EXIT_OK; i++) {
        GError *ge = NULL;
        TernImage *img = tern_image_load_file(ci->paths[i], &io, &ge);
        if (!img) {
            cli_error("%s", ge ? ge->message : ci->paths[i]);
            g_clear_error(&ge);
            status = CLI_EXIT_BAD_INPUT;
            break;
        }
        const int n = tn_vision_image_tokens(v, budget, img->width, img->height, &err);
        const size_t bytes = (size_t)img->width * (size_t)img->height * 3 * sizeof(float);
        if (n >= 0 && kept_bytes + bytes <= keep_max) {
            imgs[i] = img;
            kept_bytes += bytes;
        } else {
            tern_image_free(img);
        }
        if (n < 0) {
            cli_error("%s: %s", ci->paths[i], cli_engine_message(&err));
            status = CLI_EXIT_BAD_INPUT;
            break;
        }
        n_image_tokens += n;
    }
    /* The text needs at least one token beside them; the session makes the
     * exact check (system prompt, template) once the prompt is rendered. */
    if (status == CLI_EXIT_OK && n_ctx > 0 && n_image_tokens >= n_ctx) {
        cli_error(_("the images take %lld tokens; the context holds %d (use fewer image tokens or a "
                    "larger context)"),
                  n_image_tokens, (int)n_ctx);
        status = CLI_EXIT_BAD_INPUT;
    }
    for (int i = 0; i < ci->n && status == CLI_EXIT_OK; i++) {
        if (!imgs[i]) {
            GError *ge = NULL;
            imgs[i] = tern_image_load_file(ci->paths[i], &io, &ge);
            if (!imgs[i]) { /* changed since the first read */
                cli_error("%s", ge ? ge->message : ci->paths[i]);
                g_clear_error(&ge);
                status = CLI_EXIT_BAD_INPUT;
                break;
            }
        }
        TernImage *img = imgs[i];
        float *rows = NULL;
        int n = 0;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        /* Gemma 4's count follows the image's size: tn_vision_encode_new counts. */
        int rc = tn_vision_encode_new(v, img->rgb, img->width, img->height, budget, n_threads,
                                      &rows, &n, &err);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (rc != TN_OK) {
            cli_error("%s: %s", ci->paths[i], cli_engine_message(&err));
            status = CLI_EXIT_BAD_INPUT;
            break;
        }
        if (!quiet)
            fprintf(stderr, _("image %d: %s (%d x %d %s) -> %d tokens, encoded in %.1f s\n"), i + 1,
                    ci->paths[i], img->source_width, img->source_height, img->format, n,
                    (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
        out->images[i] = (tn_image_embd){rows, n, I->n_embd_text};
        out->n++;
        tern_image_free(img);
        imgs[i] = NULL;
    }
    for (int i = 0; imgs && i < ci->n; i++)
        if (imgs[i])
            tern_image_free(imgs[i]);
    free(imgs);
    tn_vision_free(v);
    if (status != CLI_EXIT_OK)
        cli_encoded_free(out);
    return status;
#endif
}
