// Element-wise, layout, embedding and image kernels (kernels/elementwise.cl, kernels/image.cl) against plain
// loops: activations, GEGLU, adds, axpby, scale, tanh clamp, nearest upsampling, channel concat, transpose,
// token embedding, the timestep embedding, RGB8 conversion with numpy's rounding, and the NaN/Inf count.
// Layout ops move values untouched, so they must match bit for bit.
#include <cmath>
#include <limits>

#include "kernel_test_util.hpp"
#include "nn/weight_scope.hpp"

using namespace sdt;
using nn::Act;
using nn::DType;

namespace {

// Transcendental built-ins in OpenCL C are allowed a few ulp (erf 16); 1e-6 of the largest output covers that.
constexpr double kRtol = 1e-6;

}  // namespace

TEST(Activation, MatchesExactGeluSiluAndRelu) {
  auto& ctx = test::kernel_context();
  for (int n : {1001, 320 * 16 * 16}) {
    const auto x_host = test::random_floats(n, 300, -6.0f, 6.0f);
    const nn::Tensor x = nn::upload(ctx, x_host, {n});
    for (Act act : {Act::None, Act::SiLU, Act::GELU, Act::ReLU}) {
      const cl_mem poisoned = test::poison_next_output(ctx, x.bytes());
      const nn::Tensor y = nn::activation(ctx, x, act);
      EXPECT_EQ(y.buffer.get(), poisoned);
      std::vector<float> expected(x_host.size());
      for (std::size_t i = 0; i < x_host.size(); ++i)
        expected[i] = static_cast<float>(ref::act(x_host[i], test::to_ref(act)));
      test::expect_close(ctx, y, expected, kRtol,
                         "activation " + std::to_string(static_cast<int>(act)) + " n " + std::to_string(n));
    }
  }
}

TEST(Geglu, GatesTheFirstHalfWithGeluOfTheSecond) {
  auto& ctx = test::kernel_context();
  for (auto [T, F] : {std::pair{256, 1280}, std::pair{13, 7}}) {
    const auto x_host = test::random_floats(static_cast<std::size_t>(T) * 2 * F, 310, -4.0f, 4.0f);
    const nn::Tensor x = nn::upload(ctx, x_host, {T, 2 * F});
    const cl_mem poisoned = test::poison_next_output(ctx, static_cast<std::size_t>(T) * F * 4);
    const nn::Tensor y = nn::geglu(ctx, x);
    EXPECT_EQ(y.buffer.get(), poisoned);
    ASSERT_EQ(y.shape, (std::vector<std::int64_t>{T, F}));
    std::vector<float> expected(static_cast<std::size_t>(T) * F);
    for (int t = 0; t < T; ++t)
      for (int f = 0; f < F; ++f) {
        const double a = x_host[static_cast<std::size_t>(t) * 2 * F + f];
        const double g = x_host[static_cast<std::size_t>(t) * 2 * F + F + f];
        expected[static_cast<std::size_t>(t) * F + f] = static_cast<float>(a * ref::act(g, ref::Act::GELU));
      }
    test::expect_close(ctx, y, expected, kRtol, "geglu " + std::to_string(T) + "x" + std::to_string(2 * F));
  }
}

TEST(Elementwise, AddAxpbyScaleAndTanhClampMatchTheirFormulas) {
  auto& ctx = test::kernel_context();
  const int n = 4 * 64 * 64 + 3;
  const auto a_host = test::random_floats(n, 320, -8.0f, 8.0f);
  const auto b_host = test::random_floats(n, 321, -8.0f, 8.0f);
  const nn::Tensor a = nn::upload(ctx, a_host, {n});
  const nn::Tensor b = nn::upload(ctx, b_host, {n});
  const float alpha = 0.7f, beta = -14.6146f, s = 1.0f / 0.18215f, magnitude = 3.0f;
  std::vector<float> sum(n), lerp(n), scaled(n), clamped(n);
  for (int i = 0; i < n; ++i) {
    sum[i] = a_host[i] + b_host[i];
    lerp[i] = static_cast<float>(double(alpha) * a_host[i] + double(beta) * b_host[i]);
    scaled[i] = static_cast<float>(double(a_host[i]) * s);
    clamped[i] = static_cast<float>(std::tanh(double(a_host[i]) / magnitude) * magnitude);
  }
  test::poison_next_output(ctx, a.bytes());
  test::expect_close(ctx, nn::add(ctx, a, b), sum, 0, "add");  // one rounding, the same on both sides
  test::poison_next_output(ctx, a.bytes());
  test::expect_close(ctx, nn::axpby(ctx, alpha, a, beta, b), lerp, kRtol, "axpby");
  test::poison_next_output(ctx, a.bytes());
  test::expect_close(ctx, nn::scale(ctx, a, s), scaled, kRtol, "scale");
  test::poison_next_output(ctx, a.bytes());
  test::expect_close(ctx, nn::tanh_clamp(ctx, a, magnitude), clamped, kRtol, "tanh_clamp");
}

TEST(Elementwise, AddsAPerChannelBias) {
  auto& ctx = test::kernel_context();
  for (auto [C, H, W] : {std::tuple{320, 16, 16}, std::tuple{13, 7, 5}}) {
    const auto x_host = test::random_floats(static_cast<std::size_t>(C) * H * W, 330);
    const auto v_host = test::random_floats(C, 331, -3.0f, 3.0f);
    const nn::Tensor x = nn::upload(ctx, x_host, {C, H, W});
    const nn::Tensor v = nn::upload(ctx, v_host, {C});
    const cl_mem poisoned = test::poison_next_output(ctx, x.bytes());
    const nn::Tensor y = nn::add_channel_bias(ctx, x, v);
    EXPECT_EQ(y.buffer.get(), poisoned);
    std::vector<float> expected(x_host.size());
    for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = x_host[i] + v_host[i / (H * W)];
    test::expect_close(ctx, y, expected, 0, "add_channel_bias " + std::to_string(C));
  }
}

TEST(Layout, UpsamplesNearestTwoTimes) {
  auto& ctx = test::kernel_context();
  for (auto [C, H, W] : {std::tuple{320, 8, 8}, std::tuple{3, 5, 7}}) {
    const auto x_host = test::random_floats(static_cast<std::size_t>(C) * H * W, 340);
    const nn::Tensor x = nn::upload(ctx, x_host, {C, H, W});
    const cl_mem poisoned = test::poison_next_output(ctx, x.bytes() * 4);
    const nn::Tensor y = nn::upsample_nearest2x(ctx, x);
    EXPECT_EQ(y.buffer.get(), poisoned);
    ASSERT_EQ(y.shape, (std::vector<std::int64_t>{C, 2 * H, 2 * W}));
    std::vector<float> expected(x_host.size() * 4);
    for (int c = 0; c < C; ++c)
      for (int i = 0; i < 2 * H; ++i)
        for (int j = 0; j < 2 * W; ++j)
          expected[(static_cast<std::size_t>(c) * 2 * H + i) * 2 * W + j] =
              x_host[(static_cast<std::size_t>(c) * H + i / 2) * W + j / 2];
    EXPECT_EQ(nn::download(ctx, y), expected);
  }
}

TEST(Layout, ConcatenatesChannels) {
  auto& ctx = test::kernel_context();
  for (auto [C1, C2, H, W] : {std::tuple{640, 320, 8, 8}, std::tuple{13, 4, 7, 5}}) {
    auto a_host = test::random_floats(static_cast<std::size_t>(C1) * H * W, 350);
    const auto b_host = test::random_floats(static_cast<std::size_t>(C2) * H * W, 351);
    const nn::Tensor a = nn::upload(ctx, a_host, {C1, H, W});
    const nn::Tensor b = nn::upload(ctx, b_host, {C2, H, W});
    const cl_mem poisoned = test::poison_next_output(ctx, a.bytes() + b.bytes());
    const nn::Tensor y = nn::concat_channels(ctx, a, b);
    EXPECT_EQ(y.buffer.get(), poisoned);
    ASSERT_EQ(y.shape, (std::vector<std::int64_t>{C1 + C2, H, W}));
    a_host.insert(a_host.end(), b_host.begin(), b_host.end());
    EXPECT_EQ(nn::download(ctx, y), a_host);
  }
}

TEST(Layout, Transposes) {
  auto& ctx = test::kernel_context();
  for (auto [A, B] : {std::pair{320, 256}, std::pair{1024, 77}, std::pair{13, 127}, std::pair{1, 5}}) {
    const auto x_host = test::random_floats(static_cast<std::size_t>(A) * B, 360);
    const nn::Tensor x = nn::upload(ctx, x_host, {A, B});
    const cl_mem poisoned = test::poison_next_output(ctx, x.bytes());
    const nn::Tensor y = nn::transpose(ctx, x);
    EXPECT_EQ(y.buffer.get(), poisoned);
    ASSERT_EQ(y.shape, (std::vector<std::int64_t>{B, A}));
    std::vector<float> expected(x_host.size());
    for (int i = 0; i < A; ++i)
      for (int j = 0; j < B; ++j)
        expected[static_cast<std::size_t>(j) * A + i] = x_host[static_cast<std::size_t>(i) * B + j];
    EXPECT_EQ(nn::download(ctx, y), expected) << A << "x" << B;
  }
}

TEST(Layout, ToTokensAppliesThePerChannelAffineAndFromTokensAddsTheResidual) {
  // A transformer's way into tokens (a group norm's scale and shift per channel on the way) and back (its input
  // added): SD-Turbo's 320 channels at 64x64 and odd shapes, poisoned outputs, against plain loops (fma as the
  // kernel: exact).
  auto& ctx = test::kernel_context();
  for (auto [C, H, W] : {std::tuple{320, 64, 64}, std::tuple{37, 5, 7}, std::tuple{1, 3, 1}, std::tuple{70, 1, 33}}) {
    SCOPED_TRACE(std::to_string(C) + "x" + std::to_string(H) + "x" + std::to_string(W));
    const std::size_t S = static_cast<std::size_t>(H) * W, n = static_cast<std::size_t>(C) * S;
    const auto x_host = test::random_floats(n, 370), affine_host = test::random_floats(2 * C, 371, -2.0f, 2.0f);
    const nn::Tensor x = nn::upload(ctx, x_host, {C, H, W}), affine = nn::upload(ctx, affine_host, {C, 2});
    const cl_mem poisoned = test::poison_next_output(ctx, x.bytes());
    const nn::Tensor tokens = nn::to_tokens(ctx, x, &affine);
    EXPECT_EQ(tokens.buffer.get(), poisoned);
    ASSERT_EQ(tokens.shape, (std::vector<std::int64_t>{static_cast<std::int64_t>(S), C}));
    std::vector<float> expected(n);
    for (std::size_t c = 0; c < static_cast<std::size_t>(C); ++c)
      for (std::size_t s = 0; s < S; ++s)
        expected[s * C + c] = std::fma(x_host[c * S + s], affine_host[2 * c], affine_host[2 * c + 1]);
    EXPECT_EQ(nn::download(ctx, tokens), expected);

    const auto residual_host = test::random_floats(n, 372);
    const nn::Tensor residual = nn::upload(ctx, residual_host, {C, H, W});
    const cl_mem poisoned_back = test::poison_next_output(ctx, x.bytes());
    const nn::Tensor back = nn::from_tokens(ctx, tokens, H, W, &residual);
    EXPECT_EQ(back.buffer.get(), poisoned_back);
    ASSERT_EQ(back.shape, (std::vector<std::int64_t>{C, H, W}));
    std::vector<float> expected_back(n);
    for (std::size_t c = 0; c < static_cast<std::size_t>(C); ++c)
      for (std::size_t s = 0; s < S; ++s) expected_back[c * S + s] = expected[s * C + c] + residual_host[c * S + s];
    EXPECT_EQ(nn::download(ctx, back), expected_back);
    // Without the fusions: the plain layout change.
    const auto plain = nn::download(ctx, nn::from_tokens(ctx, nn::to_tokens(ctx, x), H, W));
    EXPECT_EQ(plain, x_host);
  }
  const nn::Tensor x = nn::upload(ctx, test::random_floats(24, 373), {2, 3, 4});
  const nn::Tensor wrong = nn::upload(ctx, test::random_floats(6, 374), {3, 2});
  test::expect_shape_error([&] { nn::to_tokens(ctx, x, &wrong); }, "to_tokens", {"affine [2, 2]", "[3, 2]"});
  const nn::Tensor tokens = nn::to_tokens(ctx, x);
  test::expect_shape_error([&] { nn::from_tokens(ctx, tokens, 4, 4); }, "from_tokens", {"4x4 map", "[12, 2]"});
  const nn::Tensor other_map = nn::upload(ctx, test::random_floats(24, 375), {4, 3, 2});
  test::expect_shape_error([&] { nn::from_tokens(ctx, tokens, 3, 4, &other_map); }, "from_tokens",
                           {"expected residual [2, 3, 4]", "[4, 3, 2]"});
}

TEST(Embedding, AddsTokenAndPositionEmbeddingsInEitherStorage) {
  auto& ctx = test::kernel_context();
  const int V = 1000, C = 1024, P = 77;  // the real width and context; a smaller vocabulary
  std::vector<int> ids = {49406 % V, 0, V - 1, 17, 17, 320};
  while (ids.size() < 77) ids.push_back(static_cast<int>(ids.size() * 37 % V));
  for (DType storage : {DType::F32, DType::F16}) {
    const auto table =
        test::make_weight(ctx, test::random_floats(static_cast<std::size_t>(V) * C, 370), {V, C}, storage);
    const auto pos = test::make_weight(ctx, test::random_floats(static_cast<std::size_t>(P) * C, 371), {P, C}, storage);
    for (std::size_t T : {ids.size(), std::size_t{5}}) {
      const std::vector<int> used(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(T));
      const cl_mem poisoned = test::poison_next_output(ctx, T * C * 4);
      const nn::Tensor y = nn::embed_tokens(ctx, used, table.tensor, pos.tensor);
      EXPECT_EQ(y.buffer.get(), poisoned);
      ASSERT_EQ(y.shape, (std::vector<std::int64_t>{static_cast<std::int64_t>(T), C}));
      std::vector<float> expected(T * C);
      for (std::size_t t = 0; t < T; ++t)
        for (int c = 0; c < C; ++c)
          expected[t * C + c] = table.values[static_cast<std::size_t>(used[t]) * C + c] + pos.values[t * C + c];
      EXPECT_EQ(nn::download(ctx, y), expected) << test::storage_name(storage) << " T " << T;
    }
  }
}

TEST(TimestepEmbedding, FollowsDiffusersFloat32Recipe) {
  auto& ctx = test::kernel_context();
  struct Case {
    float t;
    int dim;
    bool flip;
    float shift;
  };
  for (const Case& c : {Case{999.0f, 320, true, 0.0f}, Case{999.0f, 320, false, 1.0f}, Case{0.5f, 7, true, 0.0f},
                        Case{250.0f, 256, true, 1.0f}}) {
    const cl_mem poisoned = test::poison_next_output(ctx, static_cast<std::size_t>(c.dim) * 4);
    const nn::Tensor y = nn::timestep_embedding(ctx, c.t, c.dim, c.flip, c.shift);
    EXPECT_EQ(y.buffer.get(), poisoned);
    const auto got = nn::download(ctx, y);
    // The exact float32 steps torch takes.
    EXPECT_EQ(got, ref::timestep_embedding(c.t, c.dim, c.flip, c.shift)) << "t " << c.t << " dim " << c.dim;
    // And, independently, the formula in double: only the float rounding of t·freq (≤ t·2^-24 rad) may differ.
    const int half = c.dim / 2;
    double worst = 0;
    for (int i = 0; i < half; ++i) {
      const double arg = c.t * std::exp(-std::log(10000.0) * i / (half - c.shift));
      const double first = c.flip ? std::cos(arg) : std::sin(arg), second = c.flip ? std::sin(arg) : std::cos(arg);
      worst = std::max({worst, std::abs(got[i] - first), std::abs(got[half + i] - second)});
    }
    if (c.dim % 2) {
      EXPECT_EQ(got.back(), 0.0f) << "odd dims end with a zero pad";
    }
    std::printf("  [timestep t %g dim %d] max|diff| to the double formula %.3g\n", c.t, c.dim, worst);
    EXPECT_LE(worst, 4.0 * c.t * 0x1p-24 + 1e-7);
  }
}

TEST(ToRgb8, RoundsHalfToEvenAfterClampingLikeNumpy) {
  auto& ctx = test::kernel_context();
  for (auto [H, W, a, b] : {std::tuple{64, 64, 0.5f, 0.5f}, std::tuple{7, 5, 1.0f, 0.0f}}) {
    const std::size_t n = static_cast<std::size_t>(H) * W;
    auto x_host = test::random_floats(3 * n, 380, -1.3f, 1.3f);
    // Exact ties: values whose level v·255 is k + 0.5 exactly, so the rounding mode shows.
    std::size_t planted = 0;
    for (int k = 0; k < 255 && 3 + 2 * planted < 3 * n; ++k) {
      const float x = ((static_cast<float>(k) + 0.5f) / 255.0f - b) / a;
      volatile float scaled = x * a;
      const float v = scaled + b;
      volatile float level = v * 255.0f;
      if (level != static_cast<float>(k) + 0.5f) continue;  // not an exact tie after the float steps
      x_host[3 + 2 * planted++] = x;
    }
    x_host[1] = std::numeric_limits<float>::quiet_NaN();
    const nn::Tensor x = nn::upload(ctx, x_host, {3, H, W});
    const cl_mem poisoned = test::poison_next_output(ctx, 3 * n);
    const cl::Buffer rgb = nn::to_rgb8(ctx, x, a, b);
    EXPECT_EQ(rgb.get(), poisoned);
    std::vector<std::uint8_t> got(3 * n);
    ctx.read(rgb, got.data(), got.size());
    const auto expected = ref::to_rgb8(x_host, H, W, a, b);
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < got.size(); ++i) mismatches += got[i] != expected[i];
    std::printf("  [to_rgb8 %dx%d] %zu exact ties planted, %zu mismatching bytes\n", H, W, planted, mismatches);
    EXPECT_GE(planted, 40u);
    EXPECT_EQ(mismatches, 0u);
    EXPECT_EQ(got[3 * 1 + 0], 0) << "NaN must become 0";  // x[0][0][1] is pixel 1's red
  }
}

TEST(CountNonFinite, CountsNanAndInfEverywhereInLargeTensors) {
  auto& ctx = test::kernel_context();
  const int n = 300007;  // beyond the grid-stride launch of 1024 groups of 256
  auto x_host = test::random_floats(n, 390, -1e30f, 1e30f);
  const nn::Tensor finite = nn::upload(ctx, x_host, {n});
  EXPECT_EQ(nn::count_non_finite(ctx, finite), 0);
  const float inf = std::numeric_limits<float>::infinity();
  for (int i : {0, 5, 262143, 262144, 299999, n - 1}) x_host[i] = std::numeric_limits<float>::quiet_NaN();
  x_host[1000] = inf;
  x_host[280000] = -inf;
  const nn::Tensor bad = nn::upload(ctx, x_host, {n});
  EXPECT_EQ(nn::count_non_finite(ctx, bad), 8);
}

// The per-weight counts behind a "its weights hold NaN or Inf" message: fp32 and fp16 weights, odd sizes, one
// launch each into its own counter, only the names under the asked prefixes, in the index's order.
TEST(CountNonFinite, CountsEachWeightOfAnIndexInFp32AndFp16) {
  auto& ctx = test::kernel_context();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Planted {
    const char* name;
    int n;
    DType dtype;
    std::vector<int> nan_at, inf_at;
  };
  const std::vector<Planted> planted = {
      {"unet.conv_in.weight", 4 * 9 * 37, DType::F16, {0, 1331}, {7}},
      {"unet.conv_in.bias", 37, DType::F32, {}, {}},
      {"unet.mid_block.attentions.0.proj_out.weight", 300007, DType::F16, {299999}, {262144, 5}},
      {"unet.conv_out.bias", 4, DType::F32, {3}, {}},
      {"vae.decoder.conv_out.weight", 1001, DType::F32, {17}, {18}},
      {"unet.time_embedding.linear_1.weight", 5003, DType::F32, {}, {}},
  };
  nn::WeightIndex index;
  std::vector<nn::Tensor> alive;
  for (std::size_t k = 0; k < planted.size(); ++k) {
    const Planted& p = planted[k];
    // Finite values inside fp16's range, so that the fp16 copies have no Inf of their own.
    auto host = test::random_floats(p.n, 400 + static_cast<std::uint32_t>(k), -6e4f, 6e4f);
    for (int i : p.nan_at) host[i] = nan;
    for (int i : p.inf_at) host[i] = (i % 2) ? -inf : inf;
    alive.push_back(nn::upload_weight(ctx, host, {p.n}, p.dtype));
    index.add(p.name, alive.back());
  }
  const auto found = nn::count_non_finite_weights(ctx, index, {"unet."});
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0], std::make_pair(std::string("unet.conv_in.weight"), std::int64_t{3}));
  EXPECT_EQ(found[1], std::make_pair(std::string("unet.mid_block.attentions.0.proj_out.weight"), std::int64_t{3}));
  EXPECT_EQ(found[2], std::make_pair(std::string("unet.conv_out.bias"), std::int64_t{1}));
  const auto vae = nn::count_non_finite_weights(ctx, index, {"text_encoder.", "vae.decoder."});
  ASSERT_EQ(vae.size(), 1u);
  EXPECT_EQ(vae[0], std::make_pair(std::string("vae.decoder.conv_out.weight"), std::int64_t{2}));
  EXPECT_TRUE(nn::count_non_finite_weights(ctx, index, {"taesd."}).empty());
}
