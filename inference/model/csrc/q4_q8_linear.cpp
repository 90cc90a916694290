// llmx::q4_q8_linear: y = x @ W.T with W in 4-bit groups of 32 (w = scale * q + low, q in 0..15, scale and low
// float16 per row and group) and x quantized on the fly to int8 per group of 32 (q_x = round(x / d_x), d_x =
// max|x| / 127): llama.cpp's Q8_1 x Q4_1 arithmetic. Each group's dot is exact in int32 (AVX2 maddubs: unsigned
// codes times signed inputs), scaled by scale * d_x, plus low * d_x * sum(q_x). Built and loaded by
// inference/model/native.py; the module that calls it is inference.model.kernels.Q8DotLinear. Codes are packed
// two to a byte, (N, K/2): byte j of group g holds code j of the group in its low nibble and code 16 + j in its
// high nibble (GGUF's own order within a block).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/inductor/aoti_torch/utils.h>
#include <torch/library.h>
#include <immintrin.h>
#include <algorithm>
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

// out[g] = f16(scale[g]) * dx[g]
inline void scaled(const uint16_t* scale, const float* dx, int64_t G, float* out) {
  int64_t g = 0;
  for (; g + 8 <= G; g += 8) {
    const __m256 s = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scale + g)));
    _mm256_storeu_ps(out + g, _mm256_mul_ps(s, _mm256_loadu_ps(dx + g)));
  }
  for (; g < G; ++g) out[g] = _cvtsh_ss(scale[g]) * dx[g];
}

// sum over g of f16(low[g]) * sx[g]
inline float dot_f16(const uint16_t* low, const float* sx, int64_t G) {
  __m256 acc = _mm256_setzero_ps();
  int64_t g = 0;
  for (; g + 8 <= G; g += 8) {
    const __m256 l = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(low + g)));
    acc = _mm256_fmadd_ps(l, _mm256_loadu_ps(sx + g), acc);
  }
  float sum = hsum(acc);
  for (; g < G; ++g) sum += _cvtsh_ss(low[g]) * sx[g];
  return sum;
}

// A tile of R weight rows times I input rows: out[i * ostride + r] = sum over groups g of
// factors[r][i][g] * (codes of row r . q of row i, group g) + lows[r][i]. Each weight group is unpacked once for the
// tile's I input rows and each input group loaded once for its R weight rows; the R * I sums are independent.
template <int R, int I>
inline void dot_tile(const uint8_t* codes, int64_t stride, const int8_t* q, int64_t K, int64_t G, const float* factors,
                     const float* lows, float* out, int64_t ostride) {
  const __m256i nibble = _mm256_set1_epi8(0xF);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R * I];
  for (int t = 0; t < R * I; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t g = 0; g < G; ++g) {
    __m256i w[R];
    for (int r = 0; r < R; ++r) {
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + r * stride + g * 16));
      w[r] = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), nibble);  // (32,) 0..15
    }
    for (int i = 0; i < I; ++i) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i * K + g * kGroup));
      for (int r = 0; r < R; ++r) {
        const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(w[r], a), ones);  // (8,) int32
        const int t = r * I + i;
        acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(factors + t * G + g), _mm256_cvtepi32_ps(dot), acc[t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < I; ++i) out[i * ostride + r] = hsum(acc[r * I + i]) + lows[r * I + i];
}

// y rows [m, m + I) and columns [n, n + R) as one tile: its factors and lows first (eight groups at a time)
template <int R, int I>
inline void tile_at(int64_t m, int64_t n, int64_t K, int64_t N, int64_t G, const uint8_t* C, const uint16_t* D,
                    const uint16_t* L, const int8_t* QX, const float* DX, const float* SX, float* factors, float* Y) {
  float lows[R * I];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < I; ++i) {
      scaled(D + (n + r) * G, DX + (m + i) * G, G, factors + (r * I + i) * G);
      lows[r * I + i] = dot_f16(L + (n + r) * G, SX + (m + i) * G, G);
    }
  }
  dot_tile<R, I>(C + n * (K / 2), K / 2, QX + m * K, K, G, factors, lows, Y + m * N + n, N);
}

// Tiles of R weight rows x I input rows over y[:, n0:n1], single rows and columns at the edges
template <int R, int I>
void product(int64_t M, int64_t K, int64_t N, int64_t n0, int64_t n1, const uint8_t* C, const uint16_t* D,
             const uint16_t* L, const int8_t* QX, const float* DX, const float* SX, float* Y) {
  const int64_t G = K / kGroup;
  std::vector<float> factors(R * I * G);  // scale * d_x of each group, for the tile's pairs of rows
  for (int64_t n = n0; n < n1; n += R) {
    const bool full_n = n + R <= n1;
    for (int64_t m = 0; m < M; m += I) {
      if (full_n && m + I <= M) {
        tile_at<R, I>(m, n, K, N, G, C, D, L, QX, DX, SX, factors.data(), Y);
      } else {
        for (int64_t r = n; r < std::min(n + R, n1); ++r)
          for (int64_t i = m; i < std::min(m + I, M); ++i)
            tile_at<1, 1>(i, r, K, N, G, C, D, L, QX, DX, SX, factors.data(), Y);
      }
    }
  }
}

at::Tensor q4_q8_linear(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& scale, const at::Tensor& low) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat, "x: (M, K) float32");
  TORCH_CHECK(codes.dim() == 2 && codes.scalar_type() == at::kByte && codes.is_contiguous(), "codes: (N, K/2) uint8");
  const int64_t M = x.size(0), K = x.size(1), N = codes.size(0);
  TORCH_CHECK(K % kGroup == 0 && codes.size(1) * 2 == K, "K must be a multiple of 32 and twice codes' columns");
  const int64_t G = K / kGroup;
  TORCH_CHECK(scale.scalar_type() == at::kHalf && low.scalar_type() == at::kHalf, "scale and low: float16");
  TORCH_CHECK(scale.sizes() == at::IntArrayRef({N, G}) && low.sizes() == at::IntArrayRef({N, G}), "scale, low: (N, K/32)");
  TORCH_CHECK(scale.is_contiguous() && low.is_contiguous(), "scale, low: contiguous");
  const at::Tensor xc = x.contiguous();
  at::Tensor qx = at::empty({M, K}, x.options().dtype(at::kChar));
  at::Tensor dx = at::empty({M, G}, x.options());
  at::Tensor sx = at::empty({M, G}, x.options());
  const float* X = xc.data_ptr<float>();
  int8_t* QX = qx.data_ptr<int8_t>();
  float* DX = dx.data_ptr<float>();
  float* SX = sx.data_ptr<float>();
  for (int64_t i = 0; i < M * G; ++i) DX[i] = quantize_group(X + i * kGroup, QX + i * kGroup, SX + i);
  at::Tensor y = at::empty({M, N}, x.options());
  const uint8_t* C = codes.data_ptr<uint8_t>();
  const uint16_t* D = reinterpret_cast<const uint16_t*>(scale.data_ptr<at::Half>());
  const uint16_t* L = reinterpret_cast<const uint16_t*>(low.data_ptr<at::Half>());
  float* Y = y.data_ptr<float>();
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    if (M < 4) {  // decode: four weight rows per pass over each input row
      product<4, 1>(M, K, N, n0, n1, C, D, L, QX, DX, SX, Y);
    } else {  // batches and prompts: two weight rows times four input rows
      product<2, 4>(M, K, N, n0, n1, C, D, L, QX, DX, SX, Y);
    }
  });
  return y;
}

}  // namespace

// The same op as AOTInductor's compiled step calls it directly (``aot_inductor.custom_ops_to_c_shims``), rather than
// through the dispatcher's boxed calls (tens of microseconds each, a product of 576 x 576 takes ~15).
extern "C" AOTI_TORCH_EXPORT AOTITorchError aoti_torch_cpu_q4_q8_linear(
    AtenTensorHandle x, AtenTensorHandle codes, AtenTensorHandle scale, AtenTensorHandle low, AtenTensorHandle* out) {
  AOTI_TORCH_CONVERT_EXCEPTION_TO_ERROR_CODE({
    using torch::aot_inductor::tensor_handle_to_tensor_pointer;
    at::Tensor y = q4_q8_linear(*tensor_handle_to_tensor_pointer(x), *tensor_handle_to_tensor_pointer(codes),
                                *tensor_handle_to_tensor_pointer(scale), *tensor_handle_to_tensor_pointer(low));
    *out = torch::aot_inductor::new_tensor_handle(std::move(y));
  });
}

TORCH_LIBRARY(llmx, m) { m.def("q4_q8_linear(Tensor x, Tensor codes, Tensor scale, Tensor low) -> Tensor"); }
TORCH_LIBRARY_IMPL(llmx, CPU, m) { m.impl("q4_q8_linear", &q4_q8_linear); }
