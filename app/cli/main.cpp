// sdturbo-cli: list devices, inspect model files, tokenize prompts, check a device (--self-check), and generate
// images from the command line.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "interrupt.hpp"
#include "options.hpp"
#include "sdt/engine.hpp"
#include "sdt/error.hpp"
#include "sdt/log.hpp"
#include "utf8_console.hpp"

int main(int argc, char** argv) {
  using sdt::cli::Options;
  sdt::app::Utf8CommandLine command_line(argc, argv);  // prompts and paths as UTF-8, also on Windows
  const sdt::app::Utf8Console console;
  Options o;
  CLI::App app{"sdturbo-cli: SD-Turbo image generation on OpenCL"};
  app.set_version_flag("--version", std::string("sdturbo-cli ") + sdt::version());
  sdt::cli::define_options(app, o);
  CLI11_PARSE(app, command_line.argc(), command_line.argv());

  sdt::set_log_level(o.verbose ? sdt::LogLevel::Debug : sdt::LogLevel::Warn);
  try {
    sdt::cli::check_options(o);
    if (o.self_check) return sdt::cli::run_self_check(o);
    if (o.list_devices) return sdt::cli::run_list_devices(o);
    if (o.tokenize) return sdt::cli::run_tokenize(o);
    if (o.inspect) return sdt::cli::run_inspect(o);
    if (!o.write_model.empty()) return sdt::cli::run_write_model(o);
    if (!o.write_model.empty()) return sdt::cli::run_write_model(o);
    return sdt::cli::run_generate(o);
  } catch (const sdt::Error& e) {
    std::fprintf(stderr, "error (%s): %s\n", sdt::to_string(e.kind()), e.message().c_str());
    if (!e.hint().empty()) std::fprintf(stderr, "%s\n", sdt::cli::hint_line(e).c_str());
    // Ctrl+C or SIGTERM: the cancellation, or whatever a system call it interrupted reported.
    if (sdt::cli::InterruptHandler::raised()) return sdt::cli::InterruptHandler::exit_code(130);
    return e.kind() == sdt::ErrorKind::Cancelled ? 130 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
