// Device tensors (engine/nn/tensor.cpp): fp16 weight storage rounds like a binary16 cast, weight views of every
// file dtype land in either storage with the right values, and bad element counts are refused.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "io/tensor_view.hpp"
#include "kernel_test_util.hpp"
#include "nn/weight_loader.hpp"

using namespace sdt;
using nn::DType;

namespace {

std::vector<std::uint16_t> read_halves(cl::Context& ctx, const nn::Tensor& t) {
  std::vector<std::uint16_t> out(static_cast<std::size_t>(t.numel()));
  ctx.read(t.buffer, out.data(), out.size() * 2);
  return out;
}

std::uint16_t half_bits(float f) {
  return std::bit_cast<std::uint16_t>(static_cast<_Float16>(f));
}

template <typename T>
io::TensorView view_of(const std::vector<T>& data, io::DType dtype, std::vector<std::int64_t> shape) {
  io::TensorView v;
  v.name = "test.weight";
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.data = reinterpret_cast<const std::byte*>(data.data());
  v.bytes = data.size() * sizeof(T);
  return v;
}

}  // namespace

TEST(Tensor, StoresFp16WeightsRoundedToNearestEven) {
  auto& ctx = test::kernel_context();
  const float denorm_min = 0x1p-24f;
  std::vector<float> values = {1.0f,
                               -0.0f,
                               65504.0f,
                               65519.0f,             // rounds down to the largest half
                               65520.0f,             // rounds up to Inf
                               1e-8f,                // below half the smallest subnormal: 0
                               denorm_min * 0.5f,    // exactly half of it: ties to even, 0
                               denorm_min * 0.75f,   // rounds up to the smallest subnormal
                               denorm_min * 1.5f,    // tie between 1 and 2 subnormal steps: 2
                               0x1p-14f * 0.999f,    // just under the smallest normal
                               1.0f + 0x1p-11f,      // tie: stays 1.0 (even)
                               1.0f + 3 * 0x1p-11f,  // tie: rounds up to even
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               1e30f};
  for (float f : test::random_floats(4000, 400, -70000.0f, 70000.0f)) values.push_back(f);
  for (float f : test::random_floats(4000, 401, -1e-4f, 1e-4f)) values.push_back(f);  // subnormal halves
  const nn::Tensor t = nn::upload_weight(ctx, values, {static_cast<std::int64_t>(values.size())}, DType::F16);
  EXPECT_EQ(t.dtype, DType::F16);
  EXPECT_EQ(t.bytes(), values.size() * 2);
  const auto halves = read_halves(ctx, t);
  for (std::size_t i = 0; i < values.size(); ++i)
    ASSERT_EQ(halves[i], half_bits(values[i])) << "value " << values[i] << " at " << i;

  const nn::Tensor nan = nn::upload_weight(ctx, {std::numeric_limits<float>::quiet_NaN()}, {1}, DType::F16);
  const auto nan_bits = read_halves(ctx, nan)[0];
  EXPECT_EQ(nan_bits & 0x7c00u, 0x7c00u);
  EXPECT_NE(nan_bits & 0x3ffu, 0u) << "NaN must stay NaN, not become Inf";
}

TEST(Tensor, UploadsWeightViewsOfEveryFileDtypeIntoEitherStorage) {
  auto& ctx = test::kernel_context();
  const auto values = test::random_floats(6 * 7, 410, -3.0f, 3.0f);
  std::vector<std::uint16_t> f16(values.size()), bf16(values.size());
  std::vector<float> f16_values(values.size()), bf16_values(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    f16[i] = half_bits(values[i]);
    f16_values[i] = static_cast<float>(std::bit_cast<_Float16>(f16[i]));
    bf16[i] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(values[i]) >> 16);  // truncation is fine here
    bf16_values[i] = std::bit_cast<float>(static_cast<std::uint32_t>(bf16[i]) << 16);
  }
  struct Source {
    io::TensorView view;
    std::vector<float> expected;
  };
  const std::vector<Source> sources = {{view_of(values, io::DType::F32, {6, 7}), values},
                                       {view_of(f16, io::DType::F16, {6, 7}), f16_values},
                                       {view_of(bf16, io::DType::BF16, {6, 7}), bf16_values}};
  for (const auto& [view, expected] : sources) {
    SCOPED_TRACE(io::to_string(view.dtype));
    const nn::Tensor as_f32 = nn::upload_weight(ctx, view, DType::F32);
    EXPECT_EQ(as_f32.shape, (std::vector<std::int64_t>{6, 7}));
    EXPECT_EQ(nn::download(ctx, as_f32), expected);
    // Another shape of the same count (the LDM VAE's 1×1-conv attention weights become linear weights).
    const nn::Tensor as_f16 = nn::upload_weight(ctx, view, DType::F16, {42, 1});
    EXPECT_EQ(as_f16.shape, (std::vector<std::int64_t>{42, 1}));
    const auto halves = read_halves(ctx, as_f16);
    for (std::size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(halves[i], half_bits(expected[i])) << i;
  }
}

TEST(Tensor, RefusesWeightsWhoseBytesOrShapeDoNotAdd) {
  auto& ctx = test::kernel_context();
  const std::vector<float> values(12, 0.5f);
  io::TensorView short_view = view_of(values, io::DType::F32, {4, 4});  // 16 elements, 12 present
  try {
    nn::upload_weight(ctx, short_view, DType::F32);
    FAIL() << "a view with too few bytes was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadModel);
    EXPECT_NE(e.message().find("test.weight"), std::string::npos) << e.message();
  }
  EXPECT_THROW(nn::upload_weight(ctx, view_of(values, io::DType::F32, {3, 4}), DType::F32, {5, 2}), Error);
  EXPECT_THROW(nn::upload_weight(ctx, values, {5}, DType::F16), Error);
  EXPECT_THROW(nn::upload(ctx, values, {2, 5}), Error);
}

TEST(Tensor, ReshapesWithoutCopyingAndRefusesOtherCounts) {
  auto& ctx = test::kernel_context();
  const auto values = test::random_floats(24, 420);
  nn::Tensor t = nn::upload(ctx, values, {2, 3, 4});
  const cl_mem handle = t.buffer.get();
  nn::Tensor r = std::move(t).reshaped({6, 4});
  EXPECT_EQ(r.buffer.get(), handle);
  EXPECT_EQ(r.shape, (std::vector<std::int64_t>{6, 4}));
  EXPECT_EQ(nn::download(ctx, r), values);
  EXPECT_THROW(std::move(r).reshaped({5, 5}), Error);
  EXPECT_EQ(nn::shape_string({320, 64, 64}), "[320, 64, 64]");
}

TEST(Tensor, DownloadsOnlyFp32Tensors) {
  auto& ctx = test::kernel_context();
  const nn::Tensor w = nn::upload_weight(ctx, test::random_floats(4, 430), {4}, DType::F16);
  EXPECT_THROW(nn::download(ctx, w), Error);
}
