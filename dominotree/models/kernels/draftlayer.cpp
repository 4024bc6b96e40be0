// The drafter's (DFlash) decoder layer as one op on CPU, for decoding: a draft of a few block rows
// ran ~50 small torch ops per layer from Python (models/drafter.py's DraftLayer), and their
// dispatch, not the products, was most of the draft. Loaded with the other kernels by
// dominotree/models/cpuext.py; used by models/draftcpu.py for a float32 drafter whose products
// run in 8-bit blocks (quantcpu.Q8Q8Linear, next to an int4-q8 target).
//
// The same ops in the same order as DraftLayer's Python composition: the layer's RMSNorms, the
// per-head q_norm / k_norm and RoPE are layer.cpp's (the C++ ops the Python path calls too), the
// products q8act.cpp's (a row's result depends on that row only, so the fused q/k/v and gate/up
// products give each output the bits of its own product), attention torch's SDPA and SiLU torch's.
#include <torch/library.h>
#include <ATen/ATen.h>

at::Tensor dominotree_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps);                // layer.cpp
at::Tensor dominotree_rope_kv(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, at::Tensor kv,
                              int64_t start, int64_t nh, int64_t nkv, const c10::optional<at::Tensor>& q_norm,
                              const c10::optional<at::Tensor>& k_norm, double eps);                    // layer.cpp
at::Tensor dominotree_q8q8_linear(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& d,
                                  int64_t n_out);                                                      // q8act.cpp

namespace {

constexpr int64_t LANES = 16;   // outputs per tile of q8act.cpp's packed weights

at::Tensor product(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& d) {
  return dominotree_q8q8_linear(x, codes, d, codes.size(0) * LANES);
}

// One layer over a round's rows. x [n, H]: the block rows' residual stream; ctx [c, H]: the new
// context rows (hidden_norm(fc(target features)), shared by every layer, not layer-normed);
// cos / sin [c + n, hd]: the context's rows, then the block's; kv [2, nkv, capacity, hd]: this
// layer's keys and values, positions < past committed. Writes the context's K/V at past .. past + c
// and the block's after them, attends every block row to all past + c + n keys (non-causal),
// returns the new x [n, H], or its first `keep` rows when 0 < keep < n (the last layer of a draft
// whose tree reads only those rows: every row attends as before, then only the kept rows go through
// the output product and the MLP, each row's ops being its own, so they keep their bits).
// w = [input_layernorm, post_attention_layernorm, q_norm, k_norm, qkv codes, qkv scales, o codes,
// o scales, gate_up codes, gate_up scales, down codes, down scales], the products in q8act.cpp's
// Q8_0 tile layout with q, k and v (gate and up) stacked by tiles.
at::Tensor draft_block(const at::Tensor& x, const at::Tensor& ctx, at::TensorList w, const at::Tensor& cos,
                       const at::Tensor& sin, at::Tensor kv, int64_t past, int64_t nh, int64_t nkv, double eps,
                       int64_t keep) {
  TORCH_CHECK(w.size() == 12, "draft_block takes 12 weight tensors");
  TORCH_CHECK(x.dim() == 2 && ctx.dim() == 2 && ctx.size(1) == x.size(1), "x and ctx must be [rows, hidden]");
  TORCH_CHECK(kv.dim() == 4 && kv.size(0) == 2 && kv.size(1) == nkv && kv.is_contiguous(), "kv must be [2, nkv, capacity, hd]");
  const int64_t n = x.size(0), c = ctx.size(0), hd = kv.size(3), L = past + c + n;
  TORCH_CHECK(nkv > 0 && nh % nkv == 0 && (nh * hd) % LANES == 0 && (nkv * hd) % LANES == 0,
              "heads do not fit the 16-output tiles");
  TORCH_CHECK(w[4].size(0) * LANES == (nh + 2 * nkv) * hd, "the q/k/v weight does not match the heads");
  TORCH_CHECK(cos.dim() == 2 && cos.size(0) == c + n && sin.sizes() == cos.sizes(), "cos/sin need c + n rows");
  TORCH_CHECK(past >= 0 && L <= kv.size(2), "positions beyond the drafter's cache");
  const int64_t q_tiles = nh * hd / LANES, kv_tiles = w[4].size(0) - q_tiles;
  if (c > 0) {   // the context rows: keys and values only (no query reads them)
    at::Tensor kvc = product(ctx, w[4].narrow(0, q_tiles, kv_tiles), w[5].narrow(0, q_tiles, kv_tiles));
    dominotree_rope_kv(kvc, cos.narrow(0, 0, c), sin.narrow(0, 0, c), kv, past, 0, nkv, w[2], w[3], eps);
  }
  at::Tensor h = dominotree_rms_norm(x, w[0], eps);
  at::Tensor q = dominotree_rope_kv(product(h, w[4], w[5]), cos.narrow(0, c, n), sin.narrow(0, c, n), kv, past + c,
                                    nh, nkv, w[2], w[3], eps);
  // every block row sees every key, as the Python path's SDPA call (the same call on views of the
  // buffer gives its bits; folding a kv head's query heads into its rows, ~0.8x the time, did not
  // for every row count)
  at::Tensor keys = kv.select(0, 0).narrow(1, 0, L), values = kv.select(0, 1).narrow(1, 0, L);
  at::Tensor o = at::scaled_dot_product_attention(q.unsqueeze(0), keys.unsqueeze(0), values.unsqueeze(0), c10::nullopt,
                                                  0.0, false, c10::nullopt, nh != nkv);
  o = o.select(0, 0).transpose(0, 1).reshape({n, nh * hd});
  const int64_t m = keep > 0 && keep < n ? keep : n;
  at::Tensor x2 = x.narrow(0, 0, m) + product(o.narrow(0, 0, m).contiguous(), w[6], w[7]);
  at::Tensor gu = product(dominotree_rms_norm(x2, w[1], eps), w[8], w[9]);
  const int64_t I = gu.size(1) / 2;
  at::Tensor a = at::silu(gu.narrow(1, 0, I)) * gu.narrow(1, I, I);
  return x2 + product(a, w[10], w[11]);
}

}  // namespace

TORCH_LIBRARY(dominotree_draft, m) {
  m.def("draft_block(Tensor x, Tensor ctx, Tensor[] w, Tensor cos, Tensor sin, Tensor(a!) kv, int past, int nh, "
        "int nkv, float eps, int keep=-1) -> Tensor");
}

TORCH_LIBRARY_IMPL(dominotree_draft, CPU, m) {
  m.impl("draft_block", &draft_block);
}
