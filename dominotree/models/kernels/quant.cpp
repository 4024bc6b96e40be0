// Block-quantized weight products with float32 activations, for x86 CPUs with AVX2 and FMA:
// 4-bit Q4_1 (the GGUF's decoder weights) and 8-bit Q8_0 (its tied embedding / LM head).
// Built by dominotree/models/cpuext.py, used by models/quantcpu.py.
//
// y[r, n] = sum_k x[r, k] * w[n, k], the weight dequantized from blocks of 32 in registers:
// Q4_1 w = fma(q, d, m) with q in [0, 15]; Q8_0 w = q * d with q in [-128, 127] (exact in float32);
// d, m the block's float32 scale and minimum.
//
// Exact arithmetic, independent of the number of rows and threads: each output y[r, n] is one
// chain acc = fma(w[k:k+8], x[k:k+8], acc) over k in steps of 8, then its 8 lanes summed in a
// fixed order. Few rows dequantize in registers, many rows dequantize 4 outputs into a buffer
// that every row tile reads; both run the same chain, so a row of a 17-row tree verify gets
// exactly what a one-row step gives it. Threads split the outputs, never a sum.
//
// Q4_1 codes are repacked (quantcpu.pack_q4): byte i of a block holds q[i] | q[8 + i] << 4 and
// byte 8 + i holds q[16 + i] | q[24 + i] << 4, so one zero-extension gives two 8-weight parts.
#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

namespace {

constexpr int64_t GROUP = 32;

// Each tile is its own function: inlined into product(), GCC's register allocation of the 3- and
// 4-row tiles changed with unrelated edits and spilled (1.5x slower, measured in one process).
#define NOINLINE __attribute__((noinline))
#define ALWAYS_INLINE __attribute__((always_inline)) inline

inline float hsum(__m256 a) {
  alignas(32) float v[8];
  _mm256_store_ps(v, a);
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

// The four 8-weight parts of block b of one output (Q4_1).
struct Q4 {
  const uint8_t* codes;   // [N, K / 2]
  const float* dm;        // [N, K / 32, 2]
  int64_t nb;
  ALWAYS_INLINE void block(int64_t n, int64_t b, __m256 w[4]) const {
    const uint8_t* c = codes + (n * nb + b) * 16;
    const float* s = dm + (n * nb + b) * 2;
    const __m256i low = _mm256_set1_epi32(0x0F);
    __m256 d = _mm256_broadcast_ss(s), m = _mm256_broadcast_ss(s + 1);
    __m256i a = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c)));
    __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c + 8)));
    w[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(a, low)), d, m);
    w[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4)), d, m);
    w[2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(e, low)), d, m);
    w[3] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(e, 4)), d, m);
  }
};

struct Q8 {
  const int8_t* codes;    // [N, K]
  const float* d;         // [N, K / 32]
  int64_t nb;
  ALWAYS_INLINE void block(int64_t n, int64_t b, __m256 w[4]) const {
    const int8_t* c = codes + (n * nb + b) * GROUP;
    const __m256 s = _mm256_broadcast_ss(d + n * nb + b);
    for (int j = 0; j < 4; ++j)
      w[j] = _mm256_mul_ps(_mm256_cvtepi32_ps(
          _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c + 8 * j)))), s);
  }
};

// NT outputs from n, RT rows from x (row stride K), weights dequantized in registers.
template <int NT, int RT, class W>
NOINLINE void reg_tile(const W& wt, int64_t n, const float* x, int64_t K, float* y, int64_t N) {
  __m256 acc[NT][RT];
  for (int i = 0; i < NT; ++i)
    for (int r = 0; r < RT; ++r) acc[i][r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < wt.nb; ++b) {
    for (int i = 0; i < NT; ++i) {
      __m256 w[4];
      wt.block(n + i, b, w);
      for (int j = 0; j < 4; ++j)
        for (int r = 0; r < RT; ++r)
          acc[i][r] = _mm256_fmadd_ps(w[j], _mm256_loadu_ps(x + r * K + b * GROUP + 8 * j), acc[i][r]);
    }
  }
  for (int i = 0; i < NT; ++i)
    for (int r = 0; r < RT; ++r) y[r * N + n + i] = hsum(acc[i][r]);
}

// NT outputs already dequantized in buf ([NT, K]) against RT rows.
template <int NT, int RT>
NOINLINE void buf_tile(const float* buf, const float* x, int64_t K, float* y, int64_t N, int64_t n) {
  __m256 acc[NT][RT];
  for (int i = 0; i < NT; ++i)
    for (int r = 0; r < RT; ++r) acc[i][r] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; k += 8) {
    __m256 xr[RT];
    for (int r = 0; r < RT; ++r) xr[r] = _mm256_loadu_ps(x + r * K + k);
    for (int i = 0; i < NT; ++i) {
      __m256 w = _mm256_loadu_ps(buf + i * K + k);
      for (int r = 0; r < RT; ++r) acc[i][r] = _mm256_fmadd_ps(w, xr[r], acc[i][r]);
    }
  }
  for (int i = 0; i < NT; ++i)
    for (int r = 0; r < RT; ++r) y[r * N + n + i] = hsum(acc[i][r]);
}

template <class W>
void product(const W& wt, const float* x, int64_t M, int64_t K, int64_t N, float* y) {
  constexpr int64_t NB = 4;        // outputs per buffered tile
  constexpr int64_t REG_ROWS = 4;  // up to this many rows, dequantize in registers (measured)
  const int64_t tiles = (N + 7) / 8;
  if (M == 0) return;          // the tiles below read and write at least one row
  at::parallel_for(0, tiles, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> buf(NB * K);
    for (int64_t n = t0 * 8; n < std::min(N, t1 * 8); ) {
      const int64_t left = std::min(N, t1 * 8) - n;
      if (M <= REG_ROWS) {                           // dequantize in registers, per row tile
        // one or two rows: 4 outputs a tile share each x load; three or four rows: one output a
        // tile, or the accumulators spill (measured 1.6x slower at 3-4 rows with 2 outputs)
        const int64_t nt = M <= 2 ? (left >= 4 ? 4 : (left >= 2 ? 2 : 1)) : 1;
        if (nt == 4) { if (M == 1) reg_tile<4, 1>(wt, n, x, K, y, N); else reg_tile<4, 2>(wt, n, x, K, y, N); }
        else if (nt == 2) { if (M == 1) reg_tile<2, 1>(wt, n, x, K, y, N); else reg_tile<2, 2>(wt, n, x, K, y, N); }
        else {
          switch (M) {
            case 1: reg_tile<1, 1>(wt, n, x, K, y, N); break;
            case 2: reg_tile<1, 2>(wt, n, x, K, y, N); break;
            case 3: reg_tile<1, 3>(wt, n, x, K, y, N); break;
            default: reg_tile<1, 4>(wt, n, x, K, y, N);
          }
        }
        n += nt;
        continue;
      }
      const int64_t nt = left >= NB ? NB : 1;
      for (int64_t i = 0; i < nt; ++i)
        for (int64_t b = 0; b < wt.nb; ++b) {
          __m256 w[4];
          wt.block(n + i, b, w);
          for (int j = 0; j < 4; ++j) _mm256_storeu_ps(buf.data() + i * K + b * GROUP + 8 * j, w[j]);
        }
      int64_t r = 0;
      if (nt == NB) {
        for (; r + 3 <= M; r += 3) buf_tile<4, 3>(buf.data(), x + r * K, K, y + r * N, N, n);
        if (M - r == 2) buf_tile<4, 2>(buf.data(), x + r * K, K, y + r * N, N, n);
        else if (M - r == 1) buf_tile<4, 1>(buf.data(), x + r * K, K, y + r * N, N, n);
      } else {
        for (; r < M; ++r) buf_tile<1, 1>(buf.data(), x + r * K, K, y + r * N, N, n);
      }
      n += nt;
    }
  });
}

void check(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& scales, at::ScalarType code_type,
           int64_t code_cols, int64_t per_block) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 2 && x.is_contiguous(),
              "x must be a contiguous float32 CPU matrix");
  TORCH_CHECK(x.size(1) % GROUP == 0, "in_features must be a multiple of 32");
  TORCH_CHECK(codes.scalar_type() == code_type && codes.dim() == 2 && codes.is_contiguous() &&
              codes.size(1) == code_cols, "codes do not match the input");
  TORCH_CHECK(scales.scalar_type() == at::kFloat && scales.is_contiguous() &&
              scales.numel() == codes.size(0) * (x.size(1) / GROUP) * per_block, "scales do not match");
}

// x [M, K] float32, codes [N, K / 2] uint8 (repacked, see above), dm [N, K / 32, 2] float32 (d, m)
at::Tensor q4_linear(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& dm) {
  check(x, codes, dm, at::kByte, x.size(1) / 2, 2);
  const int64_t M = x.size(0), K = x.size(1), N = codes.size(0);
  at::Tensor y = at::empty({M, N}, x.options());
  product(Q4{codes.data_ptr<uint8_t>(), dm.data_ptr<float>(), K / GROUP}, x.data_ptr<float>(), M, K, N,
          y.data_ptr<float>());
  return y;
}

// x [M, K] float32, codes [N, K] int8, d [N, K / 32] float32
at::Tensor q8_linear(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& d) {
  check(x, codes, d, at::kChar, x.size(1), 1);
  const int64_t M = x.size(0), K = x.size(1), N = codes.size(0);
  at::Tensor y = at::empty({M, N}, x.options());
  product(Q8{codes.data_ptr<int8_t>(), d.data_ptr<float>(), K / GROUP}, x.data_ptr<float>(), M, K, N,
          y.data_ptr<float>());
  return y;
}

}  // namespace

// for layer.cpp's whole-block op
at::Tensor dominotree_q4_linear(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& dm) {
  return q4_linear(x, codes, dm);
}

TORCH_LIBRARY(dominotree_quant, m) {
  m.def("q4_linear(Tensor x, Tensor codes, Tensor dm) -> Tensor");
  m.def("q8_linear(Tensor x, Tensor codes, Tensor d) -> Tensor");
}

TORCH_LIBRARY_IMPL(dominotree_quant, CPU, m) {
  m.impl("q4_linear", &q4_linear);
  m.impl("q8_linear", &q8_linear);
}
