// sdt::tune_kernels: the kernel tuner (nn/gemm_tuner.hpp) on a device of its own, for `sdturbo-bench --tune`: every
// candidate's times, the choice as a row for the tuning table (runtime/tuning.cpp), and the choice stored in the
// kernel cache where the engine finds it on a GPU the table does not know.
#include "nn/gemm_tuner.hpp"
#include "runtime/context.hpp"
#include "sdt/engine.hpp"

namespace sdt {

namespace {
std::string tiles_text(const cl::GemmConfig& c) {
  return "{" + std::to_string(c.tm) + ", " + std::to_string(c.tn) + ", " + std::to_string(c.tk) + ", " +
         std::to_string(c.wm) + ", " + std::to_string(c.wn) + ", " + std::to_string(c.vw) + "}";
}
// The tiles a row gives the batched big products (the engine's rule where they fill the device).
cl::GemmConfig batched_tiles(const cl::GemmRow& row) {
  return row.linear_big && row.batched_big_groups_per_unit ? *row.linear_big : row.conv;
}
}  // namespace

KernelTuningReport tune_kernels(const std::string& device, WeightStorage storage,
                                const std::filesystem::path& cache_dir,
                                const std::function<void(int done, int total)>& progress,
                                const std::atomic<bool>* cancel) {
  const cl::DeviceHandle handle = cl::find_device(device);
  cl::ContextOptions context_options;
  context_options.cache_dir = cache_dir;
  cl::Context ctx(handle, context_options);
  nn::GemmTuneOptions options;
  options.storage = storage == WeightStorage::F32 ? nn::DType::F32 : nn::DType::F16;
  options.progress = progress;
  options.cancel = cancel;
  options.time_rows = true;
  const cl::GemmRow table = ctx.tuning().row().gemm;
  const nn::GemmTuneResult result = *nn::prepare_gemm_tuning(ctx, true, options);

  KernelTuningReport report;
  report.device = ctx.info().name;
  report.driver = ctx.info().driver_version;
  report.table_row = ctx.tuning().row().label;
  report.table_tiles = nn::gemm_row_text(table);
  report.tuned_tiles = nn::gemm_row_text(result.row);
  report.cache_file = nn::gemm_tuning_file(ctx).string();
  for (const auto& c : result.candidates) {
    report.candidates.push_back(
        {tiles_text(c.config), c.linear_ms, c.conv_ms, c.big_ms, c.batched_big_ms, c.long_k_plain_ms, c.long_k_ms});
    if (c.config == table.linear) report.table_linear_ms = c.linear_ms;
    if (c.config == table.conv) report.table_conv_ms = c.conv_ms;
    if (c.config == table.linear_big.value_or(table.linear)) report.table_big_ms = c.big_ms;
    if (c.config == result.row.linear) report.tuned_linear_ms = c.linear_ms;
    if (c.config == result.row.conv) report.tuned_conv_ms = c.conv_ms;
    if (c.config == result.row.linear_big.value_or(result.row.linear)) report.tuned_big_ms = c.big_ms;
    if (c.config == batched_tiles(table)) report.table_batched_ms = c.batched_big_ms;
    if (c.config == batched_tiles(result.row)) report.tuned_batched_ms = c.batched_big_ms;
  }
  report.table_long_k_ms = result.table_long_k_ms;
  report.tuned_long_k_ms = result.tuned_long_k_ms;
  report.stream_k_off_ms = result.stream_k_off_ms;
  report.stream_k_on_ms = result.stream_k_on_ms;
  return report;
}

}  // namespace sdt
