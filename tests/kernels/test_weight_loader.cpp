// The staged weight upload (nn/weight_loader.cpp, runtime/staged_upload.cpp) and the device conversion of
// kernels/convert.cl: every converted weight is bit for bit what the host conversion gives (io::float_to_half,
// half_to_float, bf16_to_float: what the engine stored before the conversion moved to the device), at every edge
// of binary16 (every one of the 65536 halves and bf16 values, NaN payloads, signed zeros, subnormals, the
// rounding ties, overflow to Inf), for tensors split over several staging buffers and for many small ones packed
// into one.
#include <atomic>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "io/mapped_file.hpp"
#include "io/tensor_view.hpp"
#include "kernel_test_util.hpp"
#include "io/model_files.hpp"
#include "nn/linear.hpp"
#include "nn/weight_loader.hpp"

using namespace sdt;
using nn::DType;

namespace {

template <typename T>
io::TensorView view_of(const std::vector<T>& data, io::DType dtype, const std::string& name = "test.weight") {
  io::TensorView v;
  v.name = name;
  v.dtype = dtype;
  v.shape = {static_cast<std::int64_t>(data.size())};
  v.data = reinterpret_cast<const std::byte*>(data.data());
  v.bytes = data.size() * sizeof(T);
  return v;
}

template <typename T>
std::vector<T> read_back(cl::Context& ctx, const nn::Tensor& t) {
  std::vector<T> out(static_cast<std::size_t>(t.numel()));
  ctx.read(t.buffer, out.data(), out.size() * sizeof(T));
  return out;
}

std::vector<std::uint16_t> all_halves() {
  std::vector<std::uint16_t> out(65536);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::uint16_t>(i);
  return out;
}

// fp32 bit patterns where narrowing to binary16 is delicate, then random ones of every exponent.
std::vector<std::uint32_t> narrowing_edges() {
  std::vector<std::uint32_t> out;
  for (std::uint32_t sign : {0u, 0x80000000u}) {
    for (std::uint32_t bits : {0x00000000u, 0x00000001u, 0x007fffffu,  // zero, fp32 subnormals
                               0x7f800000u,                            // Inf
                               0x7f800001u, 0x7fbfffffu, 0x7fc00000u, 0x7fffffffu, 0x7fc01234u,  // NaNs
                               0x7f7fffffu,                                                      // fp32 max
                               0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477fffffu,  // 65504 .. rounding to Inf
                               0x38800000u, 0x387fffffu, 0x387fe000u, 0x387ff000u,  // the smallest normal half
                               0x33000000u, 0x32ffffffu, 0x33000001u, 0x33800000u, 0x33c00000u,   // 2^-25 ties
                               0x3f800000u, 0x3f801000u, 0x3f803000u, 0x3f800fffu, 0x3f801001u})  // ties near 1
      out.push_back(sign | bits);
    // Every exponent with mantissas at, just under and just over the rounding point of each subnormal shift.
    for (std::uint32_t exponent = 0; exponent < 256; ++exponent)
      for (std::uint32_t mantissa : {0u, 1u, 0x1000u, 0xfffu, 0x1001u, 0x3000u, 0x400000u, 0x7fffffu, 0x2000u,
                                     0x7fe000u, 0x7ff000u, 0x5555u, 0x2aaaaau})
        out.push_back(sign | (exponent << 23) | mantissa);
  }
  std::mt19937 gen(91);
  for (int i = 0; i < 200000; ++i) out.push_back(static_cast<std::uint32_t>(gen()));
  return out;
}

}  // namespace

TEST(WeightLoader, NarrowsFp32ToFp16BitForBitAsTheHost) {
  auto& ctx = test::kernel_context();
  const std::vector<std::uint32_t> bits = narrowing_edges();
  nn::WeightLoader loader(ctx, nullptr);
  const nn::Tensor t = loader.add(view_of(bits, io::DType::F32), DType::F16);
  loader.finish();
  EXPECT_EQ(loader.stats().converted_bytes, bits.size() * 4);
  const auto got = read_back<std::uint16_t>(ctx, t);
  std::size_t differing = 0;
  for (std::size_t i = 0; i < bits.size(); ++i) {
    const std::uint16_t expected = io::float_to_half(std::bit_cast<float>(bits[i]));
    if (got[i] != expected && ++differing <= 5)
      ADD_FAILURE() << std::hex << "fp32 0x" << bits[i] << ": device 0x" << got[i] << ", host 0x" << expected;
  }
  EXPECT_EQ(differing, 0u) << "of " << bits.size();
}

TEST(WeightLoader, WidensEveryHalfAndEveryBf16BitForBitAsTheHost) {
  auto& ctx = test::kernel_context();
  const std::vector<std::uint16_t> halves = all_halves();
  nn::WeightLoader loader(ctx, nullptr);
  const nn::Tensor f16_as_f32 = loader.add(view_of(halves, io::DType::F16), DType::F32);
  const nn::Tensor bf16_as_f32 = loader.add(view_of(halves, io::DType::BF16), DType::F32);
  const nn::Tensor bf16_as_f16 = loader.add(view_of(halves, io::DType::BF16), DType::F16);
  const nn::Tensor f16_as_f16 = loader.add(view_of(halves, io::DType::F16), DType::F16);  // stored as it is
  loader.finish();
  const auto a = read_back<std::uint32_t>(ctx, f16_as_f32);
  const auto b = read_back<std::uint32_t>(ctx, bf16_as_f32);
  const auto c = read_back<std::uint16_t>(ctx, bf16_as_f16);
  const auto d = read_back<std::uint16_t>(ctx, f16_as_f16);
  for (std::size_t i = 0; i < halves.size(); ++i) {
    const std::uint16_t h = halves[i];
    ASSERT_EQ(a[i], std::bit_cast<std::uint32_t>(io::half_to_float(h))) << std::hex << "half 0x" << h;
    ASSERT_EQ(b[i], std::bit_cast<std::uint32_t>(io::bf16_to_float(h))) << std::hex << "bf16 0x" << h;
    ASSERT_EQ(c[i], io::float_to_half(io::bf16_to_float(h))) << std::hex << "bf16 0x" << h;
    ASSERT_EQ(d[i], h);
  }
}

TEST(WeightLoader, SplitsLargeTensorsOverStagingBuffersAndPacksSmallOnes) {
  auto& ctx = test::kernel_context();
  // One tensor several staging buffers long (slots are at most 16 MiB and a fraction of the total), odd sizes
  // between, every dtype pair, and empty tensors.
  const std::vector<float> large = test::random_floats(3'000'001, 70, -2.0f, 2.0f);
  std::vector<std::vector<float>> small;
  for (int i = 0; i < 300; ++i) small.push_back(test::random_floats(1 + (i * 37) % 129, 71 + i, -5.0f, 5.0f));
  std::vector<std::uint16_t> large_halves(large.size());
  for (std::size_t i = 0; i < large.size(); ++i) large_halves[i] = io::float_to_half(large[i]);
  const std::vector<float> empty;

  nn::WeightLoader loader(ctx, nullptr);
  const nn::Tensor large_f16 = loader.add(view_of(large, io::DType::F32, "large"), DType::F16);
  std::vector<nn::Tensor> small_tensors;
  for (std::size_t i = 0; i < small.size(); ++i)
    small_tensors.push_back(loader.add(view_of(small[i], io::DType::F32), i % 2 ? DType::F16 : DType::F32));
  const nn::Tensor halves_f32 = loader.add(view_of(large_halves, io::DType::F16, "halves"), DType::F32);
  const nn::Tensor large_f32 = loader.add(view_of(large, io::DType::F32, "large"), DType::F32);
  const nn::Tensor nothing = loader.add(view_of(empty, io::DType::F32), DType::F16);
  std::uint64_t last_read = 0, calls = 0;
  loader.finish([&](std::uint64_t read, std::uint64_t uploaded, std::uint64_t total) {
    EXPECT_GE(read, last_read);
    EXPECT_LE(uploaded, read);
    EXPECT_LE(read, total);
    last_read = read;
    ++calls;
  });
  EXPECT_GT(calls, 3u) << "progress comes with every staging buffer";
  const auto& stats = loader.stats();
  EXPECT_EQ(stats.tensors, 303);
  EXPECT_EQ(stats.file_bytes, last_read);
  EXPECT_GT(stats.readers, 0);

  const auto got_large = read_back<std::uint16_t>(ctx, large_f16);
  for (std::size_t i = 0; i < large.size(); ++i) ASSERT_EQ(got_large[i], large_halves[i]) << i;
  EXPECT_EQ(nn::download(ctx, large_f32), large);
  const auto widened = nn::download(ctx, halves_f32);
  for (std::size_t i = 0; i < large.size(); ++i) ASSERT_EQ(widened[i], io::half_to_float(large_halves[i])) << i;
  for (std::size_t i = 0; i < small.size(); ++i) {
    if (small_tensors[i].dtype == DType::F32) {
      ASSERT_EQ(nn::download(ctx, small_tensors[i]), small[i]) << i;
    } else {
      const auto h = read_back<std::uint16_t>(ctx, small_tensors[i]);
      for (std::size_t k = 0; k < h.size(); ++k) ASSERT_EQ(h[k], io::float_to_half(small[i][k])) << i << ", " << k;
    }
  }
  EXPECT_EQ(nothing.numel(), 0);
}

// The kernels themselves, on poisoned outputs: they write exactly [dst_offset, dst_offset + n) from
// [src_offset, src_offset + n) and nothing else.
TEST(ConvertKernels, WriteExactlyTheirRangeOfAPoisonedBuffer) {
  auto& ctx = test::kernel_context();
  const std::vector<float> values = test::random_floats(1000, 72, -100.0f, 100.0f);
  const cl::Buffer src = ctx.persistent(values.size() * 4);
  ctx.write(src, values.data(), values.size() * 4);
  const std::size_t total = 1200;
  const cl::Buffer dst = ctx.persistent(total * 2);
  const std::vector<std::uint16_t> poison(total, 0xdead);
  ctx.write(dst, poison.data(), total * 2);
  const cl_uint src_offset = 17, dst_offset = 101, n = 777;
  ctx.launch(ctx.kernel("convert", "narrow_f32_to_f16"), cl::Range(cl::round_up(n, 64)), cl::Range(), src, src_offset,
             dst, dst_offset, n);
  std::vector<std::uint16_t> got(total);
  ctx.read(dst, got.data(), total * 2);
  for (std::size_t i = 0; i < total; ++i) {
    if (i >= dst_offset && i < dst_offset + n)
      ASSERT_EQ(got[i], io::float_to_half(values[src_offset + i - dst_offset])) << i;
    else
      ASSERT_EQ(got[i], poison[i]) << "written outside the range at " << i;
  }
}

TEST(WeightLoader, AFileThatShrinksWhileLoadingIsAnErrorNamingIt) {
  auto& ctx = test::kernel_context();
  test::TempDir dir("sdt-loader");
  const auto path = dir.path() / "weights.bin";
  const std::vector<float> values = test::random_floats(1 << 20, 73);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
  }
  const auto file = io::MappedFile::open(path);
  io::TensorView view;
  view.name = "unet.conv_in.weight";
  view.dtype = io::DType::F32;
  view.shape = {static_cast<std::int64_t>(values.size())};
  view.data = file->data();
  view.bytes = values.size() * 4;
  view.file = file;
  nn::WeightLoader loader(ctx, nullptr);
  const nn::Tensor t = loader.add(view, DType::F16);
  std::filesystem::resize_file(path, 1000);
  try {
    loader.finish();
    FAIL() << "a truncated file loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(e.message().find("weights.bin"), std::string::npos) << e.message();
  }
}

TEST(WeightLoader, ACancelStopsTheUpload) {
  auto& ctx = test::kernel_context();
  const std::vector<float> values = test::random_floats(2'000'000, 74);
  std::atomic<bool> cancel{false};
  nn::WeightLoader loader(ctx, nullptr, &cancel);
  const nn::Tensor a = loader.add(view_of(values, io::DType::F32), DType::F16);
  const nn::Tensor b = loader.add(view_of(values, io::DType::F32), DType::F32);
  try {
    loader.finish([&](std::uint64_t, std::uint64_t, std::uint64_t) { cancel = true; });
    FAIL() << "the cancel was ignored";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Cancelled) << e.what();
  }
}

namespace {

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& v) {
  std::vector<std::byte> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

}  // namespace

TEST(WeightLoader, StacksFusedProjectionsPartsIntoTheirRowsAndIndexesEachPart) {
  // A fused q/k/v projection (nn::Linear::stacked): the three [3, 5] weights, each in another file dtype (so one
  // part is converted by convert.cl at an offset, one written as it is at an offset, one widened or narrowed from
  // bf16), stacked into one [9, 5] buffer of either storage; the biases [3] into one [9] fp32 vector. Then the
  // weight index holds each part under its own name and range: a NaN planted in to_k's rows is found in to_k
  // alone.
  auto& ctx = test::kernel_context();
  const float nan = std::nanf("");
  const auto q = test::random_floats(15, 900), k = test::random_floats(15, 901), v = test::random_floats(15, 902);
  std::vector<std::uint16_t> k_half(15), v_bf16(15);
  for (int i = 0; i < 15; ++i) {
    k_half[i] = io::float_to_half(i == 7 ? nan : k[i]);
    v_bf16[i] = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(v[i]) >> 16);
  }
  const auto bq = test::random_floats(3, 903), bk = test::random_floats(3, 904), bv = test::random_floats(3, 905);
  io::WeightSet set;
  set.add_owned("a.to_q.weight", "test", io::DType::F32, {3, 5}, bytes_of(q));
  set.add_owned("a.to_k.weight", "test", io::DType::F16, {3, 5}, bytes_of(k_half));
  set.add_owned("a.to_v.weight", "test", io::DType::BF16, {3, 5}, bytes_of(v_bf16));
  set.add_owned("a.to_q.bias", "test", io::DType::F32, {3}, bytes_of(bq));
  set.add_owned("a.to_k.bias", "test", io::DType::F32, {3}, bytes_of(bk));
  set.add_owned("a.to_v.bias", "test", io::DType::F32, {3}, bytes_of(bv));

  for (DType storage : {DType::F16, DType::F32}) {
    SCOPED_TRACE(test::storage_name(storage));
    nn::WeightIndex index;
    auto loader = std::make_shared<nn::WeightLoader>(ctx, &set, nullptr, &index);
    const nn::WeightScope scope(loader, "a.", storage);
    const nn::Linear fused = nn::Linear::stacked(scope, {"to_q", "to_k", "to_v"}, 5, 3);
    loader->finish();
    ASSERT_EQ(fused.weight().shape, (std::vector<std::int64_t>{9, 5}));
    ASSERT_EQ(fused.out_features(), 9);
    ASSERT_NE(fused.bias(), nullptr);
    std::vector<float> expected;  // what each part's own upload stores
    for (int i = 0; i < 15; ++i) expected.push_back(q[i]);
    for (int i = 0; i < 15; ++i) expected.push_back(io::half_to_float(k_half[i]));
    for (int i = 0; i < 15; ++i) expected.push_back(io::bf16_to_float(v_bf16[i]));
    if (storage == DType::F16) {
      const auto got = read_back<std::uint16_t>(ctx, fused.weight());
      for (int i = 0; i < 45; ++i)
        if (i == 15 + 7)
          EXPECT_EQ(got[i] & 0x7c00u, 0x7c00u) << "the planted NaN";
        else
          EXPECT_EQ(got[i], io::float_to_half(expected[i])) << "element " << i;
    } else {
      const auto got = read_back<float>(ctx, fused.weight());
      for (int i = 0; i < 45; ++i)
        if (i == 15 + 7)
          EXPECT_TRUE(std::isnan(got[i]));
        else
          EXPECT_EQ(got[i], expected[i]) << "element " << i;
    }
    const auto bias = read_back<float>(ctx, *fused.bias());
    EXPECT_EQ(bias, (std::vector<float>{bq[0], bq[1], bq[2], bk[0], bk[1], bk[2], bv[0], bv[1], bv[2]}));

    ASSERT_EQ(index.entries().size(), 6u);
    const std::vector<std::pair<std::string, std::int64_t>> parts = {
        {"a.to_q.weight", 0}, {"a.to_k.weight", 15}, {"a.to_v.weight", 30},
        {"a.to_q.bias", 0},   {"a.to_k.bias", 3},    {"a.to_v.bias", 6}};
    for (std::size_t i = 0; i < parts.size(); ++i) {
      EXPECT_EQ(index.entries()[i].name, parts[i].first);
      EXPECT_EQ(index.entries()[i].first, parts[i].second) << parts[i].first;
      EXPECT_EQ(index.entries()[i].numel, i < 3 ? 15 : 3) << parts[i].first;
    }
    const auto found = nn::count_non_finite_weights(ctx, index, {"a."});
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0], std::make_pair(std::string("a.to_k.weight"), std::int64_t{1}));
  }

  // Listing (what validation and random models read): every part under its own name and shape.
  auto recording = std::make_shared<nn::RecordingSource>();
  const nn::Linear listed = nn::Linear::stacked(nn::WeightScope(recording, "a.", DType::F16), {"to_q", "to_k", "to_v"},
                                                5, 3);
  EXPECT_EQ(listed.weight().shape, (std::vector<std::int64_t>{9, 5}));
  ASSERT_EQ(recording->specs().size(), 6u);
  EXPECT_EQ(recording->specs()[1].name, "a.to_k.weight");
  EXPECT_EQ(recording->specs()[1].shape, (std::vector<std::int64_t>{3, 5}));
  EXPECT_EQ(recording->specs()[5].name, "a.to_v.bias");

  // A part of another width does not stack: named with the one it should match.
  try {
    nn::stacked_shape({{"a.to_q.weight", {3, 5}}, {"a.to_k.weight", {3, 4}}});
    ADD_FAILURE() << "parts of different widths stacked";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("a.to_k.weight [3, 4]"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("a.to_q.weight [3, 5]"), std::string::npos) << e.message();
  }
}
