#!/usr/bin/env python3
"""A misbehaving HTTP file server for the model manager's tests.

Usage: http-server.py DIR
Serves the files in DIR on 127.0.0.1 at an ephemeral port and prints the port
on the first line of stdout. The first path component picks a behaviour:

  /ok/NAME        Range and If-Range honoured, strong opaque ETag
  /etag/NAME      like ok, but the ETag is the file's sha256 (some servers do)
  /etagother/NAME like ok, with an ETag of 64 hex digits that is not the sha256
  /norange/NAME   ignores Range: always 200 with the whole file
  /drop/NAME      the first request for this path sends half the body, then
                  hangs up (Content-Length promised the whole); later ones ok
  /dropevery/NAME every request sends at most a third of the file, then hangs up
  /wrong/NAME     the right length, one byte flipped in the middle
  /404/NAME       404;  /500/NAME  500 every time;  /500once/NAME  500 once, then ok
  /stall/NAME     headers, then silence (time-outs)
  /slow/NAME      the body in 8 KiB pieces every 20 ms (cancel, restart)
  /trickle/NAME   the body 16 bytes every 100 ms (160 B/s), never a pause as
                  long as a time-out: below a minimum rate
  /gate/NAME      half the body, then nothing more until GET /_open (a
                  download held in the middle for as long as a test needs)
  /hf/NAME        302 to /ok/NAME with X-Linked-Etag / X-Linked-Size, as
                  Hugging Face answers for large files
  /hfwrong/NAME   302 to /wrong/NAME with the right X-Linked-Etag
  /hflie/NAME     302 to /ok/NAME advertising a sha256 that is not the file's
  /badrange/NAME  without Range: half the body, then hangs up; a Range request
                  is answered 206 with a Content-Range from byte 0 (not the
                  range asked for): a resume that never gets anywhere
  /range416/NAME  without Range: half the body, then hangs up; 416 for any Range
  /416/NAME       416 every time, Range or not
  /badlength/NAME 200 with Content-Length: 99999999999999999999999 (the file follows)
  /gzip/NAME      200 with the file gzip-compressed (Content-Encoding: gzip), whatever
                  Accept-Encoding said
  /scheme/NAME    302 to file:///etc/passwd;  /nohost/NAME  302 to http:///NAME
  /loop/NAME      302 to itself
  /badreason/NAME 451 whose reason phrase holds a byte that is not UTF-8 and ESC
  /newtotal/NAME  without Range: the first request half the body, then hangs up,
                  later ones ok; a Range request is answered 206 from the byte
                  asked for, but with a total 1000 bytes larger (the file was
                  replaced by a longer one) and 1000 bytes more of body
  /reset20/NAME   the first 20 requests for this path send a pseudo-random number
                  of bytes (at least one, at most a 40th of the file) of their
                  answer (200 or 206), then reset the connection (TCP RST);
                  later ones ok

Requests in absolute form (GET http://host/MODE/NAME, as sent to a proxy) are
served the same way and logged with "proxied": true.

  GET /_log    JSON: {"requests": [...], "max_concurrent": N}
  GET /_reset  forgets the log and the per-path state
  GET /_open   lets every /gate/ response send the rest of its body

A small Hugging Face Hub, with the API's documented JSON shapes:
  GET /api/models/OWNER/REPO/revision/REV   {"sha", "siblings": [{"rfilename",
                                            "size", "lfs": {"sha256", "size"}}]}
  GET /OWNER/REPO/resolve/COMMIT/PATH       the file (served like /ok/)
  GET /api/models?search=Q&filter=gguf&sort=downloads&direction=-1&limit=N
                                            the search: a list of {"_id", "id",
                                            "modelId", "downloads", "likes",
                                            "tags", "gated", ...}, ids
                                            containing Q (any case), most
                                            downloaded first; 400 unless
                                            filter=gguf
Repositories: test/repo (quants, two projectors, a split model),
test/gated (401 without "Authorization: Bearer sekrit"), test/ambiguous (two
models of one quantization, a split model missing a part), listings only
(realistic sizes, nothing to download: HUB_SIZED) and garbage/* (200 with a
body that is not the listing: HTML, 200,000 nested brackets, wrong types, a
cut-off answer). Searches for "garbage-*" answer like a broken Hub: HTML,
100,000 nested brackets, an object, wrong types, 50 MiB (with and without
Content-Length), bytes that are not UTF-8, C's escapes, \\u0000, 500, a cut-off
list.
"""
import gzip
import hashlib
import json
import os
import random
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = None
LOCK = threading.Lock()
LOG = []
SEEN = {}           # path -> number of requests
ACTIVE = [0]
MAX_ACTIVE = [0]
GATE = threading.Event()


HUB_COMMIT = "0123456789abcdef0123456789abcdef01234567"
HUB_REPOS = {
    "test/repo": {
        "repo-Q4_K_M.gguf": "a.bin",
        "repo-Q8_0.gguf": "b.bin",
        "mmproj-repo-f32.gguf": "e.bin",
        "mmproj-repo-f16.gguf": "d.bin",
        "split/big-Q4_0-00001-of-00002.gguf": "c.bin",
        "split/big-Q4_0-00002-of-00002.gguf": "b.bin",
        "README.md": None,
    },
    "test/gated": {"gated-Q4_K_M.gguf": "a.bin"},
    "test/ambiguous": {
        "model-Q4_K_M.gguf": "a.bin",
        "model-instruct-Q4_K_M.gguf": "b.bin",
        "part-Q2_K-00001-of-00003.gguf": "a.bin",
        "part-Q2_K-00003-of-00003.gguf": "b.bin",
    },
}
# Listings with the sizes real repositories have (files not served).
GB = 1000 ** 3
HUB_SIZED = {
    "tern-test/Tiny-Chat-7B-GGUF": {
        "Tiny-Chat-7B-Q2_K.gguf": int(3.02 * GB),
        "Tiny-Chat-7B-Q4_K_M.gguf": int(4.68 * GB),
        "Tiny-Chat-7B-Q8_0.gguf": int(8.10 * GB),
        "Tiny-Chat-7B-F16-00001-of-00002.gguf": int(7.9 * GB),
        "Tiny-Chat-7B-F16-00002-of-00002.gguf": int(7.34 * GB),
        "mmproj-Tiny-Chat-7B-f16.gguf": int(0.62 * GB),
    },
    "tern-test/Tiny-Chat-70B-GGUF": {
        "Tiny-Chat-70B-Q4_K_M-00001-of-00002.gguf": int(21.5 * GB),
        "Tiny-Chat-70B-Q4_K_M-00002-of-00002.gguf": int(21.0 * GB),
    },
}
HUB_GATED = {"test/gated", "tern-test/Tiny-Chat-70B-GGUF"}
# What the search finds, in the documented shape (downloads as the Hub
# counts them, likes, tags, gated: false, "auto" or "manual").
HUB_SEARCH = [
    ("test/repo", 1200, 8), ("test/gated", 300, 2), ("test/ambiguous", 20, 0),
    ("tern-test/Tiny-Chat-7B-GGUF", 1523004, 412), ("tern-test/Tiny-Chat-70B-GGUF", 88231, 97),
]
# Searches that answer like a broken Hub (or a captive portal) would.
HUB_SEARCH_GARBAGE = {
    "garbage-html": "<html><body>Please log in to the Wi-Fi</body></html>",
    "garbage-deep": "[" * 100000,
    "garbage-object": json.dumps({"error": "Invalid search"}),
    "garbage-types": json.dumps([
        5, None, "x", [], {"id": 5}, {"id": "../etc/passwd"}, {"id": "a/b/c"}, {"id": "no-slash"},
        {"modelId": "ok/by-model-id", "downloads": "many", "likes": -3, "gated": 7},
        {"id": "ok/fine", "downloads": 12, "likes": 3, "gated": "auto", "tags": "not a list"},
        {"id": "ok/nested", "downloads": {"n": 1}, "likes": [1], "gated": {"x": True}}]),
    "garbage-truncated": '[{"id": "a/b", "downl',
    # What json-glib takes and JSON is not: C's escapes (bytes that need
    # not be UTF-8 in the Models panel's labels) and a NUL.
    "garbage-octal": r'[{"id": "evil/M\101\377-GGUF", "downloads": 1}]',
    "garbage-nul": r'[{"id": "evil/a\u0000b-GGUF", "downloads": 1}]',
}
HUB_TOKEN = "Bearer sekrit"
# Answers a broken or hostile Hub (or mirror) could give: 200 with a body
# that is not the documented listing.
HUB_GARBAGE = {
    "garbage/not-json": "<html>Service Unavailable</html>",
    "garbage/deep": "[" * 200000,
    "garbage/deep-member": '{"sha": "' + "1" * 40 + '", "siblings": ' + "[" * 100000,
    "garbage/array": "[1, 2, 3]",
    "garbage/types": json.dumps({"sha": 5, "siblings": "all of them"}),
    "garbage/sibling-types": json.dumps({"sha": "2" * 40, "siblings": [
        5, None, {"rfilename": 5, "size": "big"}, {"rfilename": "x-Q4_K_M.gguf", "size": -1,
                                                     "lfs": {"sha256": 7, "size": "x"}},
        {"rfilename": "y-Q4_K_M.gguf", "size": 10, "lfs": []}]}),
    "garbage/truncated": '{"sha": "' + "3" * 40 + '", "siblings": [{"rfilename": "a-Q4_K_M.gg',
    # 20000 files of one quantization, then 20000 of as many: the error
    # listed every name (a 2 MB line).
    "garbage/many": json.dumps({"sha": "5" * 40, "siblings": [
        {"rfilename": "m%d-Q4_K_M.gguf" % i, "size": 10} for i in range(20000)]}),
    "garbage/many-quants": json.dumps({"sha": "6" * 40, "siblings": [
        {"rfilename": "m-X%d.gguf" % i, "size": 10} for i in range(20000)]}),
    # Names with control characters: they reached the one-line error as
    # they were (a newline started a line of the Hub's choosing, ESC a
    # terminal sequence, U+009B is a terminal's CSI).
    "garbage/newline": json.dumps({"sha": "7" * 40, "siblings": [
        {"rfilename": "evil-Q5_K_M\nError: all is fine\u009b2J.gguf", "size": 10}]}),
    "garbage/escape": json.dumps({"sha": "8" * 40, "siblings": [
        {"rfilename": "a-Q4_K_M.gguf", "size": 10},
        {"rfilename": "b\x1b]0;pwned\x07\r\t\x7f-Q4_K_M.gguf", "size": 10}]}),
    "garbage/octal": '{"sha": "' + "4" * 40 + r'", "siblings": [{"rfilename": "x\377-Q4_K_M.gguf", '
                     r'"size": 10}]}',
}


def sha256_of(data):
    return hashlib.sha256(data).hexdigest()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "TernTestServer/1"

    def log_message(self, fmt, *args):  # keep the test output clean
        pass

    def send_plain(self, status, text, extra=None):
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def hub_api(self, parts, auth):
        # OWNER/REPO/revision/REV (the query string is already stripped)
        if len(parts) != 4 or parts[2] != "revision":
            return self.send_plain(404, "no such API path")
        repo = "/".join(parts[:2])
        rev = parts[3].split("?")[0]
        if repo in HUB_GARBAGE:
            return self.send_plain(200, HUB_GARBAGE[repo], {"Content-Type": "application/json"})
        if repo in HUB_SIZED and rev in ("main", HUB_COMMIT):
            siblings = [{"rfilename": name, "size": size, "blobId": "1" * 40,
                         "lfs": {"sha256": sha256_of(name.encode()), "size": size, "pointerSize": 134}}
                        for name, size in HUB_SIZED[repo].items()]
            siblings.append({"rfilename": "README.md", "size": 5000, "blobId": "2" * 40})
            body = json.dumps({"_id": "y", "id": repo, "sha": HUB_COMMIT, "private": False,
                               "gated": "manual" if repo in HUB_GATED else False,
                               "siblings": siblings})
            return self.send_plain(200, body, {"Content-Type": "application/json"})
        if repo not in HUB_REPOS or rev not in ("main", HUB_COMMIT):
            return self.send_plain(404, "Repository not found")
        if repo == "test/gated" and auth != HUB_TOKEN:
            return self.send_plain(401, "Access to this model is restricted")
        siblings = []
        for rfilename, fixture in HUB_REPOS[repo].items():
            if fixture is None:
                siblings.append({"rfilename": rfilename, "size": 10, "blobId": "0" * 40})
                continue
            with open(os.path.join(ROOT, fixture), "rb") as f:
                data = f.read()
            siblings.append({"rfilename": rfilename, "size": len(data), "blobId": "1" * 40,
                             "lfs": {"sha256": sha256_of(data), "size": len(data), "pointerSize": 134}})
        body = json.dumps({"_id": "x", "id": repo, "sha": HUB_COMMIT, "private": False,
                           "gated": "manual" if repo in HUB_GATED else False,
                           "siblings": siblings})
        return self.send_plain(200, body, {"Content-Type": "application/json"})

    def hub_search(self, query):
        q = urllib.parse.parse_qs(query, keep_blank_values=True)
        search = q.get("search", [""])[0]
        if search in HUB_SEARCH_GARBAGE:
            return self.send_plain(200, HUB_SEARCH_GARBAGE[search], {"Content-Type": "application/json"})
        if search == "drip":
            # An answer that never ends in time: a byte every 0.3 s (each
            # within libsoup's idle time-out), until the client hangs up.
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            try:
                for _ in range(400):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.3)
            except OSError:
                pass
            return None
        if search == "garbage-utf8":
            body = b'[{"id": "ok/\xff\xfe-GGUF", "downloads": 1}]'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True
            return None
        if search == "garbage-500":
            return self.send_plain(500, "Internal Error")
        if search in ("garbage-big", "garbage-big-unsized"):
            # 50 MiB of a well-formed list, announced or not.
            entry = b'{"id": "big/model", "downloads": 1, "likes": 1, "tags": ["gguf"]},'
            count = (50 << 20) // len(entry)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if search == "garbage-big":
                self.send_header("Content-Length", str(1 + count * len(entry) + len(b'{"id": "e/nd"}]')))
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                self.wfile.write(b"[")
                chunk = entry * 16384
                sent = 0
                while sent < count:
                    n = min(16384, count - sent)
                    self.wfile.write(chunk if n == 16384 else entry * n)
                    sent += n
                self.wfile.write(b'{"id": "e/nd"}]')
            except (BrokenPipeError, ConnectionResetError):
                pass
            return None
        if q.get("filter", [""])[0] != "gguf":
            return self.send_plain(400, "the test Hub expects filter=gguf")
        found = []
        for repo, downloads, likes in HUB_SEARCH:
            if search.lower() not in repo.lower():
                continue
            found.append({"_id": sha256_of(repo.encode())[:24], "id": repo, "modelId": repo,
                          "likes": likes, "trendingScore": 1, "private": False,
                          "downloads": downloads, "tags": ["gguf", "text-generation", "endpoints_compatible"],
                          "pipeline_tag": "text-generation", "library_name": "gguf",
                          "createdAt": "2025-06-01T00:00:00.000Z",
                          "gated": "manual" if repo in HUB_GATED else False})
        if q.get("sort", [""])[0] == "downloads":
            found.sort(key=lambda m: -m["downloads"])
        try:
            limit = int(q.get("limit", ["1000"])[0])
        except ValueError:
            return self.send_plain(400, "bad limit")
        return self.send_plain(200, json.dumps(found[:limit]), {"Content-Type": "application/json"})

    def do_GET(self):
        proxied = False
        path = self.path
        if path.startswith("http://") or path.startswith("https://"):
            proxied = True
            path = urllib.parse.urlsplit(path).path
        path = urllib.parse.unquote(path)

        if path == "/_log":
            with LOCK:
                text = json.dumps({"requests": LOG, "max_concurrent": MAX_ACTIVE[0]})
            return self.send_plain(200, text)
        if path == "/_open":
            GATE.set()
            return self.send_plain(200, "ok")
        if path == "/_reset":
            GATE.clear()
            with LOCK:
                LOG.clear()
                SEEN.clear()
                MAX_ACTIVE[0] = 0
            return self.send_plain(200, "ok")

        auth = self.headers.get("Authorization")
        split = urllib.parse.urlsplit(self.path)
        if split.path == "/api/models":
            with LOCK:
                LOG.append({"path": split.path, "mode": "search", "query": split.query,
                            "authorization": auth, "status": None})
            return self.hub_search(split.query)
        hub = path.strip("/").split("/")
        if path.startswith("/api/models/"):
            with LOCK:
                LOG.append({"path": path, "mode": "api", "authorization": auth, "status": None})
            return self.hub_api(hub[2:], auth)
        if len(hub) >= 5 and hub[2] == "resolve" and "/".join(hub[:2]) in HUB_REPOS:
            repo = "/".join(hub[:2])
            fixture = HUB_REPOS[repo].get("/".join(hub[4:]))
            if repo == "test/gated" and auth != HUB_TOKEN:
                return self.send_plain(401, "gated")
            if hub[3] != HUB_COMMIT or fixture is None:
                return self.send_plain(404, "no such file at that commit")
            path = "/ok/" + fixture

        parts = path.strip("/").split("/", 1)
        if len(parts) != 2:
            return self.send_plain(404, "no such path")
        mode, name = parts
        with LOCK:
            count = SEEN.get(path, 0)
            SEEN[path] = count + 1
            entry = {"path": path, "mode": mode, "name": name, "proxied": proxied,
                     "range": self.headers.get("Range"), "if_range": self.headers.get("If-Range"),
                     "status": None}
            LOG.append(entry)

        file_path = os.path.join(ROOT, os.path.basename(name))
        if mode == "404" or not os.path.isfile(file_path):
            entry["status"] = 404
            return self.send_plain(404, "not found")
        if mode == "badreason":
            entry["status"] = 451
            body = b"blocked"
            # send_response writes the phrase as latin-1: these are its bytes.
            self.send_response(451, "\xff\x1b[31mBlocked")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True
            return None
        if mode == "500" or (mode == "500once" and count == 0):
            entry["status"] = 500
            return self.send_plain(500, "server error")
        with open(file_path, "rb") as f:
            data = f.read()
        sha = sha256_of(data)

        if mode == "gzip":
            packed = gzip.compress(data)
            entry["status"] = 200
            self.send_response(200)
            self.send_header("Content-Length", str(len(packed)))
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                self.wfile.write(packed)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return None
        if mode == "badlength":
            entry["status"] = 200
            self.send_response(200)
            self.send_header("Content-Length", "99999999999999999999999")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return None
        if mode == "endless":
            # No length, no end: the file's bytes again and again until the
            # client hangs up (a hostile or broken server).
            entry["status"] = 200
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            block = (data * (1 + (1 << 20) // max(1, len(data))))[: 1 << 20]
            try:
                while True:
                    self.wfile.write(block)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return None
        if mode == "loop":
            entry["status"] = 302
            return self.send_plain(302, "redirect", {"Location": "/loop/" + name})
        if mode in ("scheme", "nohost"):
            entry["status"] = 302
            return self.send_plain(302, "redirect", {
                "Location": "file:///etc/passwd" if mode == "scheme" else "http:///" + name})
        if mode == "416" or (mode == "range416" and self.headers.get("Range")):
            entry["status"] = 416
            return self.send_plain(416, "range not satisfiable", {"Content-Range": "bytes */%d" % len(data)})

        if mode in ("hf", "hfwrong", "hflie"):
            target = {"hf": "ok", "hfwrong": "wrong", "hflie": "ok"}[mode]
            advertised = sha if mode != "hflie" else sha256_of(data + b"lie")
            entry["status"] = 302
            return self.send_plain(302, "redirect", {
                "Location": "/%s/%s" % (target, name),
                "X-Linked-Etag": '"%s"' % advertised,
                "X-Linked-Size": str(len(data)),
                "ETag": '"git-object-id"',
            })

        if mode == "wrong":
            data = bytearray(data)
            data[len(data) // 2] ^= 0x5A
            data = bytes(data)
        if mode == "etag":
            etag = '"%s"' % sha
        elif mode == "etagother":
            etag = '"%s"' % sha256_of(data + b"other")
        else:
            etag = '"v1-%s"' % sha[:16]

        start = 0
        status = 200
        rng = self.headers.get("Range")
        if mode == "badrange" and rng:
            # 206 with the first bytes of the file, whatever was asked for.
            entry["status"] = 206
            self.send_response(206)
            self.send_header("Content-Length", str(len(data) // 2))
            self.send_header("Content-Range", "bytes 0-%d/%d" % (len(data) // 2 - 1, len(data)))
            self.send_header("ETag", etag)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                self.wfile.write(data[: len(data) // 2])
            except (BrokenPipeError, ConnectionResetError):
                pass
            return None
        if mode == "newtotal" and rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            longer = data + b"\0" * 1000
            entry["status"] = 206
            self.send_response(206)
            self.send_header("Content-Length", str(len(longer) - start))
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(longer) - 1, len(longer)))
            self.send_header("ETag", etag)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                self.wfile.write(longer[start:])
            except (BrokenPipeError, ConnectionResetError):
                pass
            return None
        if_range = self.headers.get("If-Range")
        if rng and mode != "norange" and (if_range is None or if_range == etag):
            spec = rng.strip()
            if spec.startswith("bytes=") and spec.endswith("-") and spec[6:-1].isdigit():
                start = int(spec[6:-1])
                if start >= len(data):
                    entry["status"] = 416
                    return self.send_plain(416, "range not satisfiable",
                                           {"Content-Range": "bytes */%d" % len(data)})
                status = 206
        body = data[start:]
        entry["status"] = status

        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "none" if mode == "norange" else "bytes")
        self.send_header("Connection", "close")
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        self.end_headers()
        self.close_connection = True

        with LOCK:
            ACTIVE[0] += 1
            MAX_ACTIVE[0] = max(MAX_ACTIVE[0], ACTIVE[0])
        try:
            if mode == "drop" and count == 0:
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                return
            if mode in ("badrange", "range416") or (mode == "newtotal" and count == 0):
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                return
            if mode == "dropevery":
                self.wfile.write(body[: max(1, len(data) // 3)])
                self.wfile.flush()
                return
            if mode == "reset20" and count < 20 and len(body) > 1:
                # The same cut points every run: a failure can be replayed.
                # At most a 40th of the file each: twenty never reach the end.
                cut = random.Random("%s %d" % (path, count)).randint(
                    1, max(1, min(len(body) - 1, len(data) // 40)))
                self.wfile.write(body[:cut])
                self.wfile.flush()
                # SO_LINGER with a zero time-out: close() sends RST, not FIN.
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.connection.close()
                return
            if mode == "stall":
                time.sleep(20)
                return
            if mode == "gate":
                half = len(body) // 2
                self.wfile.write(body[:half])
                self.wfile.flush()
                if not GATE.wait(60):
                    return
                self.wfile.write(body[half:])
                self.wfile.flush()
                return
            if mode == "trickle":
                for i in range(0, len(body), 16):
                    self.wfile.write(body[i:i + 16])
                    self.wfile.flush()
                    time.sleep(0.1)
                return
            if mode == "slow":
                for i in range(0, len(body), 8192):
                    self.wfile.write(body[i:i + 8192])
                    self.wfile.flush()
                    time.sleep(0.02)
                return
            # Several writes, so that concurrent downloads really overlap.
            for i in range(0, len(body), 65536):
                self.wfile.write(body[i:i + 65536])
                self.wfile.flush()
                time.sleep(0.005)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with LOCK:
                ACTIVE[0] -= 1


def main():
    global ROOT
    if len(sys.argv) != 2:
        sys.stderr.write("usage: http-server.py DIR\n")
        return 2
    ROOT = sys.argv[1]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    sys.stdout.write("%d\n" % server.server_address[1])
    sys.stdout.flush()
    # The test closes our stdin when it is done with us (or dies).
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
