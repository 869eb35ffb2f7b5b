// The engine under the failures of RELIABILITY.md that reach it: a model file of the wrong kind (refused before a
// device is looked for), a weight file truncated between opening and uploading (an error, not SIGBUS), prompts of
// a megabyte, with NUL bytes, a BOM or invalid UTF-8 (the dropped token count reported), NaN weights in each part
// (the error names the stage, no image is returned), cancellation at each stage boundary (nothing returned, the
// device memory given back, the next image equal to a fresh engine's), and a kernel that fails to build on a cold
// cache followed by kernels built from source that give the same bytes as cached ones.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <thread>

#include "engine_fixture.hpp"
#include "faults.hpp"
#include "io/model_files.hpp"
#include "io/safetensors.hpp"
#include "models/architecture.hpp"
#include "pipeline/pipeline.hpp"
#include "runtime/cl_error.hpp"
#include "sdt/error.hpp"

namespace sdt::test {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

Request small_request(Decoder decoder = Decoder::Full, int steps = 1) {
  Request r;
  r.prompt = "a red fox in fresh snow, watercolour";
  r.seed = 4242;
  r.width = 64;
  r.height = 64;
  r.steps = steps;
  r.decoder = decoder;
  return r;
}

std::string error_of(const std::function<void()>& body, ErrorKind expected_kind) {
  try {
    body();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), expected_kind) << e.what();
    return e.message();
  }
  ADD_FAILURE() << "no sdt::Error was thrown";
  return {};
}

std::vector<char> slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The fixture's diffusers folder under `dir`: every part linked, except that `part`'s weight file is a private copy
// (never a link: tests truncate or edit it) passed through `edit` first.
using WeightEdit = std::function<void(std::vector<char>& bytes, const io::SafetensorsHeader& header)>;
fs::path model_with_copied_weights(const fs::path& dir, const std::string& part, const std::string& file,
                                   const WeightEdit& edit = {}) {
  const fs::path source = fs::absolute(tiny_fixture_dir() / "model");  // links from the temp folder: absolute
  for (const char* entry : {"model_index.json", "scheduler", "text_encoder", "tokenizer", "unet", "vae"})
    if (entry != part) fs::create_symlink(source / entry, dir / entry);
  fs::create_directory(dir / part);
  fs::create_symlink(source / part / "config.json", dir / part / "config.json");
  std::vector<char> bytes = slurp(source / part / file);
  if (edit) {
    const io::SafetensorsHeader header =
        io::parse_safetensors(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(), file);
    edit(bytes, header);
  }
  std::ofstream(dir / part / file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return dir;
}

// Sets element `index` of the F32 tensor `name` in a safetensors file held in memory.
WeightEdit set_f32(const std::string& name, std::size_t index, float value) {
  return [=](std::vector<char>& bytes, const io::SafetensorsHeader& header) {
    for (const auto& e : header.entries) {
      if (e.name != name) continue;
      ASSERT_EQ(e.dtype_name, "F32") << name;
      ASSERT_LT(index * 4, e.end - e.begin) << name;
      std::memcpy(bytes.data() + header.data_offset + e.begin + index * 4, &value, 4);
      return;
    }
    FAIL() << "the fixture has no tensor " << name;
  };
}

EngineOptions options_for(const fs::path& model) {
  EngineOptions o = fixture_engine_options();
  o.model = model.string();
  o.taesd = "";
  return o;
}

// ---- RELIABILITY.md 10: a valid file of the wrong kind is named before any device is looked for ----

TEST(EngineReliability, WrongKindOfModelIsRefusedBeforeTheDeviceIsChosen) {
  TempDir dir("sdt-test-wrong-kind");
  // A LoRA: a valid safetensors file, only not a model.
  const std::string header =
      R"({"lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight":{"dtype":"F32","shape":[2],)"
      R"("data_offsets":[0,8]},"lora_unet_down_blocks_0_attentions_0_proj_in.alpha":{"dtype":"F32","shape":[1],)"
      R"("data_offsets":[8,12]}})";
  std::string file(8, '\0');
  const std::uint64_t length = header.size();
  std::memcpy(file.data(), &length, 8);
  file += header;
  file += std::string("\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40", 12);
  std::ofstream(dir.path() / "style.safetensors", std::ios::binary) << file;

  EngineOptions o = fixture_engine_options();
  o.model = (dir.path() / "style.safetensors").string();
  o.taesd = "";
  o.device = "no-such-device-anywhere";  // looking for it would fail with another message
  const std::string message = error_of([&] { Engine engine(o); }, ErrorKind::BadModel);
  EXPECT_NE(message.find("LoRA"), std::string::npos) << message;
  EXPECT_NE(message.find("style.safetensors"), std::string::npos) << message;
  EXPECT_EQ(message.find("no-such-device"), std::string::npos) << "a device was looked for first: " << message;

  // The same bogus device with a good model does fail on the device: the order above is what was tested.
  EngineOptions good = fixture_engine_options();
  good.device = "no-such-device-anywhere";
  EXPECT_NE(error_of([&] { Engine engine(good); }, ErrorKind::BadRequest).find("no-such-device"), std::string::npos);
}

// ---- RELIABILITY.md 13: a weight file truncated after it was opened and before its upload ----

TEST(EngineReliability, WeightFileTruncatedBetweenOpeningAndUploadFailsCleanly) {
  TempDir dir("sdt-test-truncated-live");
  const fs::path model = model_with_copied_weights(dir.path(), "unet", "diffusion_pytorch_model.safetensors");
  const fs::path weights = model / "unet" / "diffusion_pytorch_model.safetensors";
  const io::ModelFiles files = io::open_model(models::architecture(), model.string());  // validated and mapped
  fs::resize_file(weights, fs::file_size(weights) / 2);  // the download restarted, the disk filled, ...
  auto ctx = make_context();
  const std::string message =
      error_of([&] { (void)pipeline::load_models(*ctx, files, nn::DType::F32); }, ErrorKind::Io);
  EXPECT_NE(message.find(weights.string()), std::string::npos) << "the file is not named: " << message;
  EXPECT_NE(message.find("changed size"), std::string::npos) << message;
}

// ---- RELIABILITY.md 14: prompts that are huge or not clean text ----

TEST(EngineReliability, MegabytePromptIsTruncatedAndTheDroppedTokenCountIsReported) {
  Engine& engine = fixture_engine();
  Request request = small_request();
  request.prompt.clear();
  for (int i = 0; i < 200000; ++i) request.prompt += "word ";  // 1,000,000 bytes, 200,000 tokens
  const Result result = engine.generate(request);
  EXPECT_EQ(result.prompt_tokens, 200000);
  EXPECT_EQ(result.dropped_tokens, 200000 - 75);
  ASSERT_EQ(result.warnings.size(), 1u);
  EXPECT_NE(result.warnings[0].find("200000 tokens"), std::string::npos) << result.warnings[0];
  EXPECT_NE(result.warnings[0].find("the last 199925"), std::string::npos) << result.warnings[0];
  // The image is that of the 75 tokens that fit.
  Request fitting = request;
  fitting.prompt.clear();
  for (int i = 0; i < 75; ++i) fitting.prompt += "word ";
  const Result short_result = engine.generate(fitting);
  EXPECT_TRUE(short_result.warnings.empty());
  EXPECT_EQ(short_result.image.rgb, result.image.rgb);
}

TEST(EngineReliability, PromptsWithNulBomAndInvalidUtf8MakeImagesAndCleanPngText) {
  Engine& engine = fixture_engine();
  TempDir dir("sdt-test-odd-prompts");
  const std::string prompts[] = {std::string("a cat\0 on a mat", 15),
                                 "\xEF\xBB\xBF"
                                 "a cat on a mat",
                                 "a cat \xff\xfe\xc3 on a mat", "🐱 猫 кошка قطة बिल्ली on a mat"};
  int index = 0;
  for (const std::string& prompt : prompts) {
    Request request = small_request();
    request.prompt = prompt;
    const Result result = engine.generate(request);
    ASSERT_EQ(result.image.rgb.size(), 64u * 64u * 3u) << "prompt " << index;
    const fs::path path = dir.path() / ("p" + std::to_string(index++) + ".png");
    write_png(path, result.image, engine.png_metadata(request, result));
    std::vector<PngText> texts;
    EXPECT_EQ(read_png(path, &texts).rgb, result.image.rgb);
    ASSERT_FALSE(texts.empty());
    const std::string& parameters = texts[0].value;
    EXPECT_EQ(parameters.find('\0'), std::string::npos) << "a raw NUL reached the PNG text";
    EXPECT_TRUE(nlohmann::json::accept(texts[1].value)) << "the JSON chunk does not parse";
    if (prompt == prompts[3]) {
      EXPECT_EQ(parameters.rfind(prompt + "\n", 0), 0u) << "clean UTF-8 must round-trip";
    }
  }
}

// ---- RELIABILITY.md 21: NaN in the weights of each part is reported with the stage and the tensor, and no image
// comes back ----

struct NanCase {
  const char* part;
  const char* file;
  const char* tensor;
  const char* named_stage;
};

class NanWeights : public ::testing::TestWithParam<NanCase> {};

TEST_P(NanWeights, AreReportedNamingTheStageAndNoImageIsMade) {
  const NanCase& c = GetParam();
  TempDir dir("sdt-test-nan-weights");
  const fs::path model = model_with_copied_weights(dir.path(), c.part, c.file,
                                                   set_f32(c.tensor, 1, std::numeric_limits<float>::quiet_NaN()));
  Engine engine(options_for(model));
  Result result;
  result.image.width = -1;  // poisoned: generate must not hand out anything
  const std::string message = error_of([&] { result = engine.generate(small_request()); }, ErrorKind::Device);
  EXPECT_NE(message.find(c.named_stage), std::string::npos) << message;
  EXPECT_NE(message.find("non-finite"), std::string::npos) << message;
  // ... and the tensor, by its name in the model, with the one value planted.
  const std::string tensor = std::string(c.part) + "." + c.tensor + " (1)";
  EXPECT_NE(message.find("its weights hold NaN or Inf: " + tensor), std::string::npos) << message;
  EXPECT_NE(message.find("no image was made"), std::string::npos) << message;
  EXPECT_EQ(result.image.width, -1);
  EXPECT_TRUE(result.image.rgb.empty());
  // Asked again, the engine says the same instead of returning a cached broken embedding as an image.
  EXPECT_NE(error_of([&] { result = engine.generate(small_request()); }, ErrorKind::Device).find(c.named_stage),
            std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(EngineReliability, NanWeights,
                         ::testing::Values(NanCase{"text_encoder", "model.safetensors",
                                                   "text_model.final_layer_norm.weight", "the text encoder produced"},
                                           NanCase{"unet", "diffusion_pytorch_model.safetensors", "conv_in.weight",
                                                   "the UNet (1 step)"},
                                           NanCase{"vae", "diffusion_pytorch_model.safetensors",
                                                   "decoder.conv_out.bias", "the VAE decoder produced"}),
                         [](const ::testing::TestParamInfo<NanCase>& param) { return std::string(param.param.part); });

// ---- RELIABILITY.md 22: cancellation at each stage boundary ----

// Device memory the engine holds between requests once its caches are emptied: the weights and whatever the
// pool still holds in use.
std::uint64_t held_after_trim(Engine& engine) {
  engine.impl().pipeline().prompt_cache().clear();
  engine.impl().context().trim_pool();
  return engine.impl().context().memory().pooled_bytes + engine.impl().context().memory().persistent_bytes;
}

TEST(EngineReliability, CancelAtEveryStageReturnsNothingGivesMemoryBackAndLeavesTheNextImageUnchanged) {
  Engine& engine = fixture_engine();
  const Request request = small_request(Decoder::Both, 2);
  const Result reference = engine.generate(request);
  const std::uint64_t held_before = held_after_trim(engine);
  const Stage stages[] = {Stage::TextEncoder, Stage::Unet, Stage::VaeDecode, Stage::TaesdDecode, Stage::ReadBack};
  for (const Stage stage_id : stages) {
    const char* stage = stage_name(stage_id);
    std::atomic<bool> cancel{false};
    std::vector<std::string> after_cancel;
    const std::string message = error_of(
        [&] {
          (void)engine.generate(
              request,
              [&](const Progress& p) {
                if (cancel) after_cancel.push_back(stage_name(p.stage));
                if (p.stage == stage_id) cancel = true;
              },
              &cancel);
        },
        ErrorKind::Cancelled);
    EXPECT_NE(message.find("cancelled"), std::string::npos) << stage << ": " << message;
    EXPECT_TRUE(after_cancel.empty()) << "cancelled at " << stage << ", yet " << after_cancel.front() << " ran";
    EXPECT_EQ(held_after_trim(engine), held_before) << "device memory still held after cancelling at " << stage;
  }
  const Result after = engine.generate(request);
  EXPECT_EQ(after.image.rgb, reference.image.rgb);
  EXPECT_EQ(after.image_tiny.rgb, reference.image_tiny.rgb);
  // A fresh engine (as a fresh process would open) makes the same bytes.
  Engine fresh(fixture_engine_options());
  const Result fresh_result = fresh.generate(request);
  EXPECT_EQ(encode_png(fresh_result.image, fresh.png_metadata(request, fresh_result)),
            encode_png(after.image, engine.png_metadata(request, after)));
}

TEST(EngineReliability, CancelTakesEffectWithinAboutOneStage) {
  Engine& engine = fixture_engine();
  Request request = small_request(Decoder::Full, 4);
  request.width = request.height = 128;
  const Result uncancelled = engine.generate(request);
  double longest_stage_ms = uncancelled.timings.vae_decode_ms + uncancelled.timings.readback_ms;
  for (double ms : uncancelled.timings.unet_step_ms) longest_stage_ms = std::max(longest_stage_ms, ms);
  longest_stage_ms = std::max(longest_stage_ms, uncancelled.timings.text_encoder_ms);

  // Raised from another thread, as the app's Cancel button does, while step 1 of 4 runs.
  std::atomic<bool> cancel{false};
  std::atomic<bool> step_one{false};
  Clock::time_point raised;
  std::thread canceller([&] {
    while (!step_one) std::this_thread::yield();
    raised = Clock::now();
    cancel = true;
  });
  Clock::time_point stopped;
  (void)error_of(
      [&] {
        try {
          (void)engine.generate(
              request,
              [&](const Progress& p) {
                if (p.stage == Stage::Unet && p.step == 1) step_one = true;
              },
              &cancel);
        } catch (...) {
          stopped = Clock::now();
          throw;
        }
      },
      ErrorKind::Cancelled);
  canceller.join();
  const double delay_ms = std::chrono::duration<double, std::milli>(stopped - raised).count();
  std::printf("  cancel took effect after %.1f ms; the longest stage takes %.1f ms, the whole run %.1f ms\n", delay_ms,
              longest_stage_ms, uncancelled.timings.total_ms);
  // One stage in flight at a time: the delay is about one stage, well short of the remaining three steps and
  // the decoder. The margin covers a busy 2-core machine.
  EXPECT_LT(delay_ms, 2 * longest_stage_ms + 250) << "cancel waited for more than a stage";
}

// ---- RELIABILITY.md 16: fp32 weights that do not fit fall back to fp16, announced ----

// 17: a kernel that never returns. The third stage marker waits on an event nobody completes, which to the host
// is a hung kernel in the first UNet step: the watchdog ends the request with an error naming the stage, without
// waiting for the queue, and the next request reopens the device and gives the image of before.
TEST(EngineReliability, HungKernelFailsAfterTheWatchdogNamingTheStageAndTheNextRequestReopensTheDevice) {
  EngineOptions options = fixture_engine_options();
  options.watchdog_seconds = 1.0;
  Engine engine(options);
  const Request request = small_request(Decoder::Full, 2);
  const Result before = engine.generate(request);

  cl::arm_fault(cl::kHangFault, CL_INVALID_OPERATION, 2);
  const auto start = Clock::now();
  const std::string message = error_of([&] { (void)engine.generate(request); }, ErrorKind::Device);
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  cl::disarm_faults();
  EXPECT_NE(message.find("did not finish the stage 'unet step 1' within 1 s"), std::string::npos) << message;
  EXPECT_GE(waited, 1.0);
  EXPECT_LT(waited, 3.0 + 3.0 * before.timings.total_ms / 1000.0) << "the request outlived the watchdog by far";
  EXPECT_TRUE(engine.impl().needs_reopen_);

  const Result after = engine.generate(request);
  EXPECT_FALSE(engine.impl().needs_reopen_);
  EXPECT_EQ(after.image.rgb, before.image.rgb);
}

TEST(EngineReliability, Fp32WeightsThatDoNotFitFallBackToFp16AndSaySo) {
  const Request request = small_request();
  Engine fp16(fixture_engine_options(WeightStorage::F16));
  const Result fp16_result = fp16.generate(request);

  // The 40th weight buffer cannot be allocated, as on a card too small for the fp32 weights.
  cl::arm_fault("clCreateBuffer", CL_MEM_OBJECT_ALLOCATION_FAILURE, 40, 1);
  std::unique_ptr<Engine> engine;
  try {
    engine = std::make_unique<Engine>(fixture_engine_options(WeightStorage::F32));
  } catch (...) {
    cl::disarm_faults();
    throw;
  }
  cl::disarm_faults();
  EXPECT_EQ(engine->load_timings().weight_bytes, fp16.load_timings().weight_bytes) << "not loaded as fp16";
  ASSERT_FALSE(engine->model().warnings.empty());
  EXPECT_NE(engine->model().warnings.back().find("fp16"), std::string::npos) << engine->model().warnings.back();

  const Result first = engine->generate(request);
  ASSERT_EQ(first.warnings.size(), 1u) << "the fallback is announced with the first image";
  EXPECT_NE(first.warnings[0].find("did not fit into device memory"), std::string::npos) << first.warnings[0];
  EXPECT_NE(first.warnings[0].find("fp16"), std::string::npos) << first.warnings[0];
  EXPECT_EQ(first.image.rgb, fp16_result.image.rgb) << "not the image of fp16 weights";
  EXPECT_EQ(nlohmann::json::parse(engine->png_metadata(request, first)[1].value)["weights"], "fp16");
  EXPECT_TRUE(engine->generate(request).warnings.empty()) << "announced once, not with every image";

  // When fp16 does not fit either, the error says so and nothing opens.
  cl::arm_fault("clCreateBuffer", CL_MEM_OBJECT_ALLOCATION_FAILURE, 40, -1);
  const std::string message =
      error_of([&] { Engine never(fixture_engine_options(WeightStorage::F32)); }, ErrorKind::OutOfMemory);
  cl::disarm_faults();
  EXPECT_NE(message.find("clCreateBuffer"), std::string::npos) << message;
}

// ---- RELIABILITY.md 18, 22 and 26 on a cold kernel cache ----

TEST(EngineReliability, ColdCacheBuildFailureCancelDuringBuildsAndSourceBuiltKernelsGiveTheCachedBytes) {
  const Request request = small_request();
  Engine& warm = fixture_engine();
  const Result warm_result = warm.generate(request);
  const std::vector<std::uint8_t> warm_png = encode_png(warm_result.image, warm.png_metadata(request, warm_result));

  TempDir cache("sdt-test-cold-cache");
  EngineOptions o = fixture_engine_options();
  o.cache_dir = cache.path();
  // Programs built when first used, as for sizes the opening did not prepare (test_model_opening.cpp covers the
  // preparation while opening, and a failure there).
  o.prepare_kernels = false;
  Engine cold(o);

  // 18: the first program built from source fails; the message carries the call and the failure is logged with
  // the program's name; the engine stays usable.
  std::string logged;
  cl::arm_fault("clBuildProgram", CL_BUILD_PROGRAM_FAILURE);
  const std::string message = error_of(
      [&] {
        LogCapture log("cl");
        try {
          (void)cold.generate(request);
        } catch (...) {
          logged = log.text();
          throw;
        }
      },
      ErrorKind::Device);
  cl::disarm_faults();
  EXPECT_NE(message.find("clBuildProgram"), std::string::npos) << message;
  EXPECT_NE(message.find("CL_BUILD_PROGRAM_FAILURE"), std::string::npos) << message;
  EXPECT_NE(logged.find("failed to build"), std::string::npos) << "not logged: " << logged;

  // 22: cancelled while the text encoder's programs are built; the engine stops at the next stage.
  std::atomic<bool> cancel{false};
  std::vector<std::string> after_cancel;
  (void)error_of(
      [&] {
        (void)cold.generate(
            request,
            [&](const Progress& p) {
              if (cancel) after_cancel.push_back(stage_name(p.stage));
              if (p.stage == Stage::TextEncoder) cancel = true;
            },
            &cancel);
      },
      ErrorKind::Cancelled);
  EXPECT_TRUE(after_cancel.empty()) << after_cancel.front() << " ran after the cancel";

  // 26: everything else built from source now: the same PNG bytes as the engine whose kernels came from the
  // cache; and the first complete run after the failure and the cancel is that of a fresh process.
  const Result cold_result = cold.generate(request);
  EXPECT_GT(cold_result.timings.kernel_build_ms, 0) << "the programs were not built during this run";
  EXPECT_EQ(encode_png(cold_result.image, cold.png_metadata(request, cold_result)), warm_png);
}

}  // namespace
}  // namespace sdt::test
