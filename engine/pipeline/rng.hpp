// A random generator that reproduces PyTorch's CPU generator bit for bit:
// `g = torch.Generator('cpu').manual_seed(seed); torch.randn(shape, generator=g)` for float32 tensors,
// including successive draws from one generator. With it the same seed gives the same latents (and so the
// same image) as diffusers.
//
// Mirrors PyTorch: aten/src/ATen/core/MT19937RNGEngine.h (mt19937 seeded with seed mod 2^32),
// core/TransformationHelper.h (uniform_real: 24 random bits * 2^-24 for float, 53 of a 64-bit draw for double),
// core/DistributionsHelper.h (normal_distribution<double> with its cached second value) and
// native/cpu/DistributionTemplates.h (normal_fill_AVX2: blocks of 16, element i paired with i + 8, the last
// partial block recomputed from fresh draws; under 16 elements the scalar double-precision path).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

namespace sdt::pipeline {

class TorchGenerator {
 public:
  // torch.Generator('cpu').manual_seed(seed): any 64-bit seed; the engine keeps only the low 32 bits.
  explicit TorchGenerator(std::uint64_t seed = 67280421310721ull);

  // Re-seeds, dropping any cached normal value (as CPUGeneratorImpl::set_current_seed does).
  void manual_seed(std::uint64_t seed);
  std::uint64_t initial_seed() const { return seed_; }

  // torch.randn(shape, generator=this) for a contiguous float32 tensor of `numel` elements, in memory
  // order. The shape itself does not matter, only its element count: torch switches to a different
  // algorithm below 16 elements, so randn(15) is not the first 15 values of randn(16).
  std::vector<float> randn(std::size_t numel);
  void randn(float* out, std::size_t numel);

  // The raw engine draws (CPUGeneratorImpl::random / random64), for tests and other distributions.
  std::uint32_t random();
  std::uint64_t random64();

 private:
  float uniform_float();    // [0, 1): 24 bits
  double uniform_double();  // [0, 1): 53 bits of a 64-bit draw
  double normal_double();   // at::normal_distribution<double>, with the cached second value

  std::uint64_t seed_ = 0;
  // std::mt19937 is specified exactly by the C++ standard (seeding recurrence, twist and tempering) and
  // equals at::mt19937 seeded with a 32-bit value, so the stream is the same on every platform.
  std::mt19937 engine_;
  std::optional<double> next_double_normal_;
};

// The Box-Muller transform of one block of 16 uniforms in place, computed exactly as PyTorch's AVX2 kernel
// does (exposed for tests).
void torch_normal_fill_16(float* data);
// torch_normal_fill_16 on `blocks` consecutive blocks; with `allow_fma`, by the copy compiled for the FMA
// instruction where the CPU has it (the same bits: std::fma is exact either way).
void normal_fill_blocks(float* data, std::size_t blocks, bool allow_fma = true);
// Whether normal_fill_blocks has an FMA copy on this CPU (tests).
bool normal_fill_uses_fma();

}  // namespace sdt::pipeline
