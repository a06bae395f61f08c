/* GGUF tensor types: sizes and names, fp16/bf16 conversions (exhaustive),
 * hand-made blocks of every type decoded to known values, the reference
 * quantizers' rounding, quantize -> dequantize error bounds, and what
 * non-finite input becomes. */
#include "tn-quant.h"
#include "tn-test.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------ helpers */

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static float gauss(uint64_t *st) {
    /* Box-Muller on two uniforms in (0, 1]. */
    double u1 = ((double)(tn_test_rand(st) >> 11) + 1.0) / 9007199254740992.0;
    double u2 = (double)(tn_test_rand(st) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

static double rel_rmse(const float *x, const float *y, int n) {
    double err = 0, ref = 0;
    for (int i = 0; i < n; i++) {
        err += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        ref += (double)x[i] * x[i];
    }
    return ref > 0 ? sqrt(err / ref) : sqrt(err);
}

/* The types with a quantizer and the relative RMSE (RMS error / RMS value)
 * each must stay under: `gauss` on N(0,1) data (tight: about 5% above the
 * measured value, so a weaker scale search fails), `bound` on every other
 * distribution below, `outlier` on data with 40x outliers. The looser two
 * are the measured maxima plus ~25%. docs/QUANT.md has the same table. */
typedef struct {
    uint32_t type;
    double gauss, bound, outlier;
} quant_case;

static const quant_case quant_cases[] = {
    {TN_TYPE_F32, 0, 0, 0},
    {TN_TYPE_F16, 0.00023, 0.0003, 0.0003},
    {TN_TYPE_BF16, 0.0018, 0.0022, 0.0022},
    {TN_TYPE_Q8_0, 0.0057, 0.007, 0.015},
    {TN_TYPE_Q8_1, 0.0057, 0.007, 0.015},
    {TN_TYPE_Q8_K, 0.0071, 0.012, 0.032},
    {TN_TYPE_Q4_0, 0.092, 0.11, 0.14},
    {TN_TYPE_Q4_1, 0.084, 0.10, 0.145},
    {TN_TYPE_Q5_0, 0.045, 0.055, 0.10},
    {TN_TYPE_Q5_1, 0.040, 0.048, 0.066},
    {TN_TYPE_Q4_K, 0.075, 0.092, 0.117},
    {TN_TYPE_Q5_K, 0.0385, 0.046, 0.062},
    {TN_TYPE_Q6_K, 0.018, 0.023, 0.044},
    {TN_TYPE_Q3_K, 0.16, 0.195, 0.115},
    {TN_TYPE_Q2_K, 0.307, 0.36, 0.25},
    {TN_TYPE_IQ4_NL, 0.080, 0.097, 0.135},
    {TN_TYPE_IQ4_XS, 0.081, 0.096, 0.124},
    {TN_TYPE_MXFP4, 0.124, 0.179, 0.194},
};
#define N_QUANT_CASES (int)(sizeof quant_cases / sizeof quant_cases[0])

/* ---------------------------------------------------------- type table */

static void test_type_table(void) {
    static const struct {
        uint32_t type;
        const char *name;
        size_t block_size, block_bytes;
        bool supported;
    } expect[] = {
        {TN_TYPE_F32, "f32", 1, 4, true},      {TN_TYPE_F16, "f16", 1, 2, true},
        {TN_TYPE_Q4_0, "q4_0", 32, 18, true},  {TN_TYPE_Q4_1, "q4_1", 32, 20, true},
        {TN_TYPE_Q5_0, "q5_0", 32, 22, true},  {TN_TYPE_Q5_1, "q5_1", 32, 24, true},
        {TN_TYPE_Q8_0, "q8_0", 32, 34, true},  {TN_TYPE_Q8_1, "q8_1", 32, 36, true},
        {TN_TYPE_Q2_K, "q2_K", 256, 84, true}, {TN_TYPE_Q3_K, "q3_K", 256, 110, true},
        {TN_TYPE_Q4_K, "q4_K", 256, 144, true}, {TN_TYPE_Q5_K, "q5_K", 256, 176, true},
        {TN_TYPE_Q6_K, "q6_K", 256, 210, true}, {TN_TYPE_Q8_K, "q8_K", 256, 292, true},
        {TN_TYPE_BF16, "bf16", 1, 2, true},
        {TN_TYPE_IQ4_NL, "iq4_nl", 32, 18, true}, {TN_TYPE_IQ4_XS, "iq4_xs", 256, 136, true},
        /* types Tern cannot run but must size and name in messages */
        {16, "iq2_xxs", 256, 66, false},        {21, "iq3_s", 256, 110, false},
        {28, "f64", 1, 8, false},
        {35, "tq2_0", 256, 66, false},          {39, "mxfp4", 32, 17, true},
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        const char *name = tn_type_name(expect[i].type);
        CHECKF(name && strcmp(name, expect[i].name) == 0, "type %u: name %s, want %s",
               expect[i].type, name ? name : "(null)", expect[i].name);
        CHECKF(tn_type_block_size(expect[i].type) == expect[i].block_size, "%s block size %zu",
               expect[i].name, tn_type_block_size(expect[i].type));
        CHECKF(tn_type_block_bytes(expect[i].type) == expect[i].block_bytes,
               "%s block bytes %zu", expect[i].name, tn_type_block_bytes(expect[i].type));
        CHECKF(tn_type_supported(expect[i].type) == expect[i].supported, "%s supported",
               expect[i].name);
        CHECKF(tn_type_from_name(expect[i].name) == (int)expect[i].type, "from_name(%s) = %d",
               expect[i].name, tn_type_from_name(expect[i].name));
        /* a row of 3 blocks, and one value short of it */
        uint64_t n = 3 * expect[i].block_size;
        CHECK(tn_type_row_bytes(expect[i].type, n) == 3 * expect[i].block_bytes);
        if (expect[i].block_size > 1)
            CHECK(tn_type_row_bytes(expect[i].type, n - 1) == 0);
    }
    /* the supported types are exactly the ones that dequantize */
    for (uint32_t t = 0; t < 64; t++) {
        float out[256];
        static const uint8_t zero[292];
        int rc = tn_dequantize_row(t, zero, out, (int64_t)(tn_type_block_size(t) ? tn_type_block_size(t) : 1));
        CHECKF((rc == TN_OK) == tn_type_supported(t), "type %u: dequantize rc %d, supported %d",
               t, rc, tn_type_supported(t));
    }

    CHECK(tn_type_from_name("Q4_K") == TN_TYPE_Q4_K);
    CHECK(tn_type_from_name("BF16") == TN_TYPE_BF16);
    CHECK(tn_type_from_name("q4_k") == TN_TYPE_Q4_K);
    CHECK(tn_type_from_name("q4_9") == -1);
    CHECK(tn_type_from_name("") == -1);
    CHECK(tn_type_from_name("q4_0 ") == -1);
    CHECK(tn_type_from_name(NULL) == -1);
    const uint32_t unknown[] = {4, 5, 31, 32, 33, 36, 37, 38, 40, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        CHECKF(tn_type_name(unknown[i]) == NULL, "id %u has a name", unknown[i]);
        CHECK(tn_type_block_size(unknown[i]) == 0);
        CHECK(tn_type_block_bytes(unknown[i]) == 0);
        CHECK(!tn_type_supported(unknown[i]));
        CHECK(tn_type_row_bytes(unknown[i], 256) == 0);
    }
    CHECK(tn_type_row_bytes(TN_TYPE_Q4_0, 64) == 36);
    CHECK(tn_type_row_bytes(TN_TYPE_Q4_0, 33) == 0);
    CHECK(tn_type_row_bytes(TN_TYPE_Q4_K, 4096) == 16 * 144);
    CHECK(tn_type_row_bytes(TN_TYPE_Q4_K, 4096 + 32) == 0);
    CHECK(tn_type_row_bytes(TN_TYPE_Q6_K, 128) == 0);
    CHECK(tn_type_row_bytes(TN_TYPE_F16, 3) == 6);
    CHECK(tn_type_row_bytes(TN_TYPE_F32, 0) == 0);
    /* byte counts that overflow are refused, not wrapped */
    CHECK(tn_type_row_bytes(TN_TYPE_F32, UINT64_MAX / 2) == 0);
    CHECK(tn_type_row_bytes(TN_TYPE_Q8_0, (UINT64_MAX / 32) * 32) == 0);
}

static void test_dispatch_errors(void) {
    float in[256] = {0}, out[256];
    uint8_t buf[512] = {0};
    CHECK(tn_dequantize_row(16 /* iq2_xxs */, buf, out, 256) == TN_ERR_UNSUPPORTED);
    CHECK(tn_quantize_row(21 /* iq3_s */, in, buf, 256) == TN_ERR_UNSUPPORTED);
    CHECK(tn_dequantize_row(4, buf, out, 32) == TN_ERR_UNSUPPORTED);
    CHECK(tn_quantize_row(999, in, buf, 32) == TN_ERR_UNSUPPORTED);
    CHECK(tn_dequantize_row(TN_TYPE_Q4_0, buf, out, 33) == TN_ERR_INVALID);
    CHECK(tn_quantize_row(TN_TYPE_Q4_K, in, buf, 128) == TN_ERR_INVALID);
    CHECK(tn_dequantize_row(TN_TYPE_Q8_0, buf, out, -32) == TN_ERR_INVALID);
    CHECK(tn_dequantize_row(TN_TYPE_Q8_0, NULL, out, 32) == TN_ERR_INVALID);
    CHECK(tn_quantize_row(TN_TYPE_Q8_0, in, NULL, 32) == TN_ERR_INVALID);
    CHECK(tn_dequantize_row(TN_TYPE_Q8_0, buf, out, 0) == TN_OK);
    CHECK(tn_quantize_row(TN_TYPE_F16, in, buf, 0) == TN_OK);
}

/* ----------------------------------------------------------- fp16/bf16 */

/* The value of half h computed from the IEEE definition, not bit tricks. */
static double half_value(uint16_t h) {
    int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
    double v = exp == 0 ? ldexp(mant, -24) : ldexp(1024 + mant, exp - 25);
    if (exp == 31)
        v = mant ? NAN : INFINITY;
    return sign ? -v : v;
}

static void test_fp16(void) {
    int bad_value = 0, bad_trip = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tn_fp16_to_fp32((uint16_t)h);
        double want = half_value((uint16_t)h);
        if (isnan(want) ? !isnan(f) : ((double)f != want || (signbit(f) != 0) != (h >> 15 != 0)))
            bad_value++;
        /* round trip bit for bit, NaN payloads included */
        if (tn_fp32_to_fp16(f) != h)
            bad_trip++;
    }
    CHECKF(bad_value == 0, "%d halves decode to the wrong float", bad_value);
    CHECKF(bad_trip == 0, "%d halves do not survive fp16->fp32->fp16", bad_trip);

    /* Rounding, exhaustively: between every two adjacent finite halves of a
     * sign, the midpoint (exact in fp32) goes to the even one, and the floats
     * just either side of it go to their neighbour. */
    int bad_round = 0;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        for (int neg = 0; neg < 2; neg++) {
            uint16_t s = neg ? 0x8000 : 0;
            float a = tn_fp16_to_fp32((uint16_t)(s | h));
            float b = h + 1 == 0x7c00 ? (neg ? -65536.f : 65536.f)
                                      : tn_fp16_to_fp32((uint16_t)(s | (h + 1)));
            float mid = (a + b) / 2;
            uint16_t lo = (uint16_t)(s | h), hi = (uint16_t)(s | (h + 1));
            uint16_t even = (h & 1) ? hi : lo;
            if (tn_fp32_to_fp16(mid) != even)
                bad_round++;
            if (tn_fp32_to_fp16(nextafterf(mid, b)) != hi)
                bad_round++;
            if (tn_fp32_to_fp16(nextafterf(mid, a)) != lo)
                bad_round++;
            if (tn_fp32_to_fp16(a) != lo)
                bad_round++;
        }
    }
    CHECKF(bad_round == 0, "%d fp32->fp16 rounding cases wrong", bad_round);

    CHECK(tn_fp32_to_fp16(1.0f) == 0x3c00);
    CHECK(tn_fp32_to_fp16(-2.0f) == 0xc000);
    CHECK(tn_fp32_to_fp16(65504.f) == 0x7bff);
    CHECK(tn_fp32_to_fp16(65519.996f) == 0x7bff);
    CHECK(tn_fp32_to_fp16(65520.f) == 0x7c00);
    CHECK(tn_fp32_to_fp16(1e6f) == 0x7c00);
    CHECK(tn_fp32_to_fp16(-FLT_MAX) == 0xfc00);
    CHECK(tn_fp32_to_fp16(INFINITY) == 0x7c00);
    CHECK(tn_fp32_to_fp16(-INFINITY) == 0xfc00);
    CHECK(tn_fp32_to_fp16(0x1p-24f) == 0x0001);
    CHECK(tn_fp32_to_fp16(0x1p-25f) == 0x0000);            /* tie to even: 0 */
    CHECK(tn_fp32_to_fp16(0x1.8p-24f) == 0x0002);          /* tie to even: 2 */
    CHECK(tn_fp32_to_fp16(nextafterf(0x1p-25f, 1)) == 1);
    CHECK(tn_fp32_to_fp16(-1e-10f) == 0x8000);
    CHECK(tn_fp32_to_fp16(FLT_TRUE_MIN) == 0);
    CHECK(tn_fp32_to_fp16(0x1.ffcp-15f) == 0x0400);        /* carries into the normals */
    CHECK(tn_fp32_to_fp16(1.0f / 3.0f) == 0x3555);
    CHECK(tn_fp16_to_fp32(0x3555) == 0.333251953125f);
    /* any float NaN stays a NaN, even one whose payload is all in dropped bits */
    const uint32_t nans[] = {0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fffffff};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t h = tn_fp32_to_fp16(float_of(nans[i]));
        CHECKF((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0 && (h >> 15) == (nans[i] >> 31),
               "NaN %08x -> %04x", nans[i], h);
    }

#ifdef __FLT16_MAX__
    /* The compiler's own conversion agrees on random floats of every scale. */
    uint64_t st = 12345;
    int bad_hw = 0;
    for (int i = 0; i < 1 << 20; i++) {
        float f = float_of((uint32_t)tn_test_rand(&st));
        if (isnan(f))
            continue;
        _Float16 hw = (_Float16)f;
        uint16_t hb;
        memcpy(&hb, &hw, 2);
        if (hb != tn_fp32_to_fp16(f))
            bad_hw++;
    }
    CHECKF(bad_hw == 0, "%d floats convert unlike the compiler's _Float16", bad_hw);
#endif
}

static void test_bf16(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tn_bf16_to_fp32((uint16_t)h);
        if (bits_of(f) != h << 16 || tn_fp32_to_bf16(f) != h)
            bad++;
    }
    CHECKF(bad == 0, "%d bf16 values do not decode/round trip exactly", bad);

    int bad_round = 0;
    for (uint32_t h = 0; h < 0x7f80; h++) {
        for (uint32_t s = 0; s < 2; s++) {
            uint32_t lo = (s << 15) | h, hi = lo + 1;
            uint32_t mid = (lo << 16) | 0x8000; /* exactly between lo and hi */
            uint32_t even = (h & 1) ? hi : lo;
            if (tn_fp32_to_bf16(float_of(mid)) != even)
                bad_round++;
            if (tn_fp32_to_bf16(float_of(mid + 1)) != hi)
                bad_round++;
            if (tn_fp32_to_bf16(float_of(mid - 1)) != lo)
                bad_round++;
        }
    }
    CHECKF(bad_round == 0, "%d fp32->bf16 rounding cases wrong", bad_round);
    CHECK(tn_fp32_to_bf16(1.0f) == 0x3f80);
    CHECK(tn_fp32_to_bf16(-3.0f) == 0xc040);
    CHECK(tn_fp32_to_bf16(FLT_MAX) == 0x7f80); /* rounds up past the largest bf16 */
    CHECK(tn_fp32_to_bf16(INFINITY) == 0x7f80);
    CHECK(tn_fp32_to_bf16(-INFINITY) == 0xff80);
    CHECK(tn_fp32_to_bf16(float_of(0x3f808000)) == 0x3f80); /* tie, 0x3f80 even */
    CHECK(tn_fp32_to_bf16(float_of(0x3f818000)) == 0x3f82); /* tie, 0x3f81 odd */
    const uint32_t nans[] = {0x7fc00000, 0xffc00000, 0x7f800001, 0xff80ffff, 0x7fffffff};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t h = tn_fp32_to_bf16(float_of(nans[i]));
        CHECKF((h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0 && (h >> 15) == (nans[i] >> 31),
               "NaN %08x -> %04x", nans[i], h);
    }
}

/* ------------------------------------------------- hand-made blocks */

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

static void test_blocks_float(void) {
    float out[4];
    const float f32[4] = {1.5f, -0.0f, 3e38f, -7.25f};
    CHECK(tn_dequantize_row(TN_TYPE_F32, f32, out, 4) == TN_OK);
    CHECK(memcmp(out, f32, sizeof f32) == 0);

    uint8_t h[8];
    put16(h, 0x3c00);     /* 1 */
    put16(h + 2, 0xc500); /* -5 */
    put16(h + 4, 0x0001); /* 2^-24 */
    put16(h + 6, 0x7bff); /* 65504 */
    CHECK(tn_dequantize_row(TN_TYPE_F16, h, out, 4) == TN_OK);
    CHECK(out[0] == 1.0f && out[1] == -5.0f && out[2] == 0x1p-24f && out[3] == 65504.f);
    uint8_t back[8];
    CHECK(tn_quantize_row(TN_TYPE_F16, out, back, 4) == TN_OK);
    CHECK(memcmp(back, h, 8) == 0);

    put16(h, 0x3f80);     /* 1 */
    put16(h + 2, 0xc0a0); /* -5 */
    put16(h + 4, 0x3e00); /* 0.125 */
    put16(h + 6, 0x4780); /* 65536 */
    CHECK(tn_dequantize_row(TN_TYPE_BF16, h, out, 4) == TN_OK);
    CHECK(out[0] == 1.0f && out[1] == -5.0f && out[2] == 0.125f && out[3] == 65536.f);
    CHECK(tn_quantize_row(TN_TYPE_BF16, out, back, 4) == TN_OK);
    CHECK(memcmp(back, h, 8) == 0);
}

static void test_blocks_32(void) {
    float y[32];

    /* Q4_0, d = 0.5: value j is the low nibble of qs[j], value j+16 the
     * high nibble, both offset by -8. */
    tn_block_q4_0 q4;
    q4.d = 0x3800;
    for (int j = 0; j < 16; j++)
        q4.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    tn_dequant_ref_q4_0(&q4, y, 32);
    CHECK(y[0] == -4.0f && y[16] == 3.5f);
    CHECK(y[8] == 0.0f && y[24] == -0.5f);
    CHECK(y[15] == 3.5f && y[31] == -4.0f);
    int bad = 0;
    for (int j = 0; j < 16; j++)
        bad += y[j] != 0.5f * (float)(j - 8) || y[j + 16] != 0.5f * (float)(7 - j);
    CHECK(bad == 0);

    /* Q4_1, d = 0.25, m = -1: q * d + m */
    tn_block_q4_1 q41;
    q41.d = 0x3400;
    q41.m = 0xbc00;
    for (int j = 0; j < 16; j++)
        q41.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    tn_dequant_ref_q4_1(&q41, y, 32);
    CHECK(y[0] == -1.0f && y[16] == 2.75f && y[4] == 0.0f && y[31] == -1.0f);

    /* Q5_0, d = 1: the 5th bit of value j is bit j of qh (LE), of value
     * j+16 bit j+16. */
    tn_block_q5_0 q5;
    memset(&q5, 0, sizeof q5);
    q5.d = 0x3c00;
    q5.qs[0] = 0x21;  /* value 0 low 1, value 16 low 2 */
    q5.qs[15] = 0xf3; /* value 15 low 3, value 31 low 15 */
    q5.qs[7] = 0x5a;  /* value 7 low 10, value 23 low 5 */
    q5.qh[0] = 0x01;  /* bit 0: value 0 */
    q5.qh[3] = 0x80;  /* bit 31: value 31 */
    q5.qh[2] = 0x80;  /* bit 23: value 23 */
    tn_dequant_ref_q5_0(&q5, y, 32);
    CHECK(y[0] == 1.0f);   /* 17 - 16 */
    CHECK(y[16] == -14.0f); /* 2 - 16 */
    CHECK(y[15] == -13.0f); /* 3 - 16 */
    CHECK(y[31] == 15.0f); /* 31 - 16 */
    CHECK(y[7] == -6.0f);  /* 10 - 16 */
    CHECK(y[23] == 5.0f);  /* 21 - 16 */
    CHECK(y[1] == -16.0f);

    /* Q5_1, d = 0.5, m = 2 */
    tn_block_q5_1 q51;
    memset(&q51, 0, sizeof q51);
    q51.d = 0x3800;
    q51.m = 0x4000;
    q51.qs[3] = 0x9c; /* value 3 low 12, value 19 low 9 */
    q51.qh[0] = 0x08; /* bit 3: value 3 */
    q51.qh[2] = 0x08; /* bit 19: value 19 */
    tn_dequant_ref_q5_1(&q51, y, 32);
    CHECK(y[3] == 16.0f);  /* 28 * 0.5 + 2 */
    CHECK(y[19] == 14.5f); /* 25 * 0.5 + 2 */
    CHECK(y[0] == 2.0f);

    /* Q8_0 and Q8_1: d * q */
    tn_block_q8_0 q8;
    q8.d = 0x3000; /* 0.125 */
    for (int j = 0; j < 32; j++)
        q8.qs[j] = (int8_t)(j * 8 - 128);
    tn_dequant_ref_q8_0(&q8, y, 32);
    CHECK(y[0] == -16.0f && y[31] == 15.0f && y[14] == -2.0f && y[16] == 0.0f);
    tn_block_q8_1 q81;
    q81.d = 0x4000; /* 2 */
    q81.s = 0x7bff;
    for (int j = 0; j < 32; j++)
        q81.qs[j] = (int8_t)(j - 16);
    CHECK(tn_dequantize_row(TN_TYPE_Q8_1, &q81, y, 32) == TN_OK);
    CHECK(y[0] == -32.0f && y[16] == 0.0f && y[31] == 30.0f);
}

/* Q4_K and Q5_K share this scales/mins set and its packing, worked out by
 * hand (see docs/QUANT.md): sub-block j has scale sc[j] and min m[j]. */
static const int k4_sc[8] = {1, 2, 3, 63, 17, 32, 48, 5};
static const int k4_m[8] = {0, 4, 63, 1, 33, 2, 16, 60};
static const uint8_t k4_packed[12] = {
    0x41, 0x82, 0xc3, 0x3f, /* sc[0..3] | top bits of sc[4..7] << 6 */
    0x80, 0x04, 0x7f, 0xc1, /* m[0..3]  | top bits of m[4..7] << 6 */
    0x11, 0x20, 0x00, 0xc5, /* low nibbles: sc[4..7] | m[4..7] << 4 */
};

static void test_blocks_k(void) {
    float y[256];
    int bad = 0;

    /* Q4_K, d = 1, dmin = 0.5: y = d*sc*q - dmin*m. Byte l of each 32-byte
     * group g holds value 64g+l (low nibble) and 64g+32+l (high nibble). */
    tn_block_q4_K b4;
    b4.d = 0x3c00;
    b4.dmin = 0x3800;
    memcpy(b4.scales, k4_packed, 12);
    for (int i = 0; i < 128; i++)
        b4.qs[i] = (uint8_t)(i * 7 + 3);
    tn_dequant_ref_q4_K(&b4, y, 256);
    CHECK(y[0] == 3.0f);     /* sub 0: 1*3 - 0 */
    CHECK(y[32] == -2.0f);   /* sub 1: 2*0 - 0.5*4 */
    CHECK(y[200] == 520.0f); /* sub 6: qs[104] = 0xdb, 48*11 - 0.5*16 */
    CHECK(y[255] == 5.0f);   /* sub 7: qs[127] = 0x7c, 5*7 - 0.5*60 */
    CHECK(y[100] == 944.5f); /* sub 3: qs[36] = 0xff, 63*15 - 0.5*1 */
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++) {
            uint8_t q = b4.qs[32 * g + l];
            bad += y[64 * g + l] != (float)(k4_sc[2 * g] * (q & 15)) - 0.5f * (float)k4_m[2 * g];
            bad += y[64 * g + 32 + l] !=
                   (float)(k4_sc[2 * g + 1] * (q >> 4)) - 0.5f * (float)k4_m[2 * g + 1];
        }
    CHECKF(bad == 0, "%d q4_K values wrong", bad);

    /* Q5_K: same scales; bit 2g of qh[l] is the 5th bit of value 64g+l,
     * bit 2g+1 that of 64g+32+l. */
    tn_block_q5_K b5;
    b5.d = 0x3c00;
    b5.dmin = 0x3800;
    memcpy(b5.scales, k4_packed, 12);
    for (int i = 0; i < 128; i++)
        b5.qs[i] = (uint8_t)(i * 7 + 3);
    for (int l = 0; l < 32; l++)
        b5.qh[l] = (uint8_t)(l * 37 + 11);
    tn_dequant_ref_q5_K(&b5, y, 256);
    /* qh[0] = 0x0b: bits 0,1,3 -> values 0, 32, 96 get +16 */
    CHECK(y[0] == 19.0f);    /* 1*(3+16) */
    CHECK(y[32] == 30.0f);   /* 2*(0+16) - 2 */
    CHECK(y[64] == 3.0f * 3 - 31.5f); /* sub 2: qs[32] = 0xe3 low 3, no bit 2 */
    CHECK(y[96] == 63.0f * (14 + 16) - 0.5f); /* sub 3: high 14, bit 3 */
    bad = 0;
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++) {
            uint8_t q = b5.qs[32 * g + l], h = b5.qh[l];
            int lo = (q & 15) + 16 * ((h >> (2 * g)) & 1);
            int hi = (q >> 4) + 16 * ((h >> (2 * g + 1)) & 1);
            bad += y[64 * g + l] != (float)(k4_sc[2 * g] * lo) - 0.5f * (float)k4_m[2 * g];
            bad += y[64 * g + 32 + l] !=
                   (float)(k4_sc[2 * g + 1] * hi) - 0.5f * (float)k4_m[2 * g + 1];
        }
    CHECKF(bad == 0, "%d q5_K values wrong", bad);

    /* Q6_K, d = 0.5, scales[k] for values 16k..16k+15. In half h (128
     * values), for l < 32: value l = low nibble ql[l] | qh[l] bits 0-1;
     * 32+l = low nibble ql[32+l] | bits 2-3; 64+l = high nibble ql[l] |
     * bits 4-5; 96+l = high nibble ql[32+l] | bits 6-7; minus 32. */
    tn_block_q6_K b6;
    b6.d = 0x3800;
    for (int k = 0; k < 16; k++)
        b6.scales[k] = (int8_t)((k & 1) ? -(k + 1) : k + 1);
    for (int i = 0; i < 128; i++)
        b6.ql[i] = (uint8_t)(i * 13 + 5);
    for (int i = 0; i < 64; i++)
        b6.qh[i] = (uint8_t)(i * 29 + 7);
    tn_dequant_ref_q6_K(&b6, y, 256);
    /* value 0: ql[0]=0x05 low 5, qh[0]=0x07 bits0-1 = 3 -> 53-32 = 21; scale 1 */
    CHECK(y[0] == 10.5f);
    /* value 32: ql[32]=0xa5 low 5, qh[0] bits 2-3 = 1 -> 21-32 = -11; scale 3 */
    CHECK(y[32] == -16.5f);
    /* value 64: ql[0] high 0, qh[0] bits 4-5 = 0 -> -32; scale 5 */
    CHECK(y[64] == -80.0f);
    /* value 96: ql[32] high 10, bits 6-7 = 0 -> -22; scale 7 */
    CHECK(y[96] == -77.0f);
    /* value 128+17: ql[64+17] = 0x22 low 2, qh[32+17] = 0x94 bits 0-1 = 0
     * -> -30; scale index 9 -> -10 */
    CHECK(y[145] == 150.0f);
    bad = 0;
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *ql = b6.ql + 64 * h, *qh = b6.qh + 32 * h;
            int q[4] = {(ql[l] & 15) | ((qh[l] & 3) << 4),
                        (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4),
                        (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
                        (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)};
            for (int r = 0; r < 4; r++) {
                int idx = 128 * h + 32 * r + l;
                bad += y[idx] != 0.5f * (float)(b6.scales[idx / 16] * (q[r] - 32));
            }
        }
    CHECKF(bad == 0, "%d q6_K values wrong", bad);

    /* Q8_K: float d times q */
    tn_block_q8_K b8;
    memset(&b8, 0, sizeof b8);
    b8.d = 0.25f;
    for (int i = 0; i < 256; i++)
        b8.qs[i] = (int8_t)(i - 128);
    CHECK(tn_dequantize_row(TN_TYPE_Q8_K, &b8, y, 256) == TN_OK);
    CHECK(y[0] == -32.0f && y[128] == 0.0f && y[255] == 31.75f);
}

/* Q2_K, Q3_K, IQ4_NL, IQ4_XS: hand-made blocks decoded against ggml's
 * loop structure written out here (per 128-value half, four 2-bit shifts,
 * two 16-value sub-blocks each), plus a few values worked by hand. */
static void test_blocks_new(void) {
    float y[256];
    int bad = 0;

    /* Q2_K, d = 0.5, dmin = 0.25: y = d * (sc & 15) * q - dmin * (sc >> 4). */
    tn_block_q2_K b2;
    b2.d = 0x3800;
    b2.dmin = 0x3400;
    for (int k = 0; k < 16; k++)
        b2.scales[k] = (uint8_t)(k * 17 + 3);
    for (int i = 0; i < 64; i++)
        b2.qs[i] = (uint8_t)(i * 41 + 7);
    tn_dequant_ref_q2_K(&b2, y, 256);
    /* value 0: qs[0] = 0x07 bits 0-1 = 3, scales[0] = 0x03: 0.5*3*3 - 0 */
    CHECK(y[0] == 4.5f);
    /* value 48: qs[16] = 0x97 (16*41+7 = 663 = 0x297), bits 2-3 = 1;
     * sub-block 3: scales[3] = 0x36: 0.5*6*1 - 0.25*3 */
    CHECK(y[48] == 2.25f);
    int idx = 0;
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++)
            for (int half = 0; half < 2; half++) {
                const uint8_t sc = b2.scales[8 * h + 2 * j + half];
                for (int l = 0; l < 16; l++, idx++) {
                    const int q = (b2.qs[32 * h + 16 * half + l] >> (2 * j)) & 3;
                    bad += y[idx] != 0.5f * (float)(sc & 15) * (float)q - 0.25f * (float)(sc >> 4);
                }
            }
    CHECKF(bad == 0, "%d q2_K values wrong", bad);

    /* Q3_K, d = 0.5: scales 6 bits stored +32; q = 2 low bits - 4 unless
     * the hmask bit is set. Scales chosen as s[k] = k * 4 - 31 (stored
     * 4k + 1): low nibbles k < 8 in scales[k], k >= 8 in scales[k-8] >> 4,
     * top bits at 2 * (k / 4) of scales[8 + k % 4]. */
    tn_block_q3_K b3;
    memset(&b3, 0, sizeof b3);
    b3.d = 0x3800;
    for (int k = 0; k < 16; k++) {
        const int u = 4 * k + 1;
        if (k < 8)
            b3.scales[k] |= (uint8_t)(u & 15);
        else
            b3.scales[k - 8] |= (uint8_t)((u & 15) << 4);
        b3.scales[8 + k % 4] |= (uint8_t)((u >> 4) << (2 * (k / 4)));
    }
    static const uint8_t q3_scales[12] = {0x11, 0x55, 0x99, 0xdd, 0x11, 0x55, 0x99, 0xdd,
                                          0xe4, 0xe4, 0xe4, 0xe4};
    CHECK(memcmp(b3.scales, q3_scales, 12) == 0);
    for (int i = 0; i < 64; i++)
        b3.qs[i] = (uint8_t)(i * 23 + 5);
    for (int i = 0; i < 32; i++)
        b3.hmask[i] = (uint8_t)(i * 53 + 9);
    tn_dequant_ref_q3_K(&b3, y, 256);
    /* value 0: qs[0] = 5 bits 0-1 = 1, hmask[0] = 9 bit 0 set: q = 1; s = -31 */
    CHECK(y[0] == -15.5f);
    /* value 255: h 1, j 3, l 31: qs[63] = 0xae bits 6-7 = 2, hmask[31] =
     * 0x74 bit 7 clear: q = -2; s = 15*4 - 31 = 29 */
    CHECK(y[255] == -29.0f);
    idx = 0;
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++)
            for (int half = 0; half < 2; half++) {
                const int s3 = (8 * h + 2 * j + half) * 4 - 31;
                for (int l = 0; l < 16; l++, idx++) {
                    const int ll = 16 * half + l;
                    int q = (b3.qs[32 * h + ll] >> (2 * j)) & 3;
                    if (!(b3.hmask[ll] & (1 << (4 * h + j))))
                        q -= 4;
                    bad += y[idx] != 0.5f * (float)(s3 * q);
                }
            }
    CHECKF(bad == 0, "%d q3_K values wrong", bad);

    /* IQ4_NL, d = 2: nibbles as Q4_0, each an index into the table. */
    static const int8_t table[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};
    CHECK(memcmp(tn_iq4nl_values, table, 16) == 0);
    tn_block_iq4_nl bn;
    bn.d = 0x4000;
    for (int i = 0; i < 16; i++)
        bn.qs[i] = (uint8_t)(i | (15 - i) << 4);
    CHECK(tn_dequantize_row(TN_TYPE_IQ4_NL, &bn, y, 32) == TN_OK);
    for (int j = 0; j < 16; j++) {
        bad += y[j] != 2.0f * (float)table[j];
        bad += y[j + 16] != 2.0f * (float)table[15 - j];
    }
    CHECKF(bad == 0, "%d iq4_nl values wrong", bad);

    /* IQ4_XS, d = 0.25: sub-block ib's scale is the nibble ib % 2 of
     * scales_l[ib / 2] | bits 2ib..2ib+1 of scales_h << 4, minus 32. */
    tn_block_iq4_xs bx;
    bx.d = 0x3400;
    static const int xs_scale[8] = {-32, 31, 0, 1, -1, 17, -20, 5};
    bx.scales_h = 0;
    memset(bx.scales_l, 0, sizeof bx.scales_l);
    for (int ib = 0; ib < 8; ib++) {
        const int u = xs_scale[ib] + 32;
        bx.scales_l[ib / 2] |= (uint8_t)((u & 15) << (4 * (ib % 2)));
        bx.scales_h |= (uint16_t)((u >> 4) << (2 * ib));
    }
    CHECK(bx.scales_h == 0x8dac && bx.scales_l[0] == 0xf0 && bx.scales_l[1] == 0x10);
    for (int i = 0; i < 128; i++)
        bx.qs[i] = (uint8_t)(i * 29 + 1);
    tn_dequant_ref_iq4_xs(&bx, y, 256);
    /* value 0: qs[0] = 1 -> table[1] = -104, scale -32: 0.25 * 3328 */
    CHECK(y[0] == 832.0f);
    for (int ib = 0; ib < 8; ib++)
        for (int j = 0; j < 16; j++) {
            const uint8_t q = bx.qs[16 * ib + j];
            bad += y[32 * ib + j] != 0.25f * (float)(xs_scale[ib] * table[q & 15]);
            bad += y[32 * ib + 16 + j] != 0.25f * (float)(xs_scale[ib] * table[q >> 4]);
        }
    CHECKF(bad == 0, "%d iq4_xs values wrong", bad);
}

/* ------------------------------------------- reference quantizer rounding */

static void test_quant_rounding(void) {
    /* Q8_0: amax 127 -> d = 1; ties round away from zero (ggml uses roundf). */
    float x[256] = {127.f, 2.5f, -2.5f, 3.5f, 0.5f, -0.5f, 0.49f, -126.6f};
    tn_block_q8_0 q8;
    tn_quant_ref_q8_0(x, &q8, 32);
    CHECK(q8.d == 0x3c00);
    CHECK(q8.qs[0] == 127 && q8.qs[1] == 3 && q8.qs[2] == -3 && q8.qs[3] == 4);
    CHECK(q8.qs[4] == 1 && q8.qs[5] == -1 && q8.qs[6] == 0 && q8.qs[7] == -127);
    CHECK(q8.qs[8] == 0);

    /* Q8_1 also stores s = d * sum(q); here d = 2 */
    float x2[32];
    for (int j = 0; j < 32; j++)
        x2[j] = 2 * x[j];
    tn_block_q8_1 q81;
    tn_quant_ref_q8_1(x2, &q81, 32);
    CHECK(q81.d == 0x4000 && memcmp(q81.qs, q8.qs, 32) == 0);
    CHECK(tn_fp16_to_fp32(q81.s) == 2 * (127 + 3 - 3 + 4 + 1 - 1 + 0 - 127));

    /* Q4_0: the signed extreme maps to -8; d = max / -8. Here max = -8:
     * d = 1, q = floor(x + 8.5) clamped to 15 (halves round up). */
    float x4[32] = {-8.f, 7.f, 7.4f, -7.5f, 0.5f, -0.5f, 100.f / 16, 0.f};
    tn_block_q4_0 q4;
    tn_quant_ref_q4_0(x4, &q4, 32);
    CHECK(q4.d == 0x3c00);
    float y[256];
    tn_dequant_ref_q4_0(&q4, y, 32);
    CHECK(y[0] == -8.f && y[1] == 7.f && y[2] == 7.f && y[3] == -7.f);
    CHECK(y[4] == 1.f && y[5] == 0.f && y[6] == 6.f && y[7] == 0.f);
    CHECK((q4.qs[0] & 15) == 0 && (q4.qs[1] & 15) == 15 && (q4.qs[7] & 15) == 8);
    /* max = +8: d = -1, so +8 is exact and -8 clamps to -7 */
    x4[0] = 8.f;
    x4[1] = -8.f;
    tn_quant_ref_q4_0(x4, &q4, 32);
    CHECK(q4.d == 0xbc00);
    tn_dequant_ref_q4_0(&q4, y, 32);
    CHECK(y[0] == 8.f && y[1] == -7.f);

    /* Q8_K: iscale = -127 / max with max the signed extreme; bsums are the
     * sums of each 16 quants. */
    for (int i = 0; i < 256; i++)
        x[i] = (float)(i % 17) - 8.f;
    x[5] = -12.7f;
    tn_block_q8_K q8k;
    tn_quant_ref_q8_K(x, &q8k, 256);
    CHECK(fabsf(q8k.d - 0.1f) < 1e-7f);
    CHECK(q8k.qs[5] == -127 && q8k.qs[0] == -80 && q8k.qs[16] == 80);
    int bad = 0;
    for (int k = 0; k < 16; k++) {
        int s = 0;
        for (int j = 0; j < 16; j++)
            s += q8k.qs[16 * k + j];
        bad += q8k.bsums[k] != s;
    }
    CHECK(bad == 0);

    /* the dispatcher's result equals the direct call */
    uint64_t st = 7;
    for (int i = 0; i < 256; i++)
        x[i] = gauss(&st) * (float)(1 + i / 32) + 0.5f;
    tn_block_q4_K a, b;
    tn_quant_ref_q4_K(x, &a, 256);
    CHECK(tn_quantize_row(TN_TYPE_Q4_K, x, &b, 256) == TN_OK);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
}

/* ------------------------------------------------------- round trips */

enum { RT_N = 4096 };

static void fill(int dist, float *x, uint64_t *st) {
    for (int i = 0; i < RT_N; i++) {
        switch (dist) {
        case 0: x[i] = gauss(st); break;                        /* gaussian */
        case 1: x[i] = tn_test_randf(st); break;                /* uniform */
        case 2: x[i] = gauss(st) * (i % 61 == 7 ? 40.f : 1.f); break; /* outliers */
        case 3: x[i] = 1.0f + 0.25f * gauss(st); break;         /* offset, one sign */
        case 4: x[i] = 0.02f * gauss(st); break;                /* small weights */
        case 5: x[i] = 300.f * tn_test_randf(st); break;        /* large */
        case 6: x[i] = gauss(st) * (float)(1 + (i / 32) % 8); break; /* varying blocks */
        }
    }
}

static const char *dist_names[] = {"gaussian", "uniform", "outliers", "offset",
                                   "small", "large", "varying"};
#define N_DISTS 7

static void test_round_trips(void) {
    static float x[RT_N], y[RT_N];
    static uint8_t q[RT_N * 4 + 64];
    uint64_t st = 42;
    for (int c = 0; c < N_QUANT_CASES; c++) {
        const uint32_t t = quant_cases[c].type;
        const char *name = tn_type_name(t);
        fprintf(stderr, "  %-5s", name);
        for (int d = 0; d < N_DISTS; d++) {
            fill(d, x, &st);
            CHECK(tn_quantize_row(t, x, q, RT_N) == TN_OK);
            CHECK(tn_dequantize_row(t, q, y, RT_N) == TN_OK);
            double e = rel_rmse(x, y, RT_N);
            fprintf(stderr, " %s %.5f", dist_names[d], e);
            const double bound = d == 0   ? quant_cases[c].gauss
                                 : d == 2 ? quant_cases[c].outlier
                                          : quant_cases[c].bound;
            CHECKF(e <= bound, "%s on %s: relative RMSE %.5f > bound %.5f", name, dist_names[d],
                   e, bound);
        }
        fprintf(stderr, "\n");

        /* all zero -> exact zeros */
        memset(x, 0, sizeof x);
        CHECK(tn_quantize_row(t, x, q, RT_N) == TN_OK);
        CHECK(tn_dequantize_row(t, q, y, RT_N) == TN_OK);
        int nonzero = 0;
        for (int i = 0; i < RT_N; i++)
            nonzero += y[i] != 0.f;
        CHECKF(nonzero == 0, "%s: %d of an all-zero row dequantize non-zero", name, nonzero);

        /* constants of either sign come back within fp16 precision of the
         * scales (bf16's own precision for bf16) */
        const float consts[] = {0.7f, -0.7f, 3.0f, -0.05f};
        for (size_t k = 0; k < sizeof consts / sizeof consts[0]; k++) {
            for (int i = 0; i < RT_N; i++)
                x[i] = consts[k];
            CHECK(tn_quantize_row(t, x, q, RT_N) == TN_OK);
            CHECK(tn_dequantize_row(t, q, y, RT_N) == TN_OK);
            double e = rel_rmse(x, y, RT_N);
            /* MXFP4: a power-of-two scale and 3-bit levels (..., 4, 6, 8,
             * 12 times it): a constant comes back within a quarter */
            CHECKF(e <= (t == TN_TYPE_BF16 ? 4e-3 : t == TN_TYPE_MXFP4 ? 0.25 : 2e-3),
                   "%s: constant %g: relative RMSE %.5f", name, consts[k], e);
        }

        /* A destination or source at an odd address gives the same bytes. */
        fill(0, x, &st);
        const size_t bytes = tn_type_row_bytes(t, RT_N);
        static uint8_t q2[RT_N * 4 + 64];
        static float y2[RT_N];
        CHECK(tn_quantize_row(t, x, q, RT_N) == TN_OK);
        CHECK(tn_quantize_row(t, x, q2 + 1, RT_N) == TN_OK);
        CHECKF(memcmp(q, q2 + 1, bytes) == 0, "%s: unaligned quantize differs", name);
        CHECK(tn_dequantize_row(t, q, y, RT_N) == TN_OK);
        CHECK(tn_dequantize_row(t, q2 + 1, y2, RT_N) == TN_OK);
        CHECKF(memcmp(y, y2, sizeof y) == 0, "%s: unaligned dequantize differs", name);
    }
}

/* ------------------------------------------------------- non-finite */

/* Defined result: for block types NaN quantizes as 0 and +-inf as the
 * block's largest finite magnitude with its sign; F16/BF16 keep NaN/inf. */
static void test_non_finite(void) {
    static float x[512], y[512];
    static uint8_t q[4096];
    uint64_t st = 99;
    for (int c = 0; c < N_QUANT_CASES; c++) {
        const uint32_t t = quant_cases[c].type;
        const char *name = tn_type_name(t);
        for (int i = 0; i < 512; i++)
            x[i] = gauss(&st);
        /* first half of the row: scattered non-finite values among normal
         * ones; second half: blocks made only of NaN, then only of inf */
        x[3] = NAN;
        x[40] = INFINITY;
        x[41] = -INFINITY;
        x[300] = -NAN;
        for (int i = 256; i < 512; i++)
            x[i] = i < 384 ? NAN : (i % 2 ? INFINITY : -INFINITY);
        CHECK(tn_quantize_row(t, x, q, 512) == TN_OK);
        CHECK(tn_dequantize_row(t, q, y, 512) == TN_OK);
        if (t == TN_TYPE_F32 || t == TN_TYPE_F16 || t == TN_TYPE_BF16) {
            CHECK(isnan(y[3]) && isnan(y[300]));
            CHECK(y[40] == INFINITY && y[41] == -INFINITY);
            continue;
        }
        int non_finite = 0;
        for (int i = 0; i < 512; i++)
            non_finite += !isfinite(y[i]);
        CHECKF(non_finite == 0, "%s: %d non-finite outputs", name, non_finite);
        /* NaN became ~0 and inf the block's extreme, within the type's error */
        const int bs = (int)tn_type_block_size(t);
        float amax = 0;
        for (int i = 40 / bs * bs; i < 40 / bs * bs + bs; i++)
            if (isfinite(x[i]))
                amax = fmaxf(amax, fabsf(x[i]));
        /* MXFP4's scale (ggml's: 2^(floor(log2 amax) - 2), top level 6)
         * clips a block's largest values by up to a quarter */
        const float tol = t == TN_TYPE_MXFP4 ? 0.25f : 0.15f;
        CHECKF(fabsf(y[40] - amax) <= tol * amax && fabsf(y[41] + amax) <= tol * amax,
               "%s: inf -> %g, -inf -> %g, block max %g", name, y[40], y[41], amax);
        CHECKF(fabsf(y[3]) <= 0.15f * 4.f, "%s: NaN -> %g", name, y[3]);
        /* the finite values of those blocks still come back */
        double err = 0, ref = 0;
        for (int i = 0; i < 256; i++)
            if (isfinite(x[i]) && i != 40 && i != 41) {
                err += (x[i] - y[i]) * (x[i] - y[i]);
                ref += x[i] * x[i];
            }
        CHECKF(sqrt(err / ref) <= 2 * quant_cases[c].bound, "%s: finite values after NaN: %.4f",
               name, sqrt(err / ref));
        /* a block of only NaN decodes to zeros */
        CHECK(y[256] == 0.f && y[383] == 0.f);
    }
    /* huge finite values: no crash, no NaN (fp16 scales may overflow to inf) */
    for (int c = 0; c < N_QUANT_CASES; c++) {
        for (int i = 0; i < 512; i++)
            x[i] = (i % 3 ? FLT_MAX : -FLT_MAX) * (i % 5 ? 1.f : 0.5f);
        CHECK(tn_quantize_row(quant_cases[c].type, x, q, 512) == TN_OK);
        CHECK(tn_dequantize_row(quant_cases[c].type, q, y, 512) == TN_OK);
        for (int i = 0; i < 512; i++)
            x[i] = 1e-30f * gauss(&st); /* scales underflow fp16 */
        CHECK(tn_quantize_row(quant_cases[c].type, x, q, 512) == TN_OK);
        CHECK(tn_dequantize_row(quant_cases[c].type, q, y, 512) == TN_OK);
        int nan = 0;
        for (int i = 0; i < 512; i++)
            nan += isnan(y[i]);
        CHECKF(nan == 0, "%s: tiny values gave NaN", tn_type_name(quant_cases[c].type));
    }
}

/* MXFP4: hand-made blocks against the format's definition (the E8M0 byte
 * a power of two, the codes E2M1 numbers), and the reference quantizer
 * against ggml's quantize_row_mxfp4_ref written out here in its own
 * terms. */
static double e2m1(int code) {
    static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    return (code & 8 ? -1 : 1) * mag[code & 7];
}

static void test_blocks_mxfp4(void) {
    /* The scale byte: 2^(e - 127), halved against the doubled codes. */
    static const uint8_t es[] = {0, 1, 2, 3, 100, 126, 127, 128, 200, 252, 253, 254, 255};
    for (size_t i = 0; i < sizeof es / sizeof es[0]; i++)
        CHECKF(tn_e8m0_half(es[i]) == (float)ldexp(1.0, (int)es[i] - 128), "e8m0 %u", es[i]);
    tn_block_mxfp4 b;
    float y[32];
    int bad = 0;
    /* every code at every scale a file may hold (253 and up overflow: the
     * loader refuses them, below) */
    for (size_t ie = 0; es[ie] <= 252; ie++) {
        b.e = es[ie];
        for (int j = 0; j < 16; j++)
            b.qs[j] = (uint8_t)(j | (15 - j) << 4);
        CHECK(tn_dequantize_row(TN_TYPE_MXFP4, &b, y, 32) == TN_OK);
        for (int j = 0; j < 16; j++) {
            bad += (double)y[j] != e2m1(j) * ldexp(1.0, (int)b.e - 127);
            bad += (double)y[j + 16] != e2m1(15 - j) * ldexp(1.0, (int)b.e - 127);
        }
    }
    CHECKF(bad == 0, "%d mxfp4 values wrong", bad);
    /* e = 127 (scale 1): code 7 is 6, code 9 is -0.5, codes 0 and 8 are 0 */
    b.e = 127;
    memset(b.qs, 0, sizeof b.qs);
    b.qs[0] = 0x97;
    b.qs[1] = 0x08;
    CHECK(tn_dequantize_row(TN_TYPE_MXFP4, &b, y, 32) == TN_OK);
    CHECK(y[0] == 6.0f && y[16] == -0.5f && y[1] == 0.0f && y[17] == 0.0f);
    /* the load-time check: a scale byte of 253 or more is refused, by row */
    tn_block_mxfp4 rows[3][2];
    memset(rows, 0, sizeof rows);
    rows[0][1].e = 252;
    rows[2][0].e = 127;
    CHECK(tn_weights_first_nonfinite(TN_TYPE_MXFP4, rows, sizeof rows[0], 3, 64) == -1);
    rows[2][1].e = 253;
    CHECK(tn_weights_first_nonfinite(TN_TYPE_MXFP4, rows, sizeof rows[0], 3, 64) == 2);
    rows[1][0].e = 255;
    CHECK(tn_weights_first_nonfinite(TN_TYPE_MXFP4, rows, sizeof rows[0], 3, 64) == 1);

    /* The quantizer: e = floor(log2(amax)) - 2 + 127, each value to the
     * nearest of the 16 levels (the first on a tie), as ggml. */
    uint64_t st = 7;
    float x[64];
    tn_block_mxfp4 q[2];
    int qbad = 0;
    for (int trial = 0; trial < 200; trial++) {
        const float scale = ldexpf(1.0f, trial % 40 - 20);
        for (int j = 0; j < 64; j++)
            x[j] = scale * gauss(&st) * (j % 13 == 0 ? 5.0f : 1.0f);
        CHECK(tn_quantize_row(TN_TYPE_MXFP4, x, q, 64) == TN_OK);
        for (int blk = 0; blk < 2; blk++) {
            float amax = 0;
            for (int j = 0; j < 32; j++)
                amax = fabsf(x[32 * blk + j]) > amax ? fabsf(x[32 * blk + j]) : amax;
            const int e = (int)(floorf(log2f(amax)) - 2 + 127);
            qbad += q[blk].e != e;
            const double d = ldexp(1.0, e - 128);
            for (int j = 0; j < 32; j++) {
                const float v = x[32 * blk + j];
                int best = 0;
                for (int k = 1; k < 16; k++)
                    if (fabsf((float)tn_mxfp4_values[k] * (float)d - v) <
                        fabsf((float)tn_mxfp4_values[best] * (float)d - v))
                        best = k;
                const int code = j < 16 ? q[blk].qs[j] & 15 : q[blk].qs[j - 16] >> 4;
                qbad += code != best;
            }
        }
    }
    CHECKF(qbad == 0, "mxfp4 quantizer: %d scales or codes differ from ggml's rule", qbad);
    /* Blocks far out of range keep a valid scale byte (ggml's cast would be
     * undefined there), and zeros give zeros. */
    for (int j = 0; j < 32; j++)
        x[j] = j == 3 ? 1e-40f : 0.0f;
    CHECK(tn_quantize_row(TN_TYPE_MXFP4, x, q, 32) == TN_OK);
    CHECK(q[0].e == 0);
    for (int j = 0; j < 32; j++)
        x[j] = j == 3 ? 3e38f : 1.0f;
    CHECK(tn_quantize_row(TN_TYPE_MXFP4, x, q, 32) == TN_OK);
    CHECK(q[0].e == 252);
    CHECK(tn_dequantize_row(TN_TYPE_MXFP4, q, y, 32) == TN_OK);
    CHECK(isfinite(y[3]) && y[3] > 1e38f);
}

/* general.file_type names as llama.cpp prints them, and mkmodel's TYPE
 * mapped only where a llama_ftype says exactly that. */
static void test_file_types(void) {
    CHECK(tn_file_type_name(15) && !strcmp(tn_file_type_name(15), "Q4_K_M"));
    CHECK(tn_file_type_name(2) && !strcmp(tn_file_type_name(2), "Q4_0"));
    CHECK(tn_file_type_name(30) && !strcmp(tn_file_type_name(30), "IQ4_XS"));
    CHECK(tn_file_type_name(4) == NULL && tn_file_type_name(33) == NULL);
    CHECK(tn_file_type_name(1024) == NULL && tn_file_type_name(UINT32_MAX) == NULL);
    CHECK(tn_file_type_for("q4_k_m") == 15 && tn_file_type_for("Q5_K_M") == 17);
    CHECK(tn_file_type_for("q8_0") == 7 && tn_file_type_for("bf16") == 32);
    CHECK(tn_file_type_for("f16") == 1 && tn_file_type_for("q6_K") == 18);
    CHECK(tn_file_type_for("q4_K") == -1 && tn_file_type_for("q3_K") == -1);
    CHECK(tn_file_type_for("mxfp4") == 38 && !strcmp(tn_file_type_name(38), "MXFP4_MOE"));
    CHECK(tn_file_type_for("") == -1 && tn_file_type_for(NULL) == -1 && tn_file_type_for("x") == -1);
    /* Every name the mapping gives back is the table's. */
    const char *types[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                           "q2_K", "q6_K", "iq4_nl", "iq4_xs", "q4_k_m", "q5_k_m"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        int ft = tn_file_type_for(types[i]);
        CHECKF(ft >= 0 && tn_file_type_name((uint32_t)ft) &&
                   !strcasecmp(tn_file_type_name((uint32_t)ft), types[i]),
               "file type of %s", types[i]);
    }
}

int main(void) {
    test_file_types();
    test_type_table();
    test_dispatch_errors();
    test_fp16();
    test_bf16();
    test_blocks_float();
    test_blocks_32();
    test_blocks_k();
    test_blocks_new();
    test_blocks_mxfp4();
    test_quant_rounding();
    test_round_trips();
    test_non_finite();
    return tn_test_finish("quant");
}
