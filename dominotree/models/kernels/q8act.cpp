// Block-quantized weights times 8-bit activation blocks, in integer dot products, as llama.cpp
// multiplies a GGUF model: Q4_1 weights (the decoder layers) and Q8_0 weights (the tied embedding
// as LM head, the drafters' products). Built by dominotree/models/cpuext.py, used by
// models/quantcpu.py (Q4Q8Linear, Q8Q8Linear).
//
// Each row of x is quantized on its own, per block of 32: d = max|x| / 127, q = round(x / d) in
// [-127, 127] (ties to even), s = d * sum(q). With the weight w = dw * qw + mw (Q4_1: qw in [0, 15];
// Q8_0: qw in [-128, 127], mw = 0),
//   y[r, n] = sum over blocks b of  (dw * d) * sum_i qw_i q_i  (+ mw * s for Q4_1)
// The inner sums are exact int32 arithmetic (vpdpbusd; vpmaddubsw + vpmaddwd on AVX2), and the
// float part is one fixed chain per output and row:
//   acc = fma(float(isum_b), dw_b * d_b, acc); acc = fma(mw_b, s_b, acc)   for b = 0, 1, ...
// so a row's result depends on that row only: the same bits for 1 or 17 rows, 1 or 2 threads,
// and on every instruction set (AMX-INT8 in q8amx.cpp, AVX-512 VNNI, AVX2, scalar;
// tests/test_q8act.py asserts ==).
//
// Weights are packed per tile of 16 outputs (quantcpu.pack_q4_tiles / pack_q8_tiles):
// - Q4_1 codes [N/16, K/32, 4, 16, 4] uint8: byte i of lane j in part p holds
//   q[j, 8p + i] | q[j, 8p + 4 + i] << 4 (one 64-byte load and two masks give the 4-weight groups
//   2p and 2p + 1 of all 16 outputs); scales [N/16, K/32, 2, 16] float16, the GGUF's own (d of the
//   16 lanes, then m; widened to float32 exactly, a sixth of the bytes read instead of a third).
// - Q8_0 codes [N/16, K/32, 8, 16, 4] uint8: byte i of lane j in group g holds q[j, 4g + i] + 128
//   (vpdpbusd multiplies unsigned by signed bytes; 128 * sum(q) is taken off, exactly);
//   scales [N/16, K/32, 1, 16] float32.
// N is padded to 16 with zero weights.
#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "q8act.h"

namespace {

using namespace dominotree_q8;
#define NOINLINE __attribute__((noinline))

inline __m256 load_scales8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load_scales8(const at::Half* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

inline int32_t load4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// x [M, K] float32 -> 8-bit blocks (Act's layout); every value of a row from that row alone.
// 8 lanes at a time: max|x| is exact in any order, x * (1 / d) is the same IEEE product, vroundps
// rounds to nearest even as nearbyint does, and the codes' sum is exact integer arithmetic.
void quantize_rows(const float* x, int64_t M, int64_t K, int8_t* q, float* d, float* s, int32_t* sums) {
  const int64_t nb = K / GROUP;
  const __m256 sign = _mm256_set1_ps(-0.0f), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  for (int64_t r = 0; r < M; ++r)
    for (int64_t b = 0; b < nb; ++b) {
      const float* v = x + r * K + b * GROUP;
      __m256 xv[4];
      for (int k = 0; k < 4; ++k) xv[k] = _mm256_loadu_ps(v + 8 * k);
      const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, xv[0]), _mm256_andnot_ps(sign, xv[1])),
                                     _mm256_max_ps(_mm256_andnot_ps(sign, xv[2]), _mm256_andnot_ps(sign, xv[3])));
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1)));
      const float dd = amax / 127.0f, id = dd != 0.0f ? 1.0f / dd : 0.0f;
      const __m256 vid = _mm256_set1_ps(id);
      __m256i total = _mm256_setzero_si256();
      for (int k = 0; k < 4; ++k) {
        const __m256 t = _mm256_round_ps(_mm256_mul_ps(xv[k], vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m256i c = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(t, lo), hi));
        total = _mm256_add_epi32(total, c);
        const __m128i c16 = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(q + ((b * 4 + k) * M + r) * 8), _mm_packs_epi16(c16, c16));
      }
      __m128i t4 = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
      t4 = _mm_add_epi32(t4, _mm_shuffle_epi32(t4, 0x4E));
      const int32_t sum = _mm_cvtsi128_si32(_mm_add_epi32(t4, _mm_shuffle_epi32(t4, 0xB1)));
      d[b * M + r] = dd;
      s[b * M + r] = dd * static_cast<float>(sum);
      sums[b * M + r] = sum;
    }
}

// --- scalar: the reference chain ---------------------------------------------------------------
template <bool Q4>
void tile_scalar(const Tile<Q4>& t, const Act& a, int64_t r0, int rows, float* y, int64_t N, int64_t n0,
                 int64_t valid) {
  for (int r = 0; r < rows; ++r) {
    float acc[LANES] = {0};
    for (int64_t b = 0; b < a.nb; ++b) {
      const uint8_t* c = t.codes + b * Tile<Q4>::CODE_BYTES;
      const auto* dm = t.dm + b * Tile<Q4>::SCALES * LANES;
      const float da = a.d[b * a.M + r0 + r], sa = a.s[b * a.M + r0 + r];
      for (int j = 0; j < LANES; ++j) {
        int32_t isum = 0;
        for (int p = 0; p < 4; ++p) {
          const int8_t* xq = a.part(b, p, r0 + r);
          for (int i = 0; i < 4; ++i) {
            if constexpr (Q4) {
              const uint8_t byte = c[p * 64 + j * 4 + i];
              isum += (byte & 0x0F) * xq[i] + (byte >> 4) * xq[4 + i];
            } else {
              isum += (c[2 * p * 64 + j * 4 + i] - 128) * xq[i] + (c[(2 * p + 1) * 64 + j * 4 + i] - 128) * xq[4 + i];
            }
          }
        }
        acc[j] = std::fma(static_cast<float>(isum), widen(dm[j]) * da, acc[j]);
        if constexpr (Q4) acc[j] = std::fma(widen(dm[LANES + j]), sa, acc[j]);
      }
    }
    store_rows(acc, 1, y, N, r0 + r, n0, valid);
  }
}

// --- AVX2: two halves of 8 lanes, vpmaddubsw + vpmaddwd --------------------------------------
// Q8_0, up to 4 rows a pass: signed codes; vpmaddubsw takes |q| and moves q's sign onto x (pairs
// <= 32512, so each goes to int32 at once); the float accumulators in memory, as for Q4_1 below
template <int RT>
NOINLINE void tile_avx2_q8(const Tile<false>& t, const Act& a, int64_t r0, float* y, int64_t N, int64_t n0,
                           int64_t valid) {
  alignas(32) float acc[RT][LANES] = {};
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80)), ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < a.nb; ++b) {
    __m256i isum[RT][2];
    for (int r = 0; r < RT; ++r) isum[r][0] = isum[r][1] = _mm256_setzero_si256();
    const uint8_t* c = t.codes + b * Tile<false>::CODE_BYTES;
#pragma GCC unroll 1
    for (int p = 0; p < 4; ++p) {       // not unrolled: hoisting every row's activations spills
      const int8_t* x0 = a.part(b, p, r0);
      for (int h = 0; h < 2; ++h) {
        const __m256i w0 = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 2 * p * 64 + 32 * h)), bias);
        const __m256i w1 = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + (2 * p + 1) * 64 + 32 * h)), bias);
        const __m256i a0 = _mm256_sign_epi8(w0, w0), a1 = _mm256_sign_epi8(w1, w1);
        for (int r = 0; r < RT; ++r) {
          const __m256i x_lo = _mm256_set1_epi32(load4(x0 + 8 * r)), x_hi = _mm256_set1_epi32(load4(x0 + 8 * r + 4));
          const __m256i p0 = _mm256_maddubs_epi16(a0, _mm256_sign_epi8(x_lo, w0));
          const __m256i p1 = _mm256_maddubs_epi16(a1, _mm256_sign_epi8(x_hi, w1));
          isum[r][h] = _mm256_add_epi32(isum[r][h], _mm256_add_epi32(_mm256_madd_epi16(p0, ones), _mm256_madd_epi16(p1, ones)));
        }
      }
    }
    const float* dm = t.dm + b * LANES;
    for (int h = 0; h < 2; ++h) {
      const __m256 d = load_scales8(dm + 8 * h);
      for (int r = 0; r < RT; ++r)
        _mm256_store_ps(acc[r] + 8 * h, _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][h]),
                                                        _mm256_mul_ps(d, _mm256_set1_ps(a.d[b * a.M + r0 + r])),
                                                        _mm256_load_ps(acc[r] + 8 * h)));
    }
  }
  store_rows(&acc[0][0], RT, y, N, r0, n0, valid);
}

// Q4_1 on AVX2 for up to 4 rows a pass: each 4-bit weight register unpacked once for all of them,
// the block's sums kept in int16 lanes (each lane adds 8 pairs of u4 * s8 products of one output:
// |sum| <= 8 * 2 * 15 * 127 = 30480, no overflow) and widened by one vpmaddwd per row and half;
// the float chain the scalar one, its accumulators in memory (touched once per block) so that the
// 8 int16 sums, 2 weight and 2 activation registers stay in registers.
template <int RT>
NOINLINE void tile_avx2_q4(const Tile<true>& t, const Act& a, int64_t r0, float* y, int64_t N, int64_t n0,
                           int64_t valid) {
  alignas(32) float acc[RT][LANES] = {};
  const __m256i low = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < a.nb; ++b) {
    __m256i s16[RT][2];
    for (int r = 0; r < RT; ++r) s16[r][0] = s16[r][1] = _mm256_setzero_si256();
    const uint8_t* c = t.codes + b * Tile<true>::CODE_BYTES;
#pragma GCC unroll 1
    for (int p = 0; p < 4; ++p) {       // not unrolled: hoisting every row's activations spills
      const int8_t* x0 = a.part(b, p, r0);
      const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + p * 64)),
                    v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + p * 64 + 32));
      const __m256i w00 = _mm256_and_si256(v0, low), w01 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), low),
                    w10 = _mm256_and_si256(v1, low), w11 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), low);
      for (int r = 0; r < RT; ++r) {
        const __m256i x_lo = _mm256_set1_epi32(load4(x0 + 8 * r)), x_hi = _mm256_set1_epi32(load4(x0 + 8 * r + 4));
        s16[r][0] = _mm256_add_epi16(s16[r][0], _mm256_add_epi16(_mm256_maddubs_epi16(w00, x_lo), _mm256_maddubs_epi16(w01, x_hi)));
        s16[r][1] = _mm256_add_epi16(s16[r][1], _mm256_add_epi16(_mm256_maddubs_epi16(w10, x_lo), _mm256_maddubs_epi16(w11, x_hi)));
      }
    }
    const at::Half* dm = t.dm + b * Tile<true>::SCALES * LANES;
    for (int h = 0; h < 2; ++h) {
      const __m256 d = load_scales8(dm + 8 * h), m = load_scales8(dm + LANES + 8 * h);
      for (int r = 0; r < RT; ++r) {
        const __m256 isum = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16[r][h], ones));
        __m256 v = _mm256_fmadd_ps(isum, _mm256_mul_ps(d, _mm256_set1_ps(a.d[b * a.M + r0 + r])),
                                   _mm256_load_ps(acc[r] + 8 * h));
        _mm256_store_ps(acc[r] + 8 * h, _mm256_fmadd_ps(m, _mm256_set1_ps(a.s[b * a.M + r0 + r]), v));
      }
    }
  }
  store_rows(&acc[0][0], RT, y, N, r0, n0, valid);
}

// --- AVX-512 VNNI: 16 lanes, one vpdpbusd per 4-weight group ------------------------------------
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni")
inline __m512 load_scales16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load_scales16(const at::Half* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
template <bool Q4, int RT>
NOINLINE void tile_vnni(const Tile<Q4>& t, const Act& a, int64_t r0, float* y, int64_t N, int64_t n0, int64_t valid) {
  __m512 acc[RT];
  for (int r = 0; r < RT; ++r) acc[r] = _mm512_setzero_ps();
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < a.nb; ++b) {
    __m512i isum[RT];
    for (int r = 0; r < RT; ++r) isum[r] = _mm512_setzero_si512();
    const uint8_t* c = t.codes + b * Tile<Q4>::CODE_BYTES;
    for (int p = 0; p < 4; ++p) {
      __m512i w0, w1;
      if constexpr (Q4) {
        const __m512i v = _mm512_loadu_si512(c + p * 64);
        w0 = _mm512_and_si512(v, low);
        w1 = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
      } else {
        w0 = _mm512_loadu_si512(c + 2 * p * 64);
        w1 = _mm512_loadu_si512(c + (2 * p + 1) * 64);
      }
      const int8_t* x0 = a.part(b, p, r0);
      for (int r = 0; r < RT; ++r) {
        isum[r] = _mm512_dpbusd_epi32(isum[r], w0, _mm512_set1_epi32(load4(x0 + 8 * r)));
        isum[r] = _mm512_dpbusd_epi32(isum[r], w1, _mm512_set1_epi32(load4(x0 + 8 * r + 4)));
      }
    }
    const auto* dm = t.dm + b * Tile<Q4>::SCALES * LANES;
    const __m512 d = load_scales16(dm);
    const float *da = a.d + b * a.M + r0, *sa = a.s + b * a.M + r0;
    for (int r = 0; r < RT; ++r) {
      if constexpr (!Q4)    // the codes were q + 128
        isum[r] = _mm512_sub_epi32(isum[r], _mm512_set1_epi32(128 * a.sum[b * a.M + r0 + r]));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r]), _mm512_mul_ps(d, _mm512_set1_ps(da[r])), acc[r]);
      if constexpr (Q4) acc[r] = _mm512_fmadd_ps(load_scales16(dm + LANES), _mm512_set1_ps(sa[r]), acc[r]);
    }
  }
  alignas(64) float out[RT * LANES];
  for (int r = 0; r < RT; ++r) _mm512_store_ps(out + r * LANES, acc[r]);
  store_rows(out, RT, y, N, r0, n0, valid);
}
#pragma GCC pop_options

// 3: AMX-INT8 (q8amx.cpp; never the automatic choice of best_isa, see amx_rows), 4: the AMX path
// emulated in portable C++ (tests: its layouts checked on any CPU)
enum Isa : int64_t { SCALAR = 0, AVX2 = 1, VNNI = 2, AMX = 3, AMX_EMULATED = 4 };

int64_t best_isa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
    return VNNI;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return AVX2;
  return SCALAR;
}

// The automatic choice of AMX: products of at least this many rows run their whole 16-row tiles
// (and a last partial tile of at least this many rows) on AMX; 0: off. Set by set_amx, from
// Python (DOMINOTREE_AMX; off by default until measured on an AMX CPU).
std::atomic<int64_t> amx_min_rows{0};

// -> amx_support(): 0 no AMX-INT8 here, 1 Linux refused the tile state, 2 usable (then on)
int64_t set_amx(int64_t min_rows) {
  TORCH_CHECK(min_rows >= 0, "min_rows must be >= 0 (0: off)");
  const int64_t why = amx_support();
  amx_min_rows = why == 2 ? min_rows : 0;
  return why;
}

int64_t amx_state() { return amx_support(); }
int64_t get_amx_min_rows() { return amx_min_rows.load(); }

// f(std::integral_constant<int, RT>{}, r) for the row tiles of rows r0 .. r0 + rows - 1: as many
// of MAX rows as fit, then one of the rest (RT a compile-time row count for the kernels' registers)
template <int RT, class F>
inline void last_row_tile(int64_t rows, int64_t r0, F& f) {
  if (rows == RT) f(std::integral_constant<int, RT>{}, r0);
  else if constexpr (RT > 1) last_row_tile<RT - 1>(rows, r0, f);
}
template <int MAX, class F>
inline void row_tiles(int64_t rows, int64_t r0, F&& f) {
  for (; rows >= MAX; rows -= MAX, r0 += MAX) f(std::integral_constant<int, MAX>{}, r0);
  if constexpr (MAX > 1)
    if (rows > 0) last_row_tile<MAX - 1>(rows, r0, f);
}

// rows r0 .. r0 + rows - 1 of one tile, in row tiles of at most 8 (VNNI) / 4 (AVX2) rows
template <bool Q4>
void tile_rows(int64_t isa, const Tile<Q4>& t, const Act& a, int64_t r0, int64_t rows, float* y, int64_t N,
               int64_t n0, int64_t valid) {
  if (isa == VNNI) {
    row_tiles<8>(rows, r0, [&](auto rt, int64_t r) { tile_vnni<Q4, decltype(rt)::value>(t, a, r, y, N, n0, valid); });
  } else if (isa == AVX2) {
    row_tiles<4>(rows, r0, [&](auto rt, int64_t r) {
      if constexpr (Q4) tile_avx2_q4<decltype(rt)::value>(t, a, r, y, N, n0, valid);
      else tile_avx2_q8<decltype(rt)::value>(t, a, r, y, N, n0, valid);
    });
  } else {
    tile_scalar<Q4>(t, a, r0, static_cast<int>(rows), y, N, n0, valid);
  }
}

// How many leading rows the AMX path takes (the rest go to `isa`): every row for isa AMX or
// AMX_EMULATED; automatically (isa -1), whole 16-row tiles and a last tile of >= amx_min_rows rows
// when the product has at least amx_min_rows rows
int64_t amx_rows(int64_t requested, int64_t M) {
  if (requested == AMX || requested == AMX_EMULATED) return M;
  const int64_t min_rows = amx_min_rows.load();
  if (requested != -1 || min_rows == 0 || M < min_rows) return 0;
  const int64_t rest = M % AMX_ROWS;
  return rest >= min_rows ? M : M - rest;
}

// x [M, K] float32; codes and scales in the tile layout above; n_out = N; isa -1: the best this
// CPU runs (AMX only where set_amx turned it on), else one of Isa
template <bool Q4>
at::Tensor product(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& dm, int64_t n_out, int64_t isa) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 2 && x.is_contiguous(),
              "x must be a contiguous float32 CPU matrix");
  const int64_t M = x.size(0), K = x.size(1), nb = K / GROUP, tiles = (n_out + LANES - 1) / LANES;
  const int64_t parts = Q4 ? 4 : 8;
  TORCH_CHECK(K % GROUP == 0, "in_features must be a multiple of 32");
  TORCH_CHECK(codes.scalar_type() == at::kByte && codes.is_contiguous() && codes.dim() == 5 &&
              codes.size(0) == tiles && codes.size(1) == nb && codes.size(2) == parts && codes.size(3) == LANES &&
              codes.size(4) == 4, "codes do not match the input");
  using Scale = typename Tile<Q4>::Scale;
  TORCH_CHECK(dm.scalar_type() == (Q4 ? at::kHalf : at::kFloat) && dm.is_contiguous() &&
              dm.numel() == tiles * nb * Tile<Q4>::SCALES * LANES, "scales do not match the codes");
  const int64_t best = best_isa();
  TORCH_CHECK(isa >= -1 && (isa <= best || isa == AMX_EMULATED || (isa == AMX && amx_support() == 2)),
              "instruction set ", isa, " is not available here (best: ", best,
              amx_support() == 2 ? ", and AMX" : "", ")");
  const int64_t on_amx = amx_rows(isa, M);
  const bool emulate = isa == AMX_EMULATED;
  const int64_t rest_isa = isa < 0 || isa >= AMX ? best : isa;
  at::Tensor y = at::empty({M, n_out}, x.options());
  if (M == 0 || n_out == 0) return y;
  at::Tensor xq = at::empty({nb, 4, M, 8}, x.options().dtype(at::kChar));
  at::Tensor xs = at::empty({2, nb, M}, x.options());
  at::Tensor sums = at::empty({nb, M}, x.options().dtype(at::kInt));
  quantize_rows(x.data_ptr<float>(), M, K, xq.data_ptr<int8_t>(), xs[0].data_ptr<float>(), xs[1].data_ptr<float>(),
                sums.data_ptr<int32_t>());
  const Act a{xq.data_ptr<int8_t>(), xs[0].data_ptr<float>(), xs[1].data_ptr<float>(), sums.data_ptr<int32_t>(), M, nb};
  const int64_t Mp = (on_amx + AMX_ROWS - 1) / AMX_ROWS * AMX_ROWS;
  at::Tensor xa;        // nothing allocated off the AMX path
  if (on_amx) {
    xa = at::empty({nb * Mp * 32}, x.options().dtype(at::kChar));
    amx_activations(a, Mp, xa.data_ptr<int8_t>());
  }
  const int8_t* xap = on_amx ? xa.data_ptr<int8_t>() : nullptr;
  const uint8_t* cp = codes.data_ptr<uint8_t>();
  const Scale* sp = dm.data_ptr<Scale>();
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, tiles, 1, [&](int64_t t0, int64_t t1) {
    std::vector<int8_t> scratch;
    if (on_amx) scratch.resize(nb * AMX_B_BYTES);
    if (on_amx && !emulate) amx_begin();
    for (int64_t t = t0; t < t1; ++t) {
      const Tile<Q4> tile{cp + t * nb * Tile<Q4>::CODE_BYTES, sp + t * nb * Tile<Q4>::SCALES * LANES};
      const int64_t valid = std::min(LANES, n_out - t * LANES);
      if (on_amx)
        amx_tile_rows<Q4>(emulate, tile, a, xap, Mp, 0, on_amx, yp, n_out, t * LANES, valid,
                          scratch.data());
      if (on_amx < M) tile_rows<Q4>(rest_isa, tile, a, on_amx, M - on_amx, yp, n_out, t * LANES, valid);
    }
    if (on_amx && !emulate) amx_end();
  });
  return y;
}

at::Tensor q4q8_linear(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& dm, int64_t n_out, int64_t isa) {
  return product<true>(x, codes, dm, n_out, isa);
}

at::Tensor q8q8_linear(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& d, int64_t n_out, int64_t isa) {
  return product<false>(x, codes, d, n_out, isa);
}

}  // namespace

// for layer.cpp's whole-layer op
at::Tensor dominotree_q4q8_linear(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& dm, int64_t n_out) {
  return q4q8_linear(x, codes, dm, n_out, -1);
}

// for draftlayer.cpp's whole-layer op of the drafter
at::Tensor dominotree_q8q8_linear(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& d, int64_t n_out) {
  return q8q8_linear(x, codes, d, n_out, -1);
}

TORCH_LIBRARY(dominotree_q8act, m) {
  m.def("q4q8_linear(Tensor x, Tensor codes, Tensor dm, int n_out, int isa=-1) -> Tensor");
  m.def("q8q8_linear(Tensor x, Tensor codes, Tensor d, int n_out, int isa=-1) -> Tensor");
  m.def("best_isa() -> int", &best_isa);
  m.def("set_amx(int min_rows) -> int", &set_amx);
  m.def("amx_state() -> int", &amx_state);
  m.def("amx_min_rows() -> int", &get_amx_min_rows);
}

TORCH_LIBRARY_IMPL(dominotree_q8act, CPU, m) {
  m.impl("q4q8_linear", &q4q8_linear);
  m.impl("q8q8_linear", &q8q8_linear);
}
