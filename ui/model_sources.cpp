// Existing models found before offering a download; see model_sources.hpp.
#include "ui/model_sources.hpp"

#include "sdt/hf_cache.hpp"
#include "ui/download_files.hpp"
#include "ui/model_catalog.hpp"

namespace sdt::ui {

QString downloaded_sd_turbo(const QString& models_folder) {
  const CatalogRepo repo = sd_turbo_repo();
  const QString folder = download::final_folder(models_folder, repo);
  return download::finished_download(folder, repo).isEmpty() ? QString() : folder;
}

QString cached_sd_turbo() {
  return sdt::find_hf_snapshot(sdt::kSdTurboRepo)
             ? QString::fromLatin1(sdt::kHfModelPrefix.data(), sdt::kHfModelPrefix.size()) +
                   QString::fromLatin1(sdt::kSdTurboRepo)
             : QString();
}

QString model_to_adopt(const Settings& settings) {
  if (settings.has_model_choice()) return {};
  if (QString folder = downloaded_sd_turbo(settings.models_folder()); !folder.isEmpty()) return folder;
  return cached_sd_turbo();
}

}  // namespace sdt::ui
