/* What the random-weight model writers (engine/mk/) share: one generator
 * for every value they draw, so a file's bytes depend only on its seed. */
#ifndef TN_MK_H
#define TN_MK_H

#include "tn-internal.h"

#include <stdint.h>

/* The generator's state at the start of a row: a row depends only on (seed,
 * tensor name, row), so rows can be filled in any order, by any thread, and a
 * tensor keeps its values when others are added or reordered. */
static inline uint64_t tn_mk_row_state(uint64_t seed, const char *tensor, uint64_t row) {
    return seed ^ tn_fnv1a_str(tensor) ^ (row * 0x9e3779b97f4a7c15ULL);
}

/* The next value, uniform on [-1, 1): the top 53 bits, exactly. */
static inline double tn_mk_uniform(uint64_t *state) {
    return (double)(tn_splitmix64(state) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

#endif
