// Launches recorded into a command buffer (cl_khr_command_buffer, Context::begin_commands): they run only when the
// buffer is enqueued, each time it is, on the buffers' contents at that time, with the same bits as the same
// launches enqueued one by one; any other command is refused while recording. PoCL offers the extension; where a
// device does not (NVIDIA's driver 580.159.04), begin_commands says so and each test checks that instead.
#include <cmath>
#include <cstring>
#include <limits>

#include "kernel_test_util.hpp"
#include "runtime/context.hpp"
#include "sdt/error.hpp"

using namespace sdt;
using nn::DType;

namespace {

// y = 0.5 * (x · wᵀ + b) in double, the reference of the recorded sequence.
std::vector<float> half_linear(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                               int M, int K, int N) {
  std::vector<float> y(static_cast<std::size_t>(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double sum = b[n];
      for (int k = 0; k < K; ++k)
        sum += static_cast<double>(x[static_cast<std::size_t>(m) * K + k]) * w[static_cast<std::size_t>(n) * K + k];
      y[static_cast<std::size_t>(m) * N + n] = static_cast<float>(0.5 * sum);
    }
  return y;
}

// Where the device offers no command buffers (NVIDIA's driver 580.159.04), begin_commands must refuse, naming the
// extension: what each test checks there instead of recording.
bool refuses_here(cl::Context& ctx) {
  if (ctx.command_buffers_supported()) return false;
  try {
    ctx.begin_commands();
    ADD_FAILURE() << "begin_commands accepted on a device without cl_khr_command_buffer";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("cl_khr_command_buffer"), std::string::npos) << e.message();
  }
  return true;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST(CommandBuffer, RecordedLaunchesRunWhenEnqueuedOnTheContentsOfTheirBuffersThen) {
  auto& ctx = test::kernel_context();
  if (refuses_here(ctx)) return;
  // The text encoder's out product with K split in four, summed in the kernel: its tile counters must be back at
  // zero after each run for the next enqueue of the same launches to sum right.
  constexpr int M = 77, K = 1024, N = 256;
  test::TuningScope split(ctx, [](cl::TuningOverrides& o) {
    o.gemm_splits = 4;
    o.fused_splitk = true;
  });
  const float bound = 1.0f / std::sqrt(static_cast<float>(K));
  const auto w = test::make_weight(ctx, test::random_floats(static_cast<std::size_t>(N) * K, 2, -bound, bound), {N, K},
                                   DType::F32);
  const auto b = test::make_weight(ctx, test::random_floats(N, 3, -bound, bound), {N}, DType::F32);
  const auto x1 = test::random_floats(static_cast<std::size_t>(M) * K, 4);
  const auto x2 = test::random_floats(static_cast<std::size_t>(M) * K, 5);
  const nn::Tensor x = nn::upload(ctx, x1, {M, K});

  // The same launches one by one, for the bits.
  const auto direct1 = nn::download(ctx, nn::scale(ctx, nn::linear(ctx, x, w.tensor, &b.tensor), 0.5f));

  ctx.begin_commands();
  nn::Tensor y = nn::linear(ctx, x, w.tensor, &b.tensor);
  nn::Tensor z = nn::scale(ctx, y, 0.5f);
  const cl::CommandBuffer commands = ctx.end_commands();
  EXPECT_EQ(commands.launches(), 2u);

  // Nothing ran while recording: the output still holds what is written now.
  const std::vector<float> poison(static_cast<std::size_t>(M) * N, std::numeric_limits<float>::quiet_NaN());
  ctx.write(z.buffer, poison.data(), poison.size() * sizeof(float));
  EXPECT_TRUE(std::isnan(nn::download(ctx, z)[0]));

  ctx.enqueue_commands(commands);
  const auto got1 = nn::download(ctx, z);
  test::expect_close(got1, half_linear(x1, w.values, b.values, M, K, N), 1e-5, "recorded, first enqueue");
  EXPECT_TRUE(same_bits(got1, direct1)) << "the recorded launches differ from the same launches one by one";

  // New contents of x, the same launches: the second enqueue computes from them.
  ctx.write(x.buffer, x2.data(), x2.size() * sizeof(float));
  ctx.write(z.buffer, poison.data(), poison.size() * sizeof(float));
  ctx.enqueue_commands(commands);
  const auto got2 = nn::download(ctx, z);
  test::expect_close(got2, half_linear(x2, w.values, b.values, M, K, N), 1e-5, "recorded, second enqueue");
  const auto direct2 = nn::download(ctx, nn::scale(ctx, nn::linear(ctx, x, w.tensor, &b.tensor), 0.5f));
  EXPECT_TRUE(same_bits(got2, direct2)) << "the second enqueue differs from the same launches one by one";

  // Twice in a row without a wait between: the queue is in order, so the second run follows the first.
  ctx.enqueue_commands(commands);
  ctx.enqueue_commands(commands);
  EXPECT_TRUE(same_bits(nn::download(ctx, z), direct2));
}

TEST(CommandBuffer, OneKernelRecordedTwiceKeepsEachLaunchsArguments) {
  // PoCL 3.1 read a recorded launch's arguments from the kernel object when the buffer ran, so two launches of one
  // kernel both took the last one's: each recorded launch now has a kernel object of its own.
  auto& ctx = test::kernel_context();
  if (refuses_here(ctx)) return;
  const nn::Tensor x = nn::upload(ctx, test::random_floats(77 * 64, 6), {77, 64});
  const nn::Tensor g = nn::upload(ctx, test::random_floats(64, 7), {64});
  const auto direct = nn::download(ctx, nn::layer_norm(ctx, x, g, g, 1e-5f));
  const nn::Tensor x2 = nn::upload(ctx, test::random_floats(77 * 64, 8), {77, 64});
  const auto direct2 = nn::download(ctx, nn::layer_norm(ctx, x2, g, g, 1e-5f));
  ctx.begin_commands();
  const nn::Tensor y = nn::layer_norm(ctx, x, g, g, 1e-5f);
  const nn::Tensor y2 = nn::layer_norm(ctx, x2, g, g, 1e-5f);
  const cl::CommandBuffer commands = ctx.end_commands();
  ctx.enqueue_commands(commands);
  EXPECT_TRUE(same_bits(nn::download(ctx, y), direct));
  EXPECT_TRUE(same_bits(nn::download(ctx, y2), direct2));
}

TEST(CommandBuffer, OtherCommandsAreRefusedWhileRecordingAndTheRecordingEndsCleanly) {
  auto& ctx = test::kernel_context();
  if (refuses_here(ctx)) return;
  const nn::Tensor x = nn::upload(ctx, test::random_floats(64, 6), {64});
  std::vector<float> host(64);
  ctx.begin_commands();
  const auto refused = [&](const char* what, const auto& op) {
    try {
      op();
      ADD_FAILURE() << what << " was accepted while recording";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("command buffer"), std::string::npos) << what << ": " << e.message();
    }
  };
  refused("write", [&] { ctx.write(x.buffer, host.data(), 64 * sizeof(float)); });
  refused("read", [&] { ctx.read(x.buffer, host.data(), 64 * sizeof(float)); });
  refused("read_async", [&] { (void)ctx.read_async(x.buffer, 64 * sizeof(float)); });
  refused("finish", [&] { ctx.finish(); });
  refused("marker", [&] { (void)ctx.marker("a test mark"); });
  refused("queue", [&] { (void)ctx.queue(); });
  refused("a second begin_commands", [&] { ctx.begin_commands(); });
  refused("enqueue_commands", [&] { ctx.enqueue_commands(cl::CommandBuffer{}); });
  const nn::Tensor y = nn::scale(ctx, x, 2.0f);
  const cl::CommandBuffer commands = ctx.end_commands();
  EXPECT_FALSE(ctx.recording_commands());
  EXPECT_EQ(commands.launches(), 1u);
  try {
    (void)ctx.end_commands();
    ADD_FAILURE() << "end_commands without a recording was accepted";
  } catch (const Error&) {
  }
  // The context works as before, and the recorded launch runs.
  ctx.enqueue_commands(commands);
  const auto in = nn::download(ctx, x), out = nn::download(ctx, y);
  for (std::size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], 2.0f * in[i]) << i;
}
