#!/usr/bin/env python3
"""RSS and PSS of one and two processes on the same model, with the repacked
weights private (TERN_REPACK_CACHE=0) and from the repack cache (issue 21,
docs/PERFORMANCE.md "Repacked weights shared between processes").

usage: tools/repack-rss.py HOLD_BINARY CACHE_DIR MODEL.gguf...
HOLD_BINARY: tools/cputime/hold.c built against libtern (tools/cputime/README.md).
Prints one markdown table row per model, mode and process count (kB)."""
import os
import subprocess
import sys

FIELDS = ['Rss', 'Pss', 'Shared_Clean', 'Private_Clean', 'Private_Dirty', 'Anonymous', 'AnonHugePages', 'FilePmdMapped']


def rollup(pid):
    out = {}
    with open(f'/proc/{pid}/smaps_rollup') as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(':') and parts[1].isdigit():
                out[parts[0][:-1]] = int(parts[1])
    return out


def start(hold, model, env):
    p = subprocess.Popen([hold, model], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    line = p.stdout.readline().split()
    if not line or line[0] != 'READY':
        raise SystemExit(f'{hold} {model}: no READY line')
    return p, line[2], float(line[3])


def main():
    hold, cache = sys.argv[1], sys.argv[2]
    print('| model | repacked weights | processes | source | load s | ' + ' | '.join(FIELDS) + ' |')
    print('|---|---|---|---|---|' + '---|' * len(FIELDS))
    for model in sys.argv[3:]:
        for mode, value in (('private', '0'), ('cache', cache)):
            env = dict(os.environ, TERN_REPACK_CACHE=value)
            if mode == 'cache':  # make sure the file exists: the first load writes it
                p, _, _ = start(hold, model, env)
                p.stdin.close()
                p.wait()
            procs = []
            for n in (1, 2):
                procs.append(start(hold, model, env))
                for i, (p, src, load) in enumerate(procs):
                    r = rollup(p.pid)
                    print(f'| {os.path.basename(model)} | {mode} | {n} (#{i + 1}) | {src} | {load:.2f} | '
                          + ' | '.join(str(r.get(k, 0)) for k in FIELDS) + ' |', flush=True)
            for p, _, _ in procs:
                p.stdin.close()
                p.wait()


if __name__ == '__main__':
    main()
