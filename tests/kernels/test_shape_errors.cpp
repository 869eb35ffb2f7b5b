// Every op refuses shapes that do not fit with an sdt::Error naming the op and the shapes involved, before
// anything is enqueued.
#include "kernel_test_util.hpp"

using namespace sdt;
using nn::DType;

namespace {

nn::Tensor act(std::vector<std::int64_t> shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return nn::upload(test::kernel_context(), test::random_floats(static_cast<std::size_t>(n), 500), std::move(shape));
}

nn::Tensor weight(std::vector<std::int64_t> shape, DType storage = DType::F32) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return nn::upload_weight(test::kernel_context(), test::random_floats(static_cast<std::size_t>(n), 501),
                           std::move(shape), storage);
}

}  // namespace

TEST(ShapeErrors, LinearNamesItsOperands) {
  auto& ctx = test::kernel_context();
  const auto x = act({4, 8});
  test::expect_shape_error([&] { nn::linear(ctx, x, weight({3, 9}), nullptr); }, "linear", {"[4, 8]", "[3, 9]"});
  const auto w = weight({3, 8});
  const auto b = weight({4});
  test::expect_shape_error([&] { nn::linear(ctx, x, w, &b); }, "linear", {"b [3]", "b [4]"});
  const auto r = act({4, 4});
  test::expect_shape_error([&] { nn::linear(ctx, x, w, nullptr, nn::Act::None, &r); }, "linear", {"[4, 4]", "[4, 3]"});
  const auto half_x = weight({4, 8}, DType::F16);
  test::expect_shape_error([&] { nn::linear(ctx, half_x, w, nullptr); }, "linear", {"f16"});
}

TEST(ShapeErrors, Conv2dNamesItsOperands) {
  auto& ctx = test::kernel_context();
  const auto x = act({4, 8, 8});
  test::expect_shape_error(
      [&] {
        nn::conv2d(ctx, x, weight({5, 3, 3, 3}), nullptr, 1, 1);
      },
      "conv2d", {"[4, 8, 8]", "[5, 3, 3, 3]"});
  test::expect_shape_error(
      [&] {
        nn::conv2d(ctx, x, weight({5, 4, 5, 5}), nullptr, 1, 2);
      },
      "conv2d", {"[5, 4, 5, 5]"});
  const auto w = weight({5, 4, 3, 3});
  const auto r = act({5, 8, 8});
  test::expect_shape_error([&] { nn::conv2d(ctx, x, w, nullptr, 2, 1, &r); }, "conv2d", {"[5, 8, 8]", "[5, 4, 4]"});
  test::expect_shape_error([&] { nn::conv2d(ctx, x, w, nullptr, 0, 1); }, "conv2d", {"stride 0"});
  test::expect_shape_error([&] { nn::conv2d(ctx, act({4, 1, 1}), w, nullptr, 1, 0); }, "conv2d", {"[4, 1, 1]"});
  test::expect_shape_error([&] { nn::conv2d(ctx, act({4, 64}), w, nullptr, 1, 1); }, "conv2d", {"[4, 64]"});
}

TEST(ShapeErrors, NormsNameTheirOperands) {
  auto& ctx = test::kernel_context();
  const auto x = act({10, 4, 4});
  const auto g10 = weight({10}), g8 = weight({8});
  test::expect_shape_error([&] { nn::group_norm(ctx, x, g10, g10, 4, 1e-5f, false); }, "group_norm",
                           {"[10, 4, 4]", "4 groups"});
  test::expect_shape_error([&] { nn::group_norm(ctx, x, g8, g10, 5, 1e-5f, false); }, "group_norm",
                           {"gamma", "[10]", "[8]"});
  const auto t = act({3, 10});
  test::expect_shape_error([&] { nn::layer_norm(ctx, t, g10, g8, 1e-5f); }, "layer_norm", {"beta", "[8]"});
  test::expect_shape_error([&] { nn::layer_norm(ctx, x, g10, g10, 1e-5f); }, "layer_norm", {"[10, 4, 4]"});
}

TEST(ShapeErrors, AttentionNamesItsOperands) {
  auto& ctx = test::kernel_context();
  const auto q = act({6, 128});
  const auto k = act({5, 128});
  test::expect_shape_error([&] { nn::attention(ctx, q, k, k, 3, false); }, "attention", {"3 heads", "[6, 128]"});
  test::expect_shape_error(
      [&] {
        nn::attention(ctx, q, act({5, 64}), act({5, 64}), 2, false);
      },
      "attention", {"[5, 64]", "[6, 128]"});
  test::expect_shape_error([&] { nn::attention(ctx, q, k, act({4, 128}), 2, false); }, "attention", {"[4, 128]"});
  const auto wide = act({2, 1024});
  test::expect_shape_error([&] { nn::attention(ctx, wide, wide, wide, 1, false); }, "attention", {"1024", "512"});
}

TEST(ShapeErrors, ElementwiseAndLayoutOpsNameTheirOperands) {
  auto& ctx = test::kernel_context();
  const auto a = act({3, 4, 5});
  const auto b = act({3, 5, 4});
  test::expect_shape_error([&] { nn::add(ctx, a, b); }, "add", {"[3, 4, 5]", "[3, 5, 4]"});
  test::expect_shape_error([&] { nn::axpby(ctx, 1.0f, a, 2.0f, b); }, "axpby", {"[3, 4, 5]", "[3, 5, 4]"});
  test::expect_shape_error([&] { nn::add_channel_bias(ctx, a, act({4})); }, "add_channel_bias", {"[3, 4, 5]", "[4]"});
  test::expect_shape_error([&] { nn::geglu(ctx, act({2, 7})); }, "geglu", {"[2, 7]"});
  test::expect_shape_error([&] { nn::concat_channels(ctx, a, b); }, "concat_channels", {"[3, 4, 5]", "[3, 5, 4]"});
  test::expect_shape_error([&] { nn::upsample_nearest2x(ctx, act({4, 5})); }, "upsample_nearest2x", {"[4, 5]"});
  test::expect_shape_error([&] { nn::transpose(ctx, a); }, "transpose", {"[3, 4, 5]"});
  test::expect_shape_error([&] { nn::to_rgb8(ctx, act({4, 2, 2}), 0.5f, 0.5f); }, "to_rgb8", {"[4, 2, 2]"});
  test::expect_shape_error([&] { nn::tanh_clamp(ctx, a, 0.0f); }, "tanh_clamp", {"magnitude"});
  test::expect_shape_error([&] { nn::timestep_embedding(ctx, 1.0f, 1, true, 0.0f); }, "timestep_embedding", {"dim"});
}

TEST(ShapeErrors, EmbedTokensRefusesIdsOutsideTheTable) {
  auto& ctx = test::kernel_context();
  const auto table = weight({10, 8});
  const auto pos = weight({4, 8});
  test::expect_shape_error([&] { nn::embed_tokens(ctx, {1, 10}, table, pos); }, "embed_tokens", {"10", "position 1"});
  test::expect_shape_error([&] { nn::embed_tokens(ctx, {1, -1}, table, pos); }, "embed_tokens", {"-1"});
  test::expect_shape_error([&] { nn::embed_tokens(ctx, {1, 2, 3, 4, 5}, table, pos); }, "embed_tokens", {"[4, 8]"});
  test::expect_shape_error([&] { nn::embed_tokens(ctx, {1}, table, weight({4, 9})); }, "embed_tokens", {"[4, 9]"});
}
