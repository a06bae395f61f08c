/* libFuzzer target for the server's reading of a generation request's body
 * (server/tern-request.c: tern_request_scan_body, then tern_request_parse_chat
 * and _completion), with the checks the server makes between them
 * (server/tern-server.c, handle_generate: strict JSON, a JSON object, the
 * raw text of "tools"). fuzz-framing and fuzz-framer cover the bytes around
 * the body, fuzz-toolcall the raw members and the tools alone.
 *
 * The first input byte picks the endpoint (bit 0: chat or completions),
 * the model's chat template (byte >> 1, % the kinds) and whether the server
 * has a drafter (bit 7; a stand-in that is never used: parsing only asks
 * whether there is one). The server has no vision projector, so image
 * parts are refused. The rest is the body.
 * Promises: the scan refuses every NUL and every whole number beyond 64
 * bits that tn_json_check's strict flags would, and nothing else as such;
 * accepted, or refused with a reason of UTF-8 (and an OpenAI
 * error code only then); an accepted chat has its messages with known
 * roles and their text, at most TN_SESSION_MAX_STOP stop strings, none
 * empty; a single-turn chat its user text; tools only as the chat's
 * generation parameters say; and the job frees whole (LeakSanitizer).
 *
 * Built from the server's source with GLib, libsoup and json-glib (the
 * fuzz build leaves the server out).
 *
 * Seeds: tests/fuzz/corpus/request/.
 * Run:   build-fuzz/tests/fuzz/fuzz-request tests/fuzz/corpus/request
 */
#include "tern-server-private.h"
#include "tern-toolcall.h"
#include "fuzz-promise.h"

#include <stdint.h>
#include <string.h>

static bool known_role(const char *r) {
    return !strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "assistant") ||
           !strcmp(r, "tool");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    const job_kind kind = data[0] & 1 ? JOB_COMPLETION : JOB_CHAT;
    const int chat_kind = (data[0] >> 1 & 0x3f) % TN_CHAT_KIND_COUNT_;
    const char *p = (const char *)data + 1;
    const size_t n = size - 1;

    /* The server's own order: its scan, then tn_json_check without the
     * checks the scan made. What the scan let through, the strict check
     * must take too (no NUL, no integer beyond 64 bits slipped past it);
     * what the strict check takes, the scan must not call a NUL or out of
     * range. */
    tern_body_scan sc;
    tern_request_scan_body(p, n, &sc);
    PROMISE(strlen(sc.member) < sizeof sc.member);
    PROMISE(!sc.member[0] || sc.problem);
    const bool strict_ok = tn_json_check(p, n, "request body", MAX_JSON_DEPTH,
                                         TN_JSON_NO_NUL | TN_JSON_NO_HUGE_INTEGERS,
                                         NULL) == TN_OK;
    if (strict_ok && sc.problem)
        PROMISE(strcmp(sc.problem, "nul") && strcmp(sc.problem, "range"));
    if (sc.problem)
        return 0;
    if (tn_json_check(p, n, "request body", MAX_JSON_DEPTH, 0, NULL) != TN_OK)
        return 0;
    PROMISE(strict_ok);
    JsonParser *parser = json_parser_new();
    if (!json_parser_load_from_data(parser, p, (gssize)n, NULL) ||
        !json_parser_get_root(parser) || !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
        g_object_unref(parser);
        return 0;
    }
    JsonObject *o = json_node_get_object(json_parser_get_root(parser));

    tern_server srv;
    memset(&srv, 0, sizeof srv);
    srv.model_id = "fuzz-model";
    /* Never dereferenced while parsing: only whether there is one counts. */
    srv.cfg.drafter = data[0] & 0x80 ? (tn_drafter *)&srv : NULL;

    job j;
    memset(&j, 0, sizeof j);
    j.server = &srv;
    j.kind = kind;
    j.chat_kind = chat_kind;
    j.split_reasoning = kind == JOB_CHAT;
    size_t at = 0, ts = 0, te = 0;
    while (at < n && g_ascii_isspace(p[at]))
        at++;
    if (tern_json_raw_member(p, n, at, "tools", &ts, &te))
        j.raw_tools = g_strndup(p + ts, te - ts);

    const char *param = NULL;
    char *why = NULL;
    const bool ok = kind == JOB_CHAT ? tern_request_parse_chat(o, &j, &param, &why)
                                     : tern_request_parse_completion(o, &j, &param, &why);
    if (!ok) {
        PROMISE(why != NULL && g_utf8_validate(why, -1, NULL));
    } else {
        PROMISE(why == NULL && j.error_code == NULL);
        PROMISE(j.n_images == 0); /* no projector */
        PROMISE(j.gen.n_stop >= 0 && j.gen.n_stop <= TN_SESSION_MAX_STOP);
        for (int i = 0; i < j.gen.n_stop; i++)
            PROMISE(j.gen.stop[i] && j.gen.stop[i][0]);
        PROMISE(j.pin_key != NULL);
        if (kind == JOB_CHAT) {
            PROMISE(j.n_messages > 0);
            for (int i = 0; i < j.n_messages; i++) {
                PROMISE(known_role(j.messages[i].role));
                PROMISE(j.messages[i].content != NULL);
            }
            PROMISE(!j.single_turn || j.user != NULL);
            PROMISE((j.n_tools > 0) == (j.gen.n_tools > 0));
            PROMISE(j.gen.tools == (j.n_tools > 0 ? j.tools : NULL));
        } else if (j.n_prompts > 1) {
            /* Several prompts: each one a text or ids, none empty. */
            PROMISE(!j.prompt && !j.prompt_ids && j.n_messages == 0);
            PROMISE(j.n_prompts <= TERN_COMPLETION_PROMPTS_MAX);
            for (int i = 0; i < j.n_prompts; i++) {
                const job_prompt_in *in = &j.prompts[i];
                PROMISE((in->text != NULL) != (in->ids != NULL));
                PROMISE(in->text ? in->text[0] != '\0' : in->n_ids > 0);
                PROMISE((in->text != NULL) == (j.prompts[0].text != NULL));
            }
        } else {
            PROMISE((j.prompt != NULL) != (j.prompt_ids != NULL) && j.n_messages == 0);
        }
    }
    g_free(why);
    tern_request_clear(&j);
    g_object_unref(parser);
    return 0;
}
