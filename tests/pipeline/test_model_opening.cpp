// Opening a model (issues 20 and 14): every file layout with either weight storage goes through the staged upload
// and gives the same image; the open's figures are filled in and printed (a regression guard for the tiny fixture
// on PoCL, never compared with a time); the kernels a first image needs are prepared while the model opens, counted
// in the progress, and the first image builds none; a kernel that fails to prepare is built again when needed; the
// layouts the model writer makes open to the model they came from.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>

#include "engine_fixture.hpp"
#include "io/model_files.hpp"
#include "models/architecture.hpp"
#include "nn/tensor.hpp"
#include "pipeline/kernel_plan.hpp"
#include "runtime/cl_error.hpp"
#include "sdt/error.hpp"
#include "sdt/model_export.hpp"

namespace sdt::test {
namespace {

namespace fs = std::filesystem;

Request small_request() {
  Request r;
  r.prompt = "a harbour at dawn, pastel";
  r.seed = 777;
  r.width = 64;
  r.height = 64;
  r.decoder = Decoder::Both;
  return r;
}

struct Layout {
  const char* name;
  const char* path;  // under the fixture folder
};
const Layout kLayouts[] = {{"diffusers folder", "model"},
                           {"single file (LDM)", "model.ldm.safetensors"},
                           {"single file (SGM)", "model.sgm.safetensors"}};

EngineOptions layout_options(const Layout& layout, WeightStorage storage) {
  EngineOptions o = fixture_engine_options(storage);
  o.model = (tiny_fixture_dir() / layout.path).string();
  // The fixture's widths are not multiples of 64: single files get the diffusers configs for their head counts.
  if (std::string(layout.path) != "model") o.model_config = tiny_fixture_dir() / "model";
  o.prepare_width = 64;
  o.prepare_height = 64;
  return o;
}

// Bytes of the weights `model` opens to, and of those the ones fp16 storage narrows (matrices and kernels).
std::pair<std::uint64_t, std::uint64_t> weight_bytes(const EngineOptions& o) {
  io::OpenOptions open;
  open.taesd = o.taesd;
  open.config_dir = o.model_config;
  const io::ModelFiles files = io::open_model(models::architecture(), o.model, open);
  std::uint64_t all = 0, matrices = 0;
  for (const auto& name : files.weights.names()) {
    const io::TensorView* view = files.weights.find(name);
    all += view->bytes;
    if (view->shape.size() >= 2) matrices += view->bytes;
  }
  return {all, matrices};
}

TEST(ModelOpening, EveryLayoutAndStorageGivesTheSameImageAndReportsItsUpload) {
  const Request request = small_request();
  for (const WeightStorage storage : {WeightStorage::F16, WeightStorage::F32}) {
    const char* storage_name = storage == WeightStorage::F16 ? "fp16" : "fp32";
    std::optional<Result> first;
    for (const Layout& layout : kLayouts) {
      SCOPED_TRACE(std::string(layout.name) + ", " + storage_name + " storage");
      EngineOptions o = layout_options(layout, storage);
      std::vector<OpenProgress> reports;
      o.on_open_progress = [&](const OpenProgress& p) { reports.push_back(p); };
      Engine engine(o);
      const LoadTimings& t = engine.load_timings();
      const auto [bytes, matrix_bytes] = weight_bytes(o);
      EXPECT_EQ(t.file_bytes, bytes);
      EXPECT_EQ(t.converted_bytes, storage == WeightStorage::F16 ? matrix_bytes : 0u) << "the files are fp32";
      EXPECT_GE(t.read_threads, 1);
      EXPECT_GT(t.upload_ms, 0);
      EXPECT_EQ(engine.model().file_dtypes, "F32");
      EXPECT_EQ(engine.model().layout, layout.name);

      ASSERT_FALSE(reports.empty());
      for (std::size_t i = 1; i < reports.size(); ++i) {
        EXPECT_GE(reports[i].bytes_read, reports[i - 1].bytes_read);
        EXPECT_GE(reports[i].kernels_ready, reports[i - 1].kernels_ready);
        EXPECT_LE(reports[i].bytes_uploaded, reports[i].bytes_read);
      }
      EXPECT_EQ(reports.back().bytes_total, bytes);
      EXPECT_EQ(reports.back().bytes_uploaded, bytes);
      EXPECT_EQ(reports.back().kernels_ready, reports.back().kernels_total);
      EXPECT_EQ(reports.back().device, engine.device().name);

      const Result result = engine.generate(request);
      // The record this test keeps of the tiny fixture's open on this machine (not an assertion: CI machines vary).
      std::printf(
          "[ open ] %-18s %s storage: files %.1f ms, weights %.1f ms (read %.2f MB in %.1f ms on %d "
          "threads, copies %.1f ms, converted %.2f MB in %.1f ms), kernels %d prepared in %.1f ms (waited "
          "%.1f ms); first image %.1f ms\n",
          layout.name, storage_name, t.model_load_ms, t.upload_ms, static_cast<double>(t.file_bytes) * 1e-6, t.read_ms,
          t.read_threads, t.transfer_ms, static_cast<double>(t.converted_bytes) * 1e-6, t.convert_ms,
          t.kernels_prepared, t.kernel_prepare_ms, t.kernel_wait_ms, result.timings.total_ms);
      if (!first) {
        first = result;
        continue;
      }
      EXPECT_EQ(result.image.rgb, first->image.rgb) << "not the image of the diffusers folder";
      EXPECT_EQ(result.image_tiny.rgb, first->image_tiny.rgb);
    }
  }
}

TEST(ModelOpening, KernelsArePreparedWhileOpeningAndTheFirstImageBuildsNone) {
  TempDir cache("sdt-test-prepare-cache");
  EngineOptions o = layout_options(kLayouts[0], WeightStorage::F16);
  o.cache_dir = cache.path();
  std::vector<OpenProgress> reports;
  o.on_open_progress = [&](const OpenProgress& p) { reports.push_back(p); };
  {
    Engine engine(o);
    const LoadTimings& t = engine.load_timings();
    EXPECT_GT(t.kernels_prepared, 3);
    EXPECT_EQ(t.kernels_built_while_opening, t.kernels_prepared) << "an empty cache: every program from source";
    // A GPU with tensor cores also builds its probe's program (not one of the model's).
    EXPECT_EQ(t.kernel_cache_misses, t.kernels_prepared + t.probe_builds);
    ASSERT_FALSE(reports.empty());
    EXPECT_EQ(reports.back().kernels_total, t.kernels_prepared);
    EXPECT_EQ(reports.back().kernels_to_build, t.kernels_prepared);
    EXPECT_TRUE(std::any_of(reports.begin(), reports.end(), [](const OpenProgress& p) {
      return p.kernels_ready < p.kernels_total;
    })) << "the progress never showed a program still to prepare";
    const Result first = engine.generate(small_request());
    EXPECT_EQ(first.timings.kernel_build_ms, 0) << "the first image built a program the plan missed";
  }
  // The same device again: every program from the cache, nothing to build.
  reports.clear();
  Engine again(o);
  EXPECT_EQ(again.load_timings().kernels_built_while_opening, 0);
  EXPECT_EQ(again.load_timings().kernel_cache_misses, 0);
  EXPECT_EQ(reports.back().kernels_to_build, 0);
}

// A first start where the products have tensor-core kernels (here their tiling without PTX, which the test device
// runs): opening waits for the portable programs only, the first image is the portable path's, the tensor-core
// programs build after opening, and generations switch to them between two images. A second start finds them all
// in the cache and defers nothing. Each image is compared with an engine that takes its path from the start.
TEST(ModelOpening, AFirstStartMakesItsFirstImageOnThePortableKernelsWhileTheTensorCoreOnesBuild) {
  const Request request = small_request();
  const EnvScope emulated("SDT_TENSOR_CORES", "emulated");
  // As NVIDIA's row: the resnet convolutions channels-last, so the first images (portable) run them through the
  // way back to the stored order (nn::conv_weight_taps_last), which the portable plan must have built.
  const EnvScope channels_last("SDT_TC_CHANNELS_LAST", "1");
  TempDir cache("sdt-test-deferred-cache");
  EngineOptions o = layout_options(kLayouts[0], WeightStorage::F16);
  o.cache_dir = cache.path();
  Result first, switched;
  {
    Engine engine(o);
    const LoadTimings& t = engine.load_timings();
    EXPECT_GT(t.kernels_deferred, 0) << "nothing was left to build after opening";
    EXPECT_EQ(t.kernels_built_while_opening, t.kernels_prepared);
    EXPECT_TRUE(engine.impl().context().tuning().steady_path_deferred());
    EXPECT_EQ(engine.kernel_paths().winograd_layers, 0) << "layers loaded for the portable path they leave later";
    EXPECT_GT(engine.kernel_paths().channels_last_layers, 0) << "loaded for the tensor-core path they switch to";
    first = engine.generate(request);
    // A cancelled wait stops no build: the switch still comes. (Whether the builds are still running here depends
    // on the OpenCL implementation's own compiler cache; when they are, a wait that stopped them would never end.)
    const std::atomic<bool> raised{true};
    const bool ended = engine.wait_for_kernels(&raised);
    EXPECT_EQ(engine.impl().context().tuning().steady_path_deferred(), !ended)
        << "a cancelled wait said the switch " << (ended ? "came" : "did not come") << ", the engine says otherwise";
    EXPECT_EQ(first.timings.kernel_build_ms, 0) << "the first image built a program the portable plan missed";
    ASSERT_TRUE(engine.wait_for_kernels());
    EXPECT_FALSE(engine.impl().context().tuning().steady_path_deferred());
    EXPECT_GT(t.deferred_kernels_ready_ms, 0);
    switched = engine.generate(request);
    EXPECT_EQ(switched.timings.kernel_build_ms, 0) << "the tensor-core images built a program the plan missed";
    EXPECT_TRUE(engine.wait_for_kernels()) << "nothing left to wait for";
  }
  Engine again(o);
  EXPECT_EQ(again.load_timings().kernels_deferred, 0) << "the cache had every program";
  EXPECT_EQ(again.load_timings().kernels_built_while_opening, 0);
  EXPECT_FALSE(again.impl().context().tuning().steady_path_deferred());
  EXPECT_EQ(again.generate(request).image.rgb, switched.image.rgb);

  // Each path from the start (kernels from the shared cache): the portable one without Winograd, as above, and its
  // attention as blocked products (the flash program is not built for the first images).
  EngineOptions portable = layout_options(kLayouts[0], WeightStorage::F16);
  portable.tensor_cores = false;
  portable.winograd = WinogradUse::Off;
  const EnvScope blocked("SDT_FLASH_ATTENTION", "0");
  const Result reference = Engine(portable).generate(request);
  EXPECT_EQ(first.image.rgb, reference.image.rgb) << "the first image is not the portable path's";
  EXPECT_EQ(first.image_tiny.rgb, reference.image_tiny.rgb);
  EXPECT_NE(first.image.rgb, switched.image.rgb) << "the two paths gave the same image: this test tells nothing";
}

TEST(ModelOpening, AFirstStartWithQuickerTilesDefersTheSteadyProgramsWithFp32WeightsToo) {
  // On NVIDIA the first images of a first start take gemm.cl tiles that build sooner (cl::GemmRow::deferred) and
  // blocked attention, with either storage; here the override stands in for that row. fp32 storage: no tensor
  // cores, so only those programs are deferred. The first image is the one the deferred tiles give from the start,
  // the next ones (after the switch) the steady path's.
  const Request request = small_request();
  const char* quick = "32,32,16,4,4";
  const EnvScope first_tiles("SDT_FIRST_GEMM_TILE", quick);
  TempDir cache("sdt-test-deferred-fp32-cache");
  EngineOptions o = layout_options(kLayouts[0], WeightStorage::F32);
  o.cache_dir = cache.path();
  Result first, switched;
  {
    Engine engine(o);
    const LoadTimings& t = engine.load_timings();
    EXPECT_GT(t.kernels_deferred, 0) << "nothing was left to build after opening";
    EXPECT_TRUE(engine.impl().context().tuning().steady_path_deferred());
    EXPECT_FALSE(engine.tensor_cores());
    EXPECT_EQ(engine.impl().context().tuning().gemm(cl::GemmMode::Conv), (cl::GemmConfig{32, 32, 16, 4, 4}));
    first = engine.generate(request);
    EXPECT_EQ(first.timings.kernel_build_ms, 0) << "the first image built a program the first images' plan missed";
    ASSERT_TRUE(engine.wait_for_kernels());
    EXPECT_FALSE(engine.impl().context().tuning().steady_path_deferred());
    EXPECT_NE(engine.impl().context().tuning().gemm(cl::GemmMode::Conv), (cl::GemmConfig{32, 32, 16, 4, 4}));
    switched = engine.generate(request);
    EXPECT_EQ(switched.timings.kernel_build_ms, 0) << "the steady images built a program the plan missed";
  }
  Engine again(o);
  EXPECT_EQ(again.load_timings().kernels_deferred, 0) << "the cache had every program";
  EXPECT_FALSE(again.impl().context().tuning().steady_path_deferred());
  EXPECT_EQ(again.generate(request).image.rgb, switched.image.rgb);

  // The first images' path from the start: every product on the quick tiles, attention as blocked products.
  const EnvScope pinned("SDT_GEMM_TILE", quick);
  const EnvScope blocked("SDT_FLASH_ATTENTION", "0");
  EngineOptions reference_options = layout_options(kLayouts[0], WeightStorage::F32);
  reference_options.defer_steady_kernels = false;
  const Result reference = Engine(reference_options).generate(request);
  EXPECT_EQ(first.image.rgb, reference.image.rgb) << "the first image is not the quick tiles' path's";
  EXPECT_EQ(first.image_tiny.rgb, reference.image_tiny.rgb);
  // (In fp32 the two paths give this model's images to the byte, so the images check that each path is right;
  // which one ran is checked by the tiles above and by the first image building nothing of the steady plan.)
}

TEST(ModelOpening, WithTheFirstImagesProgramsCachedOnlyTheSteadyOnesAreDeferred) {
  // A cache holding the first images' programs but not the steady path's (an earlier start closed before its
  // deferred builds, or a first start of another row): the open builds nothing, the steady programs are deferred,
  // and the first image takes the first images' path without building.
  const Request request = small_request();
  const char* quick = "32,32,16,4,4";
  TempDir cache("sdt-test-first-cached");
  Result reference;
  {
    // The first images' path from the start: the quick tiles, attention as blocked products, into the cache.
    const EnvScope pinned("SDT_GEMM_TILE", quick);
    const EnvScope blocked("SDT_FLASH_ATTENTION", "0");
    EngineOptions o = layout_options(kLayouts[0], WeightStorage::F32);
    o.cache_dir = cache.path();
    o.defer_steady_kernels = false;
    reference = Engine(o).generate(request);
  }
  const EnvScope first_tiles("SDT_FIRST_GEMM_TILE", quick);
  EngineOptions o = layout_options(kLayouts[0], WeightStorage::F32);
  o.cache_dir = cache.path();
  Engine engine(o);
  const LoadTimings& t = engine.load_timings();
  EXPECT_EQ(t.kernels_built_while_opening, 0) << "the first images' programs were all in the cache";
  EXPECT_GT(t.kernels_deferred, 0) << "the steady path's programs were not deferred";
  EXPECT_TRUE(engine.impl().context().tuning().steady_path_deferred());
  const Result first = engine.generate(request);
  EXPECT_EQ(first.timings.kernel_build_ms, 0) << "the first image built a program";
  EXPECT_EQ(first.image.rgb, reference.image.rgb) << "the first image is not the first images' path's";
  ASSERT_TRUE(engine.wait_for_kernels());
  EXPECT_FALSE(engine.impl().context().tuning().steady_path_deferred());
}

// The kernel plan runs the models without running anything: the tensor-core probe (ldmatrix) must not take that
// run's empty read-back for a device that lacks the feature. The engine probes for real before it plans.
TEST(KernelPlan, PlanningLeavesTheTensorCoreProbeToARealRun) {
  auto ctx = make_context();
  const TuningScope ptx(*ctx, [](cl::TuningOverrides& t) { t.tensor_cores = cl::TensorCores::Ptx; });
  const io::ModelFiles files =
      io::open_model(models::architecture(), (tiny_fixture_dir() / "model").string(), io::OpenOptions{});
  const std::vector<cl::ProgramRequest> programs = pipeline::plan_kernels(*ctx, files, nn::DType::F16, 64, 64, true);
  EXPECT_FALSE(ctx->tuning().ldmatrix_probed()) << "planning settled the ldmatrix probe without running it";
  EXPECT_TRUE(std::any_of(programs.begin(), programs.end(), [](const cl::ProgramRequest& p) {
    return p.name == "gemm_tc" && p.options.find("-DSDT_PTX=1") != std::string::npos;
  })) << "the plan has no tensor-core product";
}

TEST(ModelOpening, AKernelThatFailsToPrepareIsBuiltAgainWhenNeeded) {
  const Request request = small_request();
  EngineOptions o = fixture_engine_options();
  o.prepare_width = o.prepare_height = 64;
  // Direct convolutions: with Winograd layers the first program planned is the filter transform, which the
  // opening itself runs, so the failed program would be built again while opening, before generate().
  o.winograd = WinogradUse::Off;
  // The steady path from the start (a GPU's row defers it otherwise).
  o.defer_steady_kernels = false;
  // The image of the same path without the failure (its kernels from the shared cache; a GPU's row takes Winograd
  // where the fixture engine's options allow it, so that engine's image is another path's).
  const Result warm = Engine(o).generate(request);
  TempDir cache("sdt-test-prepare-fail-cache");
  o.cache_dir = cache.path();
  cl::arm_fault("clBuildProgram", CL_BUILD_PROGRAM_FAILURE);
  std::unique_ptr<Engine> engine;
  try {
    engine = std::make_unique<Engine>(o);  // the failure is logged and left for the program's first use
  } catch (...) {
    cl::disarm_faults();
    throw;
  }
  cl::disarm_faults();
  EXPECT_LT(engine->load_timings().kernel_cache_misses, engine->load_timings().kernels_prepared);
  const Result result = engine->generate(request);
  EXPECT_GT(result.timings.kernel_build_ms, 0) << "the program that failed was not built again";
  EXPECT_EQ(result.image.rgb, warm.image.rgb);
}

TEST(ModelOpening, ACancelWhileTheModelOpensStopsIt) {
  TempDir cache("sdt-test-prepare-cancel-cache");
  EngineOptions o = fixture_engine_options(WeightStorage::F16);
  o.cache_dir = cache.path();
  std::atomic<bool> cancel{false};
  o.cancel = &cancel;
  o.on_open_progress = [&](const OpenProgress& p) {
    if (p.kernels_total > 0) cancel = true;
  };
  try {
    Engine engine(o);
    FAIL() << "the cancel was ignored";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Cancelled) << e.what();
  }
}

// random:tiny written in each layout opens to random:tiny: the same image with either storage, the same hash.
TEST(ModelExport, WrittenLayoutsOpenToTheModelTheyCameFrom) {
  TempDir dir("sdt-test-export");
  const auto write = [&](const char* name, ExportLayout layout, ExportDtype dtype) {
    ExportOptions e;
    e.model = "random:tiny";
    e.folder = dir.path() / name;
    e.layout = layout;
    e.dtype = dtype;
    std::uint64_t last = 0;
    e.progress = [&](std::uint64_t written, std::uint64_t total) {
      EXPECT_GE(written, last);
      EXPECT_LE(written, total);
      last = written;
    };
    const ExportResult result = export_model(e);
    EXPECT_EQ(last, result.weight_bytes);
    EXPECT_EQ(result.source_layout, "random weights");
    return e.folder;
  };
  const fs::path folder = write("fp32", ExportLayout::DiffusersFolder, ExportDtype::F32);
  const fs::path single = write("single", ExportLayout::SingleFile, ExportDtype::F32) / "sd_turbo.safetensors";
  const fs::path halves = write("fp16", ExportLayout::DiffusersFolder, ExportDtype::F16);
  ASSERT_TRUE(fs::exists(single));
  EXPECT_TRUE(fs::exists(folder / "taesd" / "config.json"));
  EXPECT_TRUE(fs::exists(halves / "unet" / "diffusion_pytorch_model.fp16.safetensors"));

  const Request request = small_request();
  for (const WeightStorage storage : {WeightStorage::F16, WeightStorage::F32}) {
    EngineOptions o = fixture_engine_options(storage);
    o.model = "random:tiny";
    o.taesd.clear();
    o.prepare_width = o.prepare_height = 64;
    // Every engine on the steady path from its first image: a GPU's row gives a first start's first images quicker
    // programs, and a later engine (finding the cache full) would not, so the bits would differ by the path.
    o.defer_steady_kernels = false;
    Engine original(o);
    const Result expected = original.generate(request);
    for (const fs::path& path : {folder, single}) {
      SCOPED_TRACE(path.string());
      o.model = path.string();
      if (path == single) o.model_config = folder;  // 32-wide: head counts from the configs
      Engine written(o);
      EXPECT_EQ(written.model().hash, original.model().hash) << "same names, dtypes, shapes and values";
      const Result result = written.generate(request);
      EXPECT_EQ(result.image.rgb, expected.image.rgb);
      EXPECT_EQ(result.image_tiny.rgb, expected.image_tiny.rgb);
    }
  }

  // The fp16 folder holds exactly the host's rounding of every weight, and says F16.
  const io::ModelFiles original = io::make_random_model(models::architecture(), "random:tiny");
  const io::ModelFiles rounded = io::open_model(models::architecture(), halves.string());
  ASSERT_EQ(rounded.weights.names(), original.weights.names());
  for (const auto& name : original.weights.names()) {
    const io::TensorView* view = rounded.weights.find(name);
    ASSERT_EQ(view->dtype, io::DType::F16) << name;
    const std::vector<float> values = original.weights.find(name)->to_f32();
    std::vector<std::uint16_t> bits(values.size());
    view->read(0, bits.size() * 2, bits.data());
    for (std::size_t i = 0; i < values.size(); ++i) ASSERT_EQ(bits[i], io::float_to_half(values[i])) << name << i;
  }
}

}  // namespace
}  // namespace sdt::test
