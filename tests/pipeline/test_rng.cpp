// TorchGenerator against torch.randn: every rng_* fixture, successive draws, 64-bit seeds, and the
// double-precision path torch takes below 16 elements.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "fixture_tensors.hpp"
#include "pipeline/rng.hpp"
#include "test_common.hpp"

namespace sdt::pipeline {
namespace {

using test::FixtureTensors;

// The fixtures promise 1e-6 absolute; this implementation is in fact bit-exact on all of them.
constexpr double kTolerance = 1e-6;

std::size_t numel_of(const nlohmann::json& shape) {
  std::size_t n = 1;
  for (const auto& d : shape) n *= d.get<std::size_t>();
  return n;
}

void expect_matches(const std::vector<float>& got, const std::vector<float>& expected, const std::string& name) {
  ASSERT_EQ(got.size(), expected.size()) << name;
  const auto diff = test::compare(got, expected);
  std::size_t exact = 0;
  for (std::size_t i = 0; i < got.size(); ++i) exact += got[i] == expected[i];
  std::printf("%-24s %6zu values: %s, %zu bit-exact\n", name.c_str(), got.size(), test::to_string(diff).c_str(), exact);
  EXPECT_LE(diff.max_abs, kTolerance) << name << " worst at " << diff.worst_index;
  EXPECT_EQ(diff.non_finite, 0u) << name;
}

TEST(TorchGenerator, MatchesEveryRngFixture) {
  const auto refs = test::fixture_refs();
  int checked = 0;
  for (const auto& entry : refs["rng"]) {
    if (!entry.contains("tensor")) continue;
    TorchGenerator generator(entry["seed"].get<std::uint64_t>());
    const std::string name = entry["tensor"];
    expect_matches(generator.randn(numel_of(entry["shape"])), FixtureTensors::refs().f32(name), name);
    ++checked;
  }
  EXPECT_GE(checked, 12);
}

TEST(TorchGenerator, SuccessiveDrawsContinueTheStream) {
  const auto refs = test::fixture_refs();
  const auto seed = refs["cases"][0]["seed"].get<std::uint64_t>();  // rng_seq_* use the first case seed
  const auto a = FixtureTensors::refs().f32("rng_seq_a");
  const auto b = FixtureTensors::refs().f32("rng_seq_b");
  TorchGenerator generator(seed);
  expect_matches(generator.randn(a.size()), a, "rng_seq_a");
  expect_matches(generator.randn(b.size()), b, "rng_seq_b");
}

TEST(TorchGenerator, SeedIsTakenModulo2To32) {
  const auto expected = FixtureTensors::refs().f32("rng_1234567_1x4x3x5");
  TorchGenerator generator(1234567 + (std::uint64_t{3} << 32));
  EXPECT_EQ(generator.initial_seed(), 1234567 + (std::uint64_t{3} << 32));
  expect_matches(generator.randn(expected.size()), expected, "seed 1234567 + 3 * 2^32");
}

TEST(TorchGenerator, ManualSeedRestartsTheStream) {
  TorchGenerator generator(42);
  const auto first = generator.randn(100);
  generator.randn(7);  // leaves a cached normal behind
  generator.manual_seed(42);
  EXPECT_EQ(generator.randn(100), first);
}

TEST(TorchGenerator, EngineIsMt19937) {
  // The reference values of mt19937 (C++ standard [rand.predef]): the 10000th draw after seeding 5489.
  TorchGenerator generator(5489);
  EXPECT_EQ(generator.random(), 3499211612u);
  for (int i = 1; i < 9999; ++i) generator.random();
  EXPECT_EQ(generator.random(), 4123659995u);
  TorchGenerator other(5489);
  EXPECT_EQ(other.random64(), (std::uint64_t{3499211612u} << 32) | 581869302u);  // high word first
}

TEST(TorchGenerator, SmallTensorsTakeTheDoublePrecisionPath) {
  // torch.manual_seed(0); torch.randn(2, 3) and torch.manual_seed(42); torch.randn(2, 3), as printed in
  // PyTorch's own documentation and countless tutorials (4 decimals).
  const std::vector<float> seed0 = {1.5410f, -0.2934f, -2.1788f, 0.5684f, -1.0845f, -1.3986f};
  const std::vector<float> seed42 = {0.3367f, 0.1288f, 0.2345f, 0.2303f, -1.1229f, -0.1863f};
  for (const auto& [seed, expected] : {std::pair{0, seed0}, std::pair{42, seed42}}) {
    TorchGenerator generator(static_cast<std::uint64_t>(seed));
    const auto got = generator.randn(6);
    for (std::size_t i = 0; i < 6; ++i) EXPECT_NEAR(got[i], expected[i], 5e-5) << "seed " << seed << " [" << i << "]";
  }
}

TEST(TorchGenerator, SmallDrawsShareTheCachedSecondValue) {
  // Box-Muller makes values in pairs; an odd-sized small draw leaves the second one cached for the next
  // small draw, so randn(3) then randn(3) equals randn(6).
  TorchGenerator split(7);
  auto first = split.randn(3);
  const auto second = split.randn(3);
  first.insert(first.end(), second.begin(), second.end());
  EXPECT_EQ(first, TorchGenerator(7).randn(6));
  // A large draw neither uses nor clears that cache.
  TorchGenerator mixed(7);
  mixed.randn(1);
  mixed.randn(32);
  EXPECT_EQ(mixed.randn(1)[0], TorchGenerator(7).randn(2)[1]);
}

TEST(TorchGenerator, PartialLastBlockIsRecomputedFromFreshDraws) {
  // 20 elements: one block of 16, then the LAST 16 (elements 4..19) redrawn from 16 new uniforms.
  TorchGenerator generator(3);
  const auto twenty = generator.randn(20);
  TorchGenerator reference(3);
  const auto sixteen = reference.randn(16);
  EXPECT_TRUE(std::equal(sixteen.begin(), sixteen.begin() + 4, twenty.begin()));
  TorchGenerator raw(3);
  std::vector<float> tail(16);
  for (int i = 0; i < 20; ++i) raw.random();  // the 20 uniforms of the first pass
  for (float& u : tail) u = static_cast<float>(raw.random() & 0xFFFFFF) / 16777216.0f;
  torch_normal_fill_16(tail.data());
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), twenty.begin() + 4));
}

// The block transform's FMA copy (used where the CPU has the instruction) gives the plain copy's bits: both are
// the same exact fused operations. 4096 blocks of uniforms from the generator, and the edges of its range.
TEST(TorchGenerator, TheFmaCopyOfTheBlockTransformGivesTheSameBits) {
  if (!normal_fill_uses_fma()) GTEST_SKIP() << "no FMA copy on this CPU: only the plain transform runs here";
  TorchGenerator g(20261203);
  std::vector<float> uniforms(4096 * 16);
  for (float& u : uniforms) u = static_cast<float>(g.random() & 0xFFFFFF) / 16777216.0f;
  for (std::size_t i = 0; i < 16; ++i) {  // the smallest and largest uniforms the generator makes
    uniforms[i] = 0.0f;
    uniforms[16 + i] = 1.0f - 1.0f / (1 << 24);
  }
  std::vector<float> plain = uniforms, fused = uniforms;
  normal_fill_blocks(plain.data(), plain.size() / 16, false);
  normal_fill_blocks(fused.data(), fused.size() / 16, true);
  for (std::size_t i = 0; i < plain.size(); ++i)
    ASSERT_EQ(std::memcmp(&plain[i], &fused[i], sizeof(float)), 0) << "element " << i << ": " << plain[i] << " against "
                                                                     << fused[i] << " from uniform " << uniforms[i];
}

}  // namespace
}  // namespace sdt::pipeline
