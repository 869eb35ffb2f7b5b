#include "sdt/model_export.hpp"

#include "io/model_writer.hpp"
#include "models/architecture.hpp"
#include "base/log.hpp"

namespace sdt {

ExportResult export_model(const ExportOptions& options) {
  io::OpenOptions open;
  open.taesd = options.taesd;
  open.config_dir = options.model_config;
  open.compute_hash = false;
  const io::ModelFiles model = io::open_model(models::architecture(), options.model, open);
  io::WriteOptions write;
  write.layout =
      options.layout == ExportLayout::SingleFile ? io::WrittenLayout::SingleFile : io::WrittenLayout::DiffusersFolder;
  write.dtype = options.dtype == ExportDtype::F16 ? io::DType::F16 : io::DType::F32;
  ExportResult result;
  write.progress = [&](std::uint64_t written, std::uint64_t total) {
    result.weight_bytes = total;
    if (options.progress) options.progress(written, total);
  };
  result.files = io::write_model(model, options.folder, write);
  result.source_layout = model.layout;
  log::get("io")->info("wrote {} ({}) into {}: {} files", model.name, model.layout, options.folder.string(),
                       result.files.size());
  return result;
}

}  // namespace sdt
