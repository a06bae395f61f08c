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
    [TN_TYPE_Q2_K] = {"q2_K", TN_QK_K, 84},
    [TN_TYPE_Q3_K] = {"q3_K", TN_QK_K, 110},
    [TN_TYPE_Q4_K] = {"q4_K", TN_QK_K, sizeof(tn_block_q4_K)},
    [TN_TYPE_Q5_K] = {"q5_K", TN_QK_K, sizeof(tn_block_q5_K)},
    [TN_TYPE_Q6_K] = {"q6_K", TN_QK_K, sizeof(tn_block_q6_K)},
    [TN_TYPE_Q8_K] = {"q8_K", TN_QK_K, sizeof(tn_block_q8_K)},
    [16] = {"iq2_xxs", TN_QK_K, 66},
    [17] = {"iq2_xs", TN_QK_K, 74},
    [18] = {"iq3_xxs", TN_QK_K, 98},
    [19] = {"iq1_s", TN_QK_K, 50},
    [20] = {"iq4_nl", 32, 18},
    [21] = {"iq3_s", TN_QK_K, 110},
    [22] = {"iq2_s", TN_QK_K, 82},
    [23] = {"iq4_xs", TN_QK_K, 136},
    [24] = {"i8", 1, 1},
    [25] = {"i16", 1, 2},
    [26] = {"i32", 1, 4},
    [27] = {"i64", 1, 8},
    [28] = {"f64", 1, 8},
    [29] = {"iq1_m", TN_QK_K, 56},
    [TN_TYPE_BF16] = {"bf16", 1, 2},
    [34] = {"tq1_0", TN_QK_K, 54},
    [35] = {"tq2_0", TN_QK_K, 66},
    [39] = {"mxfp4", 32, 17},
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

void tn_dequant_ref_q4_K(const tn_block_q4_K *x, float *y, int64_t n) { (void)x; (void)y; (void)n; }
void tn_dequant_ref_q5_K(const tn_block_q5_K *x, float *y, int64_t n) { (void)x; (void)y; (void)n; }
void tn_dequant_ref_q6_K(const tn_block_q6_K *x, float *y, int64_t n) { (void)x; (void)y; (void)n; }
void tn_quant_ref_q4_K(const float *x, tn_block_q4_K *y, int64_t n) { (void)x; (void)y; (void)n; }
void tn_quant_ref_q5_K(const float *x, tn_block_q5_K *y, int64_t n) { (void)x; (void)y; (void)n; }
void tn_quant_ref_q6_K(const float *x, tn_block_q6_K *y, int64_t n) { (void)x; (void)y; (void)n; }
void tn_quant_ref_q8_K(const float *x, tn_block_q8_K *y, int64_t n) { (void)x; (void)y; (void)n; }
static void dequant_ref_q8_K(const tn_block_q8_K *x, float *y, int64_t n) { (void)x; (void)y; (void)n; }

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
