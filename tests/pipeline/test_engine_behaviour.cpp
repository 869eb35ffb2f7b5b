// What a caller of the engine relies on beyond accuracy: identical bytes for the same seed, progress in stage
// order, timings for every stage, cancellation that leaves the engine as it was, non-finite results reported
// with the stage that made them, the PNG parameters, and the labelled random model.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "engine_fixture.hpp"
#include "io/safetensors.hpp"
#include "pipeline/stage_timing.hpp"
#include "runtime/cl_error.hpp"
#include "sdt/error.hpp"

namespace sdt::test {
namespace {

// 64×64: what these tests check does not depend on the size, and the decoders cost a quarter of 128×128.
Request small_request(Decoder decoder = Decoder::Full, int steps = 1) {
  Request r;
  r.prompt = "a lighthouse in a storm, oil painting";
  r.seed = 20240607;
  r.width = 64;
  r.height = 64;
  r.steps = steps;
  r.decoder = decoder;
  return r;
}

// One image of random:tiny on an engine of its own, with or without the per-kernel profile.
Result generate_on_tiny(bool profile_kernels, const Request& request) {
  EngineOptions o;
  o.model = "random:tiny";
  o.cache_dir = engine_kernel_cache();
  o.profile_kernels = profile_kernels;
  if (const char* device = std::getenv("SDT_TEST_DEVICE")) o.device = device;
  Engine engine(o);
  return engine.generate(request);
}

// Every device stage of a two-step generation with both decoders has a time.
void expect_every_stage_timed(const StageTimings& t) {
  EXPECT_GT(t.text_encoder_ms, 0);
  ASSERT_EQ(t.unet_step_ms.size(), 2u);
  EXPECT_GT(t.unet_step_ms[0], 0);
  EXPECT_GT(t.unet_step_ms[1], 0);
  EXPECT_GT(t.vae_decode_ms, 0);
  EXPECT_GT(t.taesd_decode_ms, 0);
}

TEST(Engine, SameSeedTwiceGivesIdenticalPngBytes) {
  Engine& engine = fixture_engine();
  const Request request = small_request();
  const Result first = engine.generate(request);
  const Result second = engine.generate(request);
  EXPECT_EQ(first.latents, second.latents);
  ASSERT_EQ(first.image.rgb.size(), 64u * 64u * 3u);
  EXPECT_EQ(first.image.rgb, second.image.rgb);
  EXPECT_EQ(encode_png(first.image, engine.png_metadata(request, first)),
            encode_png(second.image, engine.png_metadata(request, second)));
  Request other = request;
  other.seed += 1;
  EXPECT_NE(engine.generate(other).image.rgb, first.image.rgb) << "the seed changed nothing";
}

TEST(Engine, ReportsProgressForEveryStageInOrderAndTimesThem) {
  Engine& engine = fixture_engine();
  Request request = small_request(Decoder::Both, 2);
  request.prompt = "progress test prompt, never cached before";
  std::vector<std::string> seen;
  const Result r = engine.generate(request, [&](const Progress& p) {
    seen.push_back(stage_name(p.stage) + (p.steps ? " " + std::to_string(p.step) + "/" + std::to_string(p.steps) : ""));
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"text encoder", "unet 1/2", "unet 2/2", "vae decode", "taesd decode",
                                            "read-back"}));
  const StageTimings& t = r.timings;
  EXPECT_FALSE(t.text_cache_hit);
  expect_every_stage_timed(t);
  ASSERT_EQ(t.unet_step_ms.size(), 2u);  // (read below)
  EXPECT_GT(t.total_ms, 0);
  // The host's clock in its three parts: enqueueing (the stages' kernels, at least their device time minus the last
  // stage's, since the host waits at each stage boundary for the stage before), the last wait, what follows.
  EXPECT_GT(t.host_enqueue_ms, t.text_encoder_ms);
  // Of the enqueueing, the waits at the stage boundaries (five of them wait here) are a part.
  EXPECT_GT(t.host_stage_wait_ms, 0);
  EXPECT_LT(t.host_stage_wait_ms, t.host_enqueue_ms);
  EXPECT_GE(t.host_wait_ms, 0);
  EXPECT_GE(t.host_after_device_ms, 0);
  EXPECT_NEAR(t.host_enqueue_ms + t.host_wait_ms + t.host_after_device_ms, t.total_ms, 1e-6);
  EXPECT_GT(t.peak_device_bytes, engine.load_timings().weight_bytes);
  for (const char* stage : {"text encoder", "unet step 1", "unet step 2", "vae decode", "taesd decode", "read-back"}) {
    ASSERT_TRUE(t.stage_peak_bytes.count(stage)) << stage;
    EXPECT_GE(t.stage_peak_bytes.at(stage), engine.load_timings().weight_bytes) << stage;
    EXPECT_LE(t.stage_peak_bytes.at(stage), t.peak_device_bytes) << stage;
  }
  EXPECT_FALSE(r.image_tiny.empty());
  std::printf("  text %.1f ms, unet %.1f + %.1f ms, vae %.1f ms, taesd %.1f ms, read-back %.2f ms, total %.1f ms\n",
              t.text_encoder_ms, t.unet_step_ms[0], t.unet_step_ms[1], t.vae_decode_ms, t.taesd_decode_ms,
              t.readback_ms, t.total_ms);
}

TEST(Engine, CancelDuringTheUNetStopsAndTheNextRunIsUnchanged) {
  Engine& engine = fixture_engine();
  const Request request = small_request(Decoder::Full, 2);
  const Result before = engine.generate(request);
  std::atomic<bool> cancel{false};
  std::vector<std::string> after_cancel;
  try {
    (void)engine.generate(
        request,
        [&](const Progress& p) {
          if (cancel) after_cancel.push_back(stage_name(p.stage));
          if (p.stage == Stage::Unet && p.step == 1) cancel = true;
        },
        &cancel);
    FAIL() << "a cancelled generation returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Cancelled) << e.message();
  }
  EXPECT_TRUE(after_cancel.empty()) << "stages ran after the cancel: " << after_cancel.front();
  const Result again = engine.generate(request);
  EXPECT_EQ(again.image.rgb, before.image.rgb);
}

// A 4-step run shows 3 previews and exactly the image it gives without them. The first preview is the prediction
// of the clean image from the initial noise at σ_max, x − σ·ε, which is what a 1-step run ends with (its one Euler
// step goes to σ = 0): so it must equal a 1-step run's TAESD image byte for byte.
TEST(Engine, FourStepsGiveThreePreviewsAndTheSameFinalImage) {
  Engine& engine = fixture_engine();
  ASSERT_TRUE(engine.can_preview());
  const Request request = small_request(Decoder::Full, 4);
  const Result plain = engine.generate(request);
  std::vector<StepPreview> previews;
  std::vector<std::string> order;
  const Result with_previews = engine.generate(
      request, [&](const Progress& p) { order.push_back(stage_label(p.stage, p.step)); }, nullptr,
      [&](const StepPreview& p) {
        previews.push_back(p);
        order.push_back("preview " + std::to_string(p.step));
      });
  ASSERT_EQ(previews.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(previews[i].step, i + 1);
    EXPECT_EQ(previews[i].steps, 4);
    EXPECT_EQ(previews[i].image.width, 64);
    EXPECT_EQ(previews[i].image.height, 64);
    ASSERT_EQ(previews[i].image.rgb.size(), 64u * 64u * 3u);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"text encoder", "unet step 1", "preview 1", "unet step 2", "preview 2",
                                             "unet step 3", "preview 3", "unet step 4", "vae decode", "read-back"}));
  EXPECT_EQ(with_previews.image.rgb, plain.image.rgb);
  EXPECT_EQ(with_previews.latents, plain.latents);
  EXPECT_EQ(encode_png(with_previews.image, engine.png_metadata(request, with_previews)),
            encode_png(plain.image, engine.png_metadata(request, plain)));
  ASSERT_EQ(with_previews.timings.unet_step_ms.size(), 4u);  // the previews add no stage of their own

  Request one_step = small_request(Decoder::Tiny, 1);
  const Result one = engine.generate(one_step);
  EXPECT_EQ(previews[0].image.rgb, one.image.rgb) << "the first preview is not x − σ·ε at σ_max decoded by TAESD";
  EXPECT_NE(previews[0].image.rgb, previews[2].image.rgb) << "the previews do not follow the steps";
  // One step has nothing to preview.
  int one_step_previews = 0;
  (void)engine.generate(one_step, {}, nullptr, [&](const StepPreview&) { ++one_step_previews; });
  EXPECT_EQ(one_step_previews, 0);
}

// A cancel raised while a preview is shown stops the run before the next step; the next run is unchanged.
TEST(Engine, CancelFromAPreviewStopsBeforeTheNextStep) {
  Engine& engine = fixture_engine();
  const Request request = small_request(Decoder::Full, 3);
  const Result before = engine.generate(request);
  std::atomic<bool> cancel{false};
  std::vector<std::string> after_cancel;
  int previews = 0;
  try {
    (void)engine.generate(
        request,
        [&](const Progress& p) {
          if (cancel) after_cancel.push_back(stage_label(p.stage, p.step));
        },
        &cancel,
        [&](const StepPreview&) {
          ++previews;
          cancel = true;
        });
    FAIL() << "a cancelled generation returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Cancelled) << e.message();
  }
  EXPECT_EQ(previews, 1);
  EXPECT_TRUE(after_cancel.empty()) << "stages ran after the cancel: " << after_cancel.front();
  EXPECT_EQ(engine.generate(request).image.rgb, before.image.rgb);
}

TEST(Engine, CancelRaisedBeforehandThrowsWithoutRunning) {
  std::atomic<bool> cancel{true};
  EXPECT_THROW(fixture_engine().generate(small_request(), {}, &cancel), Error);
}

TEST(Engine, RecoversFromALostDeviceByReopeningItOnTheNextRequest) {
  Engine& engine = fixture_engine();
  Request request = small_request();
  request.prompt = "device loss test";
  const Result before = engine.generate(request);
  // The 30th kernel launch reports the queue as gone, as a driver reset does.
  cl::arm_fault("clEnqueueNDRangeKernel", CL_INVALID_COMMAND_QUEUE, 30);
  try {
    (void)engine.generate(request);
    ADD_FAILURE() << "a generation whose queue failed returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device) << e.message();
    EXPECT_NE(e.message().find("CL_INVALID_COMMAND_QUEUE"), std::string::npos) << e.message();
  }
  cl::disarm_faults();
  EXPECT_TRUE(engine.impl().needs_reopen_);
  const Result after = engine.generate(request);  // context and models rebuilt first
  EXPECT_FALSE(engine.impl().needs_reopen_);
  EXPECT_EQ(after.image.rgb, before.image.rgb);
}

TEST(Engine, RetriesOnceWithFreedCachesWhenTheDeviceRunsOutOfMemoryAndGivesTheSamePixels) {
  Engine& engine = fixture_engine();
  Request request = small_request();
  request.prompt = "out of memory test";
  const Result before = engine.generate(request);
  ASSERT_GT(engine.impl().pipeline().prompt_cache().size(), 0u);
  // The 12th kernel launch reports CL_OUT_OF_RESOURCES, as a driver does when memory runs out.
  cl::arm_fault("clEnqueueNDRangeKernel", CL_OUT_OF_RESOURCES, 12);
  const Result after = engine.generate(request);
  cl::disarm_faults();
  EXPECT_EQ(after.image.rgb, before.image.rgb);
  ASSERT_EQ(after.warnings.size(), 1u);
  EXPECT_NE(after.warnings[0].find("ran out of memory"), std::string::npos) << after.warnings[0];
  EXPECT_FALSE(after.timings.text_cache_hit) << "the prompt cache was not freed before the second try";
}

TEST(Engine, MemoryThatStaysExhaustedFailsWithOutOfMemoryAndTheNextRequestWorks) {
  Engine& engine = fixture_engine();
  Request request = small_request();
  request.prompt = "memory stays exhausted";
  const Result before = engine.generate(request);
  // Every kernel launch fails, so the retry with freed caches fails as well.
  cl::arm_fault("clEnqueueNDRangeKernel", CL_MEM_OBJECT_ALLOCATION_FAILURE, 0, -1);
  try {
    (void)engine.generate(request);
    cl::disarm_faults();
    ADD_FAILURE() << "generation succeeded although no kernel could run";
  } catch (const Error& e) {
    cl::disarm_faults();
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory) << e.message();
    EXPECT_NE(e.message().find("CL_MEM_OBJECT_ALLOCATION_FAILURE"), std::string::npos) << e.message();
  }
  const Result after = engine.generate(request);
  EXPECT_EQ(after.image.rgb, before.image.rgb);
  EXPECT_TRUE(after.warnings.empty());
}

TEST(Engine, CancelWhileLoadingStopsTheUpload) {
  std::atomic<bool> cancel{true};
  EngineOptions o = fixture_engine_options();
  o.cancel = &cancel;
  try {
    Engine engine(o);
    ADD_FAILURE() << "the engine opened although loading was cancelled";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Cancelled) << e.message();
  }
}

TEST(Engine, PngMetadataCarriesA1111ParametersAndReproducibleJsonWithUtf8) {
  Engine& engine = fixture_engine();
  Request request = small_request(Decoder::Both);
  request.prompt = "Café — 東京の夜景, neon 🌃";
  const Result result = engine.generate(request);
  const std::vector<PngText> texts = engine.png_metadata(request, result);
  ASSERT_EQ(texts.size(), 2u);
  EXPECT_EQ(texts[0].key, "parameters");
  const std::string& p = texts[0].value;
  EXPECT_EQ(p.rfind(request.prompt + "\n", 0), 0u) << p;
  // A1111's layout; no "Model hash" for a diffusers folder (A1111 hashes one checkpoint file).
  EXPECT_EQ(p, request.prompt + "\nNegative prompt: \nSteps: 1, Sampler: Euler, CFG scale: 1, Seed: " +
                   std::to_string(request.seed) + ", Size: 64x64, Model: model, Version: sdturbo-studio " + version());
  EXPECT_EQ(engine.model_file_hash(/*wait=*/true), "");
  EXPECT_NE(engine.png_metadata(request, result, true)[0].value.find(", VAE Decoder: TAESD, "), std::string::npos);

  EXPECT_EQ(texts[1].key, "sdturbo");
  const nlohmann::json j = nlohmann::json::parse(texts[1].value);
  EXPECT_EQ(j["prompt"], request.prompt);
  EXPECT_EQ(j["seed"], request.seed);
  EXPECT_EQ(j["steps"], 1);
  EXPECT_EQ(j["width"], 64);
  EXPECT_EQ(j["decoder"], "both");
  EXPECT_EQ(j["weights"], "fp32");
  EXPECT_EQ(j["model"]["hash"], engine.model().hash);
  EXPECT_EQ(j["scheduler"]["timesteps"], (std::vector<float>{999.0f}));

  TempDir dir("sdt-test-png");
  write_png(dir.path() / "out.png", result.image, texts);
  std::vector<PngText> read_back;
  const Image image = read_png(dir.path() / "out.png", &read_back);
  EXPECT_EQ(image.rgb, result.image.rgb);
  ASSERT_EQ(read_back.size(), 2u);
  EXPECT_EQ(read_back[0].value, texts[0].value);
  EXPECT_EQ(read_back[1].value, texts[1].value);
}

// The fixture's diffusers folder with the UNet's conv_out weights set near the float maximum: ε overflows.
std::filesystem::path make_overflowing_unet_model(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  const fs::path source = fs::absolute(tiny_fixture_dir() / "model");  // links from /tmp: never relative
  for (const char* part : {"model_index.json", "scheduler", "text_encoder", "tokenizer", "vae"})
    fs::create_symlink(source / part, dir / part);
  fs::create_directory(dir / "unet");
  fs::create_symlink(source / "unet" / "config.json", dir / "unet" / "config.json");
  const fs::path weights = source / "unet" / "diffusion_pytorch_model.safetensors";
  std::ifstream in(weights, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const io::SafetensorsHeader header =
      io::parse_safetensors(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(), weights.string());
  for (const auto& e : header.entries) {
    if (e.name != "conv_out.weight") continue;
    EXPECT_EQ(e.dtype_name, "F32");
    for (std::uint64_t at = header.data_offset + e.begin; at < header.data_offset + e.end; at += 4) {
      const float huge = 3e38f;
      std::memcpy(bytes.data() + at, &huge, 4);
    }
  }
  std::ofstream(dir / "unet" / "diffusion_pytorch_model.safetensors", std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return dir;
}

TEST(Engine, ReportsNonFiniteLatentsNamingTheUNetInsteadOfMakingAnImage) {
  TempDir dir("sdt-test-overflow-model");
  EngineOptions o = fixture_engine_options();
  o.model = make_overflowing_unet_model(dir.path()).string();
  o.taesd = "";
  // The direct convolution: as Winograd, conv_out's filter transform at load already overflows (sums of 3e38), and
  // the message then rightly names unet.conv_out.weight as holding Inf (checked below).
  o.winograd = WinogradUse::Off;
  Engine engine(o);
  try {
    (void)engine.generate(small_request());
    FAIL() << "an image was made from non-finite latents";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device) << e.message();
    EXPECT_NE(e.message().find("the UNet (1 step) produced"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("non-finite"), std::string::npos) << e.message();
    // Huge but finite weights: the overflow happened in the computation, and the message says so.
    EXPECT_NE(e.message().find("its weights are all finite"), std::string::npos) << e.message();
  }
}

TEST(Engine, ReportsAWinogradFilterThatOverflowedAtLoadByItsWeightName) {
  TempDir dir("sdt-test-overflow-model-winograd");
  EngineOptions o = fixture_engine_options();
  o.model = make_overflowing_unet_model(dir.path()).string();
  o.taesd = "";
  o.winograd = WinogradUse::On;
  Engine engine(o);
  try {
    (void)engine.generate(small_request());
    FAIL() << "an image was made from non-finite latents";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device) << e.message();
    EXPECT_NE(e.message().find("its weights hold NaN or Inf: unet.conv_out.weight"), std::string::npos) << e.message();
  }
}

TEST(Engine, RandomTinyModelGeneratesAVariedImageAndIsLabelledAsRandom) {
  EngineOptions o;
  o.model = "random:tiny";
  o.cache_dir = engine_kernel_cache();
  if (const char* device = std::getenv("SDT_TEST_DEVICE")) o.device = device;
  Engine engine(o);
  EXPECT_TRUE(engine.model().random_weights);
  const Request request = small_request(Decoder::Both);
  const Result r = engine.generate(request);
  ASSERT_EQ(r.image.rgb.size(), 64u * 64u * 3u);
  // Random weights give low-contrast noise (measured ranges: VAE > 100 levels, TAESD about 29): never flat.
  const auto [lo, hi] = std::minmax_element(r.image.rgb.begin(), r.image.rgb.end());
  EXPECT_GT(int(*hi) - int(*lo), 8) << "a flat image";
  const auto [tlo, thi] = std::minmax_element(r.image_tiny.rgb.begin(), r.image_tiny.rgb.end());
  EXPECT_GT(int(*thi) - int(*tlo), 8) << "a flat TAESD image";
  const std::vector<PngText> texts = engine.png_metadata(request, r);
  EXPECT_NE(texts[0].value.find("random weights"), std::string::npos) << texts[0].value;
  EXPECT_EQ(nlohmann::json::parse(texts[1].value)["model"]["random_weights"], true);
}

// The benchmark's profile: every launch counted once, under its stage, kernel and work sizes, so the layers a kernel
// runs for can be told apart (the UNet's products have many shapes).
TEST(Engine, KernelProfileCountsEveryLaunchByStageKernelAndShape) {
  const Result r = generate_on_tiny(true, small_request(Decoder::Full));
  ASSERT_FALSE(r.kernel_profile.empty());
  std::map<std::string, int> launches;
  std::map<std::string, std::set<std::string>> gemm_shapes;
  for (const KernelProfileEntry& e : r.kernel_profile) {
    launches[e.stage] += e.launches;
    EXPECT_GT(e.launches, 0) << e.stage << " " << e.kernel;
    EXPECT_GE(e.total_ms, 0.0) << e.stage << " " << e.kernel;
    // "<global> / <local>", each size a positive number, dimensions joined by x; "auto" where the driver chose.
    const std::size_t slash = e.shape.find(" / ");
    ASSERT_NE(slash, std::string::npos) << e.kernel << ": '" << e.shape << "'";
    for (const std::string& part : {e.shape.substr(0, slash), e.shape.substr(slash + 3)}) {
      if (part == "auto") continue;
      std::stringstream dims(part);
      std::string d;
      int count = 0;
      while (std::getline(dims, d, 'x')) {
        ++count;
        EXPECT_FALSE(d.empty() || d.find_first_not_of("0123456789") != std::string::npos || std::stoull(d) == 0)
            << e.kernel << ": '" << e.shape << "'";
      }
      EXPECT_TRUE(count >= 1 && count <= 3) << e.kernel << ": '" << e.shape << "'";
    }
    if (e.kernel.rfind("gemm", 0) == 0) gemm_shapes[e.stage].insert(e.shape);
  }
  EXPECT_EQ(launches, r.timings.stage_launches) << "every launch once, under its stage";
  EXPECT_GT(gemm_shapes["unet step 1"].size(), 3u) << "the UNet's products of different layers told apart";
  // The idle stretches: longest first, each positive, together no more than the span's idle time.
  double idle = 0;
  for (std::size_t i = 0; i < r.idle_gaps.size(); ++i) {
    EXPECT_GT(r.idle_gaps[i].gap_ms, 0.0);
    if (i > 0) {
      EXPECT_LE(r.idle_gaps[i].gap_ms, r.idle_gaps[i - 1].gap_ms);
    }
    EXPECT_FALSE(r.idle_gaps[i].after_kernel.empty() || r.idle_gaps[i].before_kernel.empty());
    idle += r.idle_gaps[i].gap_ms;
  }
  EXPECT_LE(idle, r.timings.device_span_ms - r.timings.device_busy_ms + 1e-6);
}

// Gaps between launches, measured from the latest end so far (overlapping launches leave none), longest first.
TEST(StageTimings, LongestIdleGapsNameTheLaunchesAroundThem) {
  auto launch = [](const char* stage, const char* kernel, double start, double end) {
    cl::KernelTiming k;
    k.stage = stage;
    k.kernel = kernel;
    k.start_ms = start;
    k.duration_ms = end - start;
    return k;
  };
  const std::vector<cl::KernelTiming> recorded = {
      launch("text encoder", "a", 0, 1),   launch("text encoder", "b", 1.5, 2), launch("unet step 1", "c", 2, 3),
      launch("unet step 1", "e", 5.5, 7),  launch("unet step 1", "d", 5, 6),    launch("vae decode", "f", 7.25, 8)};
  const std::vector<DeviceIdleGap> gaps = pipeline::longest_idle_gaps(recorded, 2);
  ASSERT_EQ(gaps.size(), 2u);
  EXPECT_DOUBLE_EQ(gaps[0].gap_ms, 2.0);
  EXPECT_DOUBLE_EQ(gaps[0].at_ms, 3.0);
  EXPECT_EQ(gaps[0].after_kernel, "c");
  EXPECT_EQ(gaps[0].before_kernel, "d") << "in start order";
  EXPECT_EQ(gaps[0].before_stage, "unet step 1");
  EXPECT_DOUBLE_EQ(gaps[1].gap_ms, 0.5);
  EXPECT_EQ(gaps[1].after_kernel, "a");
  EXPECT_EQ(pipeline::longest_idle_gaps(recorded, 10).size(), 3u) << "the 0.25 ms before f; none inside d and e";
  EXPECT_TRUE(pipeline::longest_idle_gaps({}, 5).empty());
}

// Without per-launch events (a generation that is not profiled), launches are counted and the stage marks time the
// stages: each from its mark to the next, busy and span from the first mark to the last; a label of no stage (the
// preview) takes its interval away from the stage before.
TEST(StageTimings, StageMarksTimeTheStagesWhenLaunchesHaveNoEvents) {
  auto mark = [](const char* stage, double at) {
    cl::KernelTiming k;
    k.stage = stage;
    k.start_ms = at;
    k.mark = true;
    return k;
  };
  auto untimed = [](const char* stage) {
    cl::KernelTiming k;
    k.stage = stage;
    k.kernel = "gemm";
    k.timed = false;
    return k;
  };
  const std::vector<cl::KernelTiming> recorded = {
      mark("text encoder", 0.5),  untimed("text encoder"), untimed("text encoder"), mark("unet step 1", 2.5),
      untimed("unet step 1"),     mark("preview after unet step 1", 6.0), untimed("preview after unet step 1"),
      mark("unet step 2", 6.5),   untimed("unet step 2"),  mark("vae decode", 9.0), untimed("vae decode"),
      mark("checks", 10.25),      untimed("checks")};
  StageTimings t;
  std::vector<KernelProfileEntry> profile;
  pipeline::add_stage_timings(recorded, t, &profile);
  EXPECT_DOUBLE_EQ(t.text_encoder_ms, 2.0);
  ASSERT_EQ(t.unet_step_ms.size(), 2u);
  EXPECT_DOUBLE_EQ(t.unet_step_ms[0], 3.5);
  EXPECT_DOUBLE_EQ(t.unet_step_ms[1], 2.5);
  EXPECT_DOUBLE_EQ(t.vae_decode_ms, 1.25);
  EXPECT_DOUBLE_EQ(t.device_span_ms, 9.75);
  EXPECT_DOUBLE_EQ(t.device_busy_ms, 9.75);
  EXPECT_EQ(t.stage_launches, (std::map<std::string, int>{{"text encoder", 2},
                                                          {"unet step 1", 1},
                                                          {"preview after unet step 1", 1},
                                                          {"unet step 2", 1},
                                                          {"vae decode", 1},
                                                          {"checks", 1}}));
  EXPECT_TRUE(profile.empty()) << "no kernel has a time of its own";
  EXPECT_TRUE(pipeline::longest_idle_gaps(recorded, 5).empty());
}

// The host's clock outside the device's span, in its parts: the first mark's enqueue relates the clocks. Here the
// host enqueued it 2 ms after the call began, at 10 ms on the device's clock; the device reached it at 10.5 ms,
// the last mark at 50 ms and ended its last command at 50.3 ms; the host's wait returned 44 ms after the call
// began (42.3 ms on its clock when the device ended, so it woke 1.7 ms later).
TEST(StageTimings, HostGapPartsRelateTheClocksThroughTheFirstMarksEnqueue) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start{std::chrono::seconds(100)};
  auto mark = [](const char* stage, double at) {
    cl::KernelTiming k;
    k.stage = stage;
    k.start_ms = at;
    k.mark = true;
    return k;
  };
  std::vector<cl::KernelTiming> recorded = {mark("text encoder", 10.5), mark("unet step 1", 20), mark("checks", 50)};
  recorded[0].queued_ms = 10.0;
  recorded[0].host_enqueued = start + std::chrono::milliseconds(2);
  recorded[0].host_enqueue_call = std::chrono::microseconds(30);
  recorded[1].queued_ms = 12.0;  // only the first mark relates the clocks
  recorded[1].host_enqueued = start + std::chrono::milliseconds(30);
  const Clock::time_point waited = start + std::chrono::milliseconds(44);
  StageTimings t;
  pipeline::add_host_gap_parts(recorded, start, 50.3, waited, t);
  ASSERT_TRUE(t.host_gap_parts);
  EXPECT_NEAR(t.host_first_enqueue_ms, 2.0, 1e-9);
  EXPECT_NEAR(t.host_before_device_ms, 2.5, 1e-9);
  EXPECT_NEAR(t.device_tail_ms, 0.3, 1e-9);
  EXPECT_NEAR(t.host_wake_ms, 1.7, 1e-9);
  EXPECT_NEAR(t.host_gap_clock_error_ms, 0.015, 1e-9);

  // Without the first mark's enqueue time (a driver that gives none), or without the last command's end: unset.
  for (const bool without_queued : {true, false}) {
    std::vector<cl::KernelTiming> partial = recorded;
    if (without_queued) partial[0].queued_ms.reset();
    StageTimings u;
    pipeline::add_host_gap_parts(partial, start, without_queued ? std::optional<double>(50.3) : std::nullopt, waited,
                                 u);
    EXPECT_FALSE(u.host_gap_parts);
    EXPECT_EQ(u.host_before_device_ms, 0);
    EXPECT_EQ(u.host_wake_ms, 0);
  }
}

// A generation that is not profiled records no event per launch (each costs NVIDIA's driver host time) and still
// times every stage and counts every launch: the same counts as a profiled generation of the same request.
TEST(Engine, WithoutAProfileStagesAreTimedByTheirMarksAndEveryLaunchCounted) {
  const Request request = small_request(Decoder::Both, 2);
  const Result marked = generate_on_tiny(false, request), profiled = generate_on_tiny(true, request);
  const StageTimings& t = marked.timings;
  EXPECT_TRUE(marked.kernel_profile.empty());
  expect_every_stage_timed(t);
  ASSERT_EQ(t.unet_step_ms.size(), 2u);  // (read below)
  const double stages = t.text_encoder_ms + t.unet_step_ms[0] + t.unet_step_ms[1] + t.vae_decode_ms + t.taesd_decode_ms;
  EXPECT_NEAR(stages, t.device_span_ms, 1e-6) << "the stages tile the span between the first mark and the last";
  EXPECT_EQ(t.device_busy_ms, t.device_span_ms);
  EXPECT_LT(t.device_span_ms, t.total_ms);
  EXPECT_EQ(t.stage_launches, profiled.timings.stage_launches);
  EXPECT_GT(t.stage_launches.at("unet step 1"), 10);
  EXPECT_FALSE(profiled.kernel_profile.empty());
  // The host's clock outside the span, by part (PoCL gives enqueue times): each is a stretch of real time, so
  // none is negative beyond the clocks' relation (known within half the first mark's enqueue call, which a busy
  // machine can stretch), the device reaches its first mark after the host enqueued it, and the host wakes after
  // the device's last command.
  ASSERT_TRUE(t.host_gap_parts);
  const double error = t.host_gap_clock_error_ms + 0.01;
  EXPECT_GE(t.host_gap_clock_error_ms, 0);
  EXPECT_GE(t.host_first_enqueue_ms, 0);
  EXPECT_GE(t.host_before_device_ms, t.host_first_enqueue_ms) << "the device's clock: the mark ran after it was queued";
  EXPECT_GE(t.device_tail_ms, 0);
  EXPECT_GE(t.host_wake_ms, -error);
  EXPECT_FALSE(profiled.timings.host_gap_parts) << "a profile's launches have events, not marks";
}

}  // namespace
}  // namespace sdt::test
