#!/usr/bin/env python3
"""tern-cli serve against hostile or sloppy input (issue 17), through real
HTTP on 127.0.0.1, on a tiny synthetic model:

- a body nested 100,000 deep (under the size limit) gets 400 and the server
  lives on; nesting inside strings does not count;
- cross-site requests: a Host that is not the server's (DNS rebinding) 403,
  a body that is not Content-Type: application/json 415, the CORS preflight
  allows the headers the openai SDK sends;
- Content-Length: -1 400, a Transfer-Encoding other than chunked 501,
  also on a kept-alive connection's later requests (pipelined or not),
  where libsoup 3.2 leaked on them; chunked bodies are framed too;
  headers or a body that do not arrive in time (--request-timeout) get the
  connection closed, also for many slow clients at once, while others are
  served;
- protocol details: a stream that fails before its first token gets the
  HTTP status and a JSON body; a message, messages or a prompt that cannot
  fit are refused from their length, before they are encoded; GET /v1/models/{id}; the paths without /v1;
  HTTP/1.0 never gets chunked encoding; ids unique across restarts;
  `created` is the time; bad numbers, NUL in content, a user message
  without content and a number where a string goes (role, a content
  part's type or text) are 400 naming the field;
- start-up: a blank --api-key is refused; --no-pin-cache and
  --pin-cache-max keep pin snapshots off the disk; a FIFO where a pin
  snapshot should be does not hang the server."""

import http.client
import itertools
import json
import os
import re
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib  # noqa: E402

checks = serverlib.Checks()
check = checks.check
tmp = serverlib.workdir("harden")
model = serverlib.make_model(tmp)
USER = [{"role": "user", "content": "hello"}]


answer_complete = serverlib.answer_complete
raw = serverlib.raw_request


def post_raw(port, path, body, headers="", version="1.1", host=None):
    if isinstance(body, str):
        body = body.encode()
    host = host if host is not None else "127.0.0.1:%d" % port
    req = ("POST %s HTTP/%s\r\n%sContent-Length: %d\r\n%s\r\n" %
           (path, version, ("Host: %s\r\n" % host) if host else "", len(body), headers))
    return raw(port, req.encode() + body)


def error_of(doc):
    return doc.get("error", {}) if isinstance(doc, dict) else {}


# ------------------------------------------------------------ main server
srv = serverlib.Server(tmp, "main", model,
                       ["--cors", "http://app.test", "--request-timeout", "3",
                        "--queue", "64"])
port = srv.port


def chat(extra=None, path="/v1/chat/completions", **kw):
    body = {"model": "tiny", "messages": USER, "max_tokens": 2}
    body.update(extra or {})
    return srv.post(path, body, **kw)


# 1. Nesting.
deep = b"[" * 100000
st, _, body, _ = post_raw(port, "/v1/chat/completions", deep,
                          "Content-Type: application/json\r\n")
check(st == 400, "100,000 nested [ : 400 (got %s)" % st)
check(b"nest" in body, "... the error says it is nested too deep: %r" % body[:200])
st, _, _, _ = post_raw(port, "/v1/chat/completions", b'{"a":' * 50000,
                       "Content-Type: application/json\r\n")
check(st == 400, "50,000 nested objects: 400 (got %s)" % st)
s, _, _ = srv.request("GET", "/health")
check(s == 200, "the server lives on after deep nesting (health %s)" % s)
s, _, doc, _ = chat({"messages": [{"role": "user", "content": "[{" * 300 + "\\\"[[" + "x"}]})
check(s == 200, "brackets inside a string do not count as nesting (got %s: %s)" % (s, doc))
nested = json.loads("[" * 100 + "]" * 100)
s, _, doc, _ = chat({"metadata": {"n": nested}})
check(s == 200, "100 levels of nesting are fine (got %s: %s)" % (s, doc))
nested = json.loads("[" * 200 + "]" * 200)
s, _, doc, _ = chat({"metadata": {"n": nested}})
check(s == 400, "200 levels of nesting: 400 (got %s)" % s)
# The scan knows the member, as for NUL, 64 bits and the count of values
# (docs/SERVER.md's table says "param: the top-level member"); the depth's
# 400 named none. A body that is all nesting has no member to name.
for member in ("metadata", "response_format", "messages"):
    s, _, doc, _ = chat({member: {"n": nested}})
    check(s == 400 and doc["error"]["param"] == member and
          doc["error"]["code"] == "invalid_json" and
          doc["error"]["message"].startswith(member + ": "),
          "200 levels in %s: 400 naming it (got %s: %s)" % (member, s, doc))
st, _, body, _ = post_raw(port, "/v1/chat/completions", b"[" * 200 + b"]" * 200,
                          "Content-Type: application/json\r\n")
check(st == 400 and b'"param":null' in body and b"nested deeper" in body,
      "a body that is 200 levels of arrays: 400 naming no member (got %s: %r)" % (st, body[:300]))

# 1b. Width: a body of more values than any request needs is refused before
# json-glib builds its tree (~100 bytes a value: a 20 MB "[0,0,...]" in a
# member nobody reads took 2.2 GB and held the server's thread for 28 s).
# Commas in strings do not count.
wide = b'{"model": "tiny", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}], ' \
       b'"metadata": [' + b",".join([b"0"] * 200001) + b"]}"
st, _, body, _ = post_raw(port, "/v1/chat/completions", wide, "Content-Type: application/json\r\n")
check(st == 400 and b"200000 JSON values" in body and b'"param":"metadata"' in body,
      "200,001 values in an ignored member: 400 naming it (got %s: %r)" % (st, body[:300]))
s, _, doc, _ = chat({"metadata": {"n": [0] * 100000, "s": "," * 300000}})
check(s == 200, "100,000 values and 300,000 commas in a string are fine (got %s: %s)" % (s, doc))

# 4. Cross-site requests.
good = json.dumps({"model": "tiny", "messages": USER, "max_tokens": 2})
for ctype in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x",
              None]:
    hdr = ("Content-Type: %s\r\n" % ctype) if ctype else ""
    st, _, body, _ = post_raw(port, "/v1/chat/completions", good, hdr)
    check(st == 415, "Content-Type %s: 415 (got %s: %r)" % (ctype, st, body[:200]))
st, _, body, _ = post_raw(port, "/v1/chat/completions", good,
                          "Content-Type: application/json; charset=utf-8\r\n")
check(st == 200, "Content-Type application/json; charset=utf-8: 200 (got %s %r)" % (st, body[:200]))
for host in ["evil.example", "evil.example:%d" % port, "127.0.0.1.evil.example",
             "localhost.evil.example:%d" % port]:
    st, _, body, _ = post_raw(port, "/v1/chat/completions", good,
                              "Content-Type: application/json\r\n", host=host)
    check(st == 403, "Host: %s 403 (got %s)" % (host, st))
    check(b'"code":"invalid_host"' in body, "... code invalid_host: %r" % body[:200])
st, _, _, _ = raw(port, b"GET /v1/models HTTP/1.1\r\nHost: rebind.example\r\n\r\n")
check(st == 403, "GET with a foreign Host: 403 (got %s)" % st)
# An absolute-form target names the host itself, and libsoup takes it over
# the Host header: a foreign one was served behind "Host: 127.0.0.1".
for target, want in [("http://evil.example/v1/models", 403),
                     ("http://evil.example:%d/v1/models" % port, 403),
                     ("http://127.0.0.1:%d/v1/models" % port, 200),
                     ("http://[::1]:%d/v1/models" % port, 200)]:
    st, _, body, _ = raw(port, ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" %
                                (target, port)).encode())
    check(st == want and (want == 200 or b"invalid_host" in body),
          "GET %s with Host: 127.0.0.1: %d (got %s %r)" % (target, want, st, body[:100]))
for host in ["127.0.0.1:%d" % port, "localhost:%d" % port, "LOCALHOST", "[::1]:%d" % port,
             "127.0.0.1"]:
    st, _, _, _ = post_raw(port, "/v1/chat/completions", good,
                           "Content-Type: application/json\r\n", host=host)
    check(st == 200, "Host: %s 200 (got %s)" % (host, st))
pre = ("OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: http://app.test\r\n"
       "Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization,"
       "content-type,x-stainless-os,x-stainless-lang,x-stainless-retry-count,"
       "openai-organization,openai-project\r\n\r\n" % port)
st, head, _, _ = raw(port, pre.encode())
allow = ""
for line in head.split("\r\n"):
    if line.lower().startswith("access-control-allow-headers:"):
        allow = line.split(":", 1)[1].lower()
check(st == 204, "preflight 204 (got %s)" % st)
for h in ["authorization", "content-type", "x-stainless-os", "x-stainless-retry-count",
          "openai-organization", "openai-project"]:
    check(h in allow, "preflight allows %s (%s)" % (h, allow))
st, head, _, _ = raw(port, pre.replace("openai-project", "x-evil").encode())
check("x-evil" not in head.lower(), "preflight does not allow an unknown header: %s" % head)

st, _, body, _ = raw(port, ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            "Content-Type: application/json\r\nContent-Length: -1\r\n\r\n" +
                            good).encode())
check(st == 400, "Content-Length: -1: 400 (got %s %r)" % (st, body[:100]))
st, _, body, _ = raw(port, ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            "Content-Type: application/json\r\nContent-Length: 5x\r\n\r\n" +
                            good).encode())
check(st == 400, "Content-Length: 5x: 400 (got %s)" % st)
for extra in ["Content-Length: %d\r\nContent-Length: %d\r\n" % (len(good), len(good) + 1),
              "Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % len(good)]:
    st, _, body, _ = raw(port, ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                "Content-Type: application/json\r\n" + extra + "\r\n" +
                                good).encode())
    check(st == 400, "%s: 400 (got %s %r)" % (extra.replace("\r\n", " | "), st, body[:100]))
# The same framing on a kept-alive connection's second request (which libsoup
# reads itself): 400 and the connection closed, the request after it unread.
for extra in ["Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % len(good),
              "Content-Length: %d\r\nContent-Length: 3\r\n" % len(good)]:
    data = ("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
            "application/json\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n"
            "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" %
            (extra, len(good), good)).encode()
    got, _ = serverlib.raw_exchange(port, data, timeout=10)
    statuses = [int(x) for x in re.findall(rb"HTTP/1\.1 (\d{3}) ", got)]
    check(statuses == [200, 400],
          "%s on a second request: 400, then closed (got %s)" %
          (extra.replace("\r\n", " | "), statuses))
# A body over the limit by its Content-Length is answered at once, not after
# the body: "Content-Length: 999999999999999999" and a body that never comes
# (or a kept-alive connection's second request with "-1") got no answer and
# were closed at the timeout (3 s here).
for first in ["", "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"]:
    for cl, want in [("999999999999999999", 413), ("-1", 400)]:
        if not first and cl != "999999999999999999":
            continue  # a first request's -1: above
        got, dt = serverlib.raw_exchange(
            port, ("%sPOST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   "Content-Type: application/json\r\nContent-Length: %s\r\n\r\n{}" %
                   (first, cl)).encode(), timeout=10)
        statuses = [int(x) for x in re.findall(rb"HTTP/1\.1 (\d{3}) ", got)]
        check(statuses == ([200] if first else []) + [want] and dt < 2,
              "Content-Length: %s%s: %d at once (got %s in %.1f s)" %
              (cl, " on a second request" if first else "", want, statuses, dt))
# The same for a request refused for its Host or Content-Type: answered at
# once, not after the body it announces.
for host, ctype, want in [("evil.example", "application/json", 403),
                          ("127.0.0.1", "text/plain", 415)]:
    st, _, body, dt = raw(port, ("POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\n"
                                 "Content-Type: %s\r\nContent-Length: 999999999999999999\r\n"
                                 "\r\n{}" % (host, ctype)).encode(), timeout=10)
    check(st == want and dt < 2,
          "Host %s, Content-Type %s, 10^18 bytes announced: %d at once (got %s in %.1f s)" %
          (host, ctype, want, st, dt))
# A whole body over the limit, sent before the answer is read: still 413.
hc = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
try:
    hc.request("POST", "/v1/chat/completions", body=b"a" * 2000000,
               headers={"Content-Type": "application/json"})
    r = hc.getresponse()
    st, body = r.status, r.read()
except OSError as e:
    st, body = None, str(e).encode()
hc.close()
check(st == 413 and b"request_too_large" in body,
      "a 2 MB body sent whole: 413 (got %s %r)" % (st, body[:100]))
# A Transfer-Encoding other than chunked: libsoup 3.2 answered 501 itself and
# leaked the request's path each time (a 60 KB path: 60 KB a request).
for te in ["gzip", "chunked, chunked", "xchunked"]:
    st, _, body, _ = raw(port, ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                "Content-Type: application/json\r\nTransfer-Encoding: %s\r\n\r\n"
                                "%x\r\n%s\r\n0\r\n\r\n" % (te, len(good), good)).encode())
    check(st == 501 and b"Transfer-Encoding" in body,
          "Transfer-Encoding: %s 501 naming it (got %s %r)" % (te, st, body[:100]))
st, _, body, _ = raw(port, ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                            "Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" %
                            (len(good), good)).encode())
check(st == 400 and b"Transfer-Encoding" in body,
      "two Transfer-Encoding headers: 400 (got %s %r)" % (st, body[:100]))
# Empty lines before the request line, which libsoup skips (RFC 9112 lets a
# server ignore them): the framing check took the first of them for the end
# of the headers and passed the request behind them unread to libsoup.
for lead in ["\r\n\r\n", "\n\n", "\r\n\r\n\r\n\r\n"]:
    st, _, body, _ = raw(port, ("%sPOST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                "Content-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n"
                                "%x\r\n%s\r\n0\r\n\r\n" % (lead, len(good), good)).encode())
    check(st == 501 and b"Transfer-Encoding" in body,
          "%r before a request with Transfer-Encoding: gzip: 501 (got %s %r)" %
          (lead, st, body[:100]))
st, _, body, _ = raw(port, b"\r\n\r\nGET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
check(st == 200, "empty lines before a GET /health: 200 (got %s %r)" % (st, body[:100]))
# A folded header line (obs-fold), which libsoup joins to the one above:
# "chunked" then " , gzip" passed the check above and reached libsoup's own
# 501, which leaked the path (found at the stop by LeakSanitizer).
for fold in ["Transfer-Encoding: chunked\r\n , gzip\r\n", "X-A: a\r\n\tb\r\n"]:
    st, _, body, _ = raw(port, ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                "Content-Type: application/json\r\n%s\r\n"
                                "%x\r\n%s\r\n0\r\n\r\n" % (fold, len(good), good)).encode())
    check(st == 400 and b"obs-fold" in body,
          "a folded header %r: 400 naming it (got %s %r)" % (fold, st, body[:100]))
# A NUL byte in the headers: 400 at once (the end of the headers was looked
# for with a C string search, so they were never complete: no answer, and
# the connection closed at the timeout).
for req in [b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\x00b\r\n\r\n",
            b"GET /hea\x00lth HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"]:
    st, _, body, dt = raw(port, req)
    check(st == 400 and b"NUL" in body and dt < 2,
          "a NUL in the headers %r: 400 at once (got %s in %.1f s)" % (req[:20], st, dt))
# Huge headers are refused, the server lives on.
st, _, _, _ = raw(port, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 200000 +
                  b"\r\n\r\n")
check(st is None or st >= 400, "200 KB header refused or dropped (got %s)" % st)
# A chunked body is parsed and checked like any other.
chunked = ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
           "application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n")
st, _, _, _ = raw(port, (chunked % (len(good), good)).encode())
check(st == 200, "a chunked body: 200 (got %s)" % st)
st, _, _, _ = raw(port, (chunked % (60000, "[" * 60000)).encode())
check(st == 400, "a chunked deeply nested body: 400 (got %s)" % st)

# Slow clients: partial headers, a partial body, and many at once; others are
# served meanwhile, and every slow one is cut within the timeout (3 s).
st, _, _, dt = raw(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n", timeout=20)
check(dt < 10, "partial headers: the connection is closed after the timeout (%.1f s)" % dt)
st, _, _, dt = raw(port, ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                          "application/json\r\nContent-Length: 100\r\n\r\n{\"model\"").encode(),
                   timeout=20)
check(dt < 10, "a partial body: the connection is closed after the timeout (%.1f s, %s)" % (dt, st))
st, _, _, dt = raw(port, b"", timeout=20)
check(dt < 10, "a connection that sends nothing is closed after the timeout (%.1f s)" % dt)
slow = []


def slowloris(i):
    slow.append(raw(port, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", timeout=30)[3])


threads = [threading.Thread(target=slowloris, args=(i,)) for i in range(40)]
for t in threads:
    t.start()
time.sleep(0.5)
s, _, doc, _ = chat()
check(s == 200, "served while 40 slow clients hold connections (got %s)" % s)
for t in threads:
    t.join()
check(len(slow) == 40 and max(slow) < 15, "the 40 slow clients were all cut (%s)" %
      (sorted(slow)[-3:] if slow else None))
# A client that never reads its answers (a stream, or here, for an answer
# of a known size, 40 pipelined requests): what it does not take waits in
# the server's socket (and libsoup) for as long as the client stays. After
# the timeout without a byte taken, the connection is reset and that dropped.
sk = socket.socket()
sk.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
sk.settimeout(10)
sk.connect(("127.0.0.1", port))
sk.sendall(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 40)
time.sleep(8)
got = b""
try:
    while got.count(b"HTTP/1.1 200") < 40 or not got.endswith(b"}"):
        b = sk.recv(65536)
        if not b:
            break
        got += b
except OSError:
    pass
sk.close()
check(got.count(b"HTTP/1.1 200") < 40,
      "answers their client does not read: dropped after the timeout (the client later read "
      "%d of the 40)" % got.count(b"HTTP/1.1 200"))
s, _, _ = srv.request("GET", "/health")
check(s == 200, "... and the server answers (%s)" % s)
# A client that does read, one request after another on a kept-alive
# connection, for longer than the timeout: answers of the same size each
# time, so the twice-a-second look at the socket's send queue can find
# the same count of bytes waiting again and again (the answer just
# written, not yet acknowledged). That is no client taking none of its
# answer: it was reset after the timeout, mid-answer, and the rest lost.
sk = socket.create_connection(("127.0.0.1", port), timeout=10)
got = b""
served = 0
t0 = time.time()
try:
    while time.time() - t0 < 6:
        sk.sendall(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        while not answer_complete(got):
            b = sk.recv(65536)
            if not b:
                raise OSError("closed")
            got += b
        got = b""
        served += 1
except OSError as e:
    got = ("<%s after %d answers, %.1f s>" % (e, served, time.time() - t0)).encode()
sk.close()
check(time.time() - t0 >= 6 and served > 0,
      "a client reading each answer before its next request, for 6 s on one connection "
      "(timeout 3 s), is not cut (%r)" % got[:200])

# Protocol details.
long_text = "word " * 3000
s, h, doc, out = chat({"messages": [{"role": "user", "content": long_text}], "stream": True})
check(s == 400 and error_of(doc).get("code") == "context_length_exceeded",
      "a stream failing before its first token: 400 with a JSON error (got %s %r)" % (s, out[:200]))
check(h.get("content-type", "").startswith("application/json"),
      "... as application/json (%s)" % h.get("content-type"))
# A message that cannot fit is refused from its length, before it is
# encoded ("at least N tokens"; encoded, the refusal said how many exactly
# and a body at the cap took seconds): one long message, streamed or not,
# many short ones, multi-byte text, and a completions prompt.
big = "a" * 1000000
many = [{"role": "user", "content": "a"}] * 30000
for label, path, body, param in [
        ("a 1 MB message", "/v1/chat/completions",
         {"messages": [{"role": "user", "content": big}]}, "messages"),
        ("a 1 MB message, streamed", "/v1/chat/completions",
         {"messages": [{"role": "user", "content": big}], "stream": True}, "messages"),
        ("30,000 messages", "/v1/chat/completions", {"messages": many}, "messages"),
        ("900 KB of CJK", "/v1/chat/completions",
         {"messages": [{"role": "user", "content": "\u4e2d" * 300000}]}, "messages"),
        ("a 1 MB prompt", "/v1/completions", {"prompt": big}, "prompt")]:
    data = json.dumps(dict(body, max_tokens=2), ensure_ascii=False).encode()
    s, _, doc, out = srv.post(path, data)
    e = error_of(doc)
    check(s == 400 and e.get("code") == "context_length_exceeded" and e.get("param") == param
          and "at least" in e.get("message", ""),
          "%s: 400 context_length_exceeded from its length (got %s %r)" % (label, s, out[:300]))
s, _, out = srv.request("GET", "/v1/models/tiny")
doc = json.loads(out) if s == 200 else {}
check(s == 200 and doc.get("id") == "tiny" and doc.get("object") == "model",
      "GET /v1/models/tiny (got %s %r)" % (s, out[:200]))
s, _, out = srv.request("GET", "/v1/models/other")
check(s == 404 and b"model_not_found" in out, "GET /v1/models/other 404 (got %s)" % s)
s, _, out = srv.request("GET", "/v1/models")
doc = json.loads(out)
now = time.time()
check(abs(doc["data"][0]["created"] - now) < 10 * 365 * 86400 and doc["data"][0]["created"] > 0,
      "/v1/models created is a time (%s)" % doc["data"][0]["created"])
s, _, doc, _ = chat(path="/chat/completions")
check(s == 200 and doc["object"] == "chat.completion", "POST /chat/completions (got %s)" % s)
s, _, doc, _ = srv.post("/completions", {"prompt": "Once", "max_tokens": 2})
check(s == 200 and doc["object"] == "text_completion", "POST /completions (got %s)" % s)
s, _, out = srv.request("GET", "/models")
check(s == 200, "GET /models (got %s)" % s)
check(abs(chat()[2]["created"] - time.time()) < 60, "created is now")
body = json.dumps({"model": "tiny", "messages": USER, "max_tokens": 3, "stream": True})
st, head, out, _ = post_raw(port, "/v1/chat/completions", body,
                            "Content-Type: application/json\r\n", version="1.0")
check(st == 200 and "chunked" not in head.lower(),
      "HTTP/1.0 stream: 200 without chunked encoding (%s)" % head.replace("\r\n", " | "))
check(out.rstrip().endswith(b"data: [DONE]") and out.startswith(b"data: {"),
      "HTTP/1.0 stream: the events as they are (%r)" % out[-60:])
st, head, out, _ = post_raw(port, "/v1/chat/completions", body,
                            "Content-Type: application/json\r\n", version="1.0", host="")
check(st == 200, "HTTP/1.0 without Host: 200 (got %s)" % st)

for bad, param in [({"seed": 1.5}, "seed"), ({"seed": -1}, "seed"),
                   ({"max_tokens": 1.5}, "max_tokens"),
                   ({"max_tokens": 2 ** 63}, "max_tokens"),
                   ({"max_tokens": None, "max_completion_tokens": 0.5}, "max_completion_tokens"),
                   ({"stream_options": "x"}, "stream_options"),
                   ({"stream_options": {"include_usage": "yes"}}, "stream_options"),
                   ({"top_k": 2.5}, "top_k"),
                   ({"n": 1.5}, "n"),
                   ({"messages": [{"role": "user", "content": "a\u0000b"}]}, "messages"),
                   ({"messages": [{"role": "user"}]}, "messages"),
                   ({"messages": [{"role": "user", "content": None}]}, "messages"),
                   ({"messages": [{"role": "user", "content": [{"type": "text",
                                                                "text": "a\u0000"}]}]},
                    "messages"),
                   # Not strings where strings go: NULL reached strcmp/strstr
                   # and took the server down.
                   ({"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
                    "messages"),
                   ({"messages": [{"role": "user", "content": [{"type": 5, "text": "a"}]}]},
                    "messages"),
                   ({"messages": [{"role": "user", "content": [{"type": "text", "text": {}}]}]},
                    "messages"),
                   ({"messages": [{"role": 5, "content": "a"}]}, "messages"),
                   ({"messages": [{"role": [], "content": "a"}]}, "messages")]:
    s, _, doc, out = chat(bad)
    check(s == 400 and error_of(doc).get("param") == param,
          "%s: 400 naming %s (got %s %r)" % (json.dumps(bad), param, s, out[:200]))
s, _, doc, out = srv.post("/v1/completions", {"prompt": "a\u0000b", "max_tokens": 2})
check(s == 400 and error_of(doc).get("param") == "prompt",
      "completions: a NUL in the prompt 400 naming prompt (got %s %r)" % (s, out[:200]))
# Escapes JSON does not have: json-glib takes C's octal and hex escapes and
# makes bytes of them that are no UTF-8 (a prompt, or the "model" echoed in
# the answer, then carried them).
for esc in ["a\\666b", "\\x41", "\\q", "\\0"]:
    for member in ["content", "model"]:
        body = ('{"model": "%s", "max_tokens": 2, "messages": [{"role": "user", "content": "%s"}]}' %
                (esc if member == "model" else "tiny", esc if member == "content" else "hi"))
        st, _, resp, _ = post_raw(port, "/v1/chat/completions", body,
                                  "Content-Type: application/json\r\n")
        check(st == 400 and b"escape" in resp,
              "%s %r: 400 naming the escape (got %s %r)" % (member, esc, st, resp[:160]))
st, _, resp, _ = post_raw(port, "/v1/chat/completions",
                          '{"model": "tiny", "max_tokens": 2, "messages": [{"role": "user", '
                          '"content": "\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9"}]}',
                          "Content-Type: application/json\r\n")
check(st == 200, "every JSON escape is fine (got %s %r)" % (st, resp[:160]))
# What else only json-glib reads (tn_json_check): bytes that are no UTF-8
# and a lone surrogate, each 400 invalid_json saying where. A repeated key
# is allowed (a tool's schema may have one: test-tooldefs.py).
for body, words in [
        (b'{"model": "tiny", "max_tokens": 2, "messages": [{"role": "user", "content": "a\xff"}]}',
         [b'line 1, column 79', b'invalid UTF-8 byte 0xFF']),
        (b'{"model": "tiny", "max_tokens": 2, "messages": [{"role": "user", "content": "\\udc00"}]}',
         [b'lone low surrogate']),
        (b'{"model": "tiny", "max_tokens": 2,\n "messages": [{"role": "user", "content": "\\x41"}]}',
         [b'line 2, column 44', b'invalid escape']),
        (b'{"model": "tiny", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}],}',
         [b'line 1, column 84', b'expected a string key'])]:
    st, _, resp, _ = post_raw(port, "/v1/chat/completions", body,
                              "Content-Type: application/json\r\n")
    check(st == 400 and b'"invalid_json"' in resp and all(w in resp for w in words),
          "%r: 400 invalid_json saying %r (got %s %r)" % (body[:60], words, st, resp[:240]))
s, _, doc, out = srv.post("/v1/completions", {"prompt": "a", "suffix": 5, "max_tokens": 2})
check(s == 400 and error_of(doc).get("param") == "suffix",
      "completions: a suffix that is a number 400 naming suffix (got %s %r)" % (s, out[:200]))
s, _, doc, _ = chat({"seed": 12345678901})
check(s == 200, "a large whole seed is fine (got %s)" % s)
s, _, doc, _ = chat({"seed": 2 ** 63 - 1})
check(s == 200, "seed 2^63 - 1, the largest, is fine (got %s: %s)" % (s, doc))
# 1e400 is a number to the client; what is wrong is that it is beyond a
# double: "seed must be a number" sent its sender looking for a typo.
for member, where in (("seed", ""), ("temperature", ""), ("max_tokens", ""),
                      ("draft_max", "tern")):
    text = ('{"model": "tiny", "messages": [{"role": "user", "content": "hi"}], %s}' %
            ('"tern": {"%s": 1e400}' % member if where else '"%s": 1e400' % member))
    st, _, resp, _ = post_raw(port, "/v1/chat/completions", text,
                              "Content-Type: application/json\r\n")
    want = (where + "." if where else "") + member
    check(st == 400 and ('"param":"%s"' % (where or member)).encode() in resp and
          b"finite" in resp and want.encode() in resp,
          "%s 1e400: 400 saying it must be finite (got %s %r)" % (want, st, resp[:240]))
# Text that holds the engine's image marker, typed by a user, is text: on a
# server without images it was a 500 ("this model takes no images"),
# single-turn and in a conversation.
for msgs in [[{"role": "user", "content": "What does <__image__> mean in Tern?"}],
             [{"role": "user", "content": "hi"},
              {"role": "assistant", "content": "Say <__image__> twice: <__image__>"},
              {"role": "user", "content": "and <__image__>?"}]]:
    s, _, doc, _ = chat({"messages": msgs})
    check(s == 200, "a typed <__image__> in %d message(s) is text (got %s: %s)" %
          (len(msgs), s, doc))
s, _, doc, _ = chat({"seed": -1})
check(s == 400 and error_of(doc).get("param") == "seed", "seed -1: 400 (got %s)" % s)
# Seeds above 2^53 are read whole: through a double, neighbours were one seed.
answers = [chat({"seed": 2 ** 53 + k, "temperature": 2.0, "max_tokens": 24})[2]
           ["choices"][0]["message"]["content"] for k in (0, 1, 0)]
check(answers[0] == answers[2] and answers[0] != answers[1],
      "seeds 2^53 and 2^53 + 1 give different answers, each its own again: %r" % answers)
s, _, doc, _ = chat({"messages": [{"role": "assistant"}, {"role": "user", "content": "x"}]})
check(s == 200, "an assistant message without content is fine (got %s)" % s)
first_id = chat()[2]["id"]
rc = srv.stop()
check(rc == 0, "main server stops cleanly (status %s)" % rc)
errs = srv.stderr()
check("ERROR" not in errs and "CRITICAL" not in errs and "WARNING" not in errs and
      "AddressSanitizer" not in errs,
      "no errors on stderr: %s" % errs[-2000:])

# ------------------------------------------------------------ kept-alive framing
# Every request on a connection has its framing checked before libsoup reads
# it, not only the first: a later one went to libsoup 3.2 unchecked, whose
# 501 for Transfer-Encoding: gzip (and 400 for "Content-Length: 5x") leaked
# the request's path. Each case follows a good request on the same
# connection; its path has a length of its own, so that a leak found by
# LeakSanitizer at the stop names the case (a path of n bytes leaks n + 1).
keep = serverlib.Server(tmp, "keep", model, ["--request-timeout", "3"])
kport = keep.port
GOOD_GET = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def answers(data):
    """The answers in data, in order: [(status, body bytes)]."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ", 2)[1])
        except (IndexError, ValueError):
            break
        fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        if fields.get("content-length", "").isdigit():
            n = int(fields["content-length"])
            body, data = rest[:n], rest[n:]
        elif "chunked" in fields.get("transfer-encoding", ""):
            body = b""
            while True:
                size_line, _, rest = rest.partition(b"\r\n")
                size = int(size_line.split(b";")[0] or b"0", 16)
                if size == 0:
                    data = rest.partition(b"\r\n")[2]
                    break
                body, rest = body + rest[:size], rest[size + 2:]
        else:
            body, data = rest, b""
        out.append((status, body))
    return out


def on_kept_alive(first, then, timeout=10):
    """first on a fresh connection, its answer read whole, then `then` (None:
    nothing) on the same connection; everything read until the server
    closes it or nothing comes for a second. ([(status, body)], closed)."""
    sk = socket.create_connection(("127.0.0.1", kport), timeout=timeout)
    got = b""
    closed = False
    try:
        sk.sendall(first)
        while not answer_complete(got):
            b = sk.recv(65536)
            if not b:
                closed = True
                break
            got += b
        if then is not None and not closed:
            sk.sendall(then)
        sk.settimeout(1.5)
        while not closed:
            b = sk.recv(65536)
            if not b:
                closed = True
                break
            got += b
    except socket.timeout:
        pass
    except OSError as e:
        got += ("<%s>" % e).encode()
    sk.close()
    return answers(got), closed


def bad_request(path, fields, body=b""):
    return (b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\n" + fields + b"\r\n" + body)


good_b = good.encode()
chunked_good = b"%x\r\n%s\r\n0\r\n\r\n" % (len(good_b), good_b)
KEEP_CASES = [
    # (name, fields, body, status, what the error names)
    ("Transfer-Encoding: gzip", b"Transfer-Encoding: gzip\r\n", chunked_good, 501,
     b"Transfer-Encoding"),
    ("Transfer-Encoding: chunked, chunked", b"Transfer-Encoding: chunked, chunked\r\n",
     chunked_good, 501, b"Transfer-Encoding"),
    ("two Transfer-Encoding lines",
     b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", chunked_good, 400,
     b"more than one Transfer-Encoding"),
    ("a folded Transfer-Encoding (obs-fold)", b"Transfer-Encoding: chunked\r\n , gzip\r\n",
     chunked_good, 400, b"obs-fold"),
    ("Content-Length with Transfer-Encoding",
     b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % len(chunked_good), chunked_good,
     400, b"both Content-Length and Transfer-Encoding"),
    ("Content-Length: 5x", b"Content-Length: 5x\r\n", good_b, 400, b"not a byte count"),
    ("two Content-Lengths", b"Content-Length: %d\r\nContent-Length: 3\r\n" % len(good_b),
     good_b, 400, b"more than one Content-Length"),
    ("a NUL in a header", b"X-A: a\x00b\r\nContent-Length: %d\r\n" % len(good_b), good_b, 400,
     b"NUL"),
    ("headers over 64 KiB", b"X-Big: " + b"a" * 70000 + b"\r\n", b"", 431, b"65536"),
    # The body's chunks are framed too: what libsoup would read otherwise.
    ("a chunk size with 0x", b"Transfer-Encoding: chunked\r\n",
     b"0x%x\r\n%s\r\n0\r\n\r\n" % (len(good_b), good_b), 400, b"chunk"),
    ("a chunk longer than its size", b"Transfer-Encoding: chunked\r\n",
     b"%x\r\n%s\r\n0\r\n\r\n" % (len(good_b) - 1, good_b), 400, b"chunk"),
    ("trailer fields", b"Transfer-Encoding: chunked\r\n",
     b"%x\r\n%s\r\n0\r\nX-Trailer: 1\r\n\r\n" % (len(good_b), good_b), 400, b"trailer"),
]
# A chunk size with leading zeros is a hex number as any (RFC 9112; libsoup's
# strtoul reads it): more than 15 digits of them were refused as a size
# over 15 hex digits, on the first request and on later ones.
for first in (True, False):
    zeros = bad_request(b"/v1/chat/completions", b"Transfer-Encoding: chunked\r\n",
                        b"%020x\r\n%s\r\n00000000000000000000\r\n\r\n" % (len(good_b), good_b))
    got, closed = (on_kept_alive(zeros, GOOD_GET) if first else on_kept_alive(GOOD_GET, zeros))
    statuses = [s for s, _ in got]
    check(statuses == [200, 200] and not closed,
          "a chunk size with 20 digits, leading zeros (%s request): 200, the connection kept "
          "(got %s %r, %s)" % ("first" if first else "later", statuses,
                               got[-1][1][:120] if got else b"", "closed" if closed else "open"))
leak_names = {}  # leaked bytes: the case
for i, (name, fields, body, want, names) in enumerate(KEEP_CASES):
    path = b"/v1/chat/completions?" + b"k" * (1000 + 2 ** i)  # sums of them differ
    leak_names[len(path) + 1] = name
    got, closed = on_kept_alive(GOOD_GET, bad_request(path, fields, body))
    statuses = [s for s, _ in got]
    check(statuses == [200, want] and names in got[-1][1] and b'"error"' in got[-1][1] and
          closed,
          "%s after a good request on the same connection: %d naming it, then closed "
          "(got %s %r, %s)" % (name, want, statuses, got[-1][1][:120] if got else b"",
                               "closed" if closed else "open"))
# Pipelined, in one send: a chunked body and a bad request behind it, then
# two good ones (both answered, in order, the connection kept).
got, closed = on_kept_alive(
    bad_request(b"/v1/chat/completions", b"Transfer-Encoding: chunked\r\n", chunked_good) +
    bad_request(b"/v1/chat/completions?" + b"p" * (1000 + 2 ** len(KEEP_CASES)),
                b"Transfer-Encoding: gzip\r\n", chunked_good), None)
leak_names[len(b"/v1/chat/completions?") + 1000 + 2 ** len(KEEP_CASES) + 1] = "pipelined gzip"
statuses = [s for s, _ in got]
check(statuses == [200, 501] and b"Transfer-Encoding" in got[-1][1] and closed,
      "pipelined: a chunked body, then Transfer-Encoding: gzip: 200, 501, closed (got %s, %s)" %
      (statuses, "closed" if closed else "open"))
got, closed = on_kept_alive(GOOD_GET + b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                            b"\r\n" + GOOD_GET)
statuses = [s for s, _ in got]
check(statuses == [200, 200, 200] and b'"object":"list"' in got[0][1] and
      b'"status":"ok"' in got[1][1] and not closed,
      "pipelined: two good requests in one send both answered in order, and one more on the "
      "same connection (got %s, %s)" % (statuses, "closed" if closed else "open"))
# Pieces of one request, a byte at a time, after a good one: still served.
sk = socket.create_connection(("127.0.0.1", kport), timeout=10)
sk.sendall(GOOD_GET)
slow_req = bad_request(b"/v1/chat/completions", b"Transfer-Encoding: chunked\r\n", chunked_good)
got = b""
try:
    while not answer_complete(got):
        got += sk.recv(65536)
    got = b""
    for k in range(0, len(slow_req), 7):
        sk.sendall(slow_req[k:k + 7])
        time.sleep(0.001)
    while not answer_complete(got):
        b = sk.recv(65536)
        if not b:
            break
        got += b
except OSError:
    pass
sk.close()
check([s for s, _ in answers(got)] == [200],
      "a chunked request in 7-byte pieces on a kept-alive connection: 200 (got %r)" % got[:100])
# A later request's head that never ends: the connection is closed after
# the request timeout (3 s), as for a first request (libsoup, which starts
# a request's clock, does not see a head before it is whole).
sk = socket.create_connection(("127.0.0.1", kport), timeout=20)
t0 = time.time()
got = b""
try:
    sk.sendall(GOOD_GET)
    while not answer_complete(got):
        got += sk.recv(65536)
    sk.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    while sk.recv(65536):
        pass
except OSError:
    pass
sk.close()
dt = time.time() - t0
check(dt < 10, "a later head left unfinished: closed after the timeout (%.1f s)" % dt)
check(keep.request("GET", "/health")[0] == 200, "the server answers after all that")
rc = keep.stop()
errs = keep.stderr()
leaked = []
for size, count in re.findall(r"Direct leak of (\d+) byte\(s\) in (\d+) object", errs):
    # LeakSanitizer sums the leaks of one place: the cases whose paths add up
    names = [c for c in itertools.combinations(leak_names, int(count)) if sum(c) == int(size)]
    leaked += [leak_names[n] for n in names[0]] if len(names) == 1 else ["%s bytes" % size]
check(rc == 0 and "AddressSanitizer" not in errs,
      "kept-alive framing: no leaks at the stop (status %s; leaked on: %s)" % (rc, leaked))

# Ids unique across restarts.
srv2 = serverlib.Server(tmp, "again", model)
second_id = srv2.post("/v1/chat/completions", {"messages": USER, "max_tokens": 2})[2]["id"]
check(first_id != second_id, "ids differ across restarts (%s, %s)" % (first_id, second_id))
srv2.stop()

# ------------------------------------------------------------ start-up options
for key in [" ", "\t \n"]:
    r = serverlib.serve_refused(model, ["--api-key", key])
    check(r.returncode != 0 and "api-key" in r.stderr,
          "--api-key %r refused at start (%s: %s)" % (key, r.returncode, r.stderr.strip()))

SYSTEM = [{"role": "system", "content": "You are a pinned system prompt."},
          {"role": "user", "content": "hi"}]


def pin_files(name, args):
    s = serverlib.Server(tmp, name, model, args)
    st, _, doc, out = s.post("/v1/chat/completions", {"messages": SYSTEM, "max_tokens": 2})
    s.stop()
    d = os.path.join(tmp, "cache", "tern", "pins")
    files = [f for f in os.listdir(d) if f.endswith(".pin")] if os.path.isdir(d) else []
    return st, files


st, files = pin_files("nopin", ["--no-pin-cache"])
check(st == 200 and files == [], "--no-pin-cache: answered, no snapshot written (%s, %s)" % (st, files))
st, files = pin_files("cap", ["--pin-cache-max", "1"])
check(st == 200 and files == [], "--pin-cache-max 1 (KiB): no snapshot written (%s, %s)" % (st, files))
st, files = pin_files("pin", [])
check(st == 200 and len(files) == 1, "by default a snapshot is written (%s, %s)" % (st, files))

# A FIFO where the snapshot is: the server must not block on it.
if files:
    path = os.path.join(tmp, "cache", "tern", "pins", files[0])
    os.unlink(path)
    os.mkfifo(path)
    s = serverlib.Server(tmp, "fifo", model)
    try:
        st, _, doc, out = s.post("/v1/chat/completions", {"messages": SYSTEM, "max_tokens": 2},
                                 timeout=20)
    except (socket.timeout, TimeoutError, OSError) as e:
        st, out = None, str(e).encode()
    check(st == 200, "a FIFO at the snapshot's path: answered (got %s %r)" % (st, out[:200]))
    if s.proc.poll() is None:
        # Unblock an open() stuck on the FIFO so that the server can stop.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass
    s.stop()

checks.finish()
