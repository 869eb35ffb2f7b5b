// The desktop app under the faults of RELIABILITY.md items 27 to 34: a gallery on a nearly full disk (the save
// fails saying the disk is full, and leaves no truncated PNG and no empty sidecar), Save As onto an existing image
// with no space left (the image stays), Save As onto a FIFO or through a link, a worker stuck where no cancel reaches
// (Cancel says what it is busy with, quitting does not freeze), a settings file that is a folder, a FIFO or holds
// sizes beyond int; and the GPU check (Help → Check GPU, and once per device and driver by itself): the verdict
// shown and remembered, the safe path a failed check found taken from then on.
#include <QAction>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <memory>

#include "faults.hpp"
#include "runtime/cl_error.hpp"
#include "runtime/program_cache.hpp"
#include "sdt_kernel_sources.hpp"
#include "sdt/image.hpp"
#include "test_common.hpp"
#include "ui/engine_worker.hpp"
#include "ui/gallery_files.hpp"
#include "ui/gpu_check.hpp"
#include "ui/main_window.hpp"
#include "ui_fixture.hpp"
#include "ui/settings.hpp"

#ifdef Q_OS_UNIX
#include <sys/stat.h>
#endif

using namespace sdt::ui;
using namespace sdt::test::ui_fixture;

namespace {

constexpr int kGenerateTimeoutMs = 120000;

std::unique_ptr<Settings> window_settings(const QString& ini, const QString& gallery, const QString& cache) {
  auto settings = std::make_unique<Settings>(ini, nullptr);
  settings->set_model(tiny_fixture("model"));
  settings->set_gallery_folder(gallery);
  if (const char* device = std::getenv("SDT_TEST_DEVICE")) settings->set_device(QString::fromLocal8Bit(device));
  settings->set_override(QString::fromLatin1(keys::kCacheDir), cache);
  settings->set_image_size(QSize(64, 64));
  settings->set_random_seed(false);
  settings->set_seed(5);
  return settings;
}

}  // namespace

class FaultsUi : public QObject {
  Q_OBJECT
 public:
  FaultsUi() {
    QStandardPaths::setTestModeEnabled(true);
    register_meta_types();
  }

 private Q_SLOTS:
#ifdef Q_OS_UNIX
  // A PNG that fits the writer's buffer but not the disk: the buffered bytes fail to flush part-way. Qt's QSaveFile
  // renamed the truncated file into place all the same, and the gallery called it saved.
  void a_save_that_fails_while_flushing_leaves_no_truncated_image() {
    QTemporaryDir dir;
    const QByteArray png = noise_png(56, 7);  // about 9.5 KB: under QFile's 16 KB buffer
    QVERIFY(png.size() > 8 * 1024 && png.size() < 16 * 1024);
    SaveOutcome outcome;
    {
      sdt::test::FileSizeLimit full(4 * 1024);
      QVERIFY(full.active());
      outcome = save_png_unique(dir.path(), QStringLiteral("sdturbo-s7"), png);
    }
    QVERIFY2(!outcome.ok(), qPrintable(QStringLiteral("a truncated image was reported saved as ") + outcome.path));
    QVERIFY2(outcome.error.contains(QStringLiteral("sdturbo-s7.png")), qPrintable(outcome.error));
    QCOMPARE(files_in(dir.path()), QStringList{});
  }

  void a_timings_sidecar_that_cannot_be_written_leaves_no_empty_file() {
    QTemporaryDir dir;
    const QString image = dir.filePath(QStringLiteral("image.png"));
    QFile(image).open(QIODevice::WriteOnly);
    QString error;
    {
      sdt::test::FileSizeLimit full(0);
      QVERIFY(full.active());
      error = write_timings_sidecar(image, QByteArray("{\"total_ms\": 12.5}"));
    }
    QVERIFY2(!error.isEmpty(), "a sidecar that could not be written was reported written");
    QVERIFY(!QFileInfo::exists(timings_sidecar_path(image)));
    QCOMPARE(files_in(dir.filePath(QStringLiteral(".timings"))), QStringList{});
  }

  void save_as_onto_an_image_with_no_space_left_keeps_that_image() {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("keep.png"));
    const QByteArray old_png = noise_png(16, 1);
    QVERIFY(save_png_as(path, old_png).ok());
    SaveOutcome outcome;
    {
      sdt::test::FileSizeLimit full(2 * 1024);
      outcome = save_png_as(path, noise_png(48, 2));  // about 7 KB, buffered whole
    }
    QVERIFY2(!outcome.ok(), "a save past the limit succeeded");
    QCOMPARE(read_all(path), old_png);
    QCOMPARE(files_in(dir.path()), QStringList{QStringLiteral("keep.png")});
  }

  void save_as_refuses_a_fifo_and_follows_a_link_to_a_file() {
    QTemporaryDir dir;
    const QString fifo = dir.filePath(QStringLiteral("pipe.png"));
    QCOMPARE(mkfifo(QFile::encodeName(fifo).constData(), 0600), 0);
    const SaveOutcome refused = save_png_as(fifo, noise_png(8, 3));
    QVERIFY(!refused.ok());
    QVERIFY2(refused.error.contains(QStringLiteral("FIFO")), qPrintable(refused.error));
    struct stat st {};
    QCOMPARE(lstat(QFile::encodeName(fifo).constData(), &st), 0);
    QVERIFY2(S_ISFIFO(st.st_mode), "the FIFO was replaced");

    QVERIFY(QDir(dir.path()).mkdir(QStringLiteral("real")));
    const QString target = dir.filePath(QStringLiteral("real/target.png"));
    QVERIFY(save_png_as(target, noise_png(8, 4)).ok());
    const QString link = dir.filePath(QStringLiteral("link.png"));
    QVERIFY(QFile::link(target, link));
    const QByteArray png = noise_png(8, 5);
    const SaveOutcome through = save_png_as(link, png);
    QVERIFY2(through.ok(), qPrintable(through.error));
    QVERIFY(QFileInfo(link).isSymLink());
    QCOMPARE(read_all(target), png);
  }

  void a_fifo_where_a_timings_sidecar_should_be_is_never_opened() {
    QTemporaryDir dir;
    const QString image = dir.filePath(QStringLiteral("image.png"));
    QVERIFY(save_png_as(image, noise_png(8, 6)).ok());
    QVERIFY(QDir(dir.path()).mkdir(QStringLiteral(".timings")));
    QCOMPARE(mkfifo(QFile::encodeName(timings_sidecar_path(image)).constData(), 0600), 0);
    QElapsedTimer clock;
    clock.start();
    QVERIFY(read_timings_sidecar(image).isEmpty());
    QVERIFY2(clock.elapsed() < 2000, "the UI thread waited on a FIFO");
  }
#endif

#ifdef Q_OS_LINUX
  // The reproduction: the gallery on a tmpfs of 200 kB filled to 196 kB. Run as a child process in a mount
  // namespace of its own (root; CI runs as root), by the test below.
  void child_of_a_gallery_on_a_nearly_full_disk() {
    const QString fault_dir = qEnvironmentVariable("SDT_FAULT_DIR");
    if (fault_dir.isEmpty()) QSKIP("run by a_gallery_on_a_nearly_full_disk_says_so_and_saves_nothing");
    const QString gallery = QDir(fault_dir).filePath(QStringLiteral("gal"));
    QVERIFY(QDir().mkpath(gallery));
    {
      std::ofstream filler(QDir(fault_dir).filePath(QStringLiteral("filler")).toStdString(), std::ios::binary);
      filler << std::string(196 * 1024, 'f');
      QVERIFY(filler.good());
    }
    QTemporaryDir root;
    auto settings = window_settings(root.filePath(QStringLiteral("settings.ini")), gallery, kernel_cache(root));
    MainWindow window(settings.get());
    QSignalSpy ready(&window, &MainWindow::engine_ready);
    window.show();
    QVERIFY2(ready.wait(kLoadTimeoutMs), qPrintable(window.error_bar()->text()));
    QSignalSpy save_failed(&window, &MainWindow::save_failed);
    QSignalSpy saved(&window, &MainWindow::image_saved);
    QSignalSpy ended(&window, &MainWindow::generation_ended);
    window.generate();
    QVERIFY2(ended.wait(kGenerateTimeoutMs), qPrintable(window.error_bar()->text()));
    QCOMPARE(saved.count(), 0);
    QCOMPARE(save_failed.count(), 1);
    QVERIFY2(save_failed.at(0).at(0).toString().contains(QStringLiteral("the disk is full")),
             qPrintable(save_failed.at(0).at(0).toString()));
    QVERIFY2(window.error_bar()->text().contains(QStringLiteral("the disk is full")),
             qPrintable(window.error_bar()->text()));
    QVERIFY2(!window.image_info()->text().contains(QStringLiteral("saved as")), qPrintable(window.image_info()->text()));
    QCOMPARE(files_in(gallery), QStringList{});
    QCOMPARE(files_in(QDir(gallery).filePath(QStringLiteral(".timings"))), QStringList{});
    QVERIFY(!window.last_image()->png.isEmpty());  // still on screen for Save As
  }

  void a_gallery_on_a_nearly_full_disk_says_so_and_saves_nothing() {
    if (!qEnvironmentVariable("SDT_FAULT_DIR").isEmpty()) QSKIP("the child itself");
    QTemporaryDir dir;
    const QString disk = dir.filePath(QStringLiteral("disk"));
    QVERIFY(QDir().mkpath(disk));
    const sdt::test::MountedChild child = sdt::test::run_self_in_mount_namespace(
        "mount -t tmpfs -o size=200k sdt-nearly-full \"$DIR\"", "child_of_a_gallery_on_a_nearly_full_disk",
        disk.toStdString());
    if (child.unavailable)
      QSKIP(qPrintable(QStringLiteral("a tmpfs in a private mount namespace needs root (CI runs as root): ") +
                       QString::fromStdString(child.output)));
    QVERIFY2(child.exit_code == 0, child.output.c_str());
    QVERIFY2(child.output.find("Totals: ") != std::string::npos && child.output.find(" 0 failed") != std::string::npos,
             child.output.c_str());
    QVERIFY2(child.output.find("PASS   : FaultsUi::child_of_a_gallery_on_a_nearly_full_disk") != std::string::npos,
             child.output.c_str());
  }
#endif

  // A kernel that hangs on a device without a watchdog (the CPU's default): nothing a cancel reaches. Cancel says
  // what the engine is busy with; closing the window returns within EngineHost's limit, says what was left running.
  void a_worker_stuck_where_no_cancel_reaches_is_named_and_quitting_does_not_freeze() {
    QTemporaryDir root;
    auto settings = window_settings(root.filePath(QStringLiteral("settings.ini")), root.filePath(QStringLiteral("g")),
                                    kernel_cache(root));
    auto window = std::make_unique<MainWindow>(settings.get());
    QSignalSpy ready(window.get(), &MainWindow::engine_ready);
    window->show();
    QVERIFY2(ready.wait(kLoadTimeoutMs), qPrintable(window->error_bar()->text()));
    if (window->engine_info()->device.is_gpu()) QSKIP("GPUs have a watchdog by default; this needs a device without");
    sdt::cl::arm_fault(sdt::cl::kHangFault, CL_INVALID_OPERATION);  // the first stage boundary never completes
    QSignalSpy progress(window->engine_host(), &EngineHost::progress);
    window->generate();
    QVERIFY(progress.wait(kGenerateTimeoutMs));
    QTest::qWait(500);
    window->cancel();
    QTRY_VERIFY_WITH_TIMEOUT(window->controls()->status_text().contains(QStringLiteral("Still cancelling")),
                             MainWindow::kStillCancellingMs + 5000);
    QVERIFY2(window->controls()->status_text().contains(QStringLiteral("generating image 1 of 1")),
             qPrintable(window->controls()->status_text()));
    QThread* worker_thread = window->engine_host()->thread_of_worker();
    QElapsedTimer clock;
    clock.start();
    QVERIFY(window->close());
    QVERIFY2(clock.elapsed() < EngineHost::kShutdownWaitMs + 5000, "closing waited for the stuck worker");
    QVERIFY2(window->engine_left_running().contains(QStringLiteral("generating")),
             qPrintable(window->engine_left_running()));
    window.reset();
    // Let the stuck stage go, so that the thread ends before this process does.
    sdt::cl::release_injected_hangs();
    QVERIFY(worker_thread->wait(60000));
    sdt::cl::disarm_faults();
  }

  void settings_that_are_a_folder_or_a_fifo_are_named_and_never_read() {
    QTemporaryDir dir;
    const QString folder = dir.filePath(QStringLiteral("settings.ini"));
    QVERIFY(QDir().mkpath(folder));
    {
      Settings settings(folder, nullptr);
      QVERIFY2(settings.problem().contains(QStringLiteral("is a folder")), qPrintable(settings.problem()));
      QVERIFY(settings.problem().contains(QDir::toNativeSeparators(folder)));
      settings.set_steps(3);  // kept for this run
      QCOMPARE(settings.steps(), 3);
      settings.sync();
    }
    QVERIFY(QFileInfo(folder).isDir());
#ifdef Q_OS_UNIX
    const QString fifo = dir.filePath(QStringLiteral("fifo.ini"));
    QCOMPARE(mkfifo(QFile::encodeName(fifo).constData(), 0600), 0);
    QElapsedTimer clock;
    clock.start();
    {
      Settings settings(fifo, nullptr);
      QVERIFY2(settings.problem().contains(QStringLiteral("not a regular file")), qPrintable(settings.problem()));
      QCOMPARE(settings.steps(), 1);
    }
    QVERIFY2(clock.elapsed() < 5000, "reading the settings waited on the FIFO");
#endif
    // The window says so.
    Settings settings(folder, nullptr);
    settings.set_model(QStringLiteral("no-such-model"));
    MainWindow window(&settings);
    QVERIFY2(window.error_bar()->text().contains(QStringLiteral("is a folder")), qPrintable(window.error_bar()->text()));
    QTRY_VERIFY_WITH_TIMEOUT(!window.engine_host()->loading(), kLoadTimeoutMs);
  }

  // Help → Check GPU: the verdict is shown and remembered under the device's key (name, driver, app version).
  void check_gpu_shows_the_verdict_and_remembers_it_for_the_device_and_driver() {
    QTemporaryDir root;
    auto settings = window_settings(root.filePath(QStringLiteral("settings.ini")), root.filePath(QStringLiteral("g")),
                                    kernel_cache(root));
    MainWindow window(settings.get());
    QSignalSpy ready(&window, &MainWindow::engine_ready);
    window.show();
    QVERIFY2(ready.wait(kLoadTimeoutMs), qPrintable(window.error_bar()->text()));
    const sdt::DeviceInfo device = window.engine_info()->device;
    if (device.is_gpu()) QSKIP("on a GPU the window checks by itself; this test drives the menu on a CPU device");
    QVERIFY2(!settings->gpu_check(device_key(device)), "a CPU device was checked without being asked");
    QSignalSpy checked(&window, &MainWindow::gpu_checked);
    auto* action = window.findChild<QAction*>(QStringLiteral("check_gpu"));
    QVERIFY(action);
    action->trigger();
    QVERIFY(checked.wait(kLoadTimeoutMs));
    QVERIFY2(checked.at(0).at(0).toBool(), qPrintable(checked.at(0).at(1).toString()));
    QVERIFY2(checked.at(0).at(1).toString().startsWith(QStringLiteral("self-check passed on")),
             qPrintable(checked.at(0).at(1).toString()));
    QVERIFY2(window.error_bar()->text().contains(QStringLiteral("self-check passed")), qPrintable(window.error_bar()->text()));
    settings->sync();
    const auto record = Settings(settings->file_name(), nullptr).gpu_check(device_key(device));
    QVERIFY(record && record->passed && !record->tensor_cores_off && !record->fp32_weights);
    QCOMPARE(record->verdict, checked.at(0).at(1).toString());
    // Another driver version is another key: it would be checked again.
    sdt::DeviceInfo updated = device;
    updated.driver_version += " (updated)";
    QVERIFY(!settings->gpu_check(device_key(updated)));
  }

  // A driver that reads fp16 weights wrongly (gemm.cl's vload_half made to scale them): the window's own check,
  // once per device, finds it; the model opens again with fp32 weights, the window says why, and a later window
  // takes that path from the start without checking again.
  void a_failed_check_is_made_once_per_device_and_its_safe_path_taken_from_then_on() {
    QTemporaryDir root;
    auto settings = window_settings(root.filePath(QStringLiteral("settings.ini")), root.filePath(QStringLiteral("g")),
                                    kernel_cache(root));
    settings->set_gpu_check_on_cpu_devices(true);
    // A function before the macro, so that it calls the real built-in (see tests/check/test_self_check.cpp).
    sdt::cl::set_source_override(
        "gemm", std::string("__attribute__((overloadable)) float sdt_wrong_vload_half(size_t i, const __global half* p) "
                            "{ return 1.5f * vload_half(i, p); }\n"
                            "#define vload_half(i, p) sdt_wrong_vload_half((i), (p))\n") +
                    std::string(sdt::kernels::source("gemm")));
    struct Restore {
      ~Restore() { sdt::cl::set_source_override("gemm", std::nullopt); }
    } restore;
    QString key;
    {
      MainWindow window(settings.get());
      QSignalSpy ready(&window, &MainWindow::engine_ready);
      QSignalSpy checked(&window, &MainWindow::gpu_checked);
      window.show();
      QVERIFY2(ready.wait(kLoadTimeoutMs), qPrintable(window.error_bar()->text()));
      QVERIFY(!ready.at(0).at(0).value<EngineInfo>().fp32_weights);
      QVERIFY2(checked.wait(kLoadTimeoutMs), "the window did not check the device by itself");
      QVERIFY(!checked.at(0).at(0).toBool());
      const QString verdict = checked.at(0).at(1).toString();
      QVERIFY2(verdict.contains(QStringLiteral("stage differs")) && verdict.contains(QStringLiteral("as fp32")),
               qPrintable(verdict));
      QVERIFY2(window.error_bar()->text().contains(QStringLiteral("fp32 weights")), qPrintable(window.error_bar()->text()));
      // Reopened with the safe path.
      QTRY_VERIFY_WITH_TIMEOUT(ready.count() == 2, kLoadTimeoutMs);
      QVERIFY(ready.at(1).at(0).value<EngineInfo>().fp32_weights);
      QVERIFY2(window.device_notice()->text().contains(QStringLiteral("safe path")),
               qPrintable(window.device_notice()->text()));
      key = device_key(window.engine_info()->device);
    }
    QVERIFY(settings->devices_with_fp32_weights().contains(key));
    MainWindow again(settings.get());
    QSignalSpy requests(again.engine_host(), &EngineHost::request_load);
    QSignalSpy ready(&again, &MainWindow::engine_ready);
    QSignalSpy checked(&again, &MainWindow::gpu_checked);
    again.reload_engine();
    QVERIFY(requests.count() >= 1);
    QVERIFY(requests.last().at(0).value<LoadRequest>().devices_with_fp32_weights.contains(key));
    QTRY_VERIFY_WITH_TIMEOUT(ready.count() >= 1, kLoadTimeoutMs);
    QVERIFY(ready.last().at(0).value<EngineInfo>().fp32_weights);
    QTest::qWait(500);
    QCOMPARE(checked.count(), 0);  // checked once per device and driver
  }

  void sizes_beyond_int_in_the_settings_file_snap_into_range() {
    QCOMPARE(Settings::snap_side(INT_MAX), Settings::kMaxSide);
    QCOMPARE(Settings::snap_side(INT_MAX - 31), Settings::kMaxSide);
    QCOMPARE(Settings::snap_side(INT_MIN), Settings::kMinSide);
    QCOMPARE(Settings::snap_side(-1), Settings::kMinSide);
    QCOMPARE(Settings::snap_side(2047), 2048);
    QCOMPARE(Settings::snap_side(100), 128);
    QTemporaryDir dir;
    const QString ini = dir.filePath(QStringLiteral("huge.ini"));
    {
      std::ofstream f(ini.toStdString());
      f << "[generation]\nwidth=2147483647\nheight=99999999999999999999\n";
    }
    Settings settings(ini, nullptr);
    QCOMPARE(settings.image_size(), QSize(Settings::kMaxSide, Settings::kMinSide));
  }
};

QTEST_MAIN(FaultsUi)
#include "test_faults.moc"
