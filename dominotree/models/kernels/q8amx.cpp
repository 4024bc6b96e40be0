// The AMX-INT8 path of q8act.cpp's products (Q4_1 x Q8, Q8_0 x Q8): the same bits as the VNNI,
// AVX2 and scalar paths, for every row count. Only this file's hardware functions are compiled
// for AMX (and AVX-512), by a target pragma; the build needs no AMX flag, and nothing here runs
// unless amx_support() says the CPU has AMX-INT8 and Linux granted the tile state.
//
// One tdpbssd (signed x signed bytes) per 32-weight block keeps every block's integer sum exactly
// today's:
//   A (16 rows x 32 bytes): 16 rows of x's block b, its codes q in input order;
//   B (8 rows x 64 bytes):  the weight tile's block b, row g holding the 16 outputs' weights
//                           4g .. 4g + 3 (Q4_1: the codes 0..15; Q8_0: q, the stored q + 128 ^ 0x80);
//   C (16 x 16 int32) = isum, exact (|C| <= 32 * 127 * 128 < 2^20).
// B is made once per weight tile for all its blocks (the 4-bit codes unpacked to bytes once) and
// read by every row tile. Each output then takes the fixed float chain of q8act.cpp, block by
// block, the accumulators of a row tile held in registers across the blocks:
//   acc = fma(float(isum), dw * d, acc); acc = fma(mw, s, acc) (Q4_1)
// in AVX-512 on the hardware path (what tile_vnni does), with std::fma in the emulation.
// Per block and row tile, the tile unit's one tdpbssd stands for VNNI's 8 vpdpbusd and 8
// broadcasts per row; what is left per row is the float chain (and C's round trip through L1).
#include "q8act.h"

#include <immintrin.h>
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cmath>

namespace dominotree_q8 {
namespace {

constexpr long ARCH_REQ_XCOMP_PERM = 0x1023;
constexpr long XFEATURE_XTILEDATA = 18;

// --- the emulation: tdpbssd and the float chain in portable C++ -----------------------------------
void dot_emulated(const int8_t* A, const int8_t* B, int32_t* C) {
  for (int m = 0; m < AMX_ROWS; ++m)
    for (int n = 0; n < LANES; ++n) {
      int32_t acc = 0;
      for (int g = 0; g < 8; ++g)
        for (int i = 0; i < 4; ++i) acc += static_cast<int32_t>(A[m * 32 + 4 * g + i]) * B[g * 64 + 4 * n + i];
      C[m * LANES + n] = acc;
    }
}

// the same B tiles in portable C++
template <bool Q4>
void weight_tiles_emulated(const Tile<Q4>& t, int64_t nb, int8_t* bt) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* c = t.codes + b * Tile<Q4>::CODE_BYTES;
    int8_t* B = bt + b * AMX_B_BYTES;
    for (int p = 0; p < (Q4 ? 4 : 8); ++p)
      for (int k = 0; k < 64; ++k) {
        if constexpr (Q4) {
          B[2 * p * 64 + k] = static_cast<int8_t>(c[p * 64 + k] & 0x0F);
          B[(2 * p + 1) * 64 + k] = static_cast<int8_t>(c[p * 64 + k] >> 4);
        } else {
          B[p * 64 + k] = static_cast<int8_t>(c[p * 64 + k] ^ 0x80);
        }
      }
  }
}

template <bool Q4>
void rows_emulated(const int8_t* bt, const Tile<Q4>& t, const Act& a, const int8_t* xa, int64_t Mp, int64_t rt,
                   int rows, float* y, int64_t N, int64_t n0, int64_t valid) {
  alignas(64) int32_t C[AMX_ROWS * LANES];
  alignas(64) float acc[AMX_ROWS * LANES] = {0};
  for (int64_t b = 0; b < a.nb; ++b) {
    dot_emulated(xa + (b * Mp + rt) * 32, bt + b * AMX_B_BYTES, C);
    const auto* dm = t.dm + b * Tile<Q4>::SCALES * LANES;
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < LANES; ++j) {
        float& v = acc[r * LANES + j];
        v = std::fma(static_cast<float>(C[r * LANES + j]), widen(dm[j]) * a.d[b * a.M + rt + r], v);
        if constexpr (Q4) v = std::fma(widen(dm[LANES + j]), a.s[b * a.M + rt + r], v);
      }
  }
  store_rows(acc, rows, y, N, rt, n0, valid);
}

// --- the hardware: AMX tiles, AVX-512 float chain ---------------------------------------------------
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,amx-tile,amx-int8")
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {0};
  uint16_t colsb[16] = {0};
  uint8_t rows[16] = {0};
};

void config_hw() {
  TileConfig cfg;
  cfg.rows[0] = AMX_ROWS; cfg.colsb[0] = 32;       // tmm0: A, 16 rows x 32 bytes
  cfg.rows[1] = 8;        cfg.colsb[1] = 64;       // tmm1: B, 8 rows x 64 bytes
  cfg.rows[2] = AMX_ROWS; cfg.colsb[2] = 64;       // tmm2: C, 16 rows x 16 int32
  cfg.rows[3] = AMX_ROWS; cfg.colsb[3] = 32;       // tmm3-5: the same three for the odd blocks
  cfg.rows[4] = 8;        cfg.colsb[4] = 64;
  cfg.rows[5] = AMX_ROWS; cfg.colsb[5] = 64;
  // not _tile_loadconfig: gcc 12's declares a read of 8 bytes only, so the stores to rows and colsb
  // above were dropped as dead and the tiles stayed unconfigured (SIGILL on the first tileloadd)
  asm volatile("ldtilecfg %0" : : "m"(cfg));
}

inline __m512 scales16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 scales16(const at::Half* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

// one block's float chain for the RT rows of a row tile, from its C tile in memory
template <bool Q4, int RT>
inline void chain_hw(const int32_t* C, const typename Tile<Q4>::Scale* dm, const float* da, const float* sa,
                     __m512* acc) {
  const __m512 d = scales16(dm);
  for (int r = 0; r < RT; ++r)
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(C + r * LANES)),
                             _mm512_mul_ps(d, _mm512_set1_ps(da[r])), acc[r]);
  if constexpr (Q4) {
    const __m512 m = scales16(dm + LANES);
    for (int r = 0; r < RT; ++r) acc[r] = _mm512_fmadd_ps(m, _mm512_set1_ps(sa[r]), acc[r]);
  }
}

// rows rt .. rt + RT - 1 of one weight tile. Blocks alternate between two sets of tiles (tmm0-2,
// tmm3-5), and each block's C goes to one of four buffers whose float chain runs two blocks later,
// so that the vector unit need not wait for the tile store it reads while the tile unit works on
// the next blocks (measured: about even with reading at once; the two units overlap only partly,
// docs/amx.md)
template <bool Q4, int RT>
__attribute__((noinline)) void rows_hw(const int8_t* bt, const Tile<Q4>& t, const Act& a, const int8_t* xa,
                                       int64_t Mp, int64_t rt, float* y, int64_t N, int64_t n0, int64_t valid,
                                       bool ahead) {
  constexpr int64_t LAG = 2;
  __m512 acc[RT];
  for (int r = 0; r < RT; ++r) acc[r] = _mm512_setzero_ps();
  alignas(64) int32_t C[4][AMX_ROWS * LANES];
  const int64_t nb = a.nb;
  auto chain = [&](int64_t b) {
    chain_hw<Q4, RT>(C[b & 3], t.dm + b * Tile<Q4>::SCALES * LANES, a.d + b * a.M + rt, a.s + b * a.M + rt, acc);
  };
  int64_t b = 0;
  // the next weight tile's codes and scales (contiguous after this one's; a prefetch never faults)
  // are fetched while this one computes, so that its unpacking does not wait for memory
  const char* next_codes = reinterpret_cast<const char*>(t.codes + nb * Tile<Q4>::CODE_BYTES);
  const char* next_scales = reinterpret_cast<const char*>(t.dm + nb * Tile<Q4>::SCALES * LANES);
  constexpr int64_t SCALE_BYTES = Tile<Q4>::SCALES * LANES * sizeof(typename Tile<Q4>::Scale);
  for (; b + 1 < nb; b += 2) {
    if (ahead) {
      for (int64_t off = 0; off < 2 * Tile<Q4>::CODE_BYTES; off += 64)
        _mm_prefetch(next_codes + b * Tile<Q4>::CODE_BYTES + off, _MM_HINT_T0);
      _mm_prefetch(next_scales + b * SCALE_BYTES, _MM_HINT_T0);
      _mm_prefetch(next_scales + (b + 1) * SCALE_BYTES, _MM_HINT_T0);
    }
    _tile_loadd(0, xa + (b * Mp + rt) * 32, 32);
    _tile_loadd(1, bt + b * AMX_B_BYTES, 64);
    _tile_zero(2);
    _tile_dpbssd(2, 0, 1);
    _tile_loadd(3, xa + ((b + 1) * Mp + rt) * 32, 32);
    _tile_loadd(4, bt + (b + 1) * AMX_B_BYTES, 64);
    _tile_zero(5);
    _tile_dpbssd(5, 3, 4);
    _tile_stored(2, C[b & 3], 64);
    _tile_stored(5, C[(b + 1) & 3], 64);
    if (b >= LAG) {
      chain(b - LAG);
      chain(b - LAG + 1);
    }
  }
  if (b < nb) {
    _tile_loadd(0, xa + (b * Mp + rt) * 32, 32);
    _tile_loadd(1, bt + b * AMX_B_BYTES, 64);
    _tile_zero(2);
    _tile_dpbssd(2, 0, 1);
    _tile_stored(2, C[b & 3], 64);
    ++b;
  }
  for (int64_t c = std::max<int64_t>(0, (nb & ~int64_t{1}) - LAG); c < nb; ++c) chain(c);
  alignas(64) float out[RT * LANES];
  for (int r = 0; r < RT; ++r) _mm512_store_ps(out + r * LANES, acc[r]);
  store_rows(out, RT, y, N, rt, n0, valid);
}

// rows_hw<Q4, rows> for a row count 1..16 known only at run time
template <bool Q4, int RT = AMX_ROWS>
inline void rows_hw_n(int rows, const int8_t* bt, const Tile<Q4>& t, const Act& a, const int8_t* xa, int64_t Mp,
                      int64_t rt, float* y, int64_t N, int64_t n0, int64_t valid, bool ahead) {
  if (rows == RT) rows_hw<Q4, RT>(bt, t, a, xa, Mp, rt, y, N, n0, valid, ahead);
  else if constexpr (RT > 1) rows_hw_n<Q4, RT - 1>(rows, bt, t, a, xa, Mp, rt, y, N, n0, valid, ahead);
}

// every block of one weight tile as B tiles: Q4_1's part p gives B rows 2p (its low nibbles, the
// weights 8p + i) and 2p + 1 (its high nibbles, 8p + 4 + i); Q8_0's stored q + 128 with the top bit
// flipped is q
template <bool Q4>
void weight_tiles_hw(const Tile<Q4>& t, int64_t nb, int8_t* bt) {
  const __m512i low = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* c = t.codes + b * Tile<Q4>::CODE_BYTES;
    int8_t* B = bt + b * AMX_B_BYTES;
    for (int p = 0; p < (Q4 ? 4 : 8); ++p) {
      const __m512i v = _mm512_loadu_si512(c + p * 64);
      if constexpr (Q4) {
        _mm512_storeu_si512(B + 2 * p * 64, _mm512_and_si512(v, low));
        _mm512_storeu_si512(B + (2 * p + 1) * 64, _mm512_and_si512(_mm512_srli_epi16(v, 4), low));
      } else {
        _mm512_storeu_si512(B + p * 64, _mm512_xor_si512(v, top));
      }
    }
  }
}

void release_hw() { _tile_release(); }
#pragma GCC pop_options

}  // namespace

int64_t amx_support() {
  static const int64_t state = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return int64_t{0};
    const bool tile = d & (1u << 24), int8 = d & (1u << 25);
    __builtin_cpu_init();
    if (!tile || !int8 || !__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512vnni"))
      return int64_t{0};
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 ? int64_t{2} : int64_t{1};
  }();
  return state;
}

void amx_begin() { config_hw(); }
void amx_end() { release_hw(); }

void amx_activations(const Act& a, int64_t Mp, int8_t* xa) {
  for (int64_t b = 0; b < a.nb; ++b)
    for (int64_t r = 0; r < Mp; ++r) {
      int8_t* row = xa + (b * Mp + r) * 32;
      if (r < a.M)
        for (int p = 0; p < 4; ++p) std::memcpy(row + 8 * p, a.part(b, p, r), 8);
      else
        std::memset(row, 0, 32);
    }
}

template <bool Q4>
void amx_tile_rows(bool emulate, const Tile<Q4>& t, const Act& a, const int8_t* xa, int64_t Mp, int64_t r0,
                   int64_t rows, float* y, int64_t N, int64_t n0, int64_t valid, int8_t* scratch) {
  if (emulate) weight_tiles_emulated<Q4>(t, a.nb, scratch);
  else weight_tiles_hw<Q4>(t, a.nb, scratch);
  for (int64_t rt = r0; rt < r0 + rows; rt += AMX_ROWS) {
    const int n = static_cast<int>(std::min<int64_t>(AMX_ROWS, r0 + rows - rt));
    if (emulate) rows_emulated<Q4>(scratch, t, a, xa, Mp, rt, n, y, N, n0, valid);
    else rows_hw_n<Q4>(n, scratch, t, a, xa, Mp, rt, y, N, n0, valid, rt == r0);
  }
}

template void amx_tile_rows<true>(bool, const Tile<true>&, const Act&, const int8_t*, int64_t, int64_t, int64_t,
                                  float*, int64_t, int64_t, int64_t, int8_t*);
template void amx_tile_rows<false>(bool, const Tile<false>&, const Act&, const int8_t*, int64_t, int64_t, int64_t,
                                   float*, int64_t, int64_t, int64_t, int8_t*);

}  // namespace dominotree_q8
