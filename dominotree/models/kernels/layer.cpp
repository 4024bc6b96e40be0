// The small float32 steps of a decoder layer, each one op instead of several torch ops (on a
// one-row step of the 135M target, op dispatch of ~50 small ops per layer is a quarter of the
// step). Loaded with quant.cpp by dominotree/models/cpuext.py; used by models/fast.py for float32
// on CPU. Every result of a row depends on that row only (no sum across rows), in a fixed order.
#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <cmath>

at::Tensor dominotree_q4_linear(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& dm);  // quant.cpp
at::Tensor dominotree_attention(const at::Tensor& q, const at::Tensor& kv, int64_t start,
                                const c10::optional<at::Tensor>& mask, bool causal);                 // attention.cpp
at::Tensor dominotree_q4q8_linear(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& dm,
                                  int64_t n_out);                                                    // q8act.cpp

namespace {

inline float sum_squares(const float* x, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  alignas(32) float a[8];
  _mm256_store_ps(a, acc);
  float s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  for (; i < n; ++i) s += x[i] * x[i];
  return s;
}

// out = w * (x * rsqrt(mean(x^2) + eps)), one row of n
inline void rms_row(const float* x, const float* w, float eps, int64_t n, float* out) {
  const float r = 1.0f / std::sqrt(sum_squares(x, n) / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = w[i] * (x[i] * r);
}

void check_f32(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous(), what,
              " must be a contiguous float32 CPU tensor");
}

// x [..., H], w [H]
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  check_f32(x, "x");
  check_f32(w, "weight");
  const int64_t H = w.numel();
  TORCH_CHECK(x.size(-1) == H, "x and weight sizes differ");
  at::Tensor out = at::empty_like(x);
  const int64_t rows = x.numel() / H;
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  float* op = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) rms_row(xp + r * H, wp, static_cast<float>(eps), H, op + r * H);
  return out;
}

// One head vector: optional per-head RMSNorm (Qwen3's q_norm / k_norm), then RoPE with
// rotate_half: out[j] = v[j] cos[j] - v[j + h] sin[j], out[j + h] = v[j + h] cos[j + h] + v[j] sin[j + h]
inline void rope_head(const float* v, const float* cos, const float* sin, const float* norm, float eps,
                      int64_t hd, float* tmp, float* out) {
  if (norm != nullptr) {
    rms_row(v, norm, eps, hd, tmp);
    v = tmp;
  }
  const int64_t h = hd / 2;
  for (int64_t j = 0; j < h; ++j) {
    out[j] = v[j] * cos[j] + (-v[j + h]) * sin[j];
    out[j + h] = v[j + h] * cos[j + h] + v[j] * sin[j + h];
  }
}

// qkv [n, (nh + 2 nkv) hd] -> q [nh, n, hd] with RoPE; k (RoPE) and v written into
// kv [2, nkv, capacity, hd] at positions start .. start + n.
at::Tensor rope_kv(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, at::Tensor kv,
                   int64_t start, int64_t nh, int64_t nkv, const c10::optional<at::Tensor>& q_norm,
                   const c10::optional<at::Tensor>& k_norm, double eps) {
  check_f32(qkv, "qkv");
  check_f32(cos, "cos");
  check_f32(sin, "sin");
  check_f32(kv, "kv");
  const int64_t n = qkv.size(0), hd = kv.size(3), cap = kv.size(2);
  TORCH_CHECK(qkv.dim() == 2 && qkv.size(1) == (nh + 2 * nkv) * hd, "qkv has the wrong width");
  TORCH_CHECK(kv.dim() == 4 && kv.size(0) == 2 && kv.size(1) == nkv, "kv has the wrong shape");
  TORCH_CHECK(start >= 0 && start + n <= cap, "positions beyond the cache");
  TORCH_CHECK(cos.size(0) == n && cos.size(1) == hd && sin.sizes() == cos.sizes(), "cos/sin have the wrong shape");
  TORCH_CHECK(hd % 2 == 0, "head_dim must be even");
  const float* qn = nullptr;
  const float* kn = nullptr;
  if (q_norm.has_value()) { check_f32(*q_norm, "q_norm"); qn = q_norm->data_ptr<float>(); }
  if (k_norm.has_value()) { check_f32(*k_norm, "k_norm"); kn = k_norm->data_ptr<float>(); }
  at::Tensor q = at::empty({nh, n, hd}, qkv.options());
  const float* src = qkv.data_ptr<float>();
  const float *cp = cos.data_ptr<float>(), *sp = sin.data_ptr<float>();
  float* qp = q.data_ptr<float>();
  float* kp = kv.data_ptr<float>();
  const int64_t width = (nh + 2 * nkv) * hd;
  const float e = static_cast<float>(eps);
  std::vector<float> tmp(hd);
  for (int64_t r = 0; r < n; ++r) {
    const float* row = src + r * width;
    const float *c = cp + r * hd, *s = sp + r * hd;
    for (int64_t h = 0; h < nh; ++h) rope_head(row + h * hd, c, s, qn, e, hd, tmp.data(), qp + (h * n + r) * hd);
    for (int64_t h = 0; h < nkv; ++h) {
      float* kdst = kp + ((0 * nkv + h) * cap + start + r) * hd;
      float* vdst = kp + ((1 * nkv + h) * cap + start + r) * hd;
      rope_head(row + (nh + h) * hd, c, s, kn, e, hd, tmp.data(), kdst);
      std::copy(row + (nh + nkv + h) * hd, row + (nh + nkv + h + 1) * hd, vdst);
    }
  }
  return q;
}

// exp of 8 floats (Cephes' expf: range reduction by ln 2 in two parts, a degree-5 polynomial,
// the exponent added as an integer); within 2 ulp of std::exp on [-87, 88], saturating outside
inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
  __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm256_sub_ps(x, _mm256_mul_ps(fx, _mm256_set1_ps(0.693359375f)));
  x = _mm256_sub_ps(x, _mm256_mul_ps(fx, _mm256_set1_ps(-2.12194440e-4f)));
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

}  // namespace

__m256 dominotree_exp8(__m256 x) { return exp8(x); }   // for attention.cpp

namespace {

// gu [n, 2 I] -> silu(gu[:, :I]) * gu[:, I:]
at::Tensor silu_mul(const at::Tensor& gu) {
  check_f32(gu, "gate_up");
  TORCH_CHECK(gu.dim() == 2 && gu.size(1) % 2 == 0, "gate_up must be [n, 2 I]");
  const int64_t n = gu.size(0), I = gu.size(1) / 2;
  at::Tensor out = at::empty({n, I}, gu.options());
  const float* g = gu.data_ptr<float>();
  float* o = out.data_ptr<float>();
  // rows in parallel (a row's values never depend on another's), 8 lanes at a time with exp8;
  // a tail (I not a multiple of 8) uses std::exp, at the same positions for every row
  at::parallel_for(0, n, 1, [&](int64_t r0, int64_t r1) {
    const __m256 one = _mm256_set1_ps(1.0f);
    for (int64_t r = r0; r < r1; ++r) {
      const float* gr = g + r * 2 * I;
      float* orow = o + r * I;
      int64_t i = 0;
      for (; i + 8 <= I; i += 8) {
        const __m256 a = _mm256_loadu_ps(gr + i);
        const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), a));
        _mm256_storeu_ps(orow + i, _mm256_mul_ps(_mm256_div_ps(a, _mm256_add_ps(one, e)), _mm256_loadu_ps(gr + I + i)));
      }
      for (; i < I; ++i) orow[i] = (gr[i] / (1.0f + std::exp(-gr[i]))) * gr[I + i];
    }
  });
  return out;
}

// One Q4_1 product: float32 activations (quant.cpp's codes [N, K / 2]) or 8-bit activation blocks
// (q8act.cpp's tiles [N / 16, K / 32, 4, 16, 4]; the whole-layer op takes them only when N is a
// multiple of 16, so N is the tiles' width).
at::Tensor q4_product(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& dm) {
  if (codes.dim() == 5) return dominotree_q4q8_linear(x, codes, dm, codes.size(0) * codes.size(3));
  return dominotree_q4_linear(x, codes, dm);
}

// A whole decoder layer whose products are all Q4_1 (quant.cpp or q8act.cpp), in one call: the same
// ops in the same order as FastModel._block's Python composition (so the same bits), without ~40
// Python-level op dispatches per layer. w = [ln1, ln2, qkv codes, qkv dm, o codes, o dm, gate_up
// codes, gate_up dm, down codes, down dm].
at::Tensor q4_block(const at::Tensor& x, at::TensorList w, const at::Tensor& cos, const at::Tensor& sin,
                    at::Tensor kv, int64_t start, int64_t nh, int64_t nkv, const c10::optional<at::Tensor>& q_norm,
                    const c10::optional<at::Tensor>& k_norm, double eps, const c10::optional<at::Tensor>& attn_mask,
                    bool causal) {
  TORCH_CHECK(w.size() == 10, "q4_block takes 10 weight tensors");
  const int64_t n = x.size(0), hd = kv.size(3);
  at::Tensor h = rms_norm(x, w[0], eps);
  at::Tensor q = rope_kv(q4_product(h, w[2], w[3]), cos, sin, kv, start, nh, nkv, q_norm, k_norm, eps);
  at::Tensor o;
  if (start == 0 && causal) {   // a prefill: the same rows for every method, torch's faster SDPA
    at::Tensor keys = kv.select(0, 0).narrow(1, 0, n), values = kv.select(0, 1).narrow(1, 0, n);
    o = at::scaled_dot_product_attention(q.unsqueeze(0), keys.unsqueeze(0), values.unsqueeze(0), attn_mask, 0.0, causal,
                                         c10::nullopt, nh != nkv);
    o = o.select(0, 0).transpose(0, 1).reshape({n, nh * hd}).contiguous();
  } else {                      // a step or a verify: every row's bits independent of the others
    o = dominotree_attention(q, kv, start, attn_mask, causal);
  }
  at::Tensor x2 = x + q4_product(o, w[4], w[5]);
  at::Tensor gu = q4_product(rms_norm(x2, w[1], eps), w[6], w[7]);
  return x2 + q4_product(silu_mul(gu), w[8], w[9]);
}

// Every decoder layer in one call, for a model whose layers all run q4_block: the same q4_block,
// layer after layer (so the same bits), without a return to Python between layers. w: the layers'
// 10 tensors each, one after the other; q_norm / k_norm: one per layer, or empty; kv: the cache
// [layers, 2, kv_heads, capacity, head_dim]; taps: increasing layer indices whose output rows are
// returned beside the last layer's.
std::tuple<at::Tensor, std::vector<at::Tensor>> q4_stack(
    const at::Tensor& x, at::TensorList w, const at::Tensor& cos, const at::Tensor& sin, at::Tensor kv, int64_t start,
    int64_t nh, int64_t nkv, at::TensorList q_norm, at::TensorList k_norm, double eps,
    const c10::optional<at::Tensor>& attn_mask, bool causal, at::IntArrayRef taps) {
  const int64_t layers = kv.size(0);
  TORCH_CHECK(kv.dim() == 5 && static_cast<int64_t>(w.size()) == 10 * layers, "q4_stack takes 10 tensors a layer of kv");
  TORCH_CHECK(q_norm.size() == k_norm.size() && (q_norm.empty() || static_cast<int64_t>(q_norm.size()) == layers),
              "q_norm / k_norm: one a layer, or none");
  std::vector<at::Tensor> tapped;
  at::Tensor h = x;
  size_t next = 0;
  for (int64_t i = 0; i < layers; ++i) {
    c10::optional<at::Tensor> qn, kn;
    if (!q_norm.empty()) qn = q_norm[i], kn = k_norm[i];
    h = q4_block(h, w.slice(10 * i, 10), cos, sin, kv.select(0, i), start, nh, nkv, qn, kn, eps, attn_mask, causal);
    if (next < taps.size() && taps[next] == i) tapped.push_back(h), ++next;
  }
  TORCH_CHECK(next == taps.size(), "taps must be increasing layer indices");
  return {h, tapped};
}

}  // namespace

// for draftlayer.cpp's whole-layer op of the drafter
at::Tensor dominotree_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) { return rms_norm(x, w, eps); }
at::Tensor dominotree_rope_kv(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, at::Tensor kv,
                              int64_t start, int64_t nh, int64_t nkv, const c10::optional<at::Tensor>& q_norm,
                              const c10::optional<at::Tensor>& k_norm, double eps) {
  return rope_kv(qkv, cos, sin, kv, start, nh, nkv, q_norm, k_norm, eps);
}

TORCH_LIBRARY(dominotree_layer, m) {
  m.def("rms_norm(Tensor x, Tensor w, float eps) -> Tensor");
  m.def("rope_kv(Tensor qkv, Tensor cos, Tensor sin, Tensor(a!) kv, int start, int nh, int nkv, "
        "Tensor? q_norm, Tensor? k_norm, float eps) -> Tensor");
  m.def("silu_mul(Tensor gate_up) -> Tensor");
  m.def("q4_block(Tensor x, Tensor[] w, Tensor cos, Tensor sin, Tensor(a!) kv, int start, int nh, int nkv, "
        "Tensor? q_norm, Tensor? k_norm, float eps, Tensor? attn_mask, bool causal) -> Tensor");
  m.def("q4_stack(Tensor x, Tensor[] w, Tensor cos, Tensor sin, Tensor(a!) kv, int start, int nh, int nkv, "
        "Tensor[] q_norm, Tensor[] k_norm, float eps, Tensor? attn_mask, bool causal, int[] taps) -> (Tensor, Tensor[])");
}

TORCH_LIBRARY_IMPL(dominotree_layer, CPU, m) {
  m.impl("rms_norm", &rms_norm);
  m.impl("rope_kv", &rope_kv);
  m.impl("silu_mul", &silu_mul);
  m.impl("q4_block", &q4_block);
  m.impl("q4_stack", &q4_stack);
}
