// bf16 products x @ W.T (+ b) whose rows do not depend on each other: a tree verify's row gets the
// bits a one-row step gives it, on every CPU. torch sends a bf16 CPU product to oneDNN wherever the
// CPU has AVX-512 (BW, VL, DQ) or AVX-NE-CONVERT and the product has more than 16^3 multiply-adds,
// and oneDNN picks its kernel by the shape: on a Xeon with AMX a 33-row product took the AMX tiles
// and gave row 0 other bits than the one-row product (issue 40). Built by models/cpuext.py, used by
// models/linear.py (linear) for every bf16 product on CPU that needs no autograd.
//
// Each output (row r, column n) is one fixed chain of float32 operations, whatever the rows,
// threads or instruction set:
//   16 lanes; lane l sums, by fma in k order, x[r, k] * w[n, k] over k = 16 i + pos(l), where the
//   16 inputs of a group are read as 8 even ones (lanes 0-7) and 8 odd ones (lanes 8-15);
//   inputs past K count as zeros;
//   s_j = lane j + lane 8 + j (j < 8); t_j = s_j + s_j+4; u_j = t_j + t_j+2; y = u_0 + u_1;
//   y = y + float(b[n]) with a bias; rounded once to bf16 (to nearest even).
// bf16 -> float32 is exact (the 16 bits shifted up), so the AVX2 path (two 8-lane accumulators)
// and the scalar path (std::fma per lane) give the same bits (tests/test_linear.py asserts ==).
#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <cmath>
#include <cstring>

namespace {

constexpr int64_t G = 16;          // inputs per lane group
#define NOINLINE __attribute__((noinline))

// x [M, K] bf16 -> [M, Kp] float32, each group of 16 as its 8 even then its 8 odd inputs, zeros past K
void widen_rows(const at::BFloat16* x, int64_t M, int64_t K, int64_t Kp, float* out) {
  for (int64_t r = 0; r < M; ++r)
    for (int64_t k = 0; k < Kp; ++k) {
      const int64_t g = k / G, i = k % G;
      const float v = k < K ? static_cast<float>(x[r * K + k]) : 0.0f;
      out[r * Kp + g * G + (i % 2) * 8 + i / 2] = v;
    }
}

inline float reduce16(const float* lane) {
  float s[8], t[4], u[2];
  for (int j = 0; j < 8; ++j) s[j] = lane[j] + lane[8 + j];
  for (int j = 0; j < 4; ++j) t[j] = s[j] + s[j + 4];
  for (int j = 0; j < 2; ++j) u[j] = t[j] + t[j + 2];
  return u[0] + u[1];
}

inline at::BFloat16 finish(float y, const at::BFloat16* bias, int64_t n) {
  if (bias != nullptr) y = y + static_cast<float>(bias[n]);
  return at::BFloat16(y);
}

// a weight row's group g as the 16 float32 lanes of the chain (zeros past K)
inline void weight_group(const at::BFloat16* w, int64_t K, int64_t g, float* lane) {
  for (int i = 0; i < G; ++i) {
    const int64_t k = g * G + i;
    lane[(i % 2) * 8 + i / 2] = k < K ? static_cast<float>(w[k]) : 0.0f;
  }
}

// --- scalar: the reference chain -------------------------------------------------------------
void cols_scalar(const float* xf, int64_t M, int64_t Kp, const at::BFloat16* w, int64_t K, const at::BFloat16* bias,
                 at::BFloat16* y, int64_t N, int64_t n0, int64_t n1) {
  float wl[G];
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t r = 0; r < M; ++r) {
      float acc[G] = {0};
      for (int64_t g = 0; g < Kp / G; ++g) {
        weight_group(w + n * K, K, g, wl);
        const float* xl = xf + r * Kp + g * G;
        for (int l = 0; l < G; ++l) acc[l] = std::fma(xl[l], wl[l], acc[l]);
      }
      y[r * N + n] = finish(reduce16(acc), bias, n);
    }
}

// --- AVX2: RT rows of one output; the weight group's 16 bf16 split into even and odd lanes -------
template <int RT>
NOINLINE void col_avx2(const float* xf, int64_t Kp, const at::BFloat16* wrow, int64_t K, float* out) {
  __m256 acc[RT][2];
  for (int r = 0; r < RT; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  const int64_t full = K / G;
  alignas(32) uint16_t tail[G];
  for (int64_t g = 0; g < Kp / G; ++g) {
    const void* src = wrow + g * G;
    if (g == full) {      // the last, partial group: zeros past K
      std::memset(tail, 0, sizeof(tail));
      std::memcpy(tail, wrow + g * G, (K - g * G) * sizeof(uint16_t));
      src = tail;
    }
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src));
    const __m256 we = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));      // inputs 0, 2, .., 14
    const __m256 wo = _mm256_castsi256_ps(_mm256_and_si256(v, high));     // inputs 1, 3, .., 15
    for (int r = 0; r < RT; ++r) {
      const float* xl = xf + r * Kp + g * G;
      acc[r][0] = _mm256_fmadd_ps(_mm256_loadu_ps(xl), we, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(_mm256_loadu_ps(xl + 8), wo, acc[r][1]);
    }
  }
  alignas(32) float lane[G];
  for (int r = 0; r < RT; ++r) {
    _mm256_store_ps(lane, acc[r][0]);
    _mm256_store_ps(lane + 8, acc[r][1]);
    out[r] = reduce16(lane);
  }
}

void cols_avx2(const float* xf, int64_t M, int64_t Kp, const at::BFloat16* w, int64_t K, const at::BFloat16* bias,
               at::BFloat16* y, int64_t N, int64_t n0, int64_t n1) {
  float out[4];
  for (int64_t n = n0; n < n1; ++n) {
    const at::BFloat16* wrow = w + n * K;
    int64_t r = 0;
    for (; r + 4 <= M; r += 4) {
      col_avx2<4>(xf + r * Kp, Kp, wrow, K, out);
      for (int i = 0; i < 4; ++i) y[(r + i) * N + n] = finish(out[i], bias, n);
    }
    const int64_t rest = M - r;
    if (rest == 3) col_avx2<3>(xf + r * Kp, Kp, wrow, K, out);
    if (rest == 2) col_avx2<2>(xf + r * Kp, Kp, wrow, K, out);
    if (rest == 1) col_avx2<1>(xf + r * Kp, Kp, wrow, K, out);
    for (int64_t i = 0; i < rest; ++i) y[(r + i) * N + n] = finish(out[i], bias, n);
  }
}

enum Isa : int64_t { SCALAR = 0, AVX2 = 1 };

int64_t best_isa() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? AVX2 : SCALAR;
}

// x [M, K], w [N, K], bias [N] or none, all bf16 on CPU -> [M, N] bf16; isa -1: the best here
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias, int64_t isa) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == at::kBFloat16 && x.dim() == 2,
              "x must be a bf16 CPU matrix");
  TORCH_CHECK(w.device().is_cpu() && w.scalar_type() == at::kBFloat16 && w.dim() == 2 && w.size(1) == x.size(1),
              "the weight must be a bf16 CPU matrix [out, in] with in = x's columns");
  const bool has_bias = bias.has_value() && bias->defined();
  if (has_bias)
    TORCH_CHECK(bias->scalar_type() == at::kBFloat16 && bias->dim() == 1 && bias->size(0) == w.size(0),
                "the bias must be bf16 [out]");
  const int64_t best = best_isa();
  TORCH_CHECK(isa >= -1 && isa <= best, "instruction set ", isa, " is not available here (best: ", best, ")");
  if (isa < 0) isa = best;
  const at::Tensor xc = x.contiguous(), wc = w.contiguous();
  const at::Tensor bc = has_bias ? bias->contiguous() : at::Tensor();
  const int64_t M = xc.size(0), K = xc.size(1), N = wc.size(0), Kp = (K + G - 1) / G * G;
  at::Tensor y = at::empty({M, N}, xc.options());
  if (M == 0 || N == 0) return y;
  at::Tensor xf = at::empty({M, Kp}, xc.options().dtype(at::kFloat));
  widen_rows(xc.data_ptr<at::BFloat16>(), M, K, Kp, xf.data_ptr<float>());
  const float* xp = xf.data_ptr<float>();
  const at::BFloat16* wp = wc.data_ptr<at::BFloat16>();
  const at::BFloat16* bp = has_bias ? bc.data_ptr<at::BFloat16>() : nullptr;
  at::BFloat16* yp = y.data_ptr<at::BFloat16>();
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    if (isa == AVX2) cols_avx2(xp, M, Kp, wp, K, bp, yp, N, n0, n1);
    else cols_scalar(xp, M, Kp, wp, K, bp, yp, N, n0, n1);
  });
  return y;
}

}  // namespace

TORCH_LIBRARY(dominotree_bf16, m) {
  m.def("linear(Tensor x, Tensor w, Tensor? bias=None, int isa=-1) -> Tensor");
  m.def("best_isa() -> int", &best_isa);
}

TORCH_LIBRARY_IMPL(dominotree_bf16, CPU, m) {
  m.impl("linear", &linear);
}
