/* Attention with AVX512_BF16: attention-avx512.c with each bf16 pair's two
 * products done by one VDPBF16PS (tn-cpu.h has the arithmetic; the result
 * is the same bits as the FMA pairs, which attention.c checks on this CPU
 * before it uses this kernel). */
#define TN_ATTN_DPBF16 1
#include "attention-avx512.c"

/* VDPBF16PS against two FMAs, high half first, on values that round
 * differently in the two orders; true when every lane agrees. */
bool tn_attention_avx512bf16_selftest(void) {
    uint16_t x[32], y[32];
    float acc[16], hw[16];
    for (int i = 0; i < 32; i++) {
        x[i] = tn_bf16_from_f32((i & 1 ? 1.0f : -1.0f) * (1.0f + (float)i / 64.0f) *
                                (float)(1 << (i % 11)));
        y[i] = tn_bf16_from_f32((1.0f + (float)(i * 7 % 32) / 32.0f) * (i % 3 ? 0.75f : 3.0f));
    }
    for (int i = 0; i < 16; i++)
        acc[i] = (float)(i * 37 % 16) / 3.0f + 1.0e-3f;
    _mm512_storeu_ps(hw, dot2(_mm512_loadu_ps(acc), _mm512_loadu_si512(x), _mm512_loadu_si512(y)));
    for (int i = 0; i < 16; i++) {
        const float a = tn_attn_dot_pair(acc[i], tn_attn_pair_at(x + 2 * i), tn_attn_pair_at(y + 2 * i));
        if (memcmp(&a, &hw[i], sizeof a) != 0)
            return false;
    }
    return true;
}
