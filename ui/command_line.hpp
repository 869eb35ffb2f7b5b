// CommandLine: the options of the sdturbo executable, parsed by QCommandLineParser, in sdt_ui so that tests parse
// them exactly as the app does.
//
//   sdturbo [--model PATH] [--taesd PATH] [--gallery DIR] [--device SEL] [--cache-dir DIR] [--models-dir DIR]
//           [--prompt TEXT] [--generate] [--settings FILE]
//   sdturbo --download-model [--models-dir DIR] [--download-catalog FILE] [--settings FILE]
//
// --model, --taesd, --gallery, --device, --cache-dir and --models-dir override the remembered settings for this run
// only (so the app can be started in a known state); they are never written to the settings file.
// --download-model downloads SD-Turbo without a window (download_command.hpp) and remembers it as the model.
#pragma once

#include <QCommandLineOption>
#include <QCommandLineParser>
#include <QString>
#include <QStringList>

#include "ui/settings.hpp"

namespace sdt::ui {

class CommandLine {
 public:
  CommandLine();

  // What main() calls: exits the process on --help, --version or an error, as QCommandLineParser::process() does.
  void process(const QCoreApplication& app) { parser_.process(app); }
  // For tests: `arguments` starts with the program name; false with error_text() on an unknown or incomplete option.
  bool parse(const QStringList& arguments) { return parser_.parse(arguments); }
  QString error_text() const { return parser_.errorText(); }

  // Puts the run's overrides into `settings` (Settings::set_override: used, never written).
  void apply_overrides(Settings& settings) const;

  bool has_settings_file() const { return parser_.isSet(settings_file_); }
  QString settings_file() const { return parser_.value(settings_file_); }
  bool has_prompt() const { return parser_.isSet(prompt_); }
  QString prompt() const { return parser_.value(prompt_); }
  bool generate() const { return parser_.isSet(generate_); }
  bool download_model() const { return parser_.isSet(download_model_); }
  bool has_download_catalog() const { return parser_.isSet(download_catalog_); }
  QString download_catalog() const { return parser_.value(download_catalog_); }

 private:
  QCommandLineParser parser_;
  QCommandLineOption model_;
  QCommandLineOption taesd_;
  QCommandLineOption gallery_;
  QCommandLineOption device_;
  QCommandLineOption cache_dir_;
  QCommandLineOption models_dir_;
  QCommandLineOption prompt_;
  QCommandLineOption generate_;
  QCommandLineOption settings_file_;
  QCommandLineOption download_model_;
  QCommandLineOption download_catalog_;
};

}  // namespace sdt::ui
