/* AVX2 + FMA + F16C kernels (this file alone is compiled for them). */
#include "tn-cpu-internal.h"

bool tn_mm_ops_avx2(tn_mm_ops *ops, uint32_t type, uint32_t layout) {
    (void)ops;
    (void)type;
    (void)layout;
    return false;
}
