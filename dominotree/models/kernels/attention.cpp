// Attention of the fast forward on CPU (float32 or bf16 q and cache, float32 arithmetic), the same
// bits for a query row whatever the other rows: a tree verify's row gets exactly what a one-row
// step gives it. torch's SDPA blocks its reductions by the shape (a 17-row verify and a one-row
// step differed by ~3e-5 in float32 here), which the 8-bit activation blocks of the int4-q8 target
// turn into different tokens, and bf16 rounding into different tokens at near-ties.
//
// Each (head, row) is one fixed chain over the keys it sees, in cache order (a tree node's
// ancestors sit in increasing cache positions, as the accepted tokens do after compaction, so a
// verify row and the one-row step see the same keys in the same order):
//   s_j = dot(q, k_j) * scale (+ mask_j), j visible;  m = max s_j;  p_j = exp(s_j - m);
//   o = (sum_j p_j v_j) / (sum_j p_j), both sums in key order.
// Hidden keys are skipped, never added as exp(-inf), so where they sit does not matter.
// Loaded with the other kernels by dominotree/models/cpuext.py; used by fast.py and layer.cpp.
#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <cmath>
#include <limits>
#include <vector>

__m256 dominotree_exp8(__m256 x);   // layer.cpp

namespace {

constexpr float HIDDEN = -1e30f;   // an additive mask value at or below this hides the key

// 8 values widened to float32 (bf16 -> float32 is exact: the 16 bits shifted up)
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const at::BFloat16* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
inline float widen(float v) { return v; }
inline float widen(at::BFloat16 v) { return static_cast<float>(v); }

// dot(a, b) over n: 8 lanes of fma, then the lanes summed in a fixed order; a scalar tail
template <class T>
inline float dot(const T* a, const T* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(load8(a + i), load8(b + i), acc);
  alignas(32) float v[8];
  _mm256_store_ps(v, acc);
  float s = ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
  for (; i < n; ++i) s = std::fma(widen(a[i]), widen(b[i]), s);
  return s;
}

// dot() of q with 8 keys at once: the same chain for each key (8 lanes of fma over q's length, a
// multiple of 8, then ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7))), 8 chains interleaved and
// the lane sums of all 8 taken by three rounds of hadd (each an IEEE sum of the same two lanes)
template <class T>
inline __m256 dot8(const T* q, const T* const* k, int64_t n) {
  __m256 a[8];
  for (int j = 0; j < 8; ++j) a[j] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 qv = load8(q + i);
    for (int j = 0; j < 8; ++j) a[j] = _mm256_fmadd_ps(qv, load8(k[j] + i), a[j]);
  }
  // hadd(x, y) = [x0+x1, x2+x3, y0+y1, y2+y3 | x4+x5, x6+x7, y4+y5, y6+y7]
  const __m256 g0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m256 g1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  // g: [(v0+v1)+(v2+v3) of keys 0..3 | (v4+v5)+(v6+v7) of keys 0..3]; the two halves added
  return _mm256_add_ps(_mm256_permute2f128_ps(g0, g1, 0x20), _mm256_permute2f128_ps(g0, g1, 0x31));
}

// One key at a time (the chains written out plainly): the tests' reference for the fast path
template <class T>
void attend(const at::Tensor& q, const at::Tensor& kv, int64_t start, const at::Tensor& m, bool causal, at::Tensor& out) {
  const int64_t nh = q.size(0), n = q.size(1), hd = q.size(2), nkv = kv.size(1), L = start + n;
  const bool is_bool = m.defined() && m.scalar_type() == at::kBool;
  const bool* mb = is_bool ? m.data_ptr<bool>() : nullptr;
  const float* mf = m.defined() && !is_bool ? m.data_ptr<float>() : nullptr;
  const T* qp = q.data_ptr<T>();
  const T* kp = kv.data_ptr<T>();
  const int64_t head_stride = kv.stride(1), half = kv.stride(0);
  T* op = out.data_ptr<T>();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t group = nh / nkv;
  at::parallel_for(0, nh * n, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> s(L + 8), acc(hd);
    std::vector<int64_t> idx(L);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t h = t / n, i = t % n;
      const T* qv = qp + (h * n + i) * hd;
      const T* keys = kp + (h / group) * head_stride;
      const T* values = keys + half;
      int64_t cnt = 0;
      float mx = -std::numeric_limits<float>::infinity();
      const int64_t last = causal ? start + i : L - 1;
      for (int64_t j = 0; j <= last; ++j) {
        float add = 0.0f;
        if (mb != nullptr && !mb[i * L + j]) continue;
        if (mf != nullptr) {
          add = mf[i * L + j];
          if (!(add > HIDDEN)) continue;            // finfo.min of float32 or bf16, -inf (and NaN): hidden
        }
        float sc = dot(qv, keys + j * hd, hd) * scale;
        if (mf != nullptr) sc = sc + add;
        s[cnt] = sc;
        idx[cnt++] = j;
        mx = std::max(mx, sc);
      }
      for (int64_t c = cnt; c < cnt + 8; ++c) s[c] = mx;   // a padded tail: exp8 is elementwise
      const __m256 vm = _mm256_set1_ps(mx);
      for (int64_t c = 0; c < cnt; c += 8)
        _mm256_storeu_ps(s.data() + c, dominotree_exp8(_mm256_sub_ps(_mm256_loadu_ps(s.data() + c), vm)));
      float sum = 0.0f;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t c = 0; c < cnt; ++c) {
        const float p = s[c];
        sum += p;
        const T* v = values + idx[c] * hd;
        int64_t d = 0;
        const __m256 pv = _mm256_set1_ps(p);
        for (; d + 8 <= hd; d += 8)
          _mm256_storeu_ps(acc.data() + d, _mm256_fmadd_ps(pv, load8(v + d), _mm256_loadu_ps(acc.data() + d)));
        for (; d < hd; ++d) acc[d] = std::fma(p, widen(v[d]), acc[d]);
      }
      T* o = op + i * nh * hd + h * hd;
      for (int64_t d = 0; d < hd; ++d) o[d] = static_cast<T>(acc[d] / sum);
    }
  });
}

// The fast path (head sizes a multiple of 64): the same chains as attend<T>, with the work of
// a tile of up to ROW_TILE rows of one head arranged so that each key and value is read from memory
// once for the tile instead of once per row (a wide verify read every key and value again for each
// of its rows, and was bound by that traffic):
// - scores: 8 keys at a time (dot8), for every row of the tile while those keys sit in L1; every
//   key up to the last one any row sees gets a score, and each row then takes its visible keys'
//   scores in cache order (a key's score is its own chain, whichever keys it is computed beside);
// - the value sum: KEY_CHUNK keys at a time, each row of the tile adding its visible keys of the
//   chunk to its 64 accumulators in key order (held in memory between chunks, exact).
// max of s[0 .. n) as the sequential std::max chain gives it (a NaN score skipped, as std::max(mx, s)
// skips it), 8 lanes at a time (max is exact in any order); a zero maximum, whose sign the order
// decides, is taken by the chain itself. s has room for 8 values past n.
inline float max_of(float* s, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t c = n; c < n + 8; ++c) s[c] = mx;
  __m256 m = _mm256_set1_ps(mx);
  for (int64_t c = 0; c < n; c += 8) m = _mm256_max_ps(_mm256_loadu_ps(s + c), m);
  alignas(32) float v[8];
  _mm256_store_ps(v, m);
  for (int k = 0; k < 8; ++k) mx = std::max(mx, v[k]);
  if (mx == 0.0f) {
    mx = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < n; ++c) mx = std::max(mx, s[c]);
  }
  return mx;
}

constexpr int64_t ROW_TILE = 8;
constexpr int64_t KEY_CHUNK = 64;

template <class T>
void attend_tiles(const at::Tensor& q, const at::Tensor& kv, int64_t start, const at::Tensor& m, bool causal,
                  at::Tensor& out) {
  const int64_t nh = q.size(0), n = q.size(1), hd = q.size(2), nkv = kv.size(1), L = start + n;
  const bool is_bool = m.defined() && m.scalar_type() == at::kBool;
  const bool* mb = is_bool ? m.data_ptr<bool>() : nullptr;
  const float* mf = m.defined() && !is_bool ? m.data_ptr<float>() : nullptr;
  const T* qp = q.data_ptr<T>();
  const T* kp = kv.data_ptr<T>();
  const int64_t head_stride = kv.stride(1), half = kv.stride(0);
  T* op = out.data_ptr<T>();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t group = nh / nkv, tiles = (n + ROW_TILE - 1) / ROW_TILE, W = L + 8;
  at::parallel_for(0, nh * tiles, 1, [&](int64_t u0, int64_t u1) {
    std::vector<float> raw(ROW_TILE * W), s(ROW_TILE * W), acc(ROW_TILE * 64), sum(ROW_TILE);
    std::vector<int64_t> idx(ROW_TILE * L), cnt(ROW_TILE), cur(ROW_TILE);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t h = u / tiles, i0 = (u % tiles) * ROW_TILE, rows = std::min(ROW_TILE, n - i0);
      const T* keys = kp + (h / group) * head_stride;
      const T* values = keys + half;
      int64_t top = -1;                               // the last key any row of the tile sees
      for (int64_t r = 0; r < rows; ++r) {            // each row's visible keys, in cache order
        const int64_t i = i0 + r, last = causal ? start + i : L - 1;
        int64_t c = 0;
        for (int64_t j = 0; j <= last; ++j) {
          if (mb != nullptr && !mb[i * L + j]) continue;
          if (mf != nullptr && !(mf[i * L + j] > HIDDEN)) continue;
          idx[r * L + c++] = j;
        }
        cnt[r] = c;
        if (c > 0) top = std::max(top, idx[r * L + c - 1]);
      }
      const T* k8[8];
      for (int64_t c = 0; c <= top; c += 8) {
        for (int j = 0; j < 8; ++j) k8[j] = keys + std::min(c + j, top) * hd;
        for (int64_t r = 0; r < rows; ++r)
          _mm256_storeu_ps(raw.data() + r * W + c,
                           _mm256_mul_ps(dot8(qp + (h * n + i0 + r) * hd, k8, hd), _mm256_set1_ps(scale)));
      }
      for (int64_t r = 0; r < rows; ++r) {            // the softmax weights of each row's visible keys
        const int64_t i = i0 + r, nc = cnt[r];
        float* sr = s.data() + r * W;
        for (int64_t c = 0; c < nc; ++c) {
          const int64_t j = idx[r * L + c];
          sr[c] = raw[r * W + j];
          if (mf != nullptr) sr[c] = sr[c] + mf[i * L + j];
        }
        const float mx = max_of(sr, nc);
        for (int64_t c = nc; c < nc + 8; ++c) sr[c] = mx;   // a padded tail: exp8 is elementwise
        const __m256 vm = _mm256_set1_ps(mx);
        for (int64_t c = 0; c < nc; c += 8)
          _mm256_storeu_ps(sr + c, dominotree_exp8(_mm256_sub_ps(_mm256_loadu_ps(sr + c), vm)));
        sum[r] = 0.0f;
      }
      for (int64_t d0 = 0; d0 < hd; d0 += 64) {       // the value sums, 64 outputs at a time
        std::fill(acc.begin(), acc.end(), 0.0f);
        std::fill(cur.begin(), cur.end(), 0);
        for (int64_t j1 = KEY_CHUNK; j1 - KEY_CHUNK <= top; j1 += KEY_CHUNK)
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t* ir = idx.data() + r * L;
            const float* sr = s.data() + r * W;
            int64_t c = cur[r];
            if (c >= cnt[r] || ir[c] >= j1) continue;
            __m256 a[8];
            for (int k = 0; k < 8; ++k) a[k] = _mm256_loadu_ps(acc.data() + r * 64 + 8 * k);
            float total = sum[r];         // the weights' sum, in key order, beside the first 64 outputs
            for (; c < cnt[r] && ir[c] < j1; ++c) {
              if (d0 == 0) total += sr[c];
              const __m256 pv = _mm256_set1_ps(sr[c]);
              const T* v = values + ir[c] * hd + d0;
              for (int k = 0; k < 8; ++k) a[k] = _mm256_fmadd_ps(pv, load8(v + 8 * k), a[k]);
            }
            for (int k = 0; k < 8; ++k) _mm256_storeu_ps(acc.data() + r * 64 + 8 * k, a[k]);
            sum[r] = total;
            cur[r] = c;
          }
        for (int64_t r = 0; r < rows; ++r) {
          T* o = op + (i0 + r) * nh * hd + h * hd + d0;
          for (int64_t d = 0; d < 64; ++d) o[d] = static_cast<T>(acc[r * 64 + d] / sum[r]);
        }
      }
    }
  });
}
}  // namespace

// q [nh, n, hd] (after RoPE); kv [2, nkv, cap, hd] with keys 0 .. start + n - 1 valid; both float32
// or both bf16 (the arithmetic is float32 either way; a bf16 output is rounded once at the end).
// mask: none (every key visible, or with causal row i sees keys <= start + i), or n x (start + n)
// values (any leading dims of size 1): bool (true: visible) or float, added to the score, finfo.min
// or -inf: hidden. Returns [n, nh * hd] in q's dtype.
namespace {
at::Tensor attention(const at::Tensor& q, const at::Tensor& kv, int64_t start, const c10::optional<at::Tensor>& mask,
                     bool causal, bool reference) {
  TORCH_CHECK(q.device().is_cpu() && (q.scalar_type() == at::kFloat || q.scalar_type() == at::kBFloat16) &&
              q.dim() == 3 && q.is_contiguous(), "q must be a contiguous float32 or bf16 [heads, n, head_dim] CPU tensor");
  TORCH_CHECK(kv.scalar_type() == q.scalar_type() && kv.dim() == 4 && kv.size(0) == 2 && kv.stride(3) == 1 &&
              kv.stride(2) == kv.size(3), "kv must be [2, kv_heads, capacity, head_dim] in q's dtype");
  const int64_t nh = q.size(0), n = q.size(1), hd = q.size(2), nkv = kv.size(1), L = start + n;
  TORCH_CHECK(kv.size(3) == hd && nkv > 0 && nh % nkv == 0, "q and kv heads do not match");
  TORCH_CHECK(start >= 0 && L <= kv.size(2), "positions beyond the cache");
  at::Tensor m;
  if (mask.has_value()) {
    TORCH_CHECK(mask->numel() == n * L, "the mask must be n x (start + n)");
    m = mask->reshape({n, L}).contiguous();
    if (m.scalar_type() != at::kBool) m = m.to(at::kFloat);   // 0 / finfo.min of any float dtype
  }
  at::Tensor out = at::empty({n, nh * hd}, q.options());
  const bool batched = !reference && hd % 64 == 0;
  if (q.scalar_type() == at::kFloat)
    batched ? attend_tiles<float>(q, kv, start, m, causal, out) : attend<float>(q, kv, start, m, causal, out);
  else
    batched ? attend_tiles<at::BFloat16>(q, kv, start, m, causal, out)
            : attend<at::BFloat16>(q, kv, start, m, causal, out);
  return out;
}
}  // namespace

at::Tensor dominotree_attention(const at::Tensor& q, const at::Tensor& kv, int64_t start,
                                const c10::optional<at::Tensor>& mask, bool causal) {
  return attention(q, kv, start, mask, causal, false);
}

// one key at a time (the chains written out plainly): the tests' reference for the batched path
at::Tensor attention_reference(const at::Tensor& q, const at::Tensor& kv, int64_t start,
                               const c10::optional<at::Tensor>& mask, bool causal) {
  return attention(q, kv, start, mask, causal, true);
}

TORCH_LIBRARY(dominotree_attn, m) {
  m.def("attention(Tensor q, Tensor kv, int start, Tensor? mask, bool causal) -> Tensor");
  m.def("attention_reference(Tensor q, Tensor kv, int start, Tensor? mask, bool causal) -> Tensor");
}

TORCH_LIBRARY_IMPL(dominotree_attn, CPU, m) {
  m.impl("attention", &dominotree_attention);
  m.impl("attention_reference", &attention_reference);
}
