// Attention of the fast forward in float32 on CPU, the same bits for a query row whatever the other
// rows: a tree verify's row gets exactly what a one-row step gives it. torch's SDPA blocks its
// reductions by the shape (a 17-row verify and a one-row step differed by ~3e-5 here), which the
// 8-bit activation blocks of the int4-q8 target turn into different tokens.
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
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

__m256 dominotree_exp8(__m256 x);   // layer.cpp

namespace {

// dot(a, b) over n: 8 lanes of fma, then the lanes summed in a fixed order; a scalar tail
inline float dot(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  alignas(32) float v[8];
  _mm256_store_ps(v, acc);
  float s = ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
  for (; i < n; ++i) s = std::fma(a[i], b[i], s);
  return s;
}

}  // namespace

// q [nh, n, hd] (after RoPE); kv [2, nkv, cap, hd] with keys 0 .. start + n - 1 valid.
// mask: none (every key visible, or with causal row i sees keys <= start + i), or n x (start + n)
// values (any leading dims of size 1): bool (true: visible) or float, added to the score, finfo.min
// or -inf: hidden. Returns [n, nh * hd].
at::Tensor dominotree_attention(const at::Tensor& q, const at::Tensor& kv, int64_t start,
                                const c10::optional<at::Tensor>& mask, bool causal) {
  TORCH_CHECK(q.device().is_cpu() && q.scalar_type() == at::kFloat && q.dim() == 3 && q.is_contiguous(),
              "q must be a contiguous float32 [heads, n, head_dim] CPU tensor");
  TORCH_CHECK(kv.scalar_type() == at::kFloat && kv.dim() == 4 && kv.size(0) == 2 && kv.stride(3) == 1 &&
              kv.stride(2) == kv.size(3), "kv must be float32 [2, kv_heads, capacity, head_dim]");
  const int64_t nh = q.size(0), n = q.size(1), hd = q.size(2), nkv = kv.size(1), L = start + n;
  TORCH_CHECK(kv.size(3) == hd && nkv > 0 && nh % nkv == 0, "q and kv heads do not match");
  TORCH_CHECK(start >= 0 && L <= kv.size(2), "positions beyond the cache");
  at::Tensor m;
  if (mask.has_value()) {
    TORCH_CHECK(mask->numel() == n * L, "the mask must be n x (start + n)");
    m = mask->reshape({n, L}).contiguous();
    TORCH_CHECK(m.scalar_type() == at::kBool || m.scalar_type() == at::kFloat, "the mask must be bool or float32");
  }
  const bool is_bool = m.defined() && m.scalar_type() == at::kBool;
  const bool* mb = is_bool ? m.data_ptr<bool>() : nullptr;
  const float* mf = m.defined() && !is_bool ? m.data_ptr<float>() : nullptr;
  at::Tensor out = at::empty({n, nh * hd}, q.options());
  const float* qp = q.data_ptr<float>();
  const float* kp = kv.data_ptr<float>();
  const int64_t head_stride = kv.stride(1), half = kv.stride(0);
  float* op = out.data_ptr<float>();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t group = nh / nkv;
  at::parallel_for(0, nh * n, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> s(L + 8), acc(hd);
    std::vector<int64_t> idx(L);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t h = t / n, i = t % n;
      const float* qv = qp + (h * n + i) * hd;
      const float* keys = kp + (h / group) * head_stride;
      const float* values = keys + half;
      int64_t cnt = 0;
      float mx = -std::numeric_limits<float>::infinity();
      const int64_t last = causal ? start + i : L - 1;
      for (int64_t j = 0; j <= last; ++j) {
        float add = 0.0f;
        if (mb != nullptr && !mb[i * L + j]) continue;
        if (mf != nullptr) {
          add = mf[i * L + j];
          if (!(add > -FLT_MAX)) continue;          // finfo.min, -inf (and NaN): hidden
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
        const float* v = values + idx[c] * hd;
        int64_t d = 0;
        const __m256 pv = _mm256_set1_ps(p);
        for (; d + 8 <= hd; d += 8)
          _mm256_storeu_ps(acc.data() + d, _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + d), _mm256_loadu_ps(acc.data() + d)));
        for (; d < hd; ++d) acc[d] = std::fma(p, v[d], acc[d]);
      }
      float* o = op + i * nh * hd + h * hd;
      for (int64_t d = 0; d < hd; ++d) o[d] = acc[d] / sum;
    }
  });
  return out;
}

TORCH_LIBRARY(dominotree_attn, m) {
  m.def("attention(Tensor q, Tensor kv, int start, Tensor? mask, bool causal) -> Tensor");
}

TORCH_LIBRARY_IMPL(dominotree_attn, CPU, m) {
  m.impl("attention", &dominotree_attention);
}
