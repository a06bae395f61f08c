/* AVX-512 (F/BW/VL/DQ + VNNI, BF16 when the CPU has it) kernels. */
#include "tn-cpu-internal.h"

bool tn_mm_ops_avx512(tn_mm_ops *ops, uint32_t type) {
    (void)ops;
    (void)type;
    return false;
}
