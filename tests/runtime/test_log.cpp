// The engine's loggers follow the front end's logging: its sinks and its flush level.
#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <mutex>

#include "base/log.hpp"

namespace sdt::test {
namespace {

// Counts what reaches it and how often it is flushed.
class CountingSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  int messages = 0;
  int flushes = 0;

 protected:
  void sink_it_(const spdlog::details::log_msg&) override { ++messages; }
  void flush_() override { ++flushes; }
};

TEST(Log, ALoggerMadeAfterTheFrontEndsSetupFlushesOnWarningsAsItsDefaultLoggerDoes) {
  const auto previous = spdlog::default_logger();
  auto sink = std::make_shared<CountingSink>();
  auto front_end = std::make_shared<spdlog::logger>("front-end-under-test", sink);
  spdlog::set_default_logger(front_end);
  spdlog::flush_on(spdlog::level::warn);  // as the desktop app does (ui/logging.cpp)

  const auto engine_logger = log::get("engine-logger-made-after-setup");
  engine_logger->warn("a warning the log file must hold at once");
  EXPECT_EQ(sink->messages, 1);
  EXPECT_EQ(sink->flushes, 1) << "the warning stayed in the sink's buffer";

  spdlog::drop("engine-logger-made-after-setup");
  spdlog::set_default_logger(previous);
  spdlog::flush_on(spdlog::level::off);
}

}  // namespace
}  // namespace sdt::test
