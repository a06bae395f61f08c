#!/usr/bin/env python3
"""tern-cli serve and requests it read wrongly, one way or the other
(docs/SERVER.md):

- `Authorization: Bearer  KEY` with more than one space, and the scheme in
  any case, is the key (RFC 9110 11.4: 1*SP between scheme and
  credentials); it was a 401. A wrong or missing key is still one.
- an HTTP/1.1 request with an empty Host is a 400 (RFC 9112 3.2: an
  invalid Host; an "http" URI needs a non-empty host, RFC 9110 4.2.1); it
  was answered, and passed the DNS-rebinding check as no Host. HTTP/1.0
  may still send none, or an empty one (RFC 9112 3.3: the server's own
  name), and an absolute-form target makes Host irrelevant. More than one
  Host is a 400 too (RFC 9112 3.2); libsoup read the last.
- a chat message's content part of type "text" without a "text" string,
  or without a type, is a 400 that names the message and the part; it was
  taken as empty text. `content: []` is no content: refused for a user
  message (as null is), an empty text for the others.
- `stream_options` without `stream: true` is a 400 naming it (OpenAI's
  answer); it was taken and ignored."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
check = checks.check
tmp = serverlib.workdir("strict")
model = serverlib.make_model(tmp)
KEY = "sk-strict"
srv = serverlib.Server(tmp, "strict", model, ["--api-key", KEY, "--request-timeout", "5"])
AUTH = {"Authorization": "Bearer " + KEY}


def raw(head, timeout=5):
    """The status of the answer to one raw request head (no body), and its body."""
    status, _, body, _ = serverlib.raw_request(srv.port, head, timeout)
    return status, body


# ------------------------------------------------------------ the API key
for label, value, want in [
        ("one space", "Bearer " + KEY, 200),
        ("two spaces", "Bearer  " + KEY, 200),
        ("five spaces", "Bearer     " + KEY, 200),
        ("the scheme in lower case", "bearer " + KEY, 200),
        ("the scheme in upper case, two spaces", "BEARER  " + KEY, 200),
        ("a wrong key after two spaces", "Bearer  nope", 401),
        ("the key with a space inside", "Bearer sk- strict", 401),
        ("a tab instead of the space", "Bearer\t" + KEY, 401),
        ("no space", "Bearer" + KEY, 401),
        ("the scheme alone", "Bearer", 401),
        ("the scheme and spaces", "Bearer   ", 401),
        ("another scheme", "Basic " + KEY, 401)]:
    status, _, _ = srv.request("GET", "/v1/models", headers={"Authorization": value})
    check(status == want, "Authorization: %r (%s): %d (got %s)" % (value, label, want, status))

# ------------------------------------------------------------ Host
for head, want in [
        (b"GET /v1/models HTTP/1.1\r\nHost:\r\n", 400),
        (b"GET /v1/models HTTP/1.1\r\nHost: \r\n", 400),
        (b"GET /v1/models HTTP/1.1\r\nHost:   \t\r\n", 400),
        (b"GET /health HTTP/1.1\r\nHost:\r\n", 400),
        (b"OPTIONS * HTTP/1.1\r\nHost:\r\n", 400),
        # more than one Host (RFC 9112 3.2: 400), whichever libsoup would read
        (b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\n", 400),
        (b"GET /v1/models HTTP/1.1\r\nHost: evil.example\r\nhost: 127.0.0.1\r\n", 400),
        (b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:x\r\nHost: 127.0.0.1\r\n", 400),
        (b"GET /v1/models HTTP/1.0\r\nHost: 127.0.0.1\r\nHOST: localhost\r\n", 400),
        (b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Host: evil.example\r\n", 200),
        (b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n", 200),
        (b"GET /v1/models HTTP/1.0\r\nHost:\r\n", 200),
        (b"GET /v1/models HTTP/1.0\r\n", 200),
        (b"GET http://127.0.0.1/v1/models HTTP/1.1\r\nHost:\r\n", 200),
        (b"GET http://evil.example/v1/models HTTP/1.1\r\nHost:\r\n", 403)]:
    status, body = raw(head + ("Authorization: Bearer %s\r\nConnection: close\r\n\r\n" %
                               KEY).encode())
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    ok = status == want
    if want == 400:
        msg = doc.get("error", {}).get("message", "") if isinstance(doc, dict) else ""
        ok = ok and "Host" in msg
    check(ok, "%r: %d%s (got %s %r)" % (head, want, " naming Host" if want == 400 else "",
                                        status, body[:160]))


# ------------------------------------------------------------ content parts
def chat(messages):
    return srv.post("/v1/chat/completions", {"messages": messages, "max_tokens": 1},
                    headers=AUTH)


def refused(label, messages, where):
    status, _, doc, out = chat(messages)
    msg = doc.get("error", {}).get("message", "") if isinstance(doc, dict) else ""
    check(status == 400 and msg.startswith(where),
          "%s: 400 naming %s (got %s %r)" % (label, where, status, out[:200]))


def taken(label, messages):
    status, _, doc, out = chat(messages)
    check(status == 200, "%s: answered (got %s %r)" % (label, status, out[:200]))


SYS = {"role": "system", "content": "Be brief."}
refused("a text part without text",
        [{"role": "user", "content": [{"type": "text"}]}], "messages[0].content[0]")
refused("a text part whose text is null",
        [{"role": "user", "content": [{"type": "text", "text": None}]}],
        "messages[0].content[0]")
refused("the second part without text",
        [SYS, {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text"}]}],
        "messages[1].content[1]")
refused("a system message's text part without text",
        [{"role": "system", "content": [{"type": "text"}]}, {"role": "user", "content": "hi"}],
        "messages[0].content[0]")
refused("a part without type",
        [{"role": "user", "content": [{"text": "hi"}]}], "messages[0].content[0]")
refused("a part with type null",
        [{"role": "user", "content": [{"type": None, "text": "hi"}]}], "messages[0].content[0]")
refused("a part that is not an object",
        [{"role": "user", "content": [{"type": "text", "text": "hi"}, "hi"]}],
        "messages[0].content[1]")
refused("a user message with content []", [{"role": "user", "content": []}], "messages[0]")
refused("a later user message with content []",
        [SYS, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
         {"role": "user", "content": []}], "messages[3]")
taken("text parts", [{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
taken("a text part with empty text", [{"role": "user", "content": [
    {"type": "text", "text": "hi"}, {"type": "text", "text": ""}]}])
taken("a system message with content []", [{"role": "system", "content": []},
                                           {"role": "user", "content": "hi"}])
taken("an assistant message with content []",
      [{"role": "user", "content": "hi"}, {"role": "assistant", "content": []},
       {"role": "user", "content": "again"}])

# ------------------------------------------------------------ whole numbers
# 2^63 fits in 64 bits (unsigned), so "beyond 64 bits" misled; the range is
# a signed 64-bit integer's, and its ends are taken.
for seed, ok in ((2 ** 63, False), (-(2 ** 63) - 1, False), (2 ** 64, False),
                 (2 ** 63 - 1, True)):
    status, _, doc, out = srv.post("/v1/chat/completions",
                                   {"messages": [{"role": "user", "content": "hi"}],
                                    "max_tokens": 1, "seed": seed}, headers=AUTH)
    msg = doc.get("error", {}).get("message", "") if isinstance(doc, dict) else ""
    if ok:
        check(status == 200, "seed %d: answered (got %s %r)" % (seed, status, out[:200]))
    else:
        check(status == 400 and msg.startswith("seed: ") and "signed 64-bit" in msg,
              "seed %d: 400 naming seed and the signed 64-bit range (got %s %r)"
              % (seed, status, out[:200]))

# ------------------------------------------------------------ U+001F
# json-glib 1.6 writes U+001F raw in strings, which Python's json (strict)
# and JSON.parse refuse: an answer echoing one must escape it.
status, _, _, out = srv.post("/v1/chat/completions",
                             {"model": "a\u001fb", "max_tokens": 1,
                              "messages": [{"role": "user", "content": "hi"}]}, headers=AUTH)
try:
    echoed = json.loads(out.decode("utf-8"))["error"]["message"]
except (ValueError, KeyError, TypeError) as e:
    echoed = "not strict JSON: %s" % e
check(status == 404 and b"\x1f" not in out and "a\u001fb" in echoed,
      "a model name with U+001F: a 404 in strict JSON, the name escaped (got %s %r: %s)"
      % (status, out[:200], echoed))

# ------------------------------------------------------------ stream_options
# Only for a streamed answer (OpenAI answers 400 without stream: true); it
# was taken and ignored. null is no stream_options.
for path, body in (("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
                   ("/v1/completions", {"prompt": "hi"})):
    for stream, so, want in ((None, {"include_usage": True}, 400),
                             (False, {"include_usage": True}, 400),
                             (False, {}, 400),
                             (None, None, 200),
                             (True, {"include_usage": True}, 200)):
        b = dict(body, max_tokens=1, stream_options=so)
        if stream is not None:
            b["stream"] = stream
        status, _, doc, out = srv.post(path, b, headers=AUTH)
        err = doc.get("error", {}) if isinstance(doc, dict) else {}
        what = "%s with stream %s and stream_options %s" % (path, stream, json.dumps(so))
        if want == 400:
            check(status == 400 and err.get("param") == "stream_options" and
                  "stream" in err.get("message", "") and "true" in err.get("message", ""),
                  "%s: 400 naming stream_options (got %s %r)" % (what, status, out[:200]))
        else:
            check(status == 200, "%s: answered (got %s %r)" % (what, status, out[:200]))

check(srv.stop() == 0, "the server stops cleanly")
checks.finish()
