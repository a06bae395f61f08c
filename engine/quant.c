/* GGUF tensor types: names, sizes, fp16/bf16 conversions and the scalar
 * reference (de)quantizers. Byte layouts and the rounding of the reference
 * quantizers follow ggml's, so files written here load in other engines and
 * theirs load here with the same values. */
#include "tn-internal.h"
#include "tn-quant.h"

#include <float.h>
#include <math.h>
#include <stdalign.h>
#include <string.h>

/* ----------------------------------------------------------- type table */

typedef struct {
    const char *name;
    uint32_t block_size;  /* values per block */
    uint32_t block_bytes; /* bytes per block */
} tn_type_info;

/* Every id ggml has assigned, so that a file using a type Tern cannot run is
 * still sized correctly and named in the message. Gaps are retired ids. */
static const tn_type_info type_table[TN_TYPE_COUNT_] = {
    [TN_TYPE_F32] = {"f32", 1, 4},
    [TN_TYPE_F16] = {"f16", 1, 2},
    [TN_TYPE_Q4_0] = {"q4_0", TN_QK4_0, sizeof(tn_block_q4_0)},
    [TN_TYPE_Q4_1] = {"q4_1", TN_QK4_1, sizeof(tn_block_q4_1)},
    [TN_TYPE_Q5_0] = {"q5_0", TN_QK5_0, sizeof(tn_block_q5_0)},
    [TN_TYPE_Q5_1] = {"q5_1", TN_QK5_1, sizeof(tn_block_q5_1)},
    [TN_TYPE_Q8_0] = {"q8_0", TN_QK8_0, sizeof(tn_block_q8_0)},
    [TN_TYPE_Q8_1] = {"q8_1", TN_QK8_1, sizeof(tn_block_q8_1)},
    [TN_TYPE_Q2_K] = {"q2_K", TN_QK_K, sizeof(tn_block_q2_K)},
    [TN_TYPE_Q3_K] = {"q3_K", TN_QK_K, sizeof(tn_block_q3_K)},
    [TN_TYPE_Q4_K] = {"q4_K", TN_QK_K, sizeof(tn_block_q4_K)},
    [TN_TYPE_Q5_K] = {"q5_K", TN_QK_K, sizeof(tn_block_q5_K)},
    [TN_TYPE_Q6_K] = {"q6_K", TN_QK_K, sizeof(tn_block_q6_K)},
    [TN_TYPE_Q8_K] = {"q8_K", TN_QK_K, sizeof(tn_block_q8_K)},
    [16] = {"iq2_xxs", TN_QK_K, 66},
    [17] = {"iq2_xs", TN_QK_K, 74},
    [18] = {"iq3_xxs", TN_QK_K, 98},
    [19] = {"iq1_s", TN_QK_K, 50},
    [TN_TYPE_IQ4_NL] = {"iq4_nl", TN_QK4_NL, sizeof(tn_block_iq4_nl)},
    [21] = {"iq3_s", TN_QK_K, 110},
    [22] = {"iq2_s", TN_QK_K, 82},
    [TN_TYPE_IQ4_XS] = {"iq4_xs", TN_QK_K, sizeof(tn_block_iq4_xs)},
    [24] = {"i8", 1, 1},
    [25] = {"i16", 1, 2},
    [26] = {"i32", 1, 4},
    [27] = {"i64", 1, 8},
    [28] = {"f64", 1, 8},
    [29] = {"iq1_m", TN_QK_K, 56},
    [TN_TYPE_BF16] = {"bf16", 1, 2},
    [34] = {"tq1_0", TN_QK_K, 54},
    [35] = {"tq2_0", TN_QK_K, 66},
    [TN_TYPE_MXFP4] = {"mxfp4", TN_QK_MXFP4, sizeof(tn_block_mxfp4)},
};

static const tn_type_info *type_info(uint32_t type) {
    if (type >= TN_TYPE_COUNT_ || !type_table[type].name)
        return NULL;
    return &type_table[type];
}

const char *tn_type_name(uint32_t type) {
    const tn_type_info *t = type_info(type);
    return t ? t->name : NULL;
}

/* llama.cpp's llama_ftype values (include/llama.h at de3ff81): ids 4-6 and
 * 33-35 were removed there and are not names here either. */
static const struct {
    uint32_t id;
    const char *name;
} file_types[] = {
    {0, "F32"},       {1, "F16"},      {2, "Q4_0"},     {3, "Q4_1"},     {7, "Q8_0"},
    {8, "Q5_0"},      {9, "Q5_1"},     {10, "Q2_K"},    {11, "Q3_K_S"},  {12, "Q3_K_M"},
    {13, "Q3_K_L"},   {14, "Q4_K_S"},  {15, "Q4_K_M"},  {16, "Q5_K_S"},  {17, "Q5_K_M"},
    {18, "Q6_K"},     {19, "IQ2_XXS"}, {20, "IQ2_XS"},  {21, "Q2_K_S"},  {22, "IQ3_XS"},
    {23, "IQ3_XXS"},  {24, "IQ1_S"},   {25, "IQ4_NL"},  {26, "IQ3_S"},   {27, "IQ3_M"},
    {28, "IQ2_S"},    {29, "IQ2_M"},   {30, "IQ4_XS"},  {31, "IQ1_M"},   {32, "BF16"},
    {36, "TQ1_0"},    {37, "TQ2_0"},   {38, "MXFP4_MOE"}, {39, "NVFP4"},
};

const char *tn_file_type_name(uint32_t file_type) {
    for (size_t i = 0; i < sizeof file_types / sizeof file_types[0]; i++)
        if (file_types[i].id == file_type)
            return file_types[i].name;
    return NULL;
}

int tn_file_type_for(const char *type_or_mix) {
    /* mkmodel's pure K types (q3_K, q4_K, q5_K) are not llama.cpp's _S
     * mixes, so they get no file_type rather than a wrong one. */
    static const char *const exact[] = {"f32", "f16", "q4_0", "q4_1", "q8_0", "q5_0", "q5_1",
                                        "q2_K", "q4_k_m", "q5_k_m", "q6_K", "iq4_nl",
                                        "iq4_xs", "bf16"};
    if (!type_or_mix)
        return -1;
    /* mkmodel's mxfp4 is llama-quantize's MXFP4_MOE rule: experts MXFP4,
     * every other matrix Q8_0. */
    if (!strcasecmp(type_or_mix, "mxfp4"))
        return 38;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        if (strcasecmp(type_or_mix, exact[i]))
            continue;
        for (size_t j = 0; j < sizeof file_types / sizeof file_types[0]; j++)
            if (!strcasecmp(file_types[j].name, type_or_mix))
                return (int)file_types[j].id;
    }
    return -1;
}

int tn_type_from_name(const char *name) {
    if (!name)
        return -1;
    for (uint32_t i = 0; i < TN_TYPE_COUNT_; i++)
        if (type_table[i].name && strcasecmp(type_table[i].name, name) == 0)
            return (int)i;
    return -1;
}

size_t tn_type_block_size(uint32_t type) {
    const tn_type_info *t = type_info(type);
    return t ? t->block_size : 0;
}

size_t tn_type_block_bytes(uint32_t type) {
    const tn_type_info *t = type_info(type);
    return t ? t->block_bytes : 0;
}

bool tn_type_supported(uint32_t type) {
    switch (type) {
    case TN_TYPE_F32:
    case TN_TYPE_F16:
    case TN_TYPE_BF16:
    case TN_TYPE_Q4_0:
    case TN_TYPE_Q4_1:
    case TN_TYPE_Q5_0:
    case TN_TYPE_Q5_1:
    case TN_TYPE_Q8_0:
    case TN_TYPE_Q8_1:
    case TN_TYPE_Q4_K:
    case TN_TYPE_Q5_K:
    case TN_TYPE_Q6_K:
    case TN_TYPE_Q8_K:
    case TN_TYPE_Q2_K:
    case TN_TYPE_Q3_K:
    case TN_TYPE_IQ4_NL:
    case TN_TYPE_IQ4_XS:
    case TN_TYPE_MXFP4:
        return true;
    default:
        return false;
    }
}

size_t tn_type_row_bytes(uint32_t type, uint64_t n) {
    const tn_type_info *t = type_info(type);
    if (!t || n % t->block_size != 0)
        return 0;
    uint64_t bytes;
    if (!tn_mul_u64(n / t->block_size, t->block_bytes, &bytes) || bytes > SIZE_MAX)
        return 0;
    return (size_t)bytes;
}

/* ------------------------------------------------------ fp16 and bf16 */

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float tn_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) /* inf, or NaN with its payload kept */
        return f32_from_bits(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24, exact in fp32 */
        float v = (float)mant * 0x1p-24f;
        return f32_from_bits(sign | f32_bits(v));
    }
    return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t tn_fp32_to_fp16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) {
        if (a == 0x7f800000u)
            return sign | 0x7c00;
        /* Keep the top of the payload so a half NaN survives the round trip;
         * a payload only in the dropped bits still has to stay a NaN. */
        uint16_t mant = (uint16_t)((a >> 13) & 0x3ff);
        return sign | 0x7c00 | (mant ? mant : 0x200);
    }
    if (a >= 0x477ff000u) /* 65520 and above round to infinity */
        return sign | 0x7c00;
    if (a >= 0x38800000u) { /* a normal half */
        uint32_t h = (a - 0x38000000u) >> 13;
        uint32_t rest = a & 0x1fff;
        if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
            h++; /* a carry into the exponent is still the right value */
        return sign | (uint16_t)h;
    }
    uint32_t exp = a >> 23;
    if (exp < 102) /* below half of the smallest subnormal */
        return sign;
    /* subnormal half: count of 2^-24 units, rounded to nearest even */
    uint32_t mant = (a & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - exp;
    uint32_t h = mant >> shift;
    uint32_t rest = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1)))
        h++;
    return sign | (uint16_t)h;
}

float tn_bf16_to_fp32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

uint16_t tn_fp32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        uint16_t h = (uint16_t)(u >> 16);
        /* truncating may leave a zero mantissa, which would read as inf */
        return (h & 0x7f) ? h : (uint16_t)(h | 0x40);
    }
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

#define FP16(x) tn_fp16_to_fp32(x)
#define TO_FP16(x) tn_fp32_to_fp16(x)

/* ------------------------------------------------------------ helpers */

/* Round to nearest, ties to even (ggml's nearest_int), clamped to
 * [lo, hi]; NaN gives the value in range nearest to 0. Clamping first keeps
 * the float->int step defined for any input. */
static inline int round_clamp(float v, int lo, int hi) {
    if (v != v)
        return lo > 0 ? lo : (hi < 0 ? hi : 0);
    if (v <= (float)lo)
        return lo;
    if (v >= (float)hi)
        return hi;
    float biased = v + 12582912.f; /* 1.5 * 2^23: the FPU rounds to an integer */
    int32_t i;
    memcpy(&i, &biased, 4);
    return (i & 0x007fffff) - 0x00400000;
}

/* floor(v) clamped to [lo, hi], NaN -> lo: ggml's (int8_t)(v + 0.5f) style
 * rounding for values it knows are non-negative. */
static inline int floor_clamp(float v, int lo, int hi) {
    if (!(v > (float)lo))
        return lo;
    if (v >= (float)hi)
        return hi;
    return (int)v;
}

static inline bool block_finite(const float *x, int n) {
    for (int i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return false;
    return true;
}

/* Quantizers work on finite values only: NaN becomes 0, and +-inf the largest
 * finite magnitude of its block with its sign, so a damaged weight costs one
 * block's accuracy, never the whole tensor nor undefined behaviour. */
static const float *finite_block(const float *x, float *tmp, int n) {
    if (block_finite(x, n))
        return x;
    float amax = 0.f;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i]) && fabsf(x[i]) > amax)
            amax = fabsf(x[i]);
    for (int i = 0; i < n; i++) {
        if (isnan(x[i]))
            tmp[i] = 0.f;
        else if (isinf(x[i]))
            tmp[i] = x[i] > 0 ? amax : -amax;
        else
            tmp[i] = x[i];
    }
    return tmp;
}

/* ------------------------------------------------------ 32-value blocks */

void tn_dequant_ref_q4_0(const tn_block_q4_0 *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / TN_QK4_0; i++, y += TN_QK4_0) {
        const float d = FP16(x[i].d);
        for (int j = 0; j < TN_QK4_0 / 2; j++) {
            y[j] = d * (float)((x[i].qs[j] & 0x0f) - 8);
            y[j + TN_QK4_0 / 2] = d * (float)((x[i].qs[j] >> 4) - 8);
        }
    }
}

void tn_quant_ref_q4_0(const float *x, tn_block_q4_0 *y, int64_t n) {
    float tmp[TN_QK4_0];
    for (int64_t i = 0; i < n / TN_QK4_0; i++, x += TN_QK4_0) {
        const float *v = finite_block(x, tmp, TN_QK4_0);
        /* The signed extreme maps to -8 exactly, so the range [-8, 7] is
         * used fully on the side that matters most. */
        float amax = 0.f, max = 0.f;
        for (int j = 0; j < TN_QK4_0; j++)
            if (fabsf(v[j]) > amax) {
                amax = fabsf(v[j]);
                max = v[j];
            }
        const float d = max / -8.f;
        const float id = d != 0.f ? 1.f / d : 0.f;
        y[i].d = TO_FP16(d);
        for (int j = 0; j < TN_QK4_0 / 2; j++) {
            int lo = floor_clamp(v[j] * id + 8.5f, 0, 15);
            int hi = floor_clamp(v[j + TN_QK4_0 / 2] * id + 8.5f, 0, 15);
            y[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

void tn_dequant_ref_q4_1(const tn_block_q4_1 *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / TN_QK4_1; i++, y += TN_QK4_1) {
        const float d = FP16(x[i].d), m = FP16(x[i].m);
        for (int j = 0; j < TN_QK4_1 / 2; j++) {
            y[j] = (float)(x[i].qs[j] & 0x0f) * d + m;
            y[j + TN_QK4_1 / 2] = (float)(x[i].qs[j] >> 4) * d + m;
        }
    }
}

void tn_quant_ref_q4_1(const float *x, tn_block_q4_1 *y, int64_t n) {
    float tmp[TN_QK4_1];
    for (int64_t i = 0; i < n / TN_QK4_1; i++, x += TN_QK4_1) {
        const float *v = finite_block(x, tmp, TN_QK4_1);
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < TN_QK4_1; j++) {
            if (v[j] < min)
                min = v[j];
            if (v[j] > max)
                max = v[j];
        }
        const float d = (max - min) / 15.f;
        const float id = d != 0.f ? 1.f / d : 0.f;
        y[i].d = TO_FP16(d);
        y[i].m = TO_FP16(min);
        for (int j = 0; j < TN_QK4_1 / 2; j++) {
            int lo = floor_clamp((v[j] - min) * id + 0.5f, 0, 15);
            int hi = floor_clamp((v[j + TN_QK4_1 / 2] - min) * id + 0.5f, 0, 15);
            y[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

/* Q5: bit 4 of value j (j < 16) is bit j of qh, of value j + 16 bit j + 16. */
void tn_dequant_ref_q5_0(const tn_block_q5_0 *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / TN_QK5_0; i++, y += TN_QK5_0) {
        const float d = FP16(x[i].d);
        const uint32_t qh = tn_rd_u32(x[i].qh);
        for (int j = 0; j < TN_QK5_0 / 2; j++) {
            int lo = (x[i].qs[j] & 0x0f) | (int)(((qh >> j) & 1) << 4);
            int hi = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = d * (float)(lo - 16);
            y[j + TN_QK5_0 / 2] = d * (float)(hi - 16);
        }
    }
}

void tn_quant_ref_q5_0(const float *x, tn_block_q5_0 *y, int64_t n) {
    float tmp[TN_QK5_0];
    for (int64_t i = 0; i < n / TN_QK5_0; i++, x += TN_QK5_0) {
        const float *v = finite_block(x, tmp, TN_QK5_0);
        float amax = 0.f, max = 0.f;
        for (int j = 0; j < TN_QK5_0; j++)
            if (fabsf(v[j]) > amax) {
                amax = fabsf(v[j]);
                max = v[j];
            }
        const float d = max / -16.f;
        const float id = d != 0.f ? 1.f / d : 0.f;
        y[i].d = TO_FP16(d);
        uint32_t qh = 0;
        for (int j = 0; j < TN_QK5_0 / 2; j++) {
            int lo = floor_clamp(v[j] * id + 16.5f, 0, 31);
            int hi = floor_clamp(v[j + TN_QK5_0 / 2] * id + 16.5f, 0, 31);
            y[i].qs[j] = (uint8_t)((lo & 0x0f) | ((hi & 0x0f) << 4));
            qh |= (uint32_t)(lo >> 4) << j;
            qh |= (uint32_t)(hi >> 4) << (j + 16);
        }
        memcpy(y[i].qh, &qh, 4);
    }
}

void tn_dequant_ref_q5_1(const tn_block_q5_1 *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / TN_QK5_1; i++, y += TN_QK5_1) {
        const float d = FP16(x[i].d), m = FP16(x[i].m);
        const uint32_t qh = tn_rd_u32(x[i].qh);
        for (int j = 0; j < TN_QK5_1 / 2; j++) {
            int lo = (x[i].qs[j] & 0x0f) | (int)(((qh >> j) & 1) << 4);
            int hi = (x[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = (float)lo * d + m;
            y[j + TN_QK5_1 / 2] = (float)hi * d + m;
        }
    }
}

void tn_quant_ref_q5_1(const float *x, tn_block_q5_1 *y, int64_t n) {
    float tmp[TN_QK5_1];
    for (int64_t i = 0; i < n / TN_QK5_1; i++, x += TN_QK5_1) {
        const float *v = finite_block(x, tmp, TN_QK5_1);
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < TN_QK5_1; j++) {
            if (v[j] < min)
                min = v[j];
            if (v[j] > max)
                max = v[j];
        }
        const float d = (max - min) / 31.f;
        const float id = d != 0.f ? 1.f / d : 0.f;
        y[i].d = TO_FP16(d);
        y[i].m = TO_FP16(min);
        uint32_t qh = 0;
        for (int j = 0; j < TN_QK5_1 / 2; j++) {
            int lo = floor_clamp((v[j] - min) * id + 0.5f, 0, 31);
            int hi = floor_clamp((v[j + TN_QK5_1 / 2] - min) * id + 0.5f, 0, 31);
            y[i].qs[j] = (uint8_t)((lo & 0x0f) | ((hi & 0x0f) << 4));
            qh |= (uint32_t)(lo >> 4) << j;
            qh |= (uint32_t)(hi >> 4) << (j + 16);
        }
        memcpy(y[i].qh, &qh, 4);
    }
}

void tn_dequant_ref_q8_0(const tn_block_q8_0 *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / TN_QK8_0; i++, y += TN_QK8_0) {
        const float d = FP16(x[i].d);
        for (int j = 0; j < TN_QK8_0; j++)
            y[j] = d * (float)x[i].qs[j];
    }
}

/* roundf: half away from zero, as ggml's Q8_0/Q8_1 reference. */
static inline int round_away_clamp(float v, int lo, int hi) {
    if (v != v)
        return 0;
    if (v <= (float)lo)
        return lo;
    if (v >= (float)hi)
        return hi;
    return (int)roundf(v);
}

/* Shared by Q8_0 and Q8_1: returns d, fills q. */
static float quant_q8_block(const float *x, int8_t *q) {
    float tmp[TN_QK8_0];
    const float *v = finite_block(x, tmp, TN_QK8_0);
    float amax = 0.f;
    for (int j = 0; j < TN_QK8_0; j++)
        amax = fmaxf(amax, fabsf(v[j]));
    const float d = amax / 127.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    for (int j = 0; j < TN_QK8_0; j++)
        q[j] = (int8_t)round_away_clamp(v[j] * id, -127, 127);
    return d;
}

void tn_quant_ref_q8_0(const float *x, tn_block_q8_0 *y, int64_t n) {
    for (int64_t i = 0; i < n / TN_QK8_0; i++, x += TN_QK8_0)
        y[i].d = TO_FP16(quant_q8_block(x, y[i].qs));
}

/* s = d * sum(q) lets a Q4_1/Q5_1 dot product add the min term cheaply. */
void tn_quant_ref_q8_1(const float *x, tn_block_q8_1 *y, int64_t n) {
    for (int64_t i = 0; i < n / TN_QK8_1; i++, x += TN_QK8_1) {
        const float d = quant_q8_block(x, y[i].qs);
        int sum = 0;
        for (int j = 0; j < TN_QK8_1; j++)
            sum += y[i].qs[j];
        y[i].d = TO_FP16(d);
        y[i].s = TO_FP16((float)sum * d);
    }
}

static void dequant_ref_q8_1(const tn_block_q8_1 *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / TN_QK8_1; i++, y += TN_QK8_1) {
        const float d = FP16(x[i].d);
        for (int j = 0; j < TN_QK8_1; j++)
            y[j] = d * (float)x[i].qs[j];
    }
}

/* ---------------------------------------------------------- K-quants */

#define GROUP_MAX_EPS 1e-15f

/* Sub-block j's 6-bit scale and min out of the 12 packed bytes: sub-blocks
 * 0-3 keep them in the low 6 bits of bytes j and j+4; sub-blocks 4-7 keep
 * their low 4 bits in byte j+4 (scale low nibble, min high nibble) and their
 * top 2 bits in the spare top bits of bytes j-4 (scale) and j (min). */
static inline void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static void pack_scale_min_k4(const int *ls, const int *lm, uint8_t *q) {
    memset(q, 0, TN_K_SCALE_SIZE);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            q[j] |= (uint8_t)ls[j];
            q[j + 4] |= (uint8_t)lm[j];
        } else {
            q[j + 4] = (uint8_t)((ls[j] & 0x0f) | ((lm[j] & 0x0f) << 4));
            q[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            q[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

/* Fits x ~ scale * L + min with L in [0, nmax] and min <= 0, minimising the
 * weighted squared error: start from the min/max grid, then try nstep+1
 * slightly different grids and solve the 2x2 least-squares problem for
 * (scale, min) on each, keeping the best. Returns scale; *neg_min = -min.
 * (ggml's make_qkx2_quants, so files quantize like theirs.) */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *neg_min, float rmin, float rdelta, int nstep) {
    uint8_t Laux[32];
    float min = x[0], max = x[0];
    float sum_w = w[0], sum_x = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0)
        min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        return 0.f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1.f / iscale;
    float best_error = 0.f;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)round_clamp(iscale * (x[i] - min), 0, nmax);
        float diff = scale * L[i] + min - x[i];
        best_error += w[i] * (diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = round_clamp(iscale * (x[i] - min), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0))
            continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float cur_error = 0.f;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * Laux[i] + this_min - x[i];
            cur_error += w[i] * (diff * diff);
        }
        if (cur_error < best_error) {
            memcpy(L, Laux, (size_t)n);
            best_error = cur_error;
            scale = this_scale;
            min = this_min;
        }
    }
    *neg_min = -min;
    return scale;
}

/* Symmetric fit x ~ scale * L, L in [-nmax, nmax-1], weights x^2: tries 19
 * grids around nmax/max and keeps the one with the best weighted
 * correlation. (ggml's make_qx_quants with rmse_type 1.) L gets l + nmax. */
static float fit_scale_sym(int n, int nmax, const float *x, uint8_t *L) {
    float max = 0.f, amax = 0.f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -(float)nmax / max;
    float sumlx = 0.f, suml2 = 0.f;
    for (int i = 0; i < n; i++) {
        int l = round_clamp(iscale * x[i], -nmax, nmax - 1);
        L[i] = (uint8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 > 0 ? sumlx / suml2 : 0.f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0.f;
        for (int i = 0; i < n; i++) {
            int l = round_clamp(iscale * x[i], -nmax, nmax - 1);
            float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (uint8_t)(round_clamp(iscale * x[i], -nmax, nmax - 1) + nmax);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q4_K and Q5_K share everything but the quant width (nmax 15 or 31) and
 * the search grid: per sub-block of 32 a (scale, min) fit weighted towards
 * large values, then both sets quantized to 6 bits against the super-block
 * maxima, then the values re-quantized with the scales as stored. */
static void quant_k_scales_mins(const float *x, int nmax, float rmin, float rdelta, int nstep,
                                tn_half *d_out, tn_half *dmin_out, uint8_t *packed,
                                uint8_t *L) {
    float scales[8], mins[8], weights[32];
    float max_scale = 0.f, max_min = 0.f;
    for (int j = 0; j < 8; j++) {
        const float *xb = x + 32 * j;
        float sum_x2 = 0.f;
        for (int l = 0; l < 32; l++)
            sum_x2 += xb[l] * xb[l];
        const float av_x = sqrtf(sum_x2 / 32.f);
        for (int l = 0; l < 32; l++)
            weights[l] = av_x + fabsf(xb[l]);
        scales[j] = fit_scale_min(32, nmax, xb, weights, L + 32 * j, &mins[j], rmin, rdelta,
                                  nstep);
        if (scales[j] > max_scale)
            max_scale = scales[j];
        if (mins[j] > max_min)
            max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    int ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        ls[j] = round_clamp(inv_scale * scales[j], 0, 63);
        lm[j] = round_clamp(inv_min * mins[j], 0, 63);
    }
    pack_scale_min_k4(ls, lm, packed);
    *d_out = TO_FP16(max_scale / 63.f);
    *dmin_out = TO_FP16(max_min / 63.f);
    const float d_all = FP16(*d_out), dmin_all = FP16(*dmin_out);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        scale_min_k4(j, packed, &sc, &m);
        const float d = d_all * (float)sc;
        if (d == 0.f) {
            memset(L + 32 * j, 0, 32);
            continue;
        }
        const float dm = dmin_all * (float)m;
        for (int ii = 0; ii < 32; ii++)
            L[32 * j + ii] = (uint8_t)round_clamp((x[32 * j + ii] + dm) / d, 0, nmax);
    }
}

/* Q4_K: 64 values per 32 bytes of qs; value j of a 64-group is the low
 * nibble of qs[j] (sub-block 2k), value 32+j its high nibble (2k+1). */
void tn_dequant_ref_q4_K(const tn_block_q4_K *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / TN_QK_K; i++) {
        const float d = FP16(x[i].d), dmin = FP16(x[i].dmin);
        const uint8_t *q = x[i].qs;
        for (int g = 0; g < 4; g++, q += 32, y += 64) {
            int sc1, m1, sc2, m2;
            scale_min_k4(2 * g, x[i].scales, &sc1, &m1);
            scale_min_k4(2 * g + 1, x[i].scales, &sc2, &m2);
            const float d1 = d * (float)sc1, min1 = dmin * (float)m1;
            const float d2 = d * (float)sc2, min2 = dmin * (float)m2;
            for (int l = 0; l < 32; l++) {
                y[l] = d1 * (float)(q[l] & 0x0f) - min1;
                y[l + 32] = d2 * (float)(q[l] >> 4) - min2;
            }
        }
    }
}

void tn_quant_ref_q4_K(const float *x, tn_block_q4_K *y, int64_t n) {
    float tmp[TN_QK_K];
    uint8_t L[TN_QK_K];
    for (int64_t i = 0; i < n / TN_QK_K; i++, x += TN_QK_K) {
        const float *v = finite_block(x, tmp, TN_QK_K);
        quant_k_scales_mins(v, 15, -1.f, 0.1f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++)
                y[i].qs[32 * g + l] = (uint8_t)(L[64 * g + l] | (L[64 * g + l + 32] << 4));
    }
}

/* Q5_K: like Q4_K plus qh: bit 2g of qh[l] is the 5th bit of value l of
 * 64-group g, bit 2g+1 that of value 32+l. */
void tn_dequant_ref_q5_K(const tn_block_q5_K *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / TN_QK_K; i++) {
        const float d = FP16(x[i].d), dmin = FP16(x[i].dmin);
        const uint8_t *ql = x[i].qs, *qh = x[i].qh;
        for (int g = 0; g < 4; g++, ql += 32, y += 64) {
            int sc1, m1, sc2, m2;
            scale_min_k4(2 * g, x[i].scales, &sc1, &m1);
            scale_min_k4(2 * g + 1, x[i].scales, &sc2, &m2);
            const float d1 = d * (float)sc1, min1 = dmin * (float)m1;
            const float d2 = d * (float)sc2, min2 = dmin * (float)m2;
            for (int l = 0; l < 32; l++) {
                int lo = (ql[l] & 0x0f) | (((qh[l] >> (2 * g)) & 1) << 4);
                int hi = (ql[l] >> 4) | (((qh[l] >> (2 * g + 1)) & 1) << 4);
                y[l] = d1 * (float)lo - min1;
                y[l + 32] = d2 * (float)hi - min2;
            }
        }
    }
}

void tn_quant_ref_q5_K(const float *x, tn_block_q5_K *y, int64_t n) {
    float tmp[TN_QK_K];
    uint8_t L[TN_QK_K];
    for (int64_t i = 0; i < n / TN_QK_K; i++, x += TN_QK_K) {
        const float *v = finite_block(x, tmp, TN_QK_K);
        quant_k_scales_mins(v, 31, -0.5f, 0.1f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++) {
                int lo = L[64 * g + l], hi = L[64 * g + l + 32];
                y[i].qs[32 * g + l] = (uint8_t)((lo & 0x0f) | ((hi & 0x0f) << 4));
                y[i].qh[l] |= (uint8_t)(((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1)));
            }
    }
}

/* Q6_K: two halves of 128 values, each with 64 bytes of ql, 32 of qh and 8
 * scales (one per 16 values). For l < 32 in half h: value l = low nibble of
 * ql[l] + bits 0-1 of qh[l]; value 32+l = low nibble of ql[32+l] + bits 2-3;
 * value 64+l = high nibble of ql[l] + bits 4-5; value 96+l = high nibble of
 * ql[32+l] + bits 6-7. Quants are stored +32. */
void tn_dequant_ref_q6_K(const tn_block_q6_K *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / TN_QK_K; i++) {
        const float d = FP16(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int h = 0; h < 2; h++, ql += 64, qh += 32, sc += 8, y += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * (float)sc[is] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

void tn_quant_ref_q6_K(const float *x, tn_block_q6_K *y, int64_t n) {
    float tmp[TN_QK_K], scales[16];
    uint8_t L[TN_QK_K];
    for (int64_t i = 0; i < n / TN_QK_K; i++, x += TN_QK_K) {
        const float *v = finite_block(x, tmp, TN_QK_K);
        float max_scale = 0.f, max_abs_scale = 0.f;
        for (int ib = 0; ib < 16; ib++) {
            scales[ib] = fit_scale_sym(16, 32, v + 16 * ib, L + 16 * ib);
            if (fabsf(scales[ib]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        /* The largest scale (by magnitude) maps to -128: like Q4_0, the
         * signed extreme gets the one extra level. */
        const float iscale = -128.f / max_scale;
        y[i].d = TO_FP16(1.f / iscale);
        for (int ib = 0; ib < 16; ib++)
            y[i].scales[ib] = (int8_t)round_clamp(iscale * scales[ib], -128, 127);
        const float d_all = FP16(y[i].d);
        for (int j = 0; j < 16; j++) {
            const float d = d_all * (float)y[i].scales[j];
            if (d == 0.f) {
                memset(L + 16 * j, 32, 16);
                continue;
            }
            for (int ii = 0; ii < 16; ii++)
                L[16 * j + ii] = (uint8_t)(round_clamp(v[16 * j + ii] / d, -32, 31) + 32);
        }
        for (int h = 0; h < 2; h++) {
            uint8_t *ql = y[i].ql + 64 * h, *qh = y[i].qh + 32 * h;
            const uint8_t *Lh = L + 128 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lh[l] & 0x0f) | ((Lh[l + 64] & 0x0f) << 4));
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0x0f) | ((Lh[l + 96] & 0x0f) << 4));
                qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                  ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}

/* Q8_K: the activation side of K-quant dot products; d is a plain float
 * and bsums[k] = sum of qs[16k .. 16k+15] so the mins term of Q4_K/Q5_K
 * costs one multiply per 16 values. */
void tn_quant_ref_q8_K(const float *x, tn_block_q8_K *y, int64_t n) {
    float tmp[TN_QK_K];
    for (int64_t i = 0; i < n / TN_QK_K; i++, x += TN_QK_K) {
        const float *v = finite_block(x, tmp, TN_QK_K);
        float max = 0.f, amax = 0.f;
        for (int j = 0; j < TN_QK_K; j++)
            if (fabsf(v[j]) > amax) {
                amax = fabsf(v[j]);
                max = v[j];
            }
        if (amax == 0.f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < TN_QK_K; j++)
            y[i].qs[j] = (int8_t)round_clamp(iscale * v[j], -127, 127);
        for (int k = 0; k < TN_QK_K / 16; k++) {
            int sum = 0;
            for (int j = 0; j < 16; j++)
                sum += y[i].qs[16 * k + j];
            y[i].bsums[k] = (int16_t)sum;
        }
        y[i].d = 1.f / iscale;
    }
}

static void dequant_ref_q8_K(const tn_block_q8_K *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / TN_QK_K; i++, y += TN_QK_K)
        for (int j = 0; j < TN_QK_K; j++)
            y[j] = x[i].d * (float)x[i].qs[j];
}

/* ------------------------------------------- Q2_K, Q3_K, IQ4_NL, IQ4_XS
 *
 * Q2_K and Q3_K share one quant layout: 2 low bits of value i of half h
 * (128 values) and 32-group j (i = 128h + 32j + l) are bits 2j..2j+1 of
 * qs[32h + l]. Q3_K's third bit is bit 4h + j of hmask[l]. Both have one
 * scale per 16 values. */
static inline int q2_bits(const uint8_t *qs, int i) {
    return (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
}

static void pack_q2_bits(const uint8_t *L, uint8_t *qs) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *Lh = L + 128 * h;
            qs[32 * h + l] = (uint8_t)((Lh[l] & 3) | ((Lh[l + 32] & 3) << 2) |
                                       ((Lh[l + 64] & 3) << 4) | ((Lh[l + 96] & 3) << 6));
        }
}

void tn_dequant_ref_q2_K(const tn_block_q2_K *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / TN_QK_K; i++, y += TN_QK_K) {
        const float d = FP16(x[i].d), dmin = FP16(x[i].dmin);
        for (int k = 0; k < TN_QK_K; k++) {
            const int sc = x[i].scales[k / 16];
            const float dl = d * (float)(sc & 0x0f), ml = dmin * (float)(sc >> 4);
            y[k] = dl * (float)q2_bits(x[i].qs, k) - ml;
        }
    }
}

/* Per 16 values a (scale, min) fit with grid 0..3 (ggml's search with
 * weights |x|, but least squares where ggml minimises absolute error),
 * then scales and mins to 4 bits against their super-block maxima, and
 * the values requantized with the stored ones. */
void tn_quant_ref_q2_K(const float *x, tn_block_q2_K *y, int64_t n) {
    float tmp[TN_QK_K], weights[16], scales[16], mins[16];
    uint8_t L[TN_QK_K];
    for (int64_t i = 0; i < n / TN_QK_K; i++, x += TN_QK_K) {
        const float *v = finite_block(x, tmp, TN_QK_K);
        float max_scale = 0.f, max_min = 0.f;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++)
                weights[l] = fabsf(v[16 * j + l]);
            scales[j] = fit_scale_min(16, 3, v + 16 * j, weights, L + 16 * j, &mins[j], -0.5f,
                                      0.1f, 15);
            if (scales[j] > max_scale)
                max_scale = scales[j];
            if (mins[j] > max_min)
                max_min = mins[j];
        }
        const float is = max_scale > 0 ? 15.f / max_scale : 0.f;
        const float im = max_min > 0 ? 15.f / max_min : 0.f;
        for (int j = 0; j < 16; j++)
            y[i].scales[j] = (uint8_t)(round_clamp(is * scales[j], 0, 15) |
                                       (round_clamp(im * mins[j], 0, 15) << 4));
        y[i].d = TO_FP16(max_scale / 15.f);
        y[i].dmin = TO_FP16(max_min / 15.f);
        const float d_all = FP16(y[i].d), dmin_all = FP16(y[i].dmin);
        for (int j = 0; j < 16; j++) {
            const float d = d_all * (float)(y[i].scales[j] & 0x0f);
            if (d == 0.f) {
                memset(L + 16 * j, 0, 16);
                continue;
            }
            const float dm = dmin_all * (float)(y[i].scales[j] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (uint8_t)round_clamp((v[16 * j + l] + dm) / d, 0, 3);
        }
        pack_q2_bits(L, y[i].qs);
    }
}

/* Q3_K scale k (0..15, stored +32): low 4 bits in the low (k < 8) or high
 * (k >= 8) nibble of scales[k % 8], top 2 bits at bit 2 * (k / 4) of
 * scales[8 + k % 4]. */
static inline int q3k_scale(const uint8_t *s, int k) {
    const int lo = k < 8 ? s[k] & 0x0f : s[k - 8] >> 4;
    const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
    return (lo | hi << 4) - 32;
}

void tn_dequant_ref_q3_K(const tn_block_q3_K *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / TN_QK_K; i++, y += TN_QK_K) {
        const float d = FP16(x[i].d);
        for (int k = 0; k < TN_QK_K; k++) {
            const int hbit = (x[i].hmask[k % 32] >> (k / 32)) & 1;
            const int q = q2_bits(x[i].qs, k) - (hbit ? 0 : 4);
            y[k] = d * (float)q3k_scale(x[i].scales, k / 16) * (float)q;
        }
    }
}

/* Per 16 values the symmetric fit of Q6_K (fit_scale_sym) with grid
 * -4..3 (ggml refines its fit by moving single quants instead), then the
 * scales to signed 6 bits against the largest (which maps to -32). */
void tn_quant_ref_q3_K(const float *x, tn_block_q3_K *y, int64_t n) {
    float tmp[TN_QK_K], scales[16];
    uint8_t L[TN_QK_K];
    for (int64_t i = 0; i < n / TN_QK_K; i++, x += TN_QK_K) {
        const float *v = finite_block(x, tmp, TN_QK_K);
        float max_scale = 0.f, amax = 0.f;
        for (int j = 0; j < 16; j++) {
            scales[j] = fit_scale_sym(16, 4, v + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        if (amax < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof y[i]); /* d = 0: reads back as zeros */
            continue;
        }
        memset(y[i].scales, 0, sizeof y[i].scales);
        const float iscale = -32.f / max_scale;
        for (int j = 0; j < 16; j++) {
            const int l = round_clamp(iscale * scales[j], -32, 31) + 32;
            if (j < 8)
                y[i].scales[j] |= (uint8_t)(l & 0x0f);
            else
                y[i].scales[j - 8] |= (uint8_t)((l & 0x0f) << 4);
            y[i].scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
        }
        y[i].d = TO_FP16(1.f / iscale);
        const float d_all = FP16(y[i].d);
        for (int j = 0; j < 16; j++) {
            const float d = d_all * (float)q3k_scale(y[i].scales, j);
            if (d == 0.f) {
                memset(L + 16 * j, 4, 16);
                continue;
            }
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (uint8_t)(round_clamp(v[16 * j + l] / d, -4, 3) + 4);
        }
        memset(y[i].hmask, 0, sizeof y[i].hmask);
        for (int k = 0; k < TN_QK_K; k++)
            if (L[k] > 3)
                y[i].hmask[k % 32] |= (uint8_t)(1u << (k / 32));
        pack_q2_bits(L, y[i].qs);
    }
}

const int8_t tn_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

/* Index of the table level nearest to v (the lower one on a tie; NaN gives
 * 0): the count of midpoints between levels that v is above. Branch-free,
 * as the quantizer calls it 15 times per value. */
static const float iq4_mid[15] = {-115.5f, -93.5f, -74.f, -57.f, -42.f, -28.5f, -16.f, -4.5f,
                                  7.f,     19.f,   31.5f, 45.5f, 61.f, 79.f,   101.f};
static inline int iq4_index(float v) {
    int idx = 0;
    for (int k = 0; k < 15; k++)
        idx += v > iq4_mid[k];
    return idx;
}

/* The best scale for 32 values on the IQ4 table: the weighted (x^2)
 * least-squares scale for the indices of each of 15 trial grids that map
 * the extreme value near the table's end (-127), keeping the one with the
 * best weighted fit (ggml's search without an importance matrix). */
static float fit_scale_iq4(const float *x) {
    float amax = 0.f, max = 0.f;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    if (amax < GROUP_MAX_EPS)
        return 0.f;
    float d = 0.f, best = -1.f;
    for (int t = -7; t <= 7; t++) {
        const float id = ((float)t + (float)tn_iq4nl_values[0]) / max;
        float sumqx = 0.f, sumq2 = 0.f;
        for (int j = 0; j < 32; j++) {
            const float q = (float)tn_iq4nl_values[iq4_index(id * x[j])];
            const float w = x[j] * x[j];
            sumqx += w * q * x[j];
            sumq2 += w * q * q;
        }
        if (sumq2 > 0 && (best < 0 || sumqx * sumqx > best * sumq2)) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* Indices of 32 values for the stored scale d, nibbles as Q4_0's. */
static void iq4_pack32(const float *x, float d, uint8_t *qs) {
    const float id = d != 0.f ? 1.f / d : 0.f;
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(iq4_index(id * x[j]) | (iq4_index(id * x[j + 16]) << 4));
}

void tn_dequant_ref_iq4_nl(const tn_block_iq4_nl *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / TN_QK4_NL; i++, y += TN_QK4_NL) {
        const float d = FP16(x[i].d);
        for (int j = 0; j < TN_QK4_NL / 2; j++) {
            y[j] = d * (float)tn_iq4nl_values[x[i].qs[j] & 0x0f];
            y[j + TN_QK4_NL / 2] = d * (float)tn_iq4nl_values[x[i].qs[j] >> 4];
        }
    }
}

void tn_quant_ref_iq4_nl(const float *x, tn_block_iq4_nl *y, int64_t n) {
    float tmp[TN_QK4_NL];
    for (int64_t i = 0; i < n / TN_QK4_NL; i++, x += TN_QK4_NL) {
        const float *v = finite_block(x, tmp, TN_QK4_NL);
        y[i].d = TO_FP16(fit_scale_iq4(v));
        iq4_pack32(v, FP16(y[i].d), y[i].qs);
    }
}

static inline int iq4xs_scale(const tn_block_iq4_xs *b, int ib) {
    return (((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f) |
            (((b->scales_h >> (2 * ib)) & 3) << 4)) - 32;
}

void tn_dequant_ref_iq4_xs(const tn_block_iq4_xs *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / TN_QK_K; i++) {
        const float d = FP16(x[i].d);
        for (int ib = 0; ib < 8; ib++, y += 32) {
            const float dl = d * (float)iq4xs_scale(&x[i], ib);
            const uint8_t *qs = x[i].qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)tn_iq4nl_values[qs[j] & 0x0f];
                y[j + 16] = dl * (float)tn_iq4nl_values[qs[j] >> 4];
            }
        }
    }
}

/* Per 32 values IQ4_NL's fit, then the scales to signed 6 bits against the
 * largest (which maps to -32), and the indices redone for the stored
 * scales. */
void tn_quant_ref_iq4_xs(const float *x, tn_block_iq4_xs *y, int64_t n) {
    float tmp[TN_QK_K], scales[8];
    for (int64_t i = 0; i < n / TN_QK_K; i++, x += TN_QK_K) {
        const float *v = finite_block(x, tmp, TN_QK_K);
        float max_scale = 0.f, amax = 0.f;
        for (int ib = 0; ib < 8; ib++) {
            scales[ib] = fit_scale_iq4(v + 32 * ib);
            if (fabsf(scales[ib]) > amax) {
                amax = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        memset(&y[i], 0, sizeof y[i]);
        const float d = -max_scale / 32.f;
        y[i].d = TO_FP16(d);
        const float d_all = FP16(y[i].d);
        const float id = d_all != 0.f ? 1.f / d_all : 0.f;
        uint16_t sh = 0;
        for (int ib = 0; ib < 8; ib++) {
            const int l = round_clamp(id * scales[ib], -32, 31);
            const int u = l + 32;
            y[i].scales_l[ib / 2] |= (uint8_t)((u & 0x0f) << (4 * (ib % 2)));
            sh |= (uint16_t)((u >> 4) << (2 * ib));
            iq4_pack32(v + 32 * ib, d_all * (float)l, y[i].qs + 16 * ib);
        }
        y[i].scales_h = sh;
    }
}

/* ---------------------------------------------------------------- MXFP4 */

const int8_t tn_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

void tn_dequant_ref_mxfp4(const tn_block_mxfp4 *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / TN_QK_MXFP4; i++, y += TN_QK_MXFP4) {
        const float d = tn_e8m0_half(x[i].e);
        for (int j = 0; j < TN_QK_MXFP4 / 2; j++) {
            y[j] = (float)tn_mxfp4_values[x[i].qs[j] & 0x0f] * d;
            y[j + TN_QK_MXFP4 / 2] = (float)tn_mxfp4_values[x[i].qs[j] >> 4] * d;
        }
    }
}

static inline int mxfp4_index(float x, float d) {
    int best = 0;
    float err = fabsf((float)tn_mxfp4_values[0] * d - x);
    for (int k = 1; k < 16; k++) {
        const float e = fabsf((float)tn_mxfp4_values[k] * d - x);
        if (e < err) {
            best = k;
            err = e;
        }
    }
    return best;
}

void tn_quant_ref_mxfp4(const float *x, tn_block_mxfp4 *y, int64_t n) {
    float tmp[TN_QK_MXFP4];
    for (int64_t i = 0; i < n / TN_QK_MXFP4; i++, x += TN_QK_MXFP4) {
        const float *v = finite_block(x, tmp, TN_QK_MXFP4);
        float amax = 0.f;
        for (int j = 0; j < TN_QK_MXFP4; j++)
            amax = fabsf(v[j]) > amax ? fabsf(v[j]) : amax;
        /* ggml's exponent, kept from going below 0 (ggml's cast is
         * undefined for blocks below 2^-125); FLT_MAX gives 252 at most. */
        float e = amax > 0.f ? floorf(log2f(amax)) - 2.f + 127.f : 0.f;
        e = e < 0.f ? 0.f : e > 252.f ? 252.f : e;
        y[i].e = (uint8_t)e;
        const float d = tn_e8m0_half(y[i].e);
        for (int j = 0; j < TN_QK_MXFP4 / 2; j++)
            y[i].qs[j] = (uint8_t)(mxfp4_index(v[j], d) | mxfp4_index(v[j + 16], d) << 4);
    }
}

/* ---------------------------------------------------------- dispatch */

typedef void (*dequant_fn)(const void *x, float *y, int64_t n);
typedef void (*quant_fn)(const float *x, void *y, int64_t n);

static void dequant_f32(const void *x, float *y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}
static void quant_f32(const float *x, void *y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}
static void dequant_f16(const void *x, float *y, int64_t n) {
    const uint8_t *p = x;
    for (int64_t i = 0; i < n; i++)
        y[i] = tn_fp16_to_fp32(tn_rd_u16(p + 2 * i));
}
static void quant_f16(const float *x, void *y, int64_t n) {
    uint8_t *p = y;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = tn_fp32_to_fp16(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}
static void dequant_bf16(const void *x, float *y, int64_t n) {
    const uint8_t *p = x;
    for (int64_t i = 0; i < n; i++)
        y[i] = tn_bf16_to_fp32(tn_rd_u16(p + 2 * i));
}
static void quant_bf16(const float *x, void *y, int64_t n) {
    uint8_t *p = y;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = tn_fp32_to_bf16(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

/* Typed wrappers so that every call goes through its real prototype. */
#define TN_BLOCK_OPS(sfx, dq, q)                                                   \
    static void dq_##sfx(const void *x, float *y, int64_t n) {                     \
        dq((const tn_block_##sfx *)x, y, n);                                       \
    }                                                                              \
    static void q_##sfx(const float *x, void *y, int64_t n) { q(x, (tn_block_##sfx *)y, n); }
TN_BLOCK_OPS(q4_0, tn_dequant_ref_q4_0, tn_quant_ref_q4_0)
TN_BLOCK_OPS(q4_1, tn_dequant_ref_q4_1, tn_quant_ref_q4_1)
TN_BLOCK_OPS(q5_0, tn_dequant_ref_q5_0, tn_quant_ref_q5_0)
TN_BLOCK_OPS(q5_1, tn_dequant_ref_q5_1, tn_quant_ref_q5_1)
TN_BLOCK_OPS(q8_0, tn_dequant_ref_q8_0, tn_quant_ref_q8_0)
TN_BLOCK_OPS(q8_1, dequant_ref_q8_1, tn_quant_ref_q8_1)
TN_BLOCK_OPS(q4_K, tn_dequant_ref_q4_K, tn_quant_ref_q4_K)
TN_BLOCK_OPS(q5_K, tn_dequant_ref_q5_K, tn_quant_ref_q5_K)
TN_BLOCK_OPS(q6_K, tn_dequant_ref_q6_K, tn_quant_ref_q6_K)
TN_BLOCK_OPS(q8_K, dequant_ref_q8_K, tn_quant_ref_q8_K)
TN_BLOCK_OPS(q2_K, tn_dequant_ref_q2_K, tn_quant_ref_q2_K)
TN_BLOCK_OPS(q3_K, tn_dequant_ref_q3_K, tn_quant_ref_q3_K)
TN_BLOCK_OPS(iq4_nl, tn_dequant_ref_iq4_nl, tn_quant_ref_iq4_nl)
TN_BLOCK_OPS(iq4_xs, tn_dequant_ref_iq4_xs, tn_quant_ref_iq4_xs)
TN_BLOCK_OPS(mxfp4, tn_dequant_ref_mxfp4, tn_quant_ref_mxfp4)

typedef struct {
    dequant_fn dequant;
    quant_fn quant;
    size_t align; /* alignment the block struct needs */
} tn_type_ops;

#define OPS(sfx) {dq_##sfx, q_##sfx, alignof(tn_block_##sfx)}

static tn_type_ops type_ops(uint32_t type) {
    switch (type) {
    case TN_TYPE_F32: return (tn_type_ops){dequant_f32, quant_f32, 1};
    case TN_TYPE_F16: return (tn_type_ops){dequant_f16, quant_f16, 1};
    case TN_TYPE_BF16: return (tn_type_ops){dequant_bf16, quant_bf16, 1};
    case TN_TYPE_Q4_0: return (tn_type_ops)OPS(q4_0);
    case TN_TYPE_Q4_1: return (tn_type_ops)OPS(q4_1);
    case TN_TYPE_Q5_0: return (tn_type_ops)OPS(q5_0);
    case TN_TYPE_Q5_1: return (tn_type_ops)OPS(q5_1);
    case TN_TYPE_Q8_0: return (tn_type_ops)OPS(q8_0);
    case TN_TYPE_Q8_1: return (tn_type_ops)OPS(q8_1);
    case TN_TYPE_Q4_K: return (tn_type_ops)OPS(q4_K);
    case TN_TYPE_Q5_K: return (tn_type_ops)OPS(q5_K);
    case TN_TYPE_Q6_K: return (tn_type_ops)OPS(q6_K);
    case TN_TYPE_Q8_K: return (tn_type_ops)OPS(q8_K);
    case TN_TYPE_Q2_K: return (tn_type_ops)OPS(q2_K);
    case TN_TYPE_Q3_K: return (tn_type_ops)OPS(q3_K);
    case TN_TYPE_IQ4_NL: return (tn_type_ops)OPS(iq4_nl);
    case TN_TYPE_IQ4_XS: return (tn_type_ops)OPS(iq4_xs);
    case TN_TYPE_MXFP4: return (tn_type_ops)OPS(mxfp4);
    default: return (tn_type_ops){NULL, NULL, 0};
    }
}

/* Big enough and aligned enough for one block of any type. */
typedef union {
    tn_block_q8_K q8_K;
    tn_block_q6_K q6_K;
    tn_block_q5_K q5_K;
    tn_block_q4_K q4_K;
    uint8_t bytes[sizeof(tn_block_q8_K)];
} tn_any_block;

static int check_row(uint32_t type, const void *src, const void *dst, int64_t n,
                     tn_type_ops *ops) {
    *ops = type_ops(type);
    if (!ops->dequant)
        return TN_ERR_UNSUPPORTED;
    const int64_t bs = (int64_t)tn_type_block_size(type);
    if (n < 0 || n % bs != 0 || (n > 0 && (!src || !dst)))
        return TN_ERR_INVALID;
    return TN_OK;
}

int tn_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    tn_type_ops ops;
    int rc = check_row(type, src, dst, n, &ops);
    if (rc != TN_OK || n == 0)
        return rc;
    if ((uintptr_t)src % ops.align == 0) {
        ops.dequant(src, dst, n);
        return TN_OK;
    }
    /* A mapping at an odd offset: go block by block through an aligned copy. */
    const int64_t bs = (int64_t)tn_type_block_size(type);
    const size_t bb = tn_type_block_bytes(type);
    const uint8_t *p = src;
    tn_any_block blk;
    for (int64_t i = 0; i < n / bs; i++) {
        memcpy(&blk, p + (size_t)i * bb, bb);
        ops.dequant(&blk, dst + i * bs, bs);
    }
    return TN_OK;
}

int tn_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
    tn_type_ops ops;
    int rc = check_row(type, src, dst, n, &ops);
    if (rc != TN_OK || n == 0)
        return rc;
    if ((uintptr_t)dst % ops.align == 0) {
        ops.quant(src, dst, n);
        return TN_OK;
    }
    const int64_t bs = (int64_t)tn_type_block_size(type);
    const size_t bb = tn_type_block_bytes(type);
    uint8_t *p = dst;
    tn_any_block blk;
    for (int64_t i = 0; i < n / bs; i++) {
        ops.quant(src + i * bs, &blk, bs);
        memcpy(p + (size_t)i * bb, &blk, bb);
    }
    return TN_OK;
}
