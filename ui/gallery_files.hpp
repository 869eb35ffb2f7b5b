// Files of the gallery folder: saving a generated PNG without ever replacing an existing file, deleting to the
// trash, and showing a file in the system's file manager.
//
// Saving reserves a fresh name with an exclusive create (O_EXCL: two saves, or two app instances, cannot get the
// same name), then writes the bytes through QSaveFile (a temporary file renamed over the reservation at commit, so
// no reader ever sees half a PNG). On any failure the reservation is removed: nothing empty or partial remains.
#pragma once

#include <QByteArray>
#include <QDateTime>
#include <QString>

namespace sdt::ui {

struct SaveOutcome {
  QString path;   // the file written, when it worked
  QString error;  // a sentence for the window, when it did not
  bool ok() const { return error.isEmpty() && !path.isEmpty(); }
};

// "sdturbo-20250131-142501-s1234" (+ suffix such as "-taesd"); the saver adds "-2", "-3", … when taken.
QString gallery_file_stem(const QDateTime& when, quint64 seed, const QString& suffix = {});

// Creates `folder` when missing, then writes `png` as <stem>.png (or <stem>-N.png).
SaveOutcome save_png_unique(const QString& folder, const QString& stem, const QByteArray& png);
// Writes `png` to exactly `path` (a name the user chose in a file dialog; replacing is their decision).
SaveOutcome save_png_as(const QString& path, const QByteArray& png);

enum class Removal { Trashed, Deleted, Failed };
// Moves the file to the trash; when the system has none and `allow_permanent`, deletes it.
Removal remove_image(const QString& path, bool allow_permanent, QString* error);

// Opens the file manager with the file selected where the platform allows it, else opens its folder.
void reveal_in_file_manager(const QString& path);

}  // namespace sdt::ui
