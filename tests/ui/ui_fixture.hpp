// What the desktop app's tests share: the tiny fixture model and the settings of a window over it, the kernel
// cache kept in the build folder (SDT_UI_TEST_KERNEL_CACHE, tests/ui/CMakeLists.txt), opening a window and waiting
// for its model, and the file helpers of the fault tests.
#pragma once

#include <QByteArray>
#include <QDir>
#include <QFile>
#include <QSignalSpy>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>
#include <QtTest>
#include <cstdlib>
#include <memory>

#include "sdt/image.hpp"
#include "test_common.hpp"
#include "ui/main_window.hpp"
#include "ui/settings.hpp"

namespace sdt::test::ui_fixture {

inline constexpr int kLoadTimeoutMs = 300000;  // opening a model on PoCL, kernels built on the first run

// A part of the tiny fixture model: "model" (its diffusers folder) or "taesd".
inline QString tiny_fixture(const char* part) {
  return QString::fromStdString((tiny_fixture_dir() / part).string());
}

// The kernel cache the test's windows use: the build folder's, shared by every ui test, else one under `root`.
inline QString kernel_cache(const QTemporaryDir& root) {
  const QString shared = qEnvironmentVariable("SDT_UI_TEST_KERNEL_CACHE");
  return shared.isEmpty() ? root.filePath(QStringLiteral("kernel-cache")) : shared;
}

// Settings in `root` for a window over the tiny model with its TAESD, a gallery in `root` and the test device.
inline std::unique_ptr<sdt::ui::Settings> tiny_model_settings(const QTemporaryDir& root) {
  auto settings = std::make_unique<sdt::ui::Settings>(root.filePath(QStringLiteral("settings.ini")), nullptr);
  settings->set_model(tiny_fixture("model"));
  settings->set_taesd(tiny_fixture("taesd"));
  settings->set_gallery_folder(root.filePath(QStringLiteral("gallery")));
  if (const char* device = std::getenv("SDT_TEST_DEVICE")) settings->set_device(QString::fromLocal8Bit(device));
  settings->set_override(QString::fromLatin1(sdt::ui::keys::kCacheDir), kernel_cache(root));
  return settings;
}

// Shows the window and waits until its model is open; false (the error bar says why) when it does not open.
[[nodiscard]] inline bool show_and_wait_for_the_model(sdt::ui::MainWindow& window) {
  QSignalSpy ready(&window, &sdt::ui::MainWindow::engine_ready);
  window.show();
  return QTest::qWaitForWindowExposed(&window) && (ready.count() > 0 || ready.wait(kLoadTimeoutMs));
}

// Seeded noise: PNG cannot compress it, so its size is known (and exceeds a small file-size limit).
inline QByteArray noise_png(int side, quint32 seed) {
  sdt::Image image;
  image.width = image.height = side;
  quint32 state = seed * 2654435761u + 1;
  for (int i = 0; i < side * side * 3; ++i) {
    state = state * 1664525u + 1013904223u;
    image.rgb.push_back(static_cast<std::uint8_t>(state >> 24));
  }
  const auto bytes = sdt::encode_png(image);
  return QByteArray(reinterpret_cast<const char*>(bytes.data()), qsizetype(bytes.size()));
}

// The files of `folder` by name, hidden ones and special files (a FIFO) included.
inline QStringList files_in(const QString& folder) {
  return QDir(folder).entryList(QDir::Files | QDir::Hidden | QDir::System | QDir::NoDotAndDotDot, QDir::Name);
}

inline QByteArray read_all(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

}  // namespace sdt::test::ui_fixture
