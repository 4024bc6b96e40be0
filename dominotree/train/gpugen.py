"""Static-batch generation for data on a GPU: one preallocated KV cache, fixed shapes per step.

``batchgen.SlotGenerator`` is built for the CPU (a Python loop per row, a cache that grows and
is cropped). On a GPU the cost is in launches and syncs, so here a batch of ``B`` prompts is
left-padded to one length, prefilled in one forward, and decoded one column a step for all
rows at once: the cache is ``[layers, B, kv_heads, capacity, head_dim]`` written in place at one
column (``index_copy_``), attention reads the whole buffer under a boolean mask, sampling is
one vectorized draw per step (temperature and top-p per row; temperature 0 is the argmax).
Attention reads the cache only up to the current column rounded up to ``BUCKET`` columns, so a
decode step has one of ``capacity / BUCKET`` shapes; on CUDA each is captured once as a CUDA
graph and replayed (``graphs=True``; a capture that fails falls back to eager steps, said in
``note``).

The layer is written as transformers' Llama / Qwen3 decoder layer (RMSNorm, q/k norms where the
model has them, ``rotate_half`` RoPE from the model's own rotary module, GQA attention as plain
SDPA over the kv heads (no copies, no ``enable_gqa`` kernel needed), the model's MLP module), so the logits agree with the transformers forward to rounding.

    gen = StaticGenerator(model, batch=1024, capacity=768)
    answers = gen.generate(prompts, max_new=384, temps=[0.0, 0.8, ...], end_ids={2}, top_p=0.95)
"""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F

BUCKET = 128      # attention widths are multiples of this (one CUDA graph per width)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def sample(logits: torch.Tensor, temps: torch.Tensor, top_p: float, gen: torch.Generator | None) -> torch.Tensor:
    """One token per row of ``logits`` [B, V]: argmax where ``temps`` is 0, else a draw from the
    top-p nucleus of ``softmax(logits / T)``."""
    greedy = logits.argmax(-1)
    hot = temps > 0
    if not bool(hot.any()):
        return greedy
    probs = torch.softmax(logits.float() / temps.clamp_min(1e-4)[:, None], dim=-1)
    if top_p < 1.0:
        p, idx = probs.sort(-1, descending=True)
        keep = (p.cumsum(-1) - p) < top_p
        probs = torch.zeros_like(probs).scatter_(-1, idx, p * keep)
    drawn = torch.multinomial(probs, 1, generator=gen)[:, 0]
    return torch.where(hot, drawn, greedy)


class StaticGenerator:
    def __init__(self, model, batch: int, capacity: int, graphs: bool = True, seed: int = 0):
        self.model, self.inner = model.eval(), model.model
        cfg = model.config
        self.B, self.L = batch, capacity
        self.hq, self.hkv = cfg.num_attention_heads, cfg.num_key_value_heads
        self.d = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.hq
        w = model.get_input_embeddings().weight
        self.dev, self.dtype = w.device, w.dtype
        n = len(self.inner.layers)
        self.k = torch.zeros(n, batch, self.hkv, capacity, self.d, dtype=self.dtype, device=self.dev)
        self.v = torch.zeros_like(self.k)
        self.graphs = graphs and self.dev.type == "cuda"
        self._graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.note = ""
        self.gen = torch.Generator(device=self.dev).manual_seed(seed)
        # the decode step's inputs and output: fixed buffers, so a captured graph stays valid
        self._ids = torch.zeros(batch, 1, dtype=torch.long, device=self.dev)
        self._pos = torch.zeros(batch, 1, dtype=torch.long, device=self.dev)
        self._col = torch.zeros(1, dtype=torch.long, device=self.dev)
        self._mask = torch.zeros(batch, 1, 1, capacity, dtype=torch.bool, device=self.dev)
        self._out = torch.zeros(batch, model.get_output_embeddings().weight.shape[0], device=self.dev)
        self.steps = 0           # decode steps run (for throughput)

    # --- the forward ----------------------------------------------------------------------
    def _forward(self, ids: torch.Tensor, pos: torch.Tensor, cols: torch.Tensor, mask: torch.Tensor,
                 width: int) -> torch.Tensor:
        """Logits [B, V] (float32) of the last column; ``ids``/``pos`` [B, T], the cache columns
        ``cols`` [T] written, attention over the first ``width`` columns, ``mask`` [B, 1, T, >=
        width] bool (True: attend)."""
        B, T = ids.shape
        x = self.inner.embed_tokens(ids)
        cos, sin = self.inner.rotary_emb(x, pos)
        cos, sin = cos[:, None], sin[:, None]
        m = mask[..., :width]
        if self.hq != self.hkv and T > 1:
            m = m.repeat(1, 1, self.hq // self.hkv, 1)             # row gi * T + t is query t
        for i, lay in enumerate(self.inner.layers):
            at = lay.self_attn
            h = lay.input_layernorm(x)
            q = at.q_proj(h).view(B, T, self.hq, self.d)
            k = at.k_proj(h).view(B, T, self.hkv, self.d)
            v = at.v_proj(h).view(B, T, self.hkv, self.d).transpose(1, 2)
            if hasattr(at, "q_norm"):
                q, k = at.q_norm(q), at.k_norm(k)
            q, k = q.transpose(1, 2), k.transpose(1, 2)
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
            self.k[i].index_copy_(2, cols, k)
            self.v[i].index_copy_(2, cols, v)
            # GQA without copies: the g query heads of a kv head are g x T query rows of it
            # (head h reads kv head h // g, as transformers' repeat_kv)
            g = self.hq // self.hkv
            o = F.scaled_dot_product_attention(q.reshape(B, self.hkv, g * T, self.d), self.k[i][:, :, :width],
                                               self.v[i][:, :, :width], attn_mask=m)
            o = o.view(B, self.hq, T, self.d)
            x = x + at.o_proj(o.transpose(1, 2).reshape(B, T, -1))
            x = x + lay.mlp(lay.post_attention_layernorm(x))
        h = self.inner.norm(x[:, -1])
        return self.model.get_output_embeddings()(h).float()

    def _decode_step(self, width: int) -> None:
        self._out.copy_(self._forward(self._ids, self._pos, self._col, self._mask, width))

    def _capture(self, width: int) -> torch.cuda.CUDAGraph:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self._decode_step(width)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self._decode_step(width)
        return g

    # --- generation -----------------------------------------------------------------------
    @torch.inference_mode()
    def generate(self, prompts: list[list[int]], max_new: int, temps: list[float], end_ids: set[int],
                 top_p: float = 0.95, deadline: float | None = None) -> list[tuple[list[int], bool]]:
        """(answer ids, truncated) per prompt; an answer ends with its end token unless truncated.
        At most ``batch`` prompts; fewer are padded with copies of the first (discarded). Past
        ``deadline`` (``time.perf_counter()``) the batch stops, its unfinished answers truncated."""
        n = len(prompts)
        if not 0 < n <= self.B:
            raise ValueError(f"{n} prompts for a batch of {self.B}")
        P = max(len(p) for p in prompts)
        if P + max_new > self.L:
            raise ValueError(f"prompt {P} + {max_new} new tokens exceed the cache capacity {self.L}")
        B, dev = self.B, self.dev
        rows = prompts + [prompts[0]] * (B - n)
        pad = torch.tensor([P - len(p) for p in rows], device=dev)
        ids = torch.tensor([[0] * (P - len(p)) + list(p) for p in rows], device=dev)
        pos = (torch.arange(P, device=dev)[None, :] - pad[:, None]).clamp_min(0)
        col = torch.arange(self.L, device=dev)
        real = col[None, :] >= pad[:, None]                                 # [B, L]: not a pad column
        causal = col[None, :] <= torch.arange(P, device=dev)[:, None]       # [P, L]
        diag = col[None, :] == torch.arange(P, device=dev)[:, None]
        mask = ((causal[None] & real[:, None]) | diag[None])[:, None]       # a pad row sees itself
        logits = self._forward(ids, pos, torch.arange(P, device=dev), mask, P)
        tt = torch.tensor(list(temps) + [0.0] * (B - n), device=dev, dtype=torch.float32)
        ends = torch.tensor(sorted(end_ids), device=dev)
        out = torch.zeros(B, max_new, dtype=torch.long, device=dev)
        done = torch.zeros(B, dtype=torch.bool, device=dev)
        done[n:] = True
        self._mask.copy_((real & (col[None, :] < P))[:, None, None, :])
        for t in range(max_new):
            tok = sample(logits, tt, top_p, self.gen)
            out[:, t] = tok
            done |= torch.isin(tok, ends)
            if t + 1 == max_new or ((t + 1) % 16 == 0 and (bool(done.all()) or
                                                            (deadline is not None and time.perf_counter() > deadline))):
                break
            self._ids[:, 0] = tok
            self._pos[:, 0] = P + t - pad
            self._col.fill_(P + t)
            self._mask[:, 0, 0, P + t] = True
            width = min(self.L, -(-(P + t + 1) // BUCKET) * BUCKET)
            if self.graphs and width not in self._graphs:
                try:
                    self._graphs[width] = self._capture(width)
                except Exception as e:          # eager steps still give the same tokens
                    self.graphs, self.note = False, f"CUDA graph capture failed ({type(e).__name__}: {e}); eager steps"
            if self.graphs:
                self._graphs[width].replay()
            else:
                self._decode_step(width)
            logits = self._out
            self.steps += 1
        res = []
        for r, row in enumerate(out[:n, : t + 1].tolist()):     # columns past t were never written
            cut = next((i for i, x in enumerate(row) if x in end_ids), None)
            res.append((row[: cut + 1], False) if cut is not None else (row[: t + 1], True))
        return res
