/* tern-request.c: a request's JSON body read into a job: the messages and
 * their content parts (text, images), sampling and stopping, tools and tool
 * calls, the server's own extensions. Every refusal names the parameter and
 * says what is wrong (docs/SERVER.md). */
#include "tern-server-private.h"
#include "tern-toolcall.h"

#include <math.h>
#include <string.h>

/* A string member: fallback when absent or null, NULL when it is something
 * else. (json_object_get_string_member_with_default gives NULL for a number
 * and the fallback, with a critical, for an object: {"role": 5} or
 * {"type": "text", "text": 5} reached strcmp and strstr as NULL and took
 * the server down.) */
static const char *string_member(JsonObject *o, const char *name, const char *fallback) {
    JsonNode *n = json_object_get_member(o, name);
    if (!n || JSON_NODE_HOLDS_NULL(n))
        return fallback;
    if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING)
        return NULL;
    return json_node_get_string(n);
}

static int count_markers(const char *text) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, TN_IMAGE_MARKER)); p += strlen(TN_IMAGE_MARKER))
        n++;
    return n;
}

/* An image_url part of messages[index].content[part]: checked here, decoded
 * later off this context. false with *why (allocated) and j->error_code. */
static bool add_image(job *j, JsonObject *part, guint index, guint part_index, const char *role,
                      char **why) {
    tern_server *srv = j->server;
    if (strcmp(role, "user")) {
        *why = g_strdup_printf("messages[%u]: image_url parts go in user messages, not %s ones",
                               index, role);
        return false;
    }
    if (!srv->cfg.vision) {
        j->error_code = "model_not_vision";
        *why = g_strdup_printf("messages[%u]: the model '%s' takes no images here: the server "
                               "has no vision projector for it (tern-cli serve --mmproj PATH, or "
                               "the model's *mmproj*.gguf beside it)",
                               index, srv->model_id);
        return false;
    }
#ifndef TERN_HAVE_IMAGEIO
    *why = g_strdup_printf("messages[%u]: this server was built without image decoding "
                           "(gdk-pixbuf)", index);
    return false;
#endif
    if (j->n_images >= TERN_SERVER_MAX_IMAGES) {
        *why = g_strdup_printf("at most %d images per request", TERN_SERVER_MAX_IMAGES);
        return false;
    }
    /* {"url": ...} as OpenAI documents it; a bare string as some clients send.
     * "detail" is OpenAI's resolution hint: the budget is tern.image_tokens. */
    JsonNode *iu = json_object_get_member(part, "image_url");
    const char *url = NULL;
    if (iu && JSON_NODE_HOLDS_OBJECT(iu))
        url = string_member(json_node_get_object(iu), "url", NULL);
    else if (iu && JSON_NODE_HOLDS_VALUE(iu) && json_node_get_value_type(iu) == G_TYPE_STRING)
        url = json_node_get_string(iu);
    j->error_code = "invalid_image_url";
    if (!url) {
        *why = g_strdup_printf("messages[%u].content[%u]: image_url must be {\"url\": \"data:"
                               "image/png;base64,...\"}",
                               index, part_index);
        return false;
    }
    if (g_ascii_strncasecmp(url, "data:", 5)) {
        const bool remote =
            !g_ascii_strncasecmp(url, "http://", 7) || !g_ascii_strncasecmp(url, "https://", 8);
        *why = g_strdup_printf("messages[%u].content[%u]: %s; send the image itself as a "
                               "data: URI (data:image/png;base64,...)",
                               index, part_index,
                               remote ? "the server never fetches remote images"
                                      : "only data: URIs are accepted");
        return false;
    }
    j->error_code = NULL;
    if (!j->images)
        j->images = g_new0(job_image, TERN_SERVER_MAX_IMAGES);
    job_image *im = &j->images[j->n_images++];
    im->uri = g_strdup(url);
    im->where = g_strdup_printf("messages[%u].content[%u]", index, part_index);
    return true;
}

/* Text of messages[index]'s content: a string, or an array of parts (text;
 * image_url, which leaves TN_IMAGE_MARKER where it was). NULL with *why
 * (allocated) when refused. */
static char *content_text(job *j, JsonNode *node, guint index, const char *role, char **why) {
    if (!node || JSON_NODE_HOLDS_NULL(node))
        return g_strdup("");
    if (JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_STRING) {
        j->text_markers += count_markers(json_node_get_string(node));
        return g_strdup(json_node_get_string(node));
    }
    if (!JSON_NODE_HOLDS_ARRAY(node)) {
        *why = g_strdup_printf("messages[%u]: content must be a string or an array of content "
                               "parts", index);
        return NULL;
    }
    JsonArray *a = json_node_get_array(node);
    if (json_array_get_length(a) == 0) {
        /* No parts is no content, as null is (OpenAI's schema asks for one
         * part at least, but its API takes [], and clients send it for an
         * assistant turn that only called tools): refused where null is,
         * in a user message, an empty text elsewhere (docs/SERVER.md). */
        if (!strcmp(role, "user")) {
            *why = g_strdup_printf("messages[%u]: a user message needs content (its content is "
                                   "an empty array of parts)",
                                   index);
            return NULL;
        }
        return g_strdup("");
    }
    GString *s = g_string_new(NULL);
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonNode *p = json_array_get_element(a, i);
        if (!JSON_NODE_HOLDS_OBJECT(p)) {
            *why = g_strdup_printf("messages[%u].content[%u]: a content part must be an object",
                                   index, i);
            g_string_free(s, TRUE);
            return NULL;
        }
        JsonObject *po = json_node_get_object(p);
        /* A part without its type or a text part without its text is a
         * client's mistake, refused as OpenAI does ("Missing required
         * parameter"); taken as empty, a message lost its words unseen. */
        const char *type = string_member(po, "type", NULL);
        const char *t = string_member(po, "text", NULL);
        if (!type) {
            *why = g_strdup_printf("messages[%u].content[%u]: a content part needs a type, a "
                                   "string (text, image_url)",
                                   index, i);
            g_string_free(s, TRUE);
            return NULL;
        }
        if (!strcmp(type, "text") && !t) {
            *why = g_strdup_printf("messages[%u].content[%u]: a text part needs its text, a "
                                   "string",
                                   index, i);
            g_string_free(s, TRUE);
            return NULL;
        }
        if (!strcmp(type, "image_url")) {
            if (!add_image(j, po, index, i, role, why)) {
                g_string_free(s, TRUE);
                return NULL;
            }
            g_string_append(s, TN_IMAGE_MARKER);
        } else if (!strcmp(type, "text")) {
            j->text_markers += count_markers(t);
            g_string_append(s, t);
        } else {
            *why = g_strdup_printf("messages[%u].content[%u]: content parts of type '%s' are not "
                                   "supported (text, image_url)",
                                   index, i, type);
            g_string_free(s, TRUE);
            return NULL;
        }
    }
    return g_string_free(s, FALSE);
}

static bool member_number(JsonObject *o, const char *name, double *out, const char **bad) {
    JsonNode *n = json_object_get_member(o, name);
    if (!n || JSON_NODE_HOLDS_NULL(n))
        return false;
    if (!JSON_NODE_HOLDS_VALUE(n) || (json_node_get_value_type(n) != G_TYPE_INT64 &&
                                      json_node_get_value_type(n) != G_TYPE_DOUBLE)) {
        *bad = name;
        return false;
    }
    *out = json_node_get_double(n);
    if (!isfinite(*out)) { /* 1e400 */
        *bad = name;
        return false;
    }
    return true;
}

/* Counts (tokens, seeds): 3 or 3.0, never 1.5. */
static bool whole(double v) {
    return v == floor(v);
}

bool tern_request_member_bool(JsonObject *o, const char *name, bool fallback, const char **bad) {
    JsonNode *n = json_object_get_member(o, name);
    if (!n || JSON_NODE_HOLDS_NULL(n))
        return fallback;
    if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_BOOLEAN) {
        *bad = name;
        return fallback;
    }
    return json_node_get_boolean(n);
}

/* Log-probabilities (docs/SERVER.md, "Log-probabilities"), OpenAI's two
 * forms: chat's "logprobs": true with "top_logprobs": 0..20, the legacy
 * completions' "logprobs": 0..5 (how many alternatives). Sets j->logprobs
 * to the alternatives per token, -1 when off. */
static bool parse_logprobs(JsonObject *o, job *j, const char **param, char **why) {
    j->logprobs = -1;
    const char *bad = NULL;
    double v = 0;
    if (j->kind == JOB_COMPLETION) {
        JsonNode *n = json_object_get_member(o, "logprobs");
        const bool is_bool = n && JSON_NODE_HOLDS_VALUE(n) &&
                             json_node_get_value_type(n) == G_TYPE_BOOLEAN;
        if (is_bool || member_number(o, "logprobs", &v, &bad) || bad) {
            if (is_bool || bad || v < 0 || v > 5 || !whole(v)) {
                *param = "logprobs";
                *why = g_strdup("logprobs must be a whole number from 0 to 5 (the alternatives "
                                "per token)");
                return false;
            }
            j->logprobs = (int)v;
        }
        return true;
    }
    const bool on = tern_request_member_bool(o, "logprobs", false, &bad);
    if (bad) {
        *param = "logprobs";
        *why = g_strdup("logprobs must be true or false");
        return false;
    }
    const bool has_top = member_number(o, "top_logprobs", &v, &bad);
    if (bad || (has_top && (v < 0 || v > TN_TOP_LOGPROBS_MAX || !whole(v)))) {
        *param = "top_logprobs";
        *why = g_strdup_printf("top_logprobs must be a whole number from 0 to %d",
                               TN_TOP_LOGPROBS_MAX);
        return false;
    }
    if (has_top && !on) {
        *param = "top_logprobs";
        *why = g_strdup("top_logprobs needs \"logprobs\": true");
        return false;
    }
    if (on)
        j->logprobs = has_top ? (int)v : 0;
    return true;
}

/* logit_bias: {"token id": bias}, OpenAI's form. A key is a token id
 * written as a plain decimal number; a bias a number from -100 to 100. */
static bool parse_logit_bias(JsonObject *o, job *j, const char **param, char **why) {
    JsonNode *lb = json_object_get_member(o, "logit_bias");
    if (!lb || JSON_NODE_HOLDS_NULL(lb))
        return true;
    *param = "logit_bias";
    if (!JSON_NODE_HOLDS_OBJECT(lb)) {
        *why = g_strdup("logit_bias must be an object mapping token ids to biases");
        return false;
    }
    JsonObject *m = json_node_get_object(lb);
    const int32_t n_vocab = tn_model_n_vocab(j->server->model);
    const guint n = json_object_get_size(m);
    if (n > TN_LOGIT_BIAS_MAX) {
        *why = g_strdup_printf("logit_bias has %u entries; at most %d", n, TN_LOGIT_BIAS_MAX);
        return false;
    }
    if (n == 0)
        return true;
    j->logit_bias = g_new(tn_logit_bias, n);
    JsonObjectIter it;
    const char *key;
    JsonNode *val;
    guint i = 0;
    json_object_iter_init(&it, m);
    while (json_object_iter_next(&it, &key, &val)) {
        /* Digits only: "+5", " 5", "5.0" and "0x5" are not token ids. No
         * leading zero either: "5" and "05" would be one token listed
         * twice, whose biases add up past the range below. */
        gint64 id = -1;
        const size_t len = strlen(key);
        if (len > 0 && len <= 10 && strspn(key, "0123456789") == len &&
            (len == 1 || key[0] != '0'))
            id = g_ascii_strtoll(key, NULL, 10);
        if (id < 0 || id >= n_vocab) {
            gchar *shown = g_strescape(key, NULL);
            *why = g_strdup_printf("logit_bias: \"%.40s\" is not a token id (a whole number "
                                   "from 0 to %d)",
                                   shown, n_vocab - 1);
            g_free(shown);
            return false;
        }
        double v = NAN;
        if (JSON_NODE_HOLDS_VALUE(val) && (json_node_get_value_type(val) == G_TYPE_INT64 ||
                                           json_node_get_value_type(val) == G_TYPE_DOUBLE))
            v = json_node_get_double(val);
        if (!(v >= -100 && v <= 100)) { /* NaN, 1e400 (inf), strings, objects */
            *why = g_strdup_printf("logit_bias[\"%s\"] must be a number from -100 to 100", key);
            return false;
        }
        j->logit_bias[i].token = (int32_t)id;
        j->logit_bias[i].bias = (float)v;
        i++;
    }
    j->gen.logit_bias = j->logit_bias;
    j->gen.n_logit_bias = (int32_t)i;
    return true;
}

/* response_format json_schema, OpenAI's structured outputs:
 * {"type": "json_schema", "json_schema": {"name": ..., "schema": {...},
 * "strict": ...}}. The schema is compiled by the engine, which refuses
 * every keyword it would not enforce (tern.h, tn_json_schema): an answer
 * that does not follow a schema must not be taken as one that does. OpenAI
 * requires "name"; it changes nothing here, so it may be left out, and
 * "strict": false is enforced all the same. */
static bool parse_json_schema(JsonObject *rfo, job *j, char **why) {
    JsonNode *js = json_object_get_member(rfo, "json_schema");
    JsonObject *jso = js && JSON_NODE_HOLDS_OBJECT(js) ? json_node_get_object(js) : NULL;
    JsonNode *schema = jso ? json_object_get_member(jso, "schema") : NULL;
    if (!schema) {
        *why = g_strdup("response_format json_schema needs a \"json_schema\" object with a "
                        "\"schema\"");
        return false;
    }
    JsonNode *name = json_object_get_member(jso, "name");
    if (name && !(JSON_NODE_HOLDS_VALUE(name) &&
                  json_node_get_value_type(name) == G_TYPE_STRING)) {
        *why = g_strdup("response_format json_schema: \"name\" must be a string");
        return false;
    }
    JsonNode *strict = json_object_get_member(jso, "strict");
    if (strict && !JSON_NODE_HOLDS_NULL(strict) &&
        !(JSON_NODE_HOLDS_VALUE(strict) && json_node_get_value_type(strict) == G_TYPE_BOOLEAN)) {
        *why = g_strdup("response_format json_schema: \"strict\" must be true or false");
        return false;
    }
    /* The schema as the client wrote it (raw_schema, the same member
     * json-glib kept): json_to_string would drop a repeated key, which the
     * engine refuses, and respell numbers (0.1 as 0.10000000000000001). */
    if (!j->raw_schema) {
        *why = g_strdup("response_format json_schema: the schema's text was not found");
        return false;
    }
    tn_error err;
    memset(&err, 0, sizeof err);
    if (tn_json_schema_compile(j->raw_schema, strlen(j->raw_schema), &j->schema, &err) !=
        TN_OK) {
        *why = g_strdup_printf("response_format json_schema: %s", err.message);
        return false;
    }
    j->gen.constrain = TN_CONSTRAIN_JSON_SCHEMA;
    j->gen.schema = j->schema;
    return true;
}

/* response_format: "text" (the default), "json_object", whose answer is
 * one JSON object (TN_CONSTRAIN_JSON_OBJECT), or "json_schema", one valid
 * against a schema in the subset the engine enforces
 * (TN_CONSTRAIN_JSON_SCHEMA). */
static bool parse_response_format(JsonObject *o, job *j, const char **param, char **why) {
    JsonNode *rf = json_object_get_member(o, "response_format");
    if (!rf || JSON_NODE_HOLDS_NULL(rf))
        return true;
    *param = "response_format";
    const char *type = JSON_NODE_HOLDS_OBJECT(rf)
                           ? string_member(json_node_get_object(rf), "type", NULL)
                           : NULL;
    if (!type) {
        *why = g_strdup("response_format must be an object with a \"type\": \"text\", "
                        "\"json_object\" or \"json_schema\"");
        return false;
    }
    if (!strcmp(type, "text"))
        return true;
    if (!strcmp(type, "json_object")) {
        /* llama.cpp's server (and some hosted APIs) read a schema sent
         * along with json_object: taking the request would return any
         * object as if it followed the schema. */
        JsonObject *rfo = json_node_get_object(rf);
        if (json_object_has_member(rfo, "schema") || json_object_has_member(rfo, "json_schema")) {
            *why = g_strdup("response_format json_object with a schema is not supported: the "
                            "schema would not be enforced; send {\"type\": \"json_schema\", "
                            "\"json_schema\": {\"schema\": ...}}, or drop it (any JSON object)");
            return false;
        }
        /* The session refuses it too, but only once the job runs, and
         * without naming the parameter. */
        if (j->chat_kind == TN_CHAT_GPTOSS) {
            *why = g_strdup("response_format json_object is not available for gpt-oss models: "
                            "their answers are in channels (analysis, then final); ask for the "
                            "object in the prompt instead");
            return false;
        }
        j->gen.constrain = TN_CONSTRAIN_JSON_OBJECT;
        return true;
    }
    if (!strcmp(type, "json_schema"))
        return parse_json_schema(json_node_get_object(rf), j, why);
    gchar *shown = g_strescape(type, NULL);
    *why = g_strdup_printf("response_format type \"%.40s\" is not supported (\"text\", "
                           "\"json_object\" or \"json_schema\")",
                           shown);
    g_free(shown);
    return false;
}

/* Fills the job's generation parameters; false with the offending parameter
 * in *param and a message in *why. */
static bool parse_gen(JsonObject *o, job *j, const char **param, char **why) {
    tn_gen_params *g = &j->gen;
    *g = tn_gen_default_params();
    /* OpenAI's default temperature is 1; a local server's callers mostly want
     * reproducible answers, so greedy unless asked (documented). */
    g->sampler.temperature = 0;
    const char *bad = NULL;
    double v;
    if (member_number(o, "temperature", &v, &bad)) {
        if (v < 0 || v > 2) {
            *param = "temperature";
            *why = g_strdup("temperature must be between 0 and 2");
            return false;
        }
        g->sampler.temperature = (float)v;
    }
    if (member_number(o, "top_p", &v, &bad)) {
        if (v <= 0 || v > 1) {
            *param = "top_p";
            *why = g_strdup("top_p must be in (0, 1]");
            return false;
        }
        g->sampler.top_p = (float)v;
    }
    if (member_number(o, "top_k", &v, &bad)) {
        if (v < 0 || v > INT32_MAX || !whole(v)) {
            *param = "top_k";
            *why = g_strdup("top_k must be a whole number: 0 (off) or more");
            return false;
        }
        g->sampler.top_k = (int32_t)v;
    }
    if (member_number(o, "min_p", &v, &bad)) {
        if (v < 0 || v > 1) {
            *param = "min_p";
            *why = g_strdup("min_p must be between 0 and 1");
            return false;
        }
        g->sampler.min_p = (float)v;
    }
    if (member_number(o, "presence_penalty", &v, &bad)) {
        if (v < -2 || v > 2) {
            *param = "presence_penalty";
            *why = g_strdup("presence_penalty must be between -2 and 2");
            return false;
        }
        g->sampler.presence_penalty = (float)v;
    }
    if (member_number(o, "frequency_penalty", &v, &bad)) {
        if (v < -2 || v > 2) {
            *param = "frequency_penalty";
            *why = g_strdup("frequency_penalty must be between -2 and 2");
            return false;
        }
        g->sampler.frequency_penalty = (float)v;
    }
    /* A whole number is read whole: through a double, 2^63 - 1 rounded up
     * to 2^63 and was refused, and seeds above 2^53 that differ gave the
     * same answer. */
    JsonNode *seed = json_object_get_member(o, "seed");
    const bool seed_int = seed && JSON_NODE_HOLDS_VALUE(seed) &&
                          json_node_get_value_type(seed) == G_TYPE_INT64;
    if (seed_int || member_number(o, "seed", &v, &bad)) {
        const gint64 sv = seed_int ? json_node_get_int(seed) : 0;
        if (seed_int ? sv < 0 : (v < 0 || v >= 9223372036854775808.0 || !whole(v))) {
            *param = "seed";
            *why = g_strdup("seed must be a whole number from 0 to 2^63 - 1");
            return false;
        }
        g->sampler.seed = seed_int ? (uint64_t)sv : (uint64_t)v;
    } else /* no seed: a new one per request, so a regenerated answer differs */
        g->sampler.seed = (uint64_t)g_random_int() << 32 | g_random_int();
    JsonNode *rf = json_object_get_member(o, "reasoning_format");
    if (rf && !JSON_NODE_HOLDS_NULL(rf)) {
        const char *f = JSON_NODE_HOLDS_VALUE(rf) && json_node_get_value_type(rf) == G_TYPE_STRING
                            ? json_node_get_string(rf)
                            : "";
        if (!strcmp(f, "none"))
            j->split_reasoning = false;
        else if (strcmp(f, "auto") && strcmp(f, "deepseek")) {
            *param = "reasoning_format";
            *why = g_strdup("reasoning_format must be \"auto\", \"deepseek\" or \"none\"");
            return false;
        }
    }
    g->max_tokens = j->kind == JOB_COMPLETION ? DEFAULT_COMPLETION_MAX_TOKENS : 0;
    /* max_completion_tokens first: OpenAI deprecated max_tokens for it, so a
     * request with both (frameworks fill in both) means the newer one, as
     * vLLM reads them. */
    const char *max_name = "max_completion_tokens";
    bool has_max = member_number(o, max_name, &v, &bad);
    if (!has_max && !bad) {
        max_name = "max_tokens";
        has_max = member_number(o, max_name, &v, &bad);
    }
    if (has_max) {
        /* 0 on completions: the prompt alone, scored with echo and logprobs
         * (what OpenAI's legacy completions took and harnesses send). */
        const int least = j->kind == JOB_COMPLETION ? 0 : 1;
        if (v < least || v > INT32_MAX || !whole(v)) {
            *param = max_name;
            *why = g_strdup_printf("%s must be a whole number from %d to %d", max_name, least,
                                   INT32_MAX);
            return false;
        }
        g->max_tokens = (int32_t)v;
        g->no_answer = v == 0;
    }
    if (member_number(o, "n", &v, &bad) && v != 1) {
        *param = "n";
        *why = g_strdup("only n = 1 is supported (one engine, one answer per request)");
        return false;
    }
    if (bad) {
        *param = bad;
        *why = g_strdup_printf("%s must be a finite number", bad);
        return false;
    }
    JsonNode *stop = json_object_get_member(o, "stop");
    if (stop && !JSON_NODE_HOLDS_NULL(stop)) {
        if (JSON_NODE_HOLDS_VALUE(stop) && json_node_get_value_type(stop) == G_TYPE_STRING) {
            j->stop_store[0] = g_strdup(json_node_get_string(stop));
            g->n_stop = 1;
        } else if (JSON_NODE_HOLDS_ARRAY(stop)) {
            JsonArray *a = json_node_get_array(stop);
            guint n = json_array_get_length(a);
            if (n > TN_SESSION_MAX_STOP) {
                *param = "stop";
                *why = g_strdup_printf("at most %d stop strings", TN_SESSION_MAX_STOP);
                return false;
            }
            for (guint i = 0; i < n; i++) {
                JsonNode *e = json_array_get_element(a, i);
                if (!JSON_NODE_HOLDS_VALUE(e) || json_node_get_value_type(e) != G_TYPE_STRING) {
                    *param = "stop";
                    *why = g_strdup("stop must be a string or an array of strings");
                    return false;
                }
                j->stop_store[g->n_stop++] = g_strdup(json_node_get_string(e));
            }
        } else {
            *param = "stop";
            *why = g_strdup("stop must be a string or an array of strings");
            return false;
        }
        for (int i = 0; i < g->n_stop; i++) {
            if (!*j->stop_store[i]) {
                *param = "stop";
                *why = g_strdup("a stop string must not be empty");
                return false;
            }
            g->stop[i] = j->stop_store[i];
        }
    }
    JsonNode *tern = json_object_get_member(o, "tern");
    if (tern && !JSON_NODE_HOLDS_NULL(tern)) {
        if (!JSON_NODE_HOLDS_OBJECT(tern)) {
            *param = "tern";
            *why = g_strdup("tern must be an object");
            return false;
        }
        JsonObject *t = json_node_get_object(tern);
        g->thinking = tern_request_member_bool(t, "thinking", g->thinking, &bad);
        if (!tern_request_member_bool(t, "single_turn", true, &bad))
            j->single_turn = false;
        if (bad) {
            *param = "tern";
            *why = g_strdup_printf("tern.%s must be true or false", bad);
            return false;
        }
        JsonNode *sp = json_object_get_member(t, "speculation");
        if (sp && !JSON_NODE_HOLDS_NULL(sp)) {
            const GType type = JSON_NODE_HOLDS_VALUE(sp) ? json_node_get_value_type(sp) : 0;
            const char *name = type == G_TYPE_STRING ? json_node_get_string(sp) : "";
            if (type == G_TYPE_BOOLEAN)
                j->spec = json_node_get_boolean(sp)
                              ? (j->server->cfg.drafter ? SPEC_SERVER : SPEC_LOOKUP)
                              : SPEC_OFF;
            else if (!strcmp(name, "none"))
                j->spec = SPEC_OFF;
            else if (!strcmp(name, "lookup"))
                j->spec = SPEC_LOOKUP;
            else if (!strcmp(name, "server"))
                j->spec = SPEC_SERVER;
            else {
                *param = "tern";
                *why = g_strdup("tern.speculation must be true, false, \"none\", \"lookup\" or "
                                "\"server\"");
                return false;
            }
            if (j->spec == SPEC_SERVER && !j->server->cfg.drafter) {
                *param = "tern";
                *why = g_strdup("tern.speculation \"server\": this server has no drafter "
                                "(tern-cli serve --spec draft:PATH, dflash:PATH or mtp:PATH)");
                return false;
            }
        }
        if (member_number(t, "image_tokens", &v, &bad)) {
            if (v < 1 || v > 65536 || v != (double)(int)v) {
                *param = "tern";
                *why = g_strdup("tern.image_tokens must be a whole number of tokens, 1..65536");
                return false;
            }
            j->image_budget = (int)v;
            tn_error be;
            if (j->server->cfg.vision &&
                tn_vision_check_budget(j->server->cfg.vision, j->image_budget, &be) != TN_OK) {
                *param = "tern";
                *why = g_strdup_printf("tern.image_tokens: %s", be.message);
                return false;
            }
        } else if (bad) {
            *param = "tern";
            *why = g_strdup_printf("tern.%s must be a finite number", bad);
            return false;
        }
        if (member_number(t, "draft_max", &v, &bad)) {
            if (v < 1 || v > TN_SPEC_MAX_DRAFT || !whole(v)) {
                *param = "tern";
                *why = g_strdup_printf("tern.draft_max must be 1..%d", TN_SPEC_MAX_DRAFT);
                return false;
            }
            g->draft_max = (int32_t)v;
        } else if (bad) {
            *param = "tern";
            *why = g_strdup_printf("tern.%s must be a finite number", bad);
            return false;
        }
    }
    if (!parse_logprobs(o, j, param, why))
        return false;
    if (!parse_logit_bias(o, j, param, why) || !parse_response_format(o, j, param, why))
        return false;
    /* Read after both, whichever comes first in the body: a stop string
     * would end a JSON answer before it closes (the engine refuses the
     * pair too, but only once queued, and without naming the member). */
    if (g->constrain != TN_CONSTRAIN_NONE && g->n_stop > 0) {
        *param = "stop";
        *why = g_strdup("stop cannot be used with response_format json_object or json_schema: "
                        "a stop string would cut the JSON short; drop stop");
        return false;
    }
    return true;
}

/* The values in a JSON text tn_json_check took (its strings whole), as
 * scan_body counts them: one, and one more for each '[', '{' or ','
 * outside a string. */
static size_t json_values(const char *p) {
    size_t v = 1;
    for (; *p; p++) {
        if (*p == '"') {
            for (p++; *p && *p != '"'; p++)
                if (*p == '\\' && p[1])
                    p++;
            if (!*p)
                break;
        } else if (*p == '[' || *p == '{' || *p == ',') {
            v++;
        }
    }
    return v;
}

/* function.arguments: JSON text (what OpenAI sends), or a JSON object,
 * which some clients send instead and which is taken as its text.
 * *values: the values of the request's arguments texts so far. */
static bool call_arguments(JsonObject *fn, const char *where, size_t *values, char **out,
                           char **why) {
    JsonNode *n = json_object_get_member(fn, "arguments");
    *out = NULL;
    if (!n || JSON_NODE_HOLDS_NULL(n))
        return true;
    if (JSON_NODE_HOLDS_OBJECT(n)) {
        JsonGenerator *g = json_generator_new();
        json_generator_set_root(g, n);
        *out = tn_json_escape_unit_separators(json_generator_to_data(g, NULL), NULL);
        g_object_unref(g);
        return true;
    }
    if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING) {
        *why = g_strdup_printf("%s.arguments must be a string of JSON (or an object)", where);
        return false;
    }
    const char *text = json_node_get_string(n);
    /* The body's own checks do not look inside strings, and json-glib's
     * parser recurses once per level (300,000 '[' here overflowed the stack
     * and took the server down) and takes C's escapes. */
    tn_error check = {0};
    if (tn_json_check(text, strlen(text), "arguments", MAX_JSON_DEPTH, 0, &check) != TN_OK) {
        *why = g_strdup_printf("%s.arguments is not JSON: %s", where, check.message);
        return false;
    }
    /* Nor does it count the values in strings: json-glib spends ~100 bytes
     * on each, and one "[0,0,...]" string of 450,000 values in a 1 MiB body
     * raised the server's peak by 95 MB for 3 s (20 MiB bodies with images:
     * ~2 GB at that rate), past the body's own limit. All of a request's
     * arguments together get what one body does. */
    *values += json_values(text);
    if (*values > MAX_JSON_VALUES) {
        *why = g_strdup_printf("%s.arguments: the request's tool call arguments hold more than "
                               "%d JSON values",
                               where, MAX_JSON_VALUES);
        return false;
    }
    JsonParser *parser = json_parser_new();
    GError *e = NULL;
    bool ok = json_parser_load_from_data(parser, text, -1, &e) && json_parser_get_root(parser);
    g_object_unref(parser);
    if (!ok) {
        *why = g_strdup_printf("%s.arguments is not JSON%s%s", where, e ? ": " : "",
                               e ? e->message : "");
        g_clear_error(&e);
        return false;
    }
    *out = g_strdup(text);
    return true;
}

/* messages[index].tool_calls (assistant) or .tool_call_id and .name (tool),
 * into m. False with *why (allocated) when refused. */
static bool parse_tool_fields(JsonObject *o, guint index, const char *role, tn_session_message *m,
                              size_t *values, char **why) {
    char *where = g_strdup_printf("messages[%u]", index);
    bool ok = true;
    if (!strcmp(role, "tool")) {
        char *id = NULL, *name = NULL;
        ok = tern_json_optional_string(o, "tool_call_id", where, &id, why) &&
             tern_json_optional_string(o, "name", where, &name, why);
        m->tool_call_id = id;
        m->name = name;
    }
    JsonNode *tc = json_object_get_member(o, "tool_calls");
    if (ok && tc && !JSON_NODE_HOLDS_NULL(tc)) {
        if (!JSON_NODE_HOLDS_ARRAY(tc)) {
            *why = g_strdup_printf("%s.tool_calls must be an array", where);
            ok = false;
        } else if (json_array_get_length(json_node_get_array(tc)) > 0 &&
                   strcmp(role, "assistant")) {
            *why = g_strdup_printf("%s: only assistant messages have tool_calls", where);
            ok = false;
        }
    }
    if (ok && tc && JSON_NODE_HOLDS_ARRAY(tc)) {
        JsonArray *a = json_node_get_array(tc);
        guint n = json_array_get_length(a);
        tn_chat_tool_call *calls = n ? g_new0(tn_chat_tool_call, n) : NULL;
        m->tool_calls = calls;
        for (guint k = 0; ok && k < n; k++) {
            char *at = g_strdup_printf("%s.tool_calls[%u]", where, k);
            JsonNode *e = json_array_get_element(a, k);
            JsonObject *c = JSON_NODE_HOLDS_OBJECT(e) ? json_node_get_object(e) : NULL;
            JsonNode *fn = c ? json_object_get_member(c, "function") : NULL;
            char *id = NULL, *name = NULL, *args = NULL, *type = NULL;
            if (!c) {
                *why = g_strdup_printf("%s must be an object", at);
                ok = false;
            } else if (!tern_json_optional_string(c, "type", at, &type, why)) {
                ok = false;
            } else if (type && strcmp(type, "function")) {
                *why = g_strdup_printf("%s: only tool calls of type 'function' are supported",
                                       at);
                ok = false;
            } else if (!fn || !JSON_NODE_HOLDS_OBJECT(fn)) {
                *why = g_strdup_printf("%s.function must be an object", at);
                ok = false;
            } else {
                char *fn_at = g_strdup_printf("%s.function", at);
                JsonObject *f = json_node_get_object(fn);
                ok = tern_json_optional_string(c, "id", at, &id, why) &&
                     tern_json_optional_string(f, "name", fn_at, &name, why) &&
                     call_arguments(f, fn_at, values, &args, why);
                if (ok && !name) {
                    *why = g_strdup_printf("%s.name is required", fn_at);
                    ok = false;
                }
                g_free(fn_at);
            }
            calls[k] = (tn_chat_tool_call){.id = id, .name = name, .arguments = args};
            m->n_tool_calls = k + 1;
            g_free(type);
            g_free(at);
        }
    }
    g_free(where);
    return ok;
}

/* tools and tool_choice: function declarations into j->tools, checked the
 * way the template will use them (an engine render refuses what it cannot
 * show). False with *param, *why when refused. */
static bool parse_tools(JsonObject *o, job *j, const char **param, char **why) {
    JsonNode *cn = json_object_get_member(o, "tool_choice");
    if (cn && !JSON_NODE_HOLDS_NULL(cn)) {
        const char *c = JSON_NODE_HOLDS_VALUE(cn) && json_node_get_value_type(cn) == G_TYPE_STRING
                            ? json_node_get_string(cn)
                            : NULL;
        if (!c || (strcmp(c, "auto") && strcmp(c, "none"))) {
            *param = "tool_choice";
            *why = g_strdup("tool_choice must be \"auto\" or \"none\": Tern cannot force "
                            "a call (\"required\" or a named function)");
            return false;
        }
        j->tool_choice_none = !strcmp(c, "none");
    }
    JsonNode *tn = json_object_get_member(o, "tools");
    if (!tn || JSON_NODE_HOLDS_NULL(tn))
        return true;
    *param = "tools";
    if (!JSON_NODE_HOLDS_ARRAY(tn)) {
        *why = g_strdup("tools must be an array of {\"type\": \"function\", \"function\": "
                        "{\"name\", \"description\", \"parameters\"}}");
        return false;
    }
    if (!tern_tools_parse(tn, j->raw_tools, &j->tools, &j->n_tools, why))
        return false;
    if (j->n_tools == 0)
        return true;
    /* The template's own checks (and whether it shows tools at all), before
     * the request waits in the queue. */
    tn_chat_options co = tn_chat_default_options();
    co.tools = j->tools;
    co.n_tools = (size_t)j->n_tools;
    tn_buf b = {0};
    tn_error e = {0};
    int rc = tn_chat_render((tn_chat_kind)j->chat_kind, NULL, 0, &co, &b, &e);
    tn_buf_free(&b);
    if (rc != TN_OK) {
        *why = g_strdup_printf("tools: %s", e.message);
        return false;
    }
    *param = NULL;
    return true;
}

bool tern_request_parse_chat(JsonObject *o, job *j, const char **param, char **why) {
    JsonNode *mn = json_object_get_member(o, "messages");
    if (!mn || !JSON_NODE_HOLDS_ARRAY(mn) || json_array_get_length(json_node_get_array(mn)) == 0) {
        *param = "messages";
        *why = g_strdup("messages must be a non-empty array");
        return false;
    }
    JsonArray *a = json_node_get_array(mn);
    guint n = json_array_get_length(a);
    size_t arg_values = 0; /* in all of the tool calls' arguments texts */
    j->messages = g_new0(tn_session_message, n);
    int n_user = 0, n_other = 0;
    for (guint i = 0; i < n; i++) {
        JsonNode *e = json_array_get_element(a, i);
        if (!JSON_NODE_HOLDS_OBJECT(e)) {
            *param = "messages";
            *why = g_strdup_printf("messages[%u] must be an object", i);
            return false;
        }
        JsonObject *m = json_node_get_object(e);
        const char *role = string_member(m, "role", "");
        if (!role) {
            *param = "messages";
            *why = g_strdup_printf("messages[%u].role must be a string", i);
            return false;
        }
        if (!strcmp(role, "developer"))
            role = "system";
        if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") &&
            strcmp(role, "tool")) {
            *param = "messages";
            *why = g_strdup_printf("messages[%u]: role '%s' is not supported (system, developer, "
                                   "user, assistant, tool)",
                                   i, role);
            return false;
        }
        JsonNode *content = json_object_get_member(m, "content");
        if (!strcmp(role, "user") && (!content || JSON_NODE_HOLDS_NULL(content))) {
            *param = "messages";
            *why = g_strdup_printf("messages[%u]: a user message needs content", i);
            return false;
        }
        char *text = content_text(j, content, i, role, why);
        if (!text) {
            *param = "messages";
            return false;
        }
        j->messages[j->n_messages].role = g_strdup(role);
        j->messages[j->n_messages].content = text;
        j->n_messages++;
        if (!parse_tool_fields(m, i, role, &j->messages[j->n_messages - 1], &arg_values, why)) {
            *param = "messages";
            return false;
        }
        if (!strcmp(role, "system") && i == 0)
            j->system = g_strdup(text);
        else if (!strcmp(role, "user"))
            n_user++;
        else
            n_other++;
    }
    /* [system,] user: one independent request against the pin. */
    bool simple = n_user == 1 && n_other == 0 &&
                  !strcmp(j->messages[j->n_messages - 1].role, "user");
    if (simple)
        j->user = g_strdup(j->messages[j->n_messages - 1].content);
    j->single_turn = simple;
    /* A conversation runs in the session that pins its own system message
     * (none: the empty one), so that another request's system prompt never
     * leaks into it, and its rows follow that pin. */
    j->pin_key = g_strconcat("s", j->system ? j->system : "", NULL);
    if (j->n_images > 0 && j->text_markers > 0) {
        *param = "messages";
        *why = g_strdup("a text part contains " TN_IMAGE_MARKER ", which marks where images go: "
                        "remove it from the text");
        return false;
    }
    if (!parse_gen(o, j, param, why) || !parse_tools(o, j, param, why))
        return false;
    if (j->n_tools > 0) {
        /* The tools are in the system part a pin holds without them. */
        j->single_turn = false;
        j->gen.tools = j->tools;
        j->gen.n_tools = (size_t)j->n_tools;
        j->tool_text = g_string_new(NULL);
    }
    return true;
}

/* A prompt given as token ids ([1, 2, 3], what lm-eval sends with
 * tokenized_requests): each a whole number inside the vocabulary (the
 * server's model's; any int32 where there is none, as in the fuzzer). */
static bool parse_prompt_ids(JsonArray *a, const char *where, job *j, int32_t **ids,
                             int32_t *n_ids, char **why) {
    const guint n = json_array_get_length(a);
    const int32_t n_vocab =
        j->server && j->server->model ? tn_model_n_vocab(j->server->model) : INT32_MAX;
    *ids = g_new(int32_t, n);
    for (guint i = 0; i < n; i++) {
        JsonNode *e = json_array_get_element(a, i);
        const bool number = JSON_NODE_HOLDS_VALUE(e) &&
                            (json_node_get_value_type(e) == G_TYPE_INT64 ||
                             json_node_get_value_type(e) == G_TYPE_DOUBLE);
        const double v = number ? json_node_get_double(e) : -1;
        if (!number || !isfinite(v) || !whole(v) || v < 0 || v >= (double)n_vocab) {
            *why = g_strdup_printf("%s[%u] must be a token id from 0 to %d (a whole number "
                                   "inside the vocabulary)",
                                   where, i, n_vocab - 1);
            return false;
        }
        (*ids)[i] = (int32_t)v;
    }
    *n_ids = (int32_t)n;
    return true;
}

static bool is_string(JsonNode *n) {
    return JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING;
}

/* Several prompts, [s, s, ...] or [[ids], [ids], ...], one kind throughout
 * (OpenAI's lists), each answered as if alone (docs/SERVER.md, "Several
 * prompts"). Bounded so that one request cannot queue unbounded work. */
static bool parse_prompt_list(JsonArray *a, job *j, char **why) {
    const guint n = json_array_get_length(a);
    if (n > TERN_COMPLETION_PROMPTS_MAX) {
        *why = g_strdup_printf("prompt holds %u prompts; one request may hold at most %d: "
                               "send the rest in another request",
                               n, TERN_COMPLETION_PROMPTS_MAX);
        return false;
    }
    const bool strings = is_string(json_array_get_element(a, 0));
    const tn_tokenizer *tok =
        j->server && j->server->model ? tn_model_tokenizer(j->server->model) : NULL;
    j->prompts = g_new0(job_prompt_in, n);
    j->n_prompts = (int)n;
    guint64 at_least = 0; /* prompt tokens in all, counted as they are read */
    for (guint i = 0; i < n; i++) {
        JsonNode *e = json_array_get_element(a, i);
        job_prompt_in *in = &j->prompts[i];
        if (strings != is_string(e) || (!is_string(e) && !JSON_NODE_HOLDS_ARRAY(e))) {
            *why = g_strdup_printf("prompt[%u] must be %s, as prompt[0] is: a list holds "
                                   "strings or lists of token ids, not both",
                                   i, strings ? "a string" : "a list of token ids");
            return false;
        }
        if (strings) {
            const char *text = json_node_get_string(e);
            if (!*text) {
                *why = g_strdup_printf("prompt[%u] is empty", i);
                return false;
            }
            in->text = g_strdup(text);
            const size_t len = strlen(text);
            at_least += tok ? tn_tokenizer_min_tokens(tok, text, len) : 0;
        } else {
            JsonArray *ids = json_node_get_array(e);
            if (json_array_get_length(ids) == 0) {
                *why = g_strdup_printf("prompt[%u] is empty", i);
                return false;
            }
            char where[32];
            g_snprintf(where, sizeof where, "prompt[%u]", i);
            if (!parse_prompt_ids(ids, where, j, &in->ids, &in->n_ids, why))
                return false;
            at_least += (guint64)in->n_ids;
        }
    }
    if (at_least > TERN_COMPLETION_PROMPTS_TOKENS_MAX) {
        *why = g_strdup_printf("the %u prompts hold at least %" G_GUINT64_FORMAT
                               " tokens; one request may hold at most %d: send fewer prompts",
                               n, at_least, TERN_COMPLETION_PROMPTS_TOKENS_MAX);
        return false;
    }
    return true;
}

bool tern_request_parse_completion(JsonObject *o, job *j, const char **param, char **why) {
    JsonNode *p = json_object_get_member(o, "prompt");
    bool unwrapped = false;
    /* OpenAI's forms: a string, token ids, or a list of either (one prompt:
     * the same as the prompt alone). */
    if (p && JSON_NODE_HOLDS_ARRAY(p) && json_array_get_length(json_node_get_array(p)) == 1) {
        JsonNode *only = json_array_get_element(json_node_get_array(p), 0);
        if (JSON_NODE_HOLDS_ARRAY(only) || is_string(only))
            p = only, unwrapped = true;
    }
    if (p && JSON_NODE_HOLDS_ARRAY(p)) {
        JsonArray *a = json_node_get_array(p);
        JsonNode *first = json_array_get_length(a) ? json_array_get_element(a, 0) : NULL;
        if (first && !unwrapped && (JSON_NODE_HOLDS_ARRAY(first) || is_string(first))) {
            if (!parse_prompt_list(a, j, why)) {
                *param = "prompt";
                return false;
            }
        } else if (!first) {
            *param = "prompt";
            *why = g_strdup("the prompt is empty");
            return false;
        } else if (!parse_prompt_ids(a, unwrapped ? "prompt[0]" : "prompt", j, &j->prompt_ids,
                                     &j->n_prompt_ids, why)) {
            *param = "prompt";
            return false;
        }
    } else if (!p || !is_string(p)) {
        *param = "prompt";
        *why = g_strdup("prompt must be a string, an array of token ids, or an array of these");
        return false;
    } else {
        j->prompt = g_strdup(json_node_get_string(p));
    }
    j->pin_key = g_strdup("r");
    j->single_turn = true;
    if (!parse_gen(o, j, param, why))
        return false;
    if (j->n_prompts > 1) {
        /* The answers are one after another on one worker: each waits for
         * the one before, so their tokens are bounded together. */
        const gint64 total = (gint64)j->n_prompts * j->gen.max_tokens;
        if (total > TERN_COMPLETION_PROMPTS_TOKENS_MAX) {
            *param = "max_tokens";
            *why = g_strdup_printf("%d prompts of max_tokens %d ask for %" G_GINT64_FORMAT
                                   " tokens; one request may ask for at most %d: lower "
                                   "max_tokens or send fewer prompts",
                                   j->n_prompts, (int)j->gen.max_tokens, total,
                                   TERN_COMPLETION_PROMPTS_TOKENS_MAX);
            return false;
        }
    }
    const char *bad = NULL;
    j->echo = tern_request_member_bool(o, "echo", false, &bad);
    double v;
    if (member_number(o, "best_of", &v, &bad) && v != 1) {
        *param = "best_of";
        *why = g_strdup("only best_of = 1 is supported (one engine, one answer per request)");
        return false;
    }
    const char *suffix = string_member(o, "suffix", "");
    if (!suffix || *suffix) {
        *param = "suffix";
        *why = g_strdup("suffix (insertion) is not supported");
        return false;
    }
    if (bad) {
        *param = bad;
        *why = g_strdup_printf("%s has the wrong type", bad);
        return false;
    }
    return true;
}

void tern_request_clear(job *j) {
    g_free(j->pin_key);
    g_free(j->system);
    g_free(j->user);
    g_free(j->prompt);
    g_free(j->prompt_ids);
    for (int i = 0; i < j->n_prompts; i++) {
        g_free(j->prompts[i].text);
        g_free(j->prompts[i].ids);
    }
    g_free(j->prompts);
    for (int i = 0; i < j->n_messages; i++) {
        tn_session_message *m = &j->messages[i];
        g_free((char *)m->role);
        g_free((char *)m->content);
        for (size_t k = 0; k < m->n_tool_calls; k++) {
            g_free((char *)m->tool_calls[k].id);
            g_free((char *)m->tool_calls[k].name);
            g_free((char *)m->tool_calls[k].arguments);
        }
        g_free((tn_chat_tool_call *)m->tool_calls);
        g_free((char *)m->tool_call_id);
        g_free((char *)m->name);
    }
    g_free(j->messages);
    tern_tools_free(j->tools, j->n_tools);
    g_free(j->raw_tools);
    g_free(j->raw_schema);
    if (j->tool_text)
        g_string_free(j->tool_text, TRUE);
    for (int i = 0; i < TN_SESSION_MAX_STOP; i++)
        g_free(j->stop_store[i]);
    g_free(j->logit_bias);
    tn_json_schema_free(j->schema);
    for (int i = 0; i < j->n_images; i++) {
        g_free(j->images[i].uri);
        g_free(j->images[i].where);
        g_free(j->images[i].key);
    }
    g_free(j->images);
}

static void scan_fail(tern_body_scan *sc, const char *problem, const char *member, size_t member_len) {
    sc->problem = problem;
    if (member_len >= sizeof sc->member)
        member_len = 0;
    memcpy(sc->member, member, member_len);
    sc->member[member_len] = '\0';
}

/* One linear pass over the body before json-glib sees it, for what the
 * parser cannot be trusted with and the answer names the member of:
 * nesting (it recurses once per level, and 100,000 levels overflowed the
 * stack), NUL in strings (\u0000 or a raw byte: a C string would end
 * there, cutting the text silently) and integers beyond 64 bits (json-glib
 * wraps them: 2^64 + 5 read as -1), and more values than any request
 * needs (json-glib spends ~100 bytes on each: a 20 MB "[0,0,...]" in a
 * member nobody reads took 2.2 GB and held the server's thread for 28 s).
 * Strings and their escapes are skipped exactly, so brackets and commas in
 * text do not count. What JSON is not (C's escapes, bytes that are no
 * UTF-8, a repeated key) is tn_json_check's, after. */
void tern_request_scan_body(const char *p, size_t n, tern_body_scan *sc) {
    sc->problem = NULL;
    sc->member[0] = '\0';
    size_t values = 1; /* each further value follows a comma or opens a container */
    int depth = 0;
    const char *key = "", *last = "";
    size_t key_len = 0, last_len = 0;
    for (size_t i = 0; i < n; i++) {
        const char c = p[i];
        if (c == '"') {
            const size_t start = ++i;
            for (; i < n && p[i] != '"'; i++) {
                if (p[i] == '\0') {
                    scan_fail(sc, "nul", key, key_len);
                    return;
                }
                if (p[i] == '\\' && i + 1 < n) {
                    if (p[i + 1] == 'u' && i + 5 < n && !memcmp(p + i + 2, "0000", 4)) {
                        scan_fail(sc, "nul", key, key_len);
                        return;
                    }
                    i++;
                }
            }
            last = p + start;
            last_len = i - start;
        } else if (c == '[' || c == '{' || c == ',') {
            if (++values > MAX_JSON_VALUES) {
                scan_fail(sc, "values", key, key_len);
                return;
            }
            if (c != ',' && ++depth > MAX_JSON_DEPTH) {
                scan_fail(sc, "depth", key, key_len);
                return;
            }
        } else if (c == ']' || c == '}') {
            depth--;
        } else if (c == ':' && depth == 1) {
            key = last;
            key_len = last_len;
        } else if (c == '\0') {
            scan_fail(sc, "nul", key, key_len);
            return;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            const size_t start = i;
            bool integer = true;
            while (i + 1 < n && p[i + 1] && strchr("+-.eE0123456789", p[i + 1])) {
                i++;
                integer = integer && p[i] != '.' && p[i] != 'e' && p[i] != 'E';
            }
            const bool neg = p[start] == '-';
            const size_t digits = i + 1 - start - (neg ? 1 : 0);
            const char *limit = neg ? "9223372036854775808" : "9223372036854775807";
            if (integer &&
                (digits > 19 || (digits == 19 && memcmp(p + start + neg, limit, 19) > 0))) {
                scan_fail(sc, "range", key, key_len);
                return;
            }
        }
    }
}
