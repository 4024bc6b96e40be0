// DominoTree's best-first build (builders/graph.py's heap and its two per-node bodies) as one op
// on CPU. On a 2-core CPU the Python heap spent most of its time calling ~25 small torch ops per
// expanded node from Python; here the same ATen ops run in the same order on the same shapes
// (the same kernels, so the same bits), and the heap is the reference's, key for key:
//
//   per depth d, on first use (scoring.py _prepare):  lp_d = log_softmax(logits_d), cand_d =
//       top_candidates(logits_d, M), w2c_d = W2[cand_d], basec_d = logits_d[cand_d];
//   the root's children: topk(lp_1, K);
//   a node at depth d with GRU state s (graph.py _corr_body):  h = silu([z_{d+1} ; s] W1^T),
//       lp = log_softmax(basec_{d+1} + h w2c_{d+1}^T), (vals, local) = topk(lp, K),
//       children cand_{d+1}[local], their base log-probs lp_{d+1}[children], ranks = local;
//   a family's K children states, when the first of them is expanded (childgru.py ChildGRU):
//       gi = T[toks], gh = s W_hh^T, r|u = sigmoid(gi[:2G] + gh[:2G]),
//       n = tanh(gi[2G:] + r * gh[2G:]), s' = (s - n) * u + n;
//   heap entries (-(cum + lp), tie, ...) in float64, ties broken by insertion order.
//
// Only the float32 Top-M scorer with ChildGRU's per-token table runs here; builders/graph.py
// keeps the Python heap for everything else. tests/test_builders.py asserts trees, scores and
// menus `==` build_reference's.
#include <torch/library.h>
#include <ATen/ATen.h>

#include <queue>
#include <vector>

namespace {

using at::indexing::Slice;

// scoring.py top_candidates: ids of the m largest logits of a float32 row, largest first
at::Tensor top_candidates(const at::Tensor& logits, int64_t m) {
  const int64_t v = logits.size(0), chunk = 64;
  if (v % chunk || v < 8 * m * chunk) return std::get<1>(at::topk(logits, m));
  const at::Tensor ids = at::arange(v, logits.options().dtype(at::kLong)).view({v / chunk, chunk});
  const at::Tensor rows = logits.view({v / chunk, chunk});
  const at::Tensor best = std::get<1>(at::topk(rows.amax({1}), m));
  const at::Tensor local = std::get<1>(at::topk(rows.index_select(0, best).view({-1}), m));
  return ids.index_select(0, best).view({-1}).index_select(0, local);
}

struct Depth {
  at::Tensor lp, cand, w2c, basec;
  std::vector<int64_t> cand_list;
};

struct Family {
  at::Tensor state, toks, states;   // states: [K, G] once a child is expanded
};

struct Entry {
  double key;                 // -(cum + lp)
  int64_t tie, tok, depth, row, family, k;
  double marg;
};

struct Later {   // std::priority_queue pops the largest: the smallest (key, tie) must be "largest"
  bool operator()(const Entry& a, const Entry& b) const {
    return a.key > b.key || (a.key == b.key && a.tie > b.tie);
  }
};

std::vector<double> doubles(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

std::vector<int64_t> longs(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// logits [D, V], z [D, H], root_state [G] (float32); w1 [E, H + G], w2 [V, E], table [V, 3G],
// w_hh [3G, G]. Returns (ints [N, 3]: token, parent, depth; scores [N, 2] float64: score, marginal
// score; menu_nodes [P, 2]: node, depth; menu_toks [P, K]; menu_vals [P, K, 2] float64: log-prob,
// base log-prob; menu_ranks [P, K]).
std::vector<at::Tensor> best_first(const at::Tensor& logits, const at::Tensor& z, const at::Tensor& root_state,
                                   int64_t root, int64_t budget, int64_t max_depth, int64_t k, int64_t m,
                                   const at::Tensor& w1, const at::Tensor& w2, const at::Tensor& table,
                                   const at::Tensor& w_hh) {
  for (const at::Tensor* t : {&logits, &z, &root_state, &w1, &w2, &table, &w_hh})
    TORCH_CHECK(t->device().is_cpu() && t->scalar_type() == at::kFloat, "best_first takes float32 CPU tensors");
  TORCH_CHECK(logits.dim() == 2 && z.dim() == 2 && z.size(0) == logits.size(0), "logits and z need one row a depth");
  const int64_t D = logits.size(0), G = w_hh.size(1);
  TORCH_CHECK(root_state.numel() == G && table.size(1) == 3 * G && w_hh.size(0) == 3 * G, "GRU shapes do not match");
  TORCH_CHECK(k >= 1 && m >= k && m <= logits.size(1) && max_depth >= 1 && max_depth <= D && budget >= 0,
              "impossible K, M or depth");
  const at::Tensor w1t = w1.t(), w_hht = w_hh.t();
  std::vector<Depth> depths(D);
  std::vector<bool> ready(D, false);
  auto row = [&](int64_t r) -> Depth& {          // block row r = depth r + 1, prepared on first use
    if (!ready[r]) {
      const at::Tensor l = logits.select(0, r);
      Depth& d = depths[r];
      d.lp = at::log_softmax(l, -1);
      d.cand = top_candidates(l, m);
      d.w2c = w2.index_select(0, d.cand);
      d.basec = l.gather(0, d.cand);
      d.cand_list = longs(d.cand);
      ready[r] = true;
    }
    return depths[r];
  };
  auto gru = [&](const at::Tensor& s, const at::Tensor& toks) {
    const at::Tensor gi = table.index_select(0, toks), gh = at::mm(s, w_hht);
    const at::Tensor ru = at::sigmoid(gi.index({Slice(), Slice(0, 2 * G)}) + gh.index({Slice(), Slice(0, 2 * G)}));
    const at::Tensor r = ru.index({Slice(), Slice(0, G)}), u = ru.index({Slice(), Slice(G, 2 * G)});
    const at::Tensor n = at::tanh(gi.index({Slice(), Slice(2 * G, 3 * G)}) + r * gh.index({Slice(), Slice(2 * G, 3 * G)}));
    return (s - n) * u + n;
  };

  std::vector<int64_t> tokens{root}, parents{-1}, node_depth{0};
  std::vector<double> scores{0.0}, margs{0.0};
  std::vector<int64_t> menu_nodes, menu_toks, menu_ranks;
  std::vector<double> menu_vals;
  std::vector<Family> families;
  std::priority_queue<Entry, std::vector<Entry>, Later> heap;
  int64_t tie = 0;
  auto push = [&](int64_t node, int64_t depth, double cum, double marg, const std::vector<int64_t>& toks,
                  const std::vector<double>& lps, const std::vector<double>& bases, const std::vector<int64_t>& ranks,
                  int64_t family) {
    menu_nodes.insert(menu_nodes.end(), {node, depth});
    for (size_t i = 0; i < toks.size(); ++i) {
      menu_toks.push_back(toks[i]);
      menu_ranks.push_back(ranks[i]);
      menu_vals.insert(menu_vals.end(), {lps[i], bases[i]});
      heap.push(Entry{-(cum + lps[i]), tie++, toks[i], depth, node, family, static_cast<int64_t>(i), marg + bases[i]});
    }
  };

  {   // depth 1: top-K of the full log-softmax (path-independent)
    Depth& d1 = row(0);
    auto [vals, toks] = at::topk(d1.lp, k);
    const std::vector<int64_t> tl = longs(toks);
    std::vector<int64_t> ranks;
    for (int64_t t : tl) {
      int64_t rank = -1;
      for (size_t j = 0; j < d1.cand_list.size(); ++j)
        if (d1.cand_list[j] == t) { rank = static_cast<int64_t>(j); break; }
      ranks.push_back(rank);
    }
    families.push_back(Family{root_state.view({1, -1}), toks, at::Tensor()});
    push(0, 1, 0.0, 0.0, tl, doubles(vals), doubles(d1.lp.index_select(0, toks)), ranks, 0);
  }
  while (!heap.empty() && static_cast<int64_t>(tokens.size()) - 1 < budget) {
    const Entry e = heap.top();
    heap.pop();
    const int64_t node = static_cast<int64_t>(tokens.size());
    tokens.push_back(e.tok);
    parents.push_back(e.row);
    node_depth.push_back(e.depth);
    scores.push_back(-e.key);
    margs.push_back(e.marg);
    if (e.depth < max_depth && static_cast<int64_t>(tokens.size()) - 1 < budget) {
      Family& f = families[e.family];
      if (!f.states.defined()) f.states = gru(f.state, f.toks);
      const at::Tensor s = f.states.narrow(0, e.k, 1);
      Depth& d = row(e.depth);                   // the children's depth e.depth + 1
      const at::Tensor h = at::silu(at::mm(at::cat({z.narrow(0, e.depth, 1), s}, -1), w1t));
      const at::Tensor lp = at::log_softmax(d.basec + at::mm(h, d.w2c.t()).select(0, 0), -1);
      auto [vals, local] = at::topk(lp, k);
      const at::Tensor toks = d.cand.index_select(0, local);
      families.push_back(Family{s, toks, at::Tensor()});
      push(node, e.depth + 1, -e.key, e.marg, longs(toks), doubles(vals), doubles(d.lp.index_select(0, toks)),
           longs(local), static_cast<int64_t>(families.size()) - 1);
    }
  }
  const int64_t N = static_cast<int64_t>(tokens.size()), P = static_cast<int64_t>(menu_nodes.size()) / 2;
  const auto L = at::TensorOptions().dtype(at::kLong), F = at::TensorOptions().dtype(at::kDouble);
  at::Tensor ints = at::empty({N, 3}, L), sc = at::empty({N, 2}, F);
  auto ip = ints.accessor<int64_t, 2>();
  auto sp = sc.accessor<double, 2>();
  for (int64_t i = 0; i < N; ++i) {
    ip[i][0] = tokens[i], ip[i][1] = parents[i], ip[i][2] = node_depth[i];
    sp[i][0] = scores[i], sp[i][1] = margs[i];
  }
  return {ints, sc, at::tensor(menu_nodes, L).view({P, 2}), at::tensor(menu_toks, L).view({P, k}),
          at::tensor(menu_vals, F).view({P, k, 2}), at::tensor(menu_ranks, L).view({P, k})};
}

}  // namespace

TORCH_LIBRARY(dominotree_build, m) {
  m.def("best_first(Tensor logits, Tensor z, Tensor root_state, int root, int budget, int max_depth, int k, int m, "
        "Tensor w1, Tensor w2, Tensor table, Tensor w_hh) -> Tensor[]");
}

TORCH_LIBRARY_IMPL(dominotree_build, CPU, m) {
  m.impl("best_first", &best_first);
}
