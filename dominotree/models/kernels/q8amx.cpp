// The AMX-INT8 path of q8act.cpp's products (Q4_1 x Q8, Q8_0 x Q8): the same bits as the VNNI,
// AVX2 and scalar paths, for every row count. Only this file's hardware functions are compiled
// for AMX (and AVX-512), by a target pragma; the build needs no AMX flag, and nothing here runs
// unless amx_support() says the CPU has AMX-INT8 and Linux granted the tile state.
//
// One tdpbusd per 32-weight block keeps every block's integer sum exactly today's:
//   A (16 rows x 32 bytes): 16 rows of x's block b as unsigned bytes q + 128;
//   B (8 rows x 64 bytes):  the weight tile's block b, row g holding the 16 outputs' weights
//                           4g .. 4g + 3 as signed bytes (Q4_1: the codes 0..15; Q8_0: q);
//   C (16 x 16 int32) = sum (q + 128) w = isum + 128 * sum(w)  ->  isum = C - 128 * sum(w),
// exact (|C| < 2^21). B and sum(w) are made once per weight tile for all its blocks (the 4-bit
// codes unpacked to bytes once) and reused by every row tile. Each output then takes the fixed
// float chain of q8act.cpp, block by block:
//   acc = fma(float(isum), dw * d, acc); acc = fma(mw, s, acc) (Q4_1)
// in AVX-512 on the hardware path (what tile_vnni does), with std::fma in the emulation.
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

// B tiles and weight sums of every block of one weight tile
template <bool Q4>
void weight_tiles(const Tile<Q4>& t, int64_t nb, int8_t* bt, int32_t* sums) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* c = t.codes + b * Tile<Q4>::CODE_BYTES;
    int8_t* B = bt + b * AMX_B_BYTES;
    int32_t* s = sums + b * LANES;
    for (int j = 0; j < LANES; ++j) s[j] = 0;
    for (int g = 0; g < 8; ++g)
      for (int j = 0; j < LANES; ++j)
        for (int i = 0; i < 4; ++i) {
          int32_t w;
          if constexpr (Q4) {   // part p = g / 2: low nibbles are weights 8p + i, high ones 8p + 4 + i
            const uint8_t byte = c[(g / 2) * 64 + j * 4 + i];
            w = g % 2 == 0 ? (byte & 0x0F) : (byte >> 4);
          } else {
            w = static_cast<int32_t>(c[g * 64 + j * 4 + i]) - 128;
          }
          B[g * 64 + j * 4 + i] = static_cast<int8_t>(w);
          s[j] += w;
        }
  }
}

// --- the emulation: tdpbusd and the float chain in portable C++ -----------------------------------
void dot_emulated(const uint8_t* A, const int8_t* B, int32_t* C) {
  for (int m = 0; m < AMX_ROWS; ++m)
    for (int n = 0; n < LANES; ++n) {
      int32_t acc = 0;
      for (int g = 0; g < 8; ++g)
        for (int i = 0; i < 4; ++i) acc += static_cast<int32_t>(A[m * 32 + 4 * g + i]) * B[g * 64 + 4 * n + i];
      C[m * LANES + n] = acc;
    }
}

template <bool Q4>
void chain_emulated(const int32_t* C, const int32_t* sums, const typename Tile<Q4>::Scale* dm, const float* da,
                    const float* sa, int rows, float* acc) {
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < LANES; ++j) {
      const int32_t isum = C[r * LANES + j] - 128 * sums[j];
      float& v = acc[r * LANES + j];
      v = std::fma(static_cast<float>(isum), widen(dm[j]) * da[r], v);
      if constexpr (Q4) v = std::fma(widen(dm[LANES + j]), sa[r], v);
    }
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
  // not _tile_loadconfig: gcc 12's declares a read of 8 bytes only, so the stores to rows and colsb
  // above were dropped as dead and the tiles stayed unconfigured (SIGILL on the first tileloadd)
  asm volatile("ldtilecfg %0" : : "m"(cfg));
}

void dot_hw(const uint8_t* A, const int8_t* B, int32_t* C) {
  _tile_loadd(0, A, 32);
  _tile_loadd(1, B, 64);
  _tile_zero(2);
  _tile_dpbusd(2, 0, 1);
  _tile_stored(2, C, 64);
}

inline __m512 scales16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 scales16(const at::Half* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

template <bool Q4>
void chain_hw(const int32_t* C, const int32_t* sums, const typename Tile<Q4>::Scale* dm, const float* da,
              const float* sa, int rows, float* acc) {
  const __m512 d = scales16(dm);
  const __m512 m = Q4 ? scales16(dm + LANES) : _mm512_setzero_ps();
  const __m512i w128 = _mm512_slli_epi32(_mm512_loadu_si512(sums), 7);
  for (int r = 0; r < rows; ++r) {
    const __m512i isum = _mm512_sub_epi32(_mm512_load_si512(C + r * LANES), w128);
    __m512 v = _mm512_load_ps(acc + r * LANES);
    v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(da[r])), v);
    if constexpr (Q4) v = _mm512_fmadd_ps(m, _mm512_set1_ps(sa[r]), v);
    _mm512_store_ps(acc + r * LANES, v);
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

void amx_activations(const Act& a, int64_t Mp, uint8_t* xa) {
  for (int64_t b = 0; b < a.nb; ++b)
    for (int64_t r = 0; r < Mp; ++r) {
      uint8_t* row = xa + (b * Mp + r) * 32;
      for (int p = 0; p < 4; ++p)
        for (int i = 0; i < 8; ++i)
          row[8 * p + i] = r < a.M ? static_cast<uint8_t>(a.part(b, p, r)[i] + 128) : uint8_t{128};
    }
}

template <bool Q4>
void amx_tile_rows(bool emulate, const Tile<Q4>& t, const Act& a, const uint8_t* xa, int64_t Mp, int64_t r0,
                   int64_t rows, float* y, int64_t N, int64_t n0, int64_t valid, int8_t* scratch, int32_t* sums) {
  weight_tiles<Q4>(t, a.nb, scratch, sums);
  alignas(64) int32_t C[AMX_ROWS * LANES];
  alignas(64) float acc[AMX_ROWS * LANES];
  for (int64_t rt = r0; rt < r0 + rows; rt += AMX_ROWS) {
    const int n = static_cast<int>(std::min<int64_t>(AMX_ROWS, r0 + rows - rt));
    std::memset(acc, 0, sizeof(acc));
    for (int64_t b = 0; b < a.nb; ++b) {
      const uint8_t* A = xa + (b * Mp + rt) * 32;
      const int8_t* B = scratch + b * AMX_B_BYTES;
      const auto* dm = t.dm + b * Tile<Q4>::SCALES * LANES;
      const float *da = a.d + b * a.M + rt, *sa = a.s + b * a.M + rt;
      if (emulate) {
        dot_emulated(A, B, C);
        chain_emulated<Q4>(C, sums + b * LANES, dm, da, sa, n, acc);
      } else {
        dot_hw(A, B, C);
        chain_hw<Q4>(C, sums + b * LANES, dm, da, sa, n, acc);
      }
    }
    store_rows(acc, n, y, N, rt, n0, valid);
  }
}

template void amx_tile_rows<true>(bool, const Tile<true>&, const Act&, const uint8_t*, int64_t, int64_t, int64_t,
                                  float*, int64_t, int64_t, int64_t, int8_t*, int32_t*);
template void amx_tile_rows<false>(bool, const Tile<false>&, const Act&, const uint8_t*, int64_t, int64_t, int64_t,
                                   float*, int64_t, int64_t, int64_t, int8_t*, int32_t*);

}  // namespace dominotree_q8
