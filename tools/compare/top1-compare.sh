#!/bin/sh
# Teacher-forced top-1 of Tern against llama.cpp, position by position.
#
# usage: tools/compare/top1-compare.sh TERN_DUMP LLAMA_DUMP
#   TERN_DUMP:  `tern-cli perplexity --dump-top1`, "POSITION ARGMAX LOGIT INPUT_ID"
#   LLAMA_DUMP: `tools/llamacpp-compare.mjs --dump`,
#               "POSITION ARGMAX LOGIT TOP2_GAP INPUT_ID"
#
# The inputs are checked first: a comparison of two engines fed different ids
# says nothing about either (with BOS in front on one side only, every
# position of a Llama 2 file "disagreed"). Exits 1 when they differ, and
# prints nothing else then. A disagreement where llama.cpp's own top two are
# >= 0.5 logit apart is one no rounding explains ("firm").
set -eu
[ $# -eq 2 ] || { echo "usage: top1-compare.sh TERN_DUMP LLAMA_DUMP" >&2; exit 2; }
nt=$(wc -l <"$1")
nl=$(wc -l <"$2")
if [ "$nt" -ne "$nl" ] || [ "$nt" -eq 0 ]; then
    echo "inputs: DIFFER ($nt positions in $1, $nl in $2)"
    exit 1
fi
paste -d' ' "$1" "$2" | awk '
    NF != 9 { printf "inputs: DIFFER (line %d is not 4 + 5 fields: an old dump format?)\n", NR; bad = 1; exit }
    $1 != $5 || $4 != $9 { printf "inputs: DIFFER at position %s: Tern evaluated %s, llama.cpp %s\n", $1, $4, $9; bad = 1; exit }
    END { if (!bad) printf "inputs: identical (%d positions)\n", NR; exit bad }' || exit 1
paste -d' ' "$1" "$2" | awk '
    { n++
      if ($2 == $6) same++
      else {
        printf "  differ at %d: tern %d, llama.cpp %d (llama.cpp gap %.3f)\n", $1, $2, $6, $8
        if ($8 >= 0.5) firm++
        if ($8 > maxgap) maxgap = $8
      }
      d = $3 - $7; if (d < 0) d = -d; if (d > maxd) maxd = d
      a = $7 < 0 ? -$7 : $7; if (a > maxa) maxa = a }
    END { printf "argmax: %d of %d agree; firm disagreements (llama.cpp top-2 gap >= 0.5): %d; largest gap at a disagreement %.3f; top logit max |diff| %.3f (logits to %.1f)\n",
                 same, n, firm, maxgap, maxd, maxa
          exit firm > 0 }'
