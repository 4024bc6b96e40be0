// What q8act.cpp (the VNNI, AVX2 and scalar paths) and q8amx.cpp (the AMX-INT8 path) share: the
// 8-bit activation blocks, the weight tiles, and the AMX entry points. See q8act.cpp for the
// arithmetic every path keeps.
#pragma once
#include <ATen/ATen.h>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace dominotree_q8 {

constexpr int64_t GROUP = 32;
constexpr int64_t LANES = 16;     // outputs per tile

// The 8-bit blocks of x, laid out so that a row tile reads every row from one pointer at fixed
// offsets (row-major per-row pointers spilled the general registers at 8 rows)
struct Act {
  const int8_t* q;         // [K / 32, 4, M, 8]: inputs 8p .. 8p + 7 of block b of row r at ((b * 4 + p) * M + r) * 8
  const float* d;          // [K / 32, M]
  const float* s;          // [K / 32, M]  d * sum(q)
  const int32_t* sum;      // [K / 32, M]  sum(q)
  int64_t M, nb;
  const int8_t* part(int64_t b, int p, int64_t r) const { return q + ((b * 4 + p) * M + r) * 8; }
};

// Q4 = true: Q4_1 weights (float16 scales), else Q8_0 (float32 scales)
template <bool Q4>
struct Tile {              // one tile of 16 outputs
  using Scale = std::conditional_t<Q4, at::Half, float>;
  const uint8_t* codes;    // [nb, 4 or 8, 16, 4]
  const Scale* dm;         // [nb, 2 or 1, 16]
  static constexpr int64_t CODE_BYTES = Q4 ? 4 * 64 : 8 * 64;   // per block
  static constexpr int64_t SCALES = Q4 ? 2 : 1;
};

inline float widen(float v) { return v; }
inline float widen(at::Half v) { return static_cast<float>(v); }

// y[r0 + r, n0 + j] for j < valid (the tile's real outputs)
inline void store_rows(const float* acc, int rows, float* y, int64_t N, int64_t r0, int64_t n0, int64_t valid) {
  for (int r = 0; r < rows; ++r) std::memcpy(y + (r0 + r) * N + n0, acc + r * LANES, valid * sizeof(float));
}

// --- the AMX-INT8 path (q8amx.cpp) ---------------------------------------------------------------
constexpr int64_t AMX_ROWS = 16;                 // rows per AMX row tile
constexpr int64_t AMX_B_BYTES = 8 * 64;          // one block's weights as tdpbusd's B tile

// 0: the CPU has no AMX-INT8 (or no AVX-512 VNNI beside it), 1: Linux refused the tile state
// (arch_prctl ARCH_REQ_XCOMP_PERM), 2: usable. Asks Linux once, on the first call.
int64_t amx_support();

// x's blocks as AMX's A tiles: [nb, Mp, 32] int8, each row's codes q in input order (Mp: M rounded
// up to 16; the padding rows hold 0)
void amx_activations(const Act& a, int64_t Mp, int8_t* xa);

// Rows r0 .. r0 + rows of one weight tile, in AMX row tiles of 16 (the last one partial).
// emulate: the tile instructions and the float part in portable C++ (any CPU; the tests' check of
// the layouts), else the hardware (amx_support() == 2, between amx_begin() and amx_end() on this
// thread). scratch: nb * AMX_B_BYTES bytes.
template <bool Q4>
void amx_tile_rows(bool emulate, const Tile<Q4>& t, const Act& a, const int8_t* xa, int64_t Mp, int64_t r0,
                   int64_t rows, float* y, int64_t N, int64_t n0, int64_t valid, int8_t* scratch);

void amx_begin();   // this thread's tile configuration (ldtilecfg)
void amx_end();     // tilerelease

}  // namespace dominotree_q8
