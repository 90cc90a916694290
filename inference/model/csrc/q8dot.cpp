// Our int8-dot kernels on a GGUF file's own blocks, inputs quantized on the fly to int8 per group of 32 (q_x =
// round(x / d_x), d_x = max|x| / 127) as llama.cpp quantizes them; each group's dot exact in int32 (AVX2 maddubs),
// scaled by the weight group's scale times d_x. Built and loaded by inference/model/native.py.
// - llmx::q4_q8_linear: y = x @ W.T, W in 4-bit groups of 32 (w = scale * q + low, q in 0..15, scale and low
//   float16 per row and group, scale (N, K/32) and low (K/32, N); llama.cpp's Q8_1 x Q4_1), plus low * d_x *
//   sum(q_x). Codes packed two to a byte, (N, K/2): byte j of group g holds code j of the group in its low nibble
//   and code 16 + j in its high nibble (GGUF's own order within a block). Called by
//   inference.model.kernels.Q8DotLinear. Two groups at a time (dot_pairs): one madd, conversion and fma a pair.
// - llmx::q8_q8_linear: the same with Q8_0's groups (w = scale * q, q in -127..127 one a byte, scale float16 or
//   float32).
// - llmx::q8_rows_at: chosen outputs of a Q8_0 product in float32 from x itself (no rounding of x).
//   Both called by inference.model.kernels.Q8DotHead (the output matrix).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/inductor/aoti_torch/utils.h>
#include <torch/library.h>
#include <immintrin.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

namespace {

constexpr int64_t kGroup = 32;

inline float hsum(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// one group of 32 float32 inputs -> 32 int8 codes q = round(x / d), d = max|x| / 127; returns d, writes d * sum(q)
inline float quantize_group(const float* xs, int8_t* out, float* dsum) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(xs + 8 * i);
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
  }
  __m128 h = _mm_max_ps(_mm256_extractf128_ps(amax, 1), _mm256_castps256_ps128(amax));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  const float a = _mm_cvtss_f32(h);
  const float d = a / 127.f;
  const __m256 inv = _mm256_set1_ps(a > 0.f ? 127.f / a : 0.f);
  __m256i q[4];
  for (int i = 0; i < 4; ++i) {
    q[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  s4 = _mm_hadd_epi32(s4, s4);
  s4 = _mm_hadd_epi32(s4, s4);
  __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  packed = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), packed);
  *dsum = d * static_cast<float>(_mm_cvtsi128_si32(s4));
  return d;
}

// Group g's 32 rounded inputs into its row's buffer, laid out for the 4-bit pairs of groups (dot_pairs): 64 bytes a
// pair, [g's 0..15 | g + 1's 0..15 | g's 16..31 | g + 1's 16..31]; a last odd group as it is
inline void place(const int8_t* codes, int64_t g, int64_t G, int8_t* row) {
  if (g + 1 == G && G % 2) {
    std::memcpy(row + g * kGroup, codes, kGroup);
    return;
  }
  int8_t* pair = row + (g / 2) * 2 * kGroup + (g % 2) * 16;
  std::memcpy(pair, codes, 16);
  std::memcpy(pair + kGroup, codes + 16, 16);
}

// The low terms of y[:, n0:n1]: Y[m, n] = sum over g of f16(lowT[g, n]) * dsum[m, g], eight columns at a time (each
// lowT row holds one group's lows of all N weight rows), MB input rows per pass; each output's sum is taken in the
// same order (fused multiply-adds over g) wherever its column and row fall
template <int MB>
inline void low_block(const uint16_t* lowT, const float* dsum, int64_t m, int64_t n, int64_t G, int64_t N, float* Y) {
  __m256 acc[MB];
  for (int j = 0; j < MB; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t g = 0; g < G; ++g) {
    const __m256 l = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lowT + g * N + n)));
    for (int j = 0; j < MB; ++j) acc[j] = _mm256_fmadd_ps(l, _mm256_broadcast_ss(dsum + (m + j) * G + g), acc[j]);
  }
  for (int j = 0; j < MB; ++j) _mm256_storeu_ps(Y + (m + j) * N + n, acc[j]);
}

inline void low_terms(const uint16_t* lowT, const float* dsum, int64_t M, int64_t G, int64_t N, int64_t n0, int64_t n1,
                      float* Y) {
  int64_t n = n0;
  for (; n + 8 <= n1; n += 8) {
    int64_t m = 0;
    for (; m + 8 <= M; m += 8) low_block<8>(lowT, dsum, m, n, G, N, Y);
    for (; m < M; ++m) low_block<1>(lowT, dsum, m, n, G, N, Y);
  }
  for (; n < n1; ++n) {
    for (int64_t m = 0; m < M; ++m) {
      float sum = 0.f;
      for (int64_t g = 0; g < G; ++g) sum = std::fma(_cvtsh_ss(lowT[g * N + n]), dsum[m * G + g], sum);
      Y[m * N + n] = sum;
    }
  }
}

// The sums of up to 8 vectors' lanes, [sum a[0], ..., sum a[n - 1]] (n <= 8), each added in the same order
// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) whatever n is: a tile's size never changes an output's bits
inline void lane_sums(const __m256* a, int n, float* out) {
  __m256 v[8];
  for (int t = 0; t < 8; ++t) v[t] = t < n ? a[t] : _mm256_setzero_ps();
  const __m256 h0123 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));  // per 128-bit half
  const __m256 h4567 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  const __m256 sums = _mm256_add_ps(_mm256_permute2f128_ps(h0123, h4567, 0x20), _mm256_permute2f128_ps(h0123, h4567, 0x31));
  if (n == 8) {
    _mm256_storeu_ps(out, sums);
  } else {
    alignas(32) float all[8];
    _mm256_store_ps(all, sums);
    for (int t = 0; t < n; ++t) out[t] = all[t];
  }
}

// The two weight formats a tile reads, per group of 32: a weight group as 32 bytes the dot takes, the group's exact
// int32 dot with 32 int8 inputs (8 partial sums), its scale as float32, and (Q8, read by dot_tile) how many tiles
// ahead to prefetch; the 4-bit rows (dot_pairs) are not prefetched: measured no faster.
struct Q4 {  // codes 0..15 packed two to a byte (16 bytes a group), float16 scale and low: w = scale * q + low
  using Scale = uint16_t;
  static constexpr int64_t kBytes = kGroup / 2;
  static constexpr bool kPaired = true;  // two groups at a time (dot_pairs)
  static __m256i load(const uint8_t* p) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0xF));  // (32,) 0..15
  }
  static __m256i dot(__m256i w, __m256i a) {  // unsigned codes times signed inputs
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), _mm256_set1_epi16(1));
  }
};

template <class S>
struct Q8 {  // codes -127..127 (one byte each), a float16 (uint16_t) or float32 scale: w = scale * q
  using Scale = S;
  static constexpr int64_t kBytes = kGroup;
  static constexpr int kAhead = 2;  // rows prefetched two tiles ahead: the output matrix at 1 row 1.5 -> 1.0 ms
  static constexpr bool kPaired = false;  // |w . a| over two bytes reaches 2 * 127 * 127: no room to add in int16
  static __m256i load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static __m256i dot(__m256i w, __m256i a) {  // |w| times a with w's sign: maddubs takes one unsigned side
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w)),
                             _mm256_set1_epi16(1));
  }
};

// out[g] = scale[g] * dx[g], eight groups at a time; the last G % 8 as the last eight again (the same products, from
// G >= 8 on), the scale float16 or float32
inline __m256 load_scale(const uint16_t* scale) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scale)));
}

inline __m256 load_scale(const float* scale) { return _mm256_loadu_ps(scale); }

inline float as_float(uint16_t half) { return _cvtsh_ss(half); }
inline float as_float(float value) { return value; }

template <class S>
inline void scaled(const S* scale, const float* dx, int64_t G, float* out) {
  int64_t g = 0;
  for (; g + 8 <= G; g += 8) _mm256_storeu_ps(out + g, _mm256_mul_ps(load_scale(scale + g), _mm256_loadu_ps(dx + g)));
  if (g < G && G >= 8) {
    _mm256_storeu_ps(out + G - 8, _mm256_mul_ps(load_scale(scale + G - 8), _mm256_loadu_ps(dx + G - 8)));
    g = G;
  }
  for (; g < G; ++g) out[g] = as_float(scale[g]) * dx[g];
}

// The 4-bit tile two groups at a time. One 32-byte load holds a pair of groups' packed codes: its low nibbles are
// codes 0..15 of both groups, its high nibbles codes 16..31, and the inputs are laid out to match (``place``). The
// two halves' maddubs are added in int16 (|sum| <= 2 * 2 * 15 * 127) before one madd, so a pair of groups takes one
// madd, one conversion and one fma where one group took each: lanes 0..3 carry the first group's partial sums and
// lanes 4..7 the second's, each times its own factor, ``factor.pair(r, i, g)`` = [f(g) x4 | f(g + 1) x4]. A last
// odd group alone, as Q4::dot, times ``factor.last(r, i)``. Every output's arithmetic is the same whatever its
// tile and wherever the factors come from (the same float products).
template <int R, int I, class Factor>
inline void dot_pairs(const uint8_t* codes, int64_t stride, const int8_t* q, int64_t K, int64_t G, const Factor& factor,
                      __m256* sums) {
  __m256 acc[R * I];
  for (int t = 0; t < R * I; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i nibble = _mm256_set1_epi8(0xF);
  int64_t g = 0;
  for (; g + 2 <= G; g += 2) {
    __m256i lo[R], hi[R];
    for (int r = 0; r < R; ++r) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + r * stride + g * Q4::kBytes));
      lo[r] = _mm256_and_si256(raw, nibble);
      hi[r] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nibble);
    }
    for (int i = 0; i < I; ++i) {
      const int8_t* a = q + i * K + g * kGroup;
      const __m256i a_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
      const __m256i a_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + kGroup));
      for (int r = 0; r < R; ++r) {
        const __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(lo[r], a_lo), _mm256_maddubs_epi16(hi[r], a_hi));
        const __m256 dots = _mm256_cvtepi32_ps(_mm256_madd_epi16(s, _mm256_set1_epi16(1)));
        acc[r * I + i] = _mm256_fmadd_ps(factor.pair(r, i, g), dots, acc[r * I + i]);
      }
    }
  }
  if (g < G) {
    __m256i w[R];
    for (int r = 0; r < R; ++r) w[r] = Q4::load(codes + r * stride + g * Q4::kBytes);
    for (int i = 0; i < I; ++i) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i * K + g * kGroup));
      for (int r = 0; r < R; ++r) {
        const __m256 dots = _mm256_cvtepi32_ps(Q4::dot(w[r], a));
        acc[r * I + i] = _mm256_fmadd_ps(_mm256_set1_ps(factor.last(r, i)), dots, acc[r * I + i]);
      }
    }
  }
  for (int t = 0; t < R * I; ++t) sums[t] = acc[t];
}

// Factors from the tile's own table, factors[(r * I + i) * G + g] = scale * d_x (the few rows of decode)
template <int I>
struct TileFactors {
  const float* f;
  int64_t G;
  __m256 pair(int r, int i, int64_t g) const {
    const float* at = f + (r * I + i) * G + g;
    return _mm256_set_m128(_mm_broadcast_ss(at + 1), _mm_broadcast_ss(at));
  }
  float last(int r, int i) const { return f[(r * I + i) * G + G - 1]; }
};

// Factors as the product of the weight rows' scales and the input rows' steps, each spread for pairs of groups once
// per call or per block of rows (``spread_pairs``, S floats a row; sf and d: the same as (rows, G) floats)
struct SpreadFactors {
  const float *sv, *dv, *sf, *d;
  int64_t S, G;
  __m256 pair(int r, int i, int64_t g) const {
    return _mm256_mul_ps(_mm256_loadu_ps(sv + r * S + g * 4), _mm256_loadu_ps(dv + i * S + g * 4));
  }
  float last(int r, int i) const { return sf[r * G + G - 1] * d[i * G + G - 1]; }
};

// v (G,) spread for pairs of groups: out[8p, 8p + 8) = [v[2p] x4 | v[2p + 1] x4] for p < G / 2
inline void spread_pairs(const float* v, int64_t G, float* out) {
  for (int64_t p = 0; p < G / 2; ++p)
    _mm256_storeu_ps(out + 8 * p, _mm256_set_m128(_mm_set1_ps(v[2 * p + 1]), _mm_set1_ps(v[2 * p])));
}

// A tile of R weight rows times I input rows: sums[r * I + i] = the sum over the groups g of factors[r][i][g] *
// (codes of row r . q of row i, group g), as 8 partial sums each. Each weight group is loaded once for the tile's I input rows
// and each input group once for its R weight rows; the R * I sums are independent.
template <class F, int R, int I>
inline void dot_tile(const uint8_t* codes, int64_t stride, const int8_t* q, int64_t K, int64_t G, const float* factors,
                     __m256* sums) {
  __m256 acc[R * I];  // in registers, stored once: sums may alias factors (__m256 may alias any float)
  for (int t = 0; t < R * I; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t g = 0; g < G; ++g) {
    __m256i w[R];
    for (int r = 0; r < R; ++r) {
      if constexpr (F::kAhead > 0)  // the same group of the rows kAhead tiles on, on its way from memory
        _mm_prefetch(reinterpret_cast<const char*>(codes + (r + F::kAhead * R) * stride + g * F::kBytes), _MM_HINT_T0);
      w[r] = F::load(codes + r * stride + g * F::kBytes);
    }
    for (int i = 0; i < I; ++i) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i * K + g * kGroup));
      for (int r = 0; r < R; ++r) {
        const int t = r * I + i;
        acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(factors + t * G + g), _mm256_cvtepi32_ps(F::dot(w[r], a)), acc[t]);
      }
    }
  }
  for (int t = 0; t < R * I; ++t) sums[t] = acc[t];
}

// The weights of one call: codes (N rows of G groups, F::kBytes each), scales per row and group, (Q4) lows per
// group and row (G, N)
template <class F>
struct Weights {
  const uint8_t* codes;
  const typename F::Scale* scale;
  const uint16_t* low;  // (G, N); nullptr: no low term (Q8)
};

// The inputs of one call, quantized: int8 codes (M, K), their steps d_x and d_x * sum(q_x) per row and group
struct Inputs {
  const int8_t* q;
  const float* d;
  const float* dsum;
};

// A tile's sums into y (Y at y[m, n], N columns a row): each output's 8 partial sums reduced (lane_sums), stored or,
// with ``add``, added to the low terms already there
template <int R, int I>
inline void store_tile(const __m256* acc, bool add, float* Y, int64_t N) {
  float sums[R * I];
  for (int t = 0; t < R * I; t += 8) lane_sums(acc + t, std::min(8, R * I - t), sums + t);
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < I; ++i) {
      float* y = Y + i * N + r;
      *y = add ? sums[r * I + i] + *y : sums[r * I + i];
    }
  }
}

// y rows [m, m + I) and columns [n, n + R) as one tile: its factors, then its sums, reduced 8 outputs at a time,
// plus the low terms already in Y (Q4)
template <class F, int R, int I>
inline void tile_at(int64_t m, int64_t n, int64_t K, int64_t N, int64_t G, const Weights<F>& W, const Inputs& X,
                    float* factors, float* Y) {
  __m256 acc[R * I];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < I; ++i) {
      const int t = r * I + i;  // the pair's place in the tile
      scaled(W.scale + (n + r) * G, X.d + (m + i) * G, G, factors + t * G);
    }
  }
  const uint8_t* codes = W.codes + n * G * F::kBytes;
  if constexpr (F::kPaired) {
    dot_pairs<R, I>(codes, G * F::kBytes, X.q + m * K, K, G, TileFactors<I>{factors, G}, acc);
  } else {
    dot_tile<F, R, I>(codes, G * F::kBytes, X.q + m * K, K, G, factors, acc);
  }
  store_tile<R, I>(acc, W.low != nullptr, Y + m * N + n, N);
}

// tile(std::integral_constant<int, T>{}) with T = take, for a take of 1 to I input rows: a tile's count of input rows
// as a compile-time constant, so that the last M % I rows are one tile of their own
template <int I, class Tile>
inline void with_rows(int64_t take, const Tile& tile) {
  if (take == I) {
    tile(std::integral_constant<int, I>{});
  } else if constexpr (I > 1) {
    with_rows<I - 1>(take, tile);
  }
}

// Tiles of R weight rows x I input rows over y[:, n0:n1]: the last M % I input rows of each block of R weight rows in
// one tile of their own (the weights still in cache), single rows at the last columns. Flattened (every call in it
// inlined), as product_spread is: GCC left parts of the tiles out of line, a few percent at every row count
// (docs/benchmarks.md, "The kernel's last rows")
template <class F, int R, int I>
__attribute__((flatten)) void product(int64_t M, int64_t K, int64_t N, int64_t n0, int64_t n1, const Weights<F>& W,
                                      const Inputs& X, float* Y) {
  const int64_t G = K / kGroup;
  std::vector<float> factors(R * I * G);  // scale * d_x of each group, for the tile's pairs of rows
  for (int64_t n = n0; n < n1; n += R) {
    const bool full_n = n + R <= n1;
    for (int64_t m = 0; m < M; m += I) {
      const int64_t take = std::min<int64_t>(I, M - m);
      if (full_n) {
        with_rows<I>(take, [&](auto t) { tile_at<F, R, decltype(t)::value>(m, n, K, N, G, W, X, factors.data(), Y); });
      } else {
        for (int64_t r = n; r < n1; ++r)
          for (int64_t i = m; i < m + take; ++i) tile_at<F, 1, 1>(i, r, K, N, G, W, X, factors.data(), Y);
      }
    }
  }
}

// A block of weight rows' scales (sf: (R, G) floats; sv: spread for pairs, S floats a row) and the input rows' steps
// spread (dv, S floats a row)
struct Spread {
  const float *sv, *dv, *sf;
  int64_t S;
};

// Weight rows [n + r, n + r + RT) times input rows [i, i + T) as one tile, added to the low terms in Y
template <int RT, int T>
inline void spread_tile(const Spread& s, const Weights<Q4>& W, const Inputs& X, int64_t K, int64_t N, int64_t G,
                        int64_t n, int64_t r, int64_t i, float* Y) {
  const SpreadFactors factor{s.sv + r * s.S, s.dv + i * s.S, s.sf + r * G, X.d + i * G, s.S, G};
  __m256 acc[RT * T];
  dot_pairs<RT, T>(W.codes + (n + r) * G * Q4::kBytes, G * Q4::kBytes, X.q + i * K, K, G, factor, acc);
  store_tile<RT, T>(acc, true, Y + i * N + n + r, N);
}

// The 4-bit product of many input rows over y[:, n0:n1] (dv: their steps spread, once per call), in tiles of R
// weight rows x I input rows: each block of R weight rows has its scales converted and spread once for all its
// tiles (rather than a table of factors per tile), and its last M % I input rows are one tile of their own; single
// weight rows at the last columns. The same arithmetic for every output whatever its tile.
template <int R, int I>
__attribute__((flatten)) void product_spread(int64_t M, int64_t K, int64_t N, int64_t n0, int64_t n1,
                                             const Weights<Q4>& W, const Inputs& X, const float* dv, float* Y) {
  const int64_t G = K / kGroup, S = (G / 2) * 8;
  std::vector<float> sf(R * G), sv(R * S + 8);
  for (int64_t n = n0; n < n1; n += R) {
    const int64_t rows = std::min<int64_t>(R, n1 - n);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t g = 0; g < G; ++g) sf[r * G + g] = _cvtsh_ss(W.scale[(n + r) * G + g]);
      spread_pairs(sf.data() + r * G, G, sv.data() + r * S);
    }
    const Spread spread{sv.data(), dv, sf.data(), S};
    for (int64_t m = 0; m < M; m += I) {
      const int64_t take = std::min<int64_t>(I, M - m);
      if (rows == R) {
        with_rows<I>(take, [&](auto t) { spread_tile<R, decltype(t)::value>(spread, W, X, K, N, G, n, 0, m, Y); });
      } else {
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t i = m; i < m + take; ++i) spread_tile<1, 1>(spread, W, X, K, N, G, n, r, i, Y);
      }
    }
  }
}

// x (M, K) float32 quantized per group of 32, then y = x @ W.T (M, N) over N's rows in parallel
template <class F>
at::Tensor linear(const at::Tensor& x, const Weights<F>& W, int64_t N) {
  const int64_t M = x.size(0), K = x.size(1), G = K / kGroup;
  const at::Tensor xc = x.contiguous();
  const float* X = xc.data_ptr<float>();
  at::Tensor y = at::empty({M, N}, x.options());
  float* Y = y.data_ptr<float>();
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    // each thread rounds the inputs itself, into its own buffers (kept between calls, up to 4 MiB): no serial
    // part before the products, and the rounded inputs in the cache of the core that reads them
    thread_local std::vector<int8_t> qx;
    thread_local std::vector<float> dx, sx, dv;  // dv: a batch's steps spread for pairs of groups (4-bit)
    qx.resize(M * K);
    dx.resize(M * G);
    sx.resize(M * G);
    for (int64_t i = 0; i < M * G; ++i) {
      if constexpr (F::kPaired) {
        alignas(32) int8_t codes[kGroup];
        dx[i] = quantize_group(X + i * kGroup, codes, sx.data() + i);
        place(codes, i % G, G, qx.data() + (i / G) * K);
      } else {
        dx[i] = quantize_group(X + i * kGroup, qx.data() + i * kGroup, sx.data() + i);
      }
    }
    const Inputs in{qx.data(), dx.data(), sx.data()};
    if (W.low) low_terms(W.low, in.dsum, M, G, N, n0, n1, Y);
    if (M < 4) {  // decode: four weight rows per pass over each input row
      product<F, 4, 1>(M, K, N, n0, n1, W, in, Y);
    } else if constexpr (F::kPaired) {  // batches and prompts: two weight rows times four input rows
      const int64_t S = (G / 2) * 8;
      dv.resize(M * S + 8);
      for (int64_t i = 0; i < M; ++i) spread_pairs(in.d + i * G, G, dv.data() + i * S);
      product_spread<2, 4>(M, K, N, n0, n1, W, in, dv.data(), Y);
    } else {
      product<F, 2, 4>(M, K, N, n0, n1, W, in, Y);
    }
    if (qx.capacity() > (1 << 22)) {  // a long prompt's: not held until the next one
      std::vector<int8_t>().swap(qx);
      std::vector<float>().swap(dx);
      std::vector<float>().swap(sx);
      std::vector<float>().swap(dv);
    }
  });
  return y;
}

void check_input(const at::Tensor& x, int64_t K) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat, "x: (M, K) float32");
  TORCH_CHECK(x.size(1) == K, "x has ", x.size(1), " columns and the weights ", K);
  TORCH_CHECK(K % kGroup == 0, "K must be a multiple of 32");
}

at::Tensor q4_q8_linear(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& scale, const at::Tensor& low) {
  TORCH_CHECK(codes.dim() == 2 && codes.scalar_type() == at::kByte && codes.is_contiguous(), "codes: (N, K/2) uint8");
  const int64_t N = codes.size(0), K = codes.size(1) * 2, G = K / kGroup;
  check_input(x, K);
  TORCH_CHECK(scale.scalar_type() == at::kHalf && low.scalar_type() == at::kHalf, "scale and low: float16");
  TORCH_CHECK(scale.sizes() == at::IntArrayRef({N, G}), "scale: (N, K/32)");
  TORCH_CHECK(low.sizes() == at::IntArrayRef({G, N}), "low: (K/32, N)");
  TORCH_CHECK(scale.is_contiguous() && low.is_contiguous(), "scale, low: contiguous");
  const Weights<Q4> W{codes.data_ptr<uint8_t>(), reinterpret_cast<const uint16_t*>(scale.data_ptr<at::Half>()),
                      reinterpret_cast<const uint16_t*>(low.data_ptr<at::Half>())};
  return linear<Q4>(x, W, N);
}

void check_q8(const at::Tensor& codes, const at::Tensor& scale) {
  TORCH_CHECK(codes.dim() == 2 && codes.scalar_type() == at::kChar && codes.is_contiguous(), "codes: (N, K) int8");
  TORCH_CHECK(codes.size(1) % kGroup == 0, "K must be a multiple of 32");
  TORCH_CHECK((scale.scalar_type() == at::kFloat || scale.scalar_type() == at::kHalf) && scale.is_contiguous(),
              "scale: contiguous float32 or float16");
  TORCH_CHECK(scale.sizes() == at::IntArrayRef({codes.size(0), codes.size(1) / kGroup}), "scale: (N, K/32)");
}

at::Tensor q8_q8_linear(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& scale) {
  check_q8(codes, scale);
  check_input(x, codes.size(1));
  const auto* C = reinterpret_cast<const uint8_t*>(codes.data_ptr<int8_t>());
  if (scale.scalar_type() == at::kHalf) {
    const Weights<Q8<uint16_t>> W{C, reinterpret_cast<const uint16_t*>(scale.data_ptr<at::Half>()), nullptr};
    return linear<Q8<uint16_t>>(x, W, codes.size(0));
  }
  const Weights<Q8<float>> W{C, scale.data_ptr<float>(), nullptr};
  return linear<Q8<float>>(x, W, codes.size(0));
}

// out[i] = sum over k of x[i / T, k] * codes[index[i], k] * scale[index[i], k / 32] for i < M * T, in float32 (x
// not rounded): the outputs a caller wants exactly, each a float dot per group scaled by the group's scale
template <class S>
void rows_at(const float* X, const int8_t* C, const S* scale, const int64_t* I, int64_t M, int64_t T, int64_t K,
             float* O) {
  const int64_t G = K / kGroup;
  at::parallel_for(0, M * T, 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int8_t* row = C + I[i] * K;
      const float* xs = X + (i / T) * K;
      __m256 acc = _mm256_setzero_ps();
      for (int64_t g = 0; g < G; ++g) {
        __m256 part = _mm256_setzero_ps();
        for (int j = 0; j < kGroup; j += 8) {
          const __m128i c8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + g * kGroup + j));
          part = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c8)), _mm256_loadu_ps(xs + g * kGroup + j), part);
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(as_float(scale[I[i] * G + g])), part, acc);
      }
      O[i] = hsum(acc);
    }
  });
}

// out[m, t]: the outputs of x @ W.T (M, N) that index (M, T) names, x not rounded
at::Tensor q8_rows_at(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& scale, const at::Tensor& index) {
  check_q8(codes, scale);
  check_input(x, codes.size(1));
  TORCH_CHECK(index.dim() == 2 && index.scalar_type() == at::kLong && index.size(0) == x.size(0), "index: (M, T) int64");
  const int64_t M = x.size(0), K = x.size(1), T = index.size(1), N = codes.size(0);
  const at::Tensor xc = x.contiguous(), ic = index.contiguous();
  const int64_t* I = ic.data_ptr<int64_t>();
  for (int64_t i = 0; i < M * T; ++i) TORCH_CHECK(I[i] >= 0 && I[i] < N, "index ", I[i], " out of range for ", N, " rows");
  at::Tensor out = at::empty({M, T}, x.options());
  if (scale.scalar_type() == at::kHalf) {
    rows_at(xc.data_ptr<float>(), codes.data_ptr<int8_t>(), reinterpret_cast<const uint16_t*>(scale.data_ptr<at::Half>()),
            I, M, T, K, out.data_ptr<float>());
  } else {
    rows_at(xc.data_ptr<float>(), codes.data_ptr<int8_t>(), scale.data_ptr<float>(), I, M, T, K, out.data_ptr<float>());
  }
  return out;
}

}  // namespace

// The ops as AOTInductor's compiled step calls them directly (``aot_inductor.custom_ops_to_c_shims``), rather than
// through the dispatcher's boxed calls (tens of microseconds each, a product of 576 x 576 takes ~15).
#define LLMX_SHIM(call)                                               \
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({                        \
    using torch::aot_inductor::tensor_handle_to_tensor_pointer;      \
    *out = torch::aot_inductor::new_tensor_handle(call);              \
  });

#define T(h) (*tensor_handle_to_tensor_pointer(h))

extern "C" AOTI_TORCH_EXPORT AOTITorchError aoti_torch_cpu_q4_q8_linear(
    AtenTensorHandle x, AtenTensorHandle codes, AtenTensorHandle scale, AtenTensorHandle low, AtenTensorHandle* out) {
  LLMX_SHIM(q4_q8_linear(T(x), T(codes), T(scale), T(low)))
}

extern "C" AOTI_TORCH_EXPORT AOTITorchError aoti_torch_cpu_q8_q8_linear(
    AtenTensorHandle x, AtenTensorHandle codes, AtenTensorHandle scale, AtenTensorHandle* out) {
  LLMX_SHIM(q8_q8_linear(T(x), T(codes), T(scale)))
}

extern "C" AOTI_TORCH_EXPORT AOTITorchError aoti_torch_cpu_q8_rows_at(
    AtenTensorHandle x, AtenTensorHandle codes, AtenTensorHandle scale, AtenTensorHandle index, AtenTensorHandle* out) {
  LLMX_SHIM(q8_rows_at(T(x), T(codes), T(scale), T(index)))
}

TORCH_LIBRARY(llmx, m) {
  m.def("q4_q8_linear(Tensor x, Tensor codes, Tensor scale, Tensor low) -> Tensor");
  m.def("q8_q8_linear(Tensor x, Tensor codes, Tensor scale) -> Tensor");
  m.def("q8_rows_at(Tensor x, Tensor codes, Tensor scale, Tensor index) -> Tensor");
}

TORCH_LIBRARY_IMPL(llmx, CPU, m) {
  m.impl("q4_q8_linear", &q4_q8_linear);
  m.impl("q8_q8_linear", &q8_q8_linear);
  m.impl("q8_rows_at", &q8_rows_at);
}
