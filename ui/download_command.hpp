// `sdturbo --download-model [--models-dir DIR] [--download-catalog FILE] [--settings FILE]`: the app's download
// without a window, for scripts, the Windows installer's optional last step, and tests. Progress goes to standard
// output, a line per file and about one a second; the exit status is 0 once every file is verified and in place
// (the model is then remembered, so the next start of the app opens it), 1 with the reason on standard error (also
// for a bad command line), 130 when interrupted (Ctrl+C keeps what was downloaded; running it again goes on).
//
// It needs no display: main() checks for --download-model before it creates the QApplication.
#pragma once

#include <QCoreApplication>

namespace sdt::ui {

bool wants_download_command(int argc, char** argv);
int run_download_command(QCoreApplication& app);

}  // namespace sdt::ui
