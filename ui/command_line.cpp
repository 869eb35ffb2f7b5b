// The sdturbo command line; see command_line.hpp.
#include "ui/command_line.hpp"

namespace sdt::ui {

CommandLine::CommandLine()
    : model_(QStringLiteral("model"),
             QStringLiteral("Diffusers folder, single-file checkpoint, random:tiny or random:sd-turbo (this run only)"),
             QStringLiteral("PATH")),
      taesd_(QStringLiteral("taesd"),
             QStringLiteral("TAESD: AutoencoderTiny folder or taesd_decoder.safetensors (this run only)"),
             QStringLiteral("PATH")),
      gallery_(QStringLiteral("gallery"), QStringLiteral("Gallery folder (this run only)"), QStringLiteral("DIR")),
      device_(QStringLiteral("device"), QStringLiteral("OpenCL device: index or part of its name (this run only)"),
              QStringLiteral("SEL")),
      cache_dir_(QStringLiteral("cache-dir"),
                 QStringLiteral("Folder of the compiled OpenCL kernels (this run only; default: the platform's cache "
                                "folder, or the one chosen in Model > Kernel Cache)"),
                 QStringLiteral("DIR")),
      models_dir_(QStringLiteral("models-dir"),
                  QStringLiteral("Folder that Model > Download puts models into (this run only; with "
                                 "--download-model: where to download)"),
                  QStringLiteral("DIR")),
      prompt_(QStringLiteral("prompt"), QStringLiteral("Put TEXT in the prompt box"), QStringLiteral("TEXT")),
      generate_(QStringLiteral("generate"), QStringLiteral("Generate as soon as the model is open")),
      settings_file_(QStringLiteral("settings"),
                     QStringLiteral("Keep the settings in this INI file instead of the user's"),
                     QStringLiteral("FILE")),
      download_model_(QStringLiteral("download-model"),
                      QStringLiteral("Download SD-Turbo and TAESD from Hugging Face (HF_ENDPOINT, HF_TOKEN) without a "
                                     "window, verify them, make SD-Turbo the model, and exit (0 once in place)")),
      download_catalog_(QStringLiteral("download-catalog"),
                        QStringLiteral("With --download-model: download what this JSON catalog names instead (another "
                                       "pinned revision, a mirror's)"),
                        QStringLiteral("FILE")) {
  parser_.setApplicationDescription(
      QStringLiteral("SD-Turbo Studio: images from text with Stable Diffusion Turbo on OpenCL"));
  parser_.addHelpOption();
  parser_.addVersionOption();
  parser_.addOptions({model_, taesd_, gallery_, device_, cache_dir_, models_dir_, prompt_, generate_, settings_file_,
                      download_model_, download_catalog_});
}

void CommandLine::apply_overrides(Settings& settings) const {
  const std::pair<const QCommandLineOption*, const char*> overrides[] = {
      {&model_, keys::kModel},   {&taesd_, keys::kTaesd},        {&gallery_, keys::kGalleryFolder},
      {&device_, keys::kDevice}, {&cache_dir_, keys::kCacheDir}, {&models_dir_, keys::kModelsFolder}};
  for (const auto& [option, key] : overrides)
    if (parser_.isSet(*option)) settings.set_override(QString::fromLatin1(key), parser_.value(*option));
}

}  // namespace sdt::ui
