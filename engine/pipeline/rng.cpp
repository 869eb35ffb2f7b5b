// PyTorch-compatible CPU random normals. See rng.hpp for the references this mirrors.
//
// Why the Box-Muller arithmetic below is written out by hand: PyTorch's x86-64 wheels fill float tensors of
// 16+ elements with normal_fill_16_AVX2, which evaluates log, sin and cos with the Cephes polynomials of
// avx_mathfun.h, and GCC compiles that file with -mfma and contracts its mul+add pairs into fused
// multiply-adds. std::log/std::cos round differently in the last bit for about 1 value in 6 (up to 2e-6 off,
// more than the 1e-6 we promise); the same polynomials with the same fused operations, spelled with std::fma,
// reproduce every value of the fixtures bit for bit. std::fma is exact on every platform (hardware or
// software), so no compiler flag changes the result. No other multiply feeds an add in this file, so
// floating-point contraction by the compiler cannot change anything either. std::fma is a library call where the
// build targets no FMA instruction (x86-64's baseline), about 0.7 ms for a 512² image's 16384 normals, which the
// device waited for between the text encoder and the UNet (docs/PERFORMANCE.md, 2026-12-03): on x86 CPUs that
// have FMA (all since 2013) the blocks are transformed by a copy of the same code compiled for it, where
// std::fma is the instruction, the same exact operation.
#include "pipeline/rng.hpp"

#include <cmath>
#include <cstring>

namespace sdt::pipeline {

namespace {

constexpr std::size_t kBlock = 16;  // normal_fill works on blocks of 16: element i pairs with i + 8

float bits_to_float(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
std::uint32_t float_to_bits(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// Inlined into both copies of the block loop below (the plain one and, where built, the FMA one).
#if defined(__GNUC__)
#define SDT_RNG_INLINE inline __attribute__((always_inline))
#else
#define SDT_RNG_INLINE inline
#endif

// log256_ps of avx_mathfun.h for one lane, x in (0, 1] (never 0 or denormal here: x = 1 - u >= 2^-24).
SDT_RNG_INLINE float cephes_logf(float x) {
  const std::uint32_t bits = float_to_bits(x);
  float e = static_cast<float>(static_cast<int>(bits >> 23) - 0x7f);
  float m = bits_to_float((bits & ~0x7f800000u) | 0x3f000000u);  // mantissa in [0.5, 1)
  e = e + 1.0f;
  float t;
  if (m < 0.707106781186547524f) {
    e = e - 1.0f;
    t = (m - 1.0f) + m;
  } else {
    t = m - 1.0f;
  }
  const float z = t * t;
  float y = 7.0376836292E-2f;
  y = std::fma(y, t, -1.1514610310E-1f);
  y = std::fma(y, t, 1.1676998740E-1f);
  y = std::fma(y, t, -1.2420140846E-1f);
  y = std::fma(y, t, 1.4249322787E-1f);
  y = std::fma(y, t, -1.6668057665E-1f);
  y = std::fma(y, t, 2.0000714765E-1f);
  y = std::fma(y, t, -2.4999993993E-1f);
  y = std::fma(y, t, 3.3333331174E-1f);
  y = y * t;
  y = std::fma(y, z, e * -2.12194440e-4f);
  y = std::fma(-z, 0.5f, y);
  const float r = t + y;
  return std::fma(e, 0.693359375f, r);
}

// sincos256_ps of avx_mathfun.h for one lane (x in [0, 2*pi) here).
SDT_RNG_INLINE void cephes_sincosf(float x_in, float* sin_out, float* cos_out) {
  float x = std::fabs(x_in);
  const bool negative = std::signbit(x_in);
  int j = static_cast<int>(x * 1.27323954473516f);  // 4 / pi, truncated like cvttps
  j = (j + 1) & ~1;
  const float y = static_cast<float>(j);
  const bool swap_sin_sign = (j & 4) != 0;
  const bool sin_uses_sin_poly = (j & 2) == 0;
  const bool cos_negative = (~(j - 2) & 4) != 0;
  // extended-precision range reduction: x - y * pi/4 in three parts
  x = std::fma(y, -0.78515625f, x);
  x = std::fma(y, -2.4187564849853515625e-4f, x);
  x = std::fma(y, -3.77489497744594108e-8f, x);
  const float z = x * x;
  float cos_poly = 2.443315711809948E-005f;
  cos_poly = std::fma(cos_poly, z, -1.388731625493765E-003f);
  cos_poly = std::fma(cos_poly, z, 4.166664568298827E-002f);
  cos_poly = cos_poly * z;
  cos_poly = std::fma(cos_poly, z, -(z * 0.5f));
  cos_poly = cos_poly + 1.0f;
  float sin_poly = -1.9515295891E-4f;
  sin_poly = std::fma(sin_poly, z, 8.3321608736E-3f);
  sin_poly = std::fma(sin_poly, z, -1.6666654611E-1f);
  sin_poly = sin_poly * z;
  sin_poly = std::fma(sin_poly, x, x);
  float s = sin_uses_sin_poly ? sin_poly : cos_poly;
  float c = sin_uses_sin_poly ? cos_poly : sin_poly;
  if (negative != swap_sin_sign) s = -s;
  if (cos_negative) c = -c;
  *sin_out = s;
  *cos_out = c;
}

SDT_RNG_INLINE void normal_fill_16(float* data) {
  // 2 * pi rounded to float once, as _mm256_set1_ps(2.0f * c10::pi<double>) does.
  const float two_pi = static_cast<float>(2.0 * 3.14159265358979323846);
  for (std::size_t j = 0; j < kBlock / 2; ++j) {
    const float u1 = 1.0f - data[j];  // [0, 1) -> (0, 1] for the log
    const float u2 = data[j + 8];
    const float radius = std::sqrt(-2.0f * cephes_logf(u1));
    const float theta = two_pi * u2;
    float s, c;
    cephes_sincosf(theta, &s, &c);
    // mean 0, std 1: the kernel's final fmadd(n, std, mean) leaves n unchanged
    data[j] = radius * c;
    data[j + 8] = radius * s;
  }
}

void fill_blocks_plain(float* data, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) normal_fill_16(data + b * kBlock);
}

#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("fma"))) void fill_blocks_fma(float* data, std::size_t blocks) {
  for (std::size_t b = 0; b < blocks; ++b) normal_fill_16(data + b * kBlock);
}
bool cpu_has_fma() {
  static const bool has = __builtin_cpu_supports("fma");
  return has;
}
#else
void fill_blocks_fma(float* data, std::size_t blocks) {  // never called: cpu_has_fma() says no
  fill_blocks_plain(data, blocks);
}
bool cpu_has_fma() {
  return false;
}
#endif

}  // namespace

void torch_normal_fill_16(float* data) {
  normal_fill_blocks(data, 1);
}

void normal_fill_blocks(float* data, std::size_t blocks, bool allow_fma) {
  if (allow_fma && cpu_has_fma())
    fill_blocks_fma(data, blocks);
  else
    fill_blocks_plain(data, blocks);
}

bool normal_fill_uses_fma() {
  return cpu_has_fma();
}

TorchGenerator::TorchGenerator(std::uint64_t seed) {
  manual_seed(seed);
}

void TorchGenerator::manual_seed(std::uint64_t seed) {
  seed_ = seed;
  engine_.seed(static_cast<std::uint32_t>(seed & 0xffffffffu));
  next_double_normal_.reset();
}

std::uint32_t TorchGenerator::random() {
  return static_cast<std::uint32_t>(engine_());
}

std::uint64_t TorchGenerator::random64() {
  const std::uint64_t hi = random();
  const std::uint64_t lo = random();
  return (hi << 32) | lo;
}

float TorchGenerator::uniform_float() {
  return static_cast<float>(random() & ((1u << 24) - 1)) * (1.0f / static_cast<float>(1u << 24));
}

double TorchGenerator::uniform_double() {
  return static_cast<double>(random64() & ((std::uint64_t{1} << 53) - 1)) *
         (1.0 / static_cast<double>(std::uint64_t{1} << 53));
}

double TorchGenerator::normal_double() {
  if (next_double_normal_) {
    const double cached = *next_double_normal_;
    next_double_normal_.reset();
    return cached;
  }
  // Note the roles: the first uniform sets the angle, the second the radius (unlike normal_fill).
  const double u1 = uniform_double();
  const double u2 = uniform_double();
  const double radius = std::sqrt(-2.0 * std::log1p(-u2));
  const double theta = 2.0 * 3.14159265358979323846 * u1;
  next_double_normal_ = radius * std::sin(theta);
  return radius * std::cos(theta);
}

std::vector<float> TorchGenerator::randn(std::size_t numel) {
  std::vector<float> out(numel);
  randn(out.data(), numel);
  return out;
}

void TorchGenerator::randn(float* out, std::size_t numel) {
  if (numel < kBlock) {
    // The scalar path: one double-precision normal per element, rounded to float. Its cached second value
    // stays in the generator and is the first value of the next small draw.
    for (std::size_t i = 0; i < numel; ++i) out[i] = static_cast<float>(normal_double());
    return;
  }
  // All uniforms first, then the transform block by block.
  for (std::size_t i = 0; i < numel; ++i) out[i] = uniform_float();
  normal_fill_blocks(out, numel / kBlock);
  if (numel % kBlock != 0) {
    // The last partial block: PyTorch redraws 16 fresh uniforms for the LAST 16 elements (overlapping the
    // previous full block) and transforms them again.
    float* tail = out + numel - kBlock;
    for (std::size_t i = 0; i < kBlock; ++i) tail[i] = uniform_float();
    torch_normal_fill_16(tail);
  }
}

}  // namespace sdt::pipeline
