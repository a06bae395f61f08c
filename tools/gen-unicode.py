#!/usr/bin/env python3
"""Generates engine/unicode-data.h: the Unicode tables libtern's tokenizers need.

Usage: tools/gen-unicode.py [OUTPUT]   (default: engine/unicode-data.h)

Everything comes from Python's `unicodedata` module, so the Unicode version
is the one of the Python that runs this (written into the header). The
build never runs this script: its output is committed, and regenerating it
is a deliberate change (review the diff, run the unicode test).

What is generated:
  * a two-stage table: code point -> record index -> {flags, canonical
    combining class}. Flags are the general-category classes the
    pre-tokenizer split expressions use (\\p{L}, \\p{N}, \\p{P}, \\p{S},
    \\p{M}, \\s = White_Space), plus the NFC quick-check value and whether
    the code point has a canonical decomposition;
  * full (recursive) canonical decompositions, Hangul excluded (algorithmic);
  * primary composites as (first, second) -> composite, composition
    exclusions and non-starter decompositions removed;
  * simple case folding (what (?i) matches use);
  * under TN_UNICODE_TEST_SAMPLES: expectations computed directly from
    unicodedata, NOT from the compressed tables, for a sample of code points
    and for NFC of a set of strings; tests/engine/test-unicode.c checks the
    C lookups against them, so a wrong table fails the test.
"""

import random
import sys
import unicodedata

MAX_CP = 0x110000

# Keep these equal to the TN_UC_* values in engine/tn-unicode.h; the
# generated header asserts that they are.
FLAG_BITS = [
    ("TN_UC_LETTER", 1 << 0),
    ("TN_UC_NUMBER", 1 << 1),
    ("TN_UC_WHITESPACE", 1 << 2),
    ("TN_UC_PUNCT", 1 << 3),
    ("TN_UC_SYMBOL", 1 << 4),
    ("TN_UC_MARK", 1 << 5),
    ("TN_UC_CONTROL", 1 << 6),
    ("TN_UC_SEPARATOR", 1 << 7),
    ("TN_UC_FORMAT", 1 << 8),
    ("TN_UC_OTHER", 1 << 9),
    ("TN_UC_UPPER", 1 << 10),
    ("TN_UC_LOWER", 1 << 11),
    ("TN_UC_NFC_NO", 1 << 12),
    ("TN_UC_NFC_MAYBE", 1 << 13),
    ("TN_UC_DECOMPOSES", 1 << 14),
]
F = dict(FLAG_BITS)

# PropList.txt White_Space. unicodedata does not expose the property; the
# set has been stable since Unicode 6.3 (U+180E left it then). It is exactly
# Oniguruma's Unicode \s (9-D, 85, Zs, Zl, Zp) and the Rust regex crate's
# \s; checked against the general categories below.
WHITE_SPACE = set(range(0x09, 0x0E)) | {
    0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
} | set(range(0x2000, 0x200B))

S_BASE, L_BASE, V_BASE, T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
L_COUNT, V_COUNT, T_COUNT = 19, 21, 28
N_COUNT = V_COUNT * T_COUNT
S_COUNT = L_COUNT * N_COUNT


def is_hangul_syllable(cp):
    return S_BASE <= cp < S_BASE + S_COUNT


def canonical_decomposition(cp):
    """The single-level canonical mapping, or None (compatibility ones ignored)."""
    d = unicodedata.decomposition(chr(cp))
    if not d or d.startswith("<"):
        return None
    return [int(x, 16) for x in d.split()]


def full_decomposition(cp):
    d = canonical_decomposition(cp)
    if d is None:
        return [cp]
    out = []
    for x in d:
        out.extend(full_decomposition(x))
    return out


def simple_fold(cp):
    """Simple case folding (CaseFolding.txt statuses C and S)."""
    c = chr(cp)
    f = c.casefold()
    if len(f) == 1:
        return ord(f)
    # Full folding expands (status F); where a simple one exists (S) it is
    # the lowercase mapping (U+1E9E -> U+00DF, U+1F88 -> U+1F80, ...).
    lo = c.lower()
    if len(lo) == 1:
        return ord(lo)
    return cp


def category_flags(cp):
    c = chr(cp)
    gc = unicodedata.category(c)
    flags = 0
    major = gc[0]
    if major == "L":
        flags |= F["TN_UC_LETTER"]
    elif major == "N":
        flags |= F["TN_UC_NUMBER"]
    elif major == "P":
        flags |= F["TN_UC_PUNCT"]
    elif major == "S":
        flags |= F["TN_UC_SYMBOL"]
    elif major == "M":
        flags |= F["TN_UC_MARK"]
    elif major == "Z":
        flags |= F["TN_UC_SEPARATOR"]
    elif gc == "Cc":
        flags |= F["TN_UC_CONTROL"]
    elif gc == "Cf":
        flags |= F["TN_UC_FORMAT"]
    else:  # Co, Cs, Cn
        flags |= F["TN_UC_OTHER"]
    if gc == "Lu" or gc == "Lt":
        flags |= F["TN_UC_UPPER"]
    if gc == "Ll":
        flags |= F["TN_UC_LOWER"]
    if cp in WHITE_SPACE:
        flags |= F["TN_UC_WHITESPACE"]
    return flags


def build():
    ccc = [unicodedata.combining(chr(cp)) for cp in range(MAX_CP)]

    # White_Space must contain every separator (Zs/Zl/Zp) and only those
    # plus the listed controls: a sanity check of the hand-written set.
    for cp in range(MAX_CP):
        gc = unicodedata.category(chr(cp))
        if gc in ("Zs", "Zl", "Zp"):
            assert cp in WHITE_SPACE, hex(cp)
    for cp in WHITE_SPACE:
        gc = unicodedata.category(chr(cp))
        assert gc in ("Zs", "Zl", "Zp", "Cc"), hex(cp)

    decomps = {}
    for cp in range(MAX_CP):
        if is_hangul_syllable(cp):
            continue
        if canonical_decomposition(cp) is not None:
            full = full_decomposition(cp)
            nfd = unicodedata.normalize("NFD", chr(cp))
            # Canonically reordered, the expansion must be what NFD gives.
            assert "".join(map(chr, sorted_canonically(full, ccc))) == nfd, hex(cp)
            decomps[cp] = full

    # Primary composites: a canonical pair mapping that NFC keeps composed.
    # Composition exclusions, singletons and non-starter decompositions are
    # exactly the code points NFC does not give back from their own NFD.
    comps = {}
    nfc_no = set()
    for cp in range(MAX_CP):
        if is_hangul_syllable(cp):
            continue
        d = canonical_decomposition(cp)
        if d is None:
            continue
        if unicodedata.normalize("NFC", chr(cp)) != chr(cp):
            nfc_no.add(cp)  # Full_Composition_Exclusion: NFC_QC = No
            continue
        assert len(d) == 2, hex(cp)
        key = (d[0], d[1])
        assert key not in comps
        comps[key] = cp

    # NFC_QC = Maybe: code points that can combine with a preceding one.
    nfc_maybe = {second for (_, second) in comps}
    nfc_maybe |= set(range(V_BASE, V_BASE + V_COUNT))
    nfc_maybe |= set(range(T_BASE + 1, T_BASE + T_COUNT))
    assert not (nfc_maybe & nfc_no)

    # Every NFC_QC=Yes starter must be a segment boundary: its expansion
    # must start with a starter that cannot combine backwards. unicode.c
    # relies on that to normalize segment by segment.
    for cp, full in decomps.items():
        if cp in nfc_no or cp in nfc_maybe or ccc[cp] != 0:
            continue
        assert ccc[full[0]] == 0 and full[0] not in nfc_maybe, hex(cp)

    records = []
    record_index = {}
    per_cp = []
    for cp in range(MAX_CP):
        flags = category_flags(cp)
        if cp in nfc_no:
            flags |= F["TN_UC_NFC_NO"]
        if cp in nfc_maybe:
            flags |= F["TN_UC_NFC_MAYBE"]
        if cp in decomps:
            flags |= F["TN_UC_DECOMPOSES"]
        rec = (flags, ccc[cp])
        if rec not in record_index:
            record_index[rec] = len(records)
            records.append(rec)
        per_cp.append(record_index[rec])
    assert len(records) <= 256, len(records)

    folds = {}
    for cp in range(MAX_CP):
        f = simple_fold(cp)
        if f != cp:
            folds[cp] = f

    return dict(ccc=ccc, decomps=decomps, comps=comps, records=records,
                per_cp=per_cp, folds=folds, nfc_no=nfc_no, nfc_maybe=nfc_maybe)


def sorted_canonically(cps, ccc):
    out = list(cps)
    # Stable sort of each run of non-starters by combining class.
    i = 0
    while i < len(out):
        if ccc[out[i]] == 0:
            i += 1
            continue
        j = i
        while j < len(out) and ccc[out[j]] != 0:
            j += 1
        out[i:j] = sorted(out[i:j], key=lambda c: ccc[c])
        i = j
    return out


def two_stage(per_cp):
    best = None
    for shift in range(4, 10):
        size = 1 << shift
        blocks = {}
        stage1 = []
        stage2 = []
        for start in range(0, MAX_CP, size):
            blk = tuple(per_cp[start:start + size])
            if blk not in blocks:
                blocks[blk] = len(blocks)
                stage2.extend(blk)
            stage1.append(blocks[blk])
        stage1_bytes = 1 if len(blocks) <= 256 else 2
        cost = len(stage1) * stage1_bytes + len(stage2)
        if best is None or cost < best[0]:
            best = (cost, shift, stage1, stage2, stage1_bytes)
    return best


def c_array(values, per_line=16, fmt="{}"):
    lines = []
    for i in range(0, len(values), per_line):
        lines.append("    " + ",".join(fmt.format(v) for v in values[i:i + per_line]) + ",")
    return "\n".join(lines)


def flag_expr(flags):
    names = [name for name, bit in FLAG_BITS if flags & bit]
    return "|".join(names) if names else "0"


def c_string(b):
    out = []
    for byte in b:
        ch = chr(byte)
        if 0x20 <= byte < 0x7F and ch not in '"\\?':
            out.append(ch)
        else:
            out.append("\\%03o" % byte)
    return '"' + "".join(out) + '"'


def nfc_samples(data):
    rng = random.Random(20240614)
    ccc = data["ccc"]
    cases = []
    # Every composable pair, decomposed: NFC must put it back together.
    for cp in sorted(data["decomps"]):
        s = unicodedata.normalize("NFD", chr(cp))
        cases.append(s)
        cases.append(chr(cp))
    # Hand-picked: Hangul, exclusions, singletons, reordering, blocking.
    cases += [
        "e\u0301", "\u1100\u1161", "\u1100\u1161\u11a8", "\uac00\u11a8", "\u1100\u1161\u0301",
        "a\u0323\u0302", "a\u0302\u0323", "a\u0301\u0323\u0302", "\u0958", "\u2126", "\u212b",
        "\u0344", "\u0f73", "\u1e9b\u0323", "q\u0307\u0323", "\u1e0b\u0323", "\u0041\u030a",
        "\u0301e", "\u0301", "e\u0301\u0301", "\u0b47\u0b3e", "\u0b47\u0300\u0b3e",
        "\u1100\u1100\u1161", "\u115f\u1161", "\u1100\u1176", "\uac01\u11a8",
        "\u00e9\u0301", "\u0041\u0308\u0304", "\u01de\u0323", "\U0001d15e", "\U0001d160",
        "\u2adc\u0338", "\u05d0\u05b7\u05bc", "\u0308\u0301\u0301", "a\u0315\u0300\u05ae\u0300b",
        "\ufb2c", "\u0374", "\u037e", "\u0387", "\u1f71", "\u1fee", "\u2000", "\u2001",
        "\U0002f800", "\u0915\u093c", "\u09c7\u09be", "\u0d46\u0d3e", "\u0cc6\u0cc2\u0cd5",
        "\u1025\u102e", "\U000110a5\U000110ba", "\U00011131\U00011127", "\u30ab\u3099",
        "\uff76\uff9e", "ABC\u0301xyz", "",
    ]
    # Random mixtures of bases, marks of many classes, jamo and excluded
    # characters, which exercise ordering and blocked composition.
    pool = []
    pool += [ord(c) for c in "aeiouAEIOUnNcCsSzZ"]
    pool += [cp for cp in range(0x300, 0x370) if ccc[cp]]
    pool += [0x0591, 0x05B0, 0x05B7, 0x05BC, 0x0618, 0x064B, 0x0651, 0x093C, 0x094D, 0x0E38,
             0x0F71, 0x0F72, 0x0F74, 0x0F80, 0x1DCE, 0x302A, 0x302E, 0x3099, 0x309A]
    pool += list(range(0x1100, 0x1105)) + list(range(0x1161, 0x1166)) + list(range(0x11A8, 0x11AC))
    pool += [0xAC00, 0xAC01, 0xD7A3, 0x00C5, 0x00E9, 0x1E0B, 0x0958, 0x2126, 0x0344, 0x0F73,
             0x0B47, 0x0B3E, 0x0B57, 0x0CC6, 0x0CC2, 0x0CD5, 0x03B1, 0x03C9, 0x0345, 0x1FB6]
    for _ in range(600):
        n = rng.randint(1, 9)
        cases.append("".join(chr(rng.choice(pool)) for _ in range(n)))
    seen = set()
    out = []
    for s in cases:
        if s in seen:
            continue
        seen.add(s)
        out.append((s.encode("utf-8"), unicodedata.normalize("NFC", s).encode("utf-8")))
    return out


def cp_samples():
    cps = set(range(0, 0x300))
    cps |= set(range(0, MAX_CP, 257))
    cps |= set(range(0x300, 0x370))
    cps |= WHITE_SPACE
    cps |= {0x1C, 0x1D, 0x1E, 0x1F, 0x180E, 0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0xFFFD,
            0x4E00, 0x9FFF, 0x3400, 0x20000, 0x0627, 0x0661, 0x064B, 0x0915, 0x093F, 0x094D,
            0x0966, 0x1F600, 0x1F3FB, 0x1F468, 0x2764, 0xFE0F, 0x17F, 0x212A, 0x212B, 0x1E9E,
            0x130, 0x131, 0x3C2, 0x3A3, 0x1F88, 0x13F8, 0xAB70, 0x10400, 0xE000, 0xD800, 0xDFFF,
            0x10FFFF, 0xE0001, 0xE0100, 0x2160, 0x00BD, 0x0F33, 0x1D7CE, 0xAC00, 0xD7A3}
    return sorted(cps)


def emit(data, path):
    cost, shift, stage1, stage2, stage1_bytes = two_stage(data["per_cp"])
    version = unicodedata.unidata_version
    records = data["records"]
    ccc = data["ccc"]

    pool = []
    entries = []
    for cp in sorted(data["decomps"]):
        full = data["decomps"][cp]
        entries.append((cp, len(pool), len(full)))
        pool.extend(full)
    assert len(pool) < 65536 and max(e[2] for e in entries) < 256

    comps = sorted(data["comps"].items())
    folds = sorted(data["folds"].items())

    o = []
    w = o.append
    w("/* Generated by tools/gen-unicode.py from Python's unicodedata (Unicode %s)." % version)
    w(" * Do not edit: change the generator and run it again. */")
    w("#ifndef TN_UNICODE_DATA_H")
    w("#define TN_UNICODE_DATA_H")
    w("")
    w('#include "tn-unicode.h"')
    w("")
    w('#define TN_UNICODE_DATA_VERSION "%s"' % version)
    w("")
    for name, bit in FLAG_BITS:
        w('_Static_assert(%s == 0x%x, "tn-unicode.h and tools/gen-unicode.py disagree");' % (name, bit))
    w("")
    w("typedef struct tn_uc_record {")
    w("    uint16_t flags; /* TN_UC_* */")
    w("    uint8_t ccc;    /* canonical combining class */")
    w("} tn_uc_record;")
    w("")
    w("#define TN_UC_SHIFT %d" % shift)
    w("")
    w("static const tn_uc_record tn_uc_records[%d] = {" % len(records))
    for flags, c in records:
        w("    {%s, %d}," % (flag_expr(flags), c))
    w("};")
    w("")
    w("/* code point >> TN_UC_SHIFT -> block; block << TN_UC_SHIFT | low bits -> record */")
    w("static const uint%d_t tn_uc_stage1[%d] = {" % (8 * stage1_bytes, len(stage1)))
    w(c_array(stage1, 24))
    w("};")
    w("")
    w("static const uint8_t tn_uc_stage2[%d] = {" % len(stage2))
    w(c_array(stage2, 32))
    w("};")
    w("")
    w("/* Full canonical decompositions (Hangul syllables are algorithmic). */")
    w("typedef struct tn_uc_decomp {")
    w("    uint32_t cp;")
    w("    uint16_t offset; /* into tn_uc_decomp_pool */")
    w("    uint8_t len;")
    w("} tn_uc_decomp;")
    w("")
    w("static const uint32_t tn_uc_decomp_pool[%d] = {" % len(pool))
    w(c_array(pool, 12, "0x{:X}"))
    w("};")
    w("")
    w("static const tn_uc_decomp tn_uc_decomps[%d] = {" % len(entries))
    w(c_array(["{0x%X,%d,%d}" % e for e in entries], 6))
    w("};")
    w("")
    w("/* Primary composites, sorted by (first, second). */")
    w("typedef struct tn_uc_comp {")
    w("    uint32_t first, second, composite;")
    w("} tn_uc_comp;")
    w("")
    w("static const tn_uc_comp tn_uc_comps[%d] = {" % len(comps))
    w(c_array(["{0x%X,0x%X,0x%X}" % (a, b, c) for (a, b), c in comps], 5))
    w("};")
    w("")
    w("/* Simple case folding, sorted by code point. */")
    w("typedef struct tn_uc_fold {")
    w("    uint32_t cp, fold;")
    w("} tn_uc_fold;")
    w("")
    w("static const tn_uc_fold tn_uc_folds[%d] = {" % len(folds))
    w(c_array(["{0x%X,0x%X}" % f for f in folds], 8))
    w("};")
    w("")
    w("#ifdef TN_UNICODE_TEST_SAMPLES")
    w("/* Expectations computed by the generator straight from unicodedata, not")
    w(" * from the tables above. */")
    w("typedef struct tn_uc_sample {")
    w("    uint32_t cp;")
    w("    uint16_t flags;")
    w("    uint8_t ccc;")
    w("    uint32_t fold;")
    w("} tn_uc_sample;")
    w("")
    samples = cp_samples()
    w("static const tn_uc_sample tn_uc_samples[%d] = {" % len(samples))
    rows = []
    for cp in samples:
        flags = category_flags(cp)
        if cp in data["nfc_no"]:
            flags |= F["TN_UC_NFC_NO"]
        if cp in data["nfc_maybe"]:
            flags |= F["TN_UC_NFC_MAYBE"]
        if not is_hangul_syllable(cp) and canonical_decomposition(cp) is not None:
            flags |= F["TN_UC_DECOMPOSES"]
        rows.append("{0x%X,0x%X,%d,0x%X}" % (cp, flags, unicodedata.combining(chr(cp)),
                                            simple_fold(cp)))
    w(c_array(rows, 6))
    w("};")
    w("")
    w("typedef struct tn_uc_nfc_sample {")
    w("    const char *in;")
    w("    const char *nfc;")
    w("} tn_uc_nfc_sample;")
    w("")
    ns = nfc_samples(data)
    w("static const tn_uc_nfc_sample tn_uc_nfc_samples[%d] = {" % len(ns))
    for a, b in ns:
        w("    {%s, %s}," % (c_string(a), c_string(b)))
    w("};")
    w("#endif /* TN_UNICODE_TEST_SAMPLES */")
    w("")
    w("#endif")
    text = "\n".join(o) + "\n"

    # Self-check: decompress the emitted stages and compare every code point.
    mask = (1 << shift) - 1
    for cp in range(MAX_CP):
        r = stage2[(stage1[cp >> shift] << shift) | (cp & mask)]
        assert r == data["per_cp"][cp]

    with open(path, "w", encoding="ascii") as f:
        f.write(text)
    sys.stderr.write("gen-unicode: %s: Unicode %s, %d records, shift %d, stages %d bytes, "
                     "%d decompositions, %d composites, %d folds, %d bytes of source\n"
                     % (path, version, len(records), shift, cost, len(entries), len(comps),
                        len(folds), len(text)))


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "engine/unicode-data.h"
    emit(build(), path)


if __name__ == "__main__":
    main()
