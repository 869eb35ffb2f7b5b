// Files of the gallery folder: saving a generated PNG without ever replacing an existing file, deleting to the
// trash, and showing a file in the system's file manager.
//
// Saving reserves a fresh name with an exclusive create (O_EXCL: two saves, or two app instances, cannot get the
// same name), then writes the bytes with the engine's atomic writer (sdt/files.hpp: a temporary file, flushed to
// the disk and renamed over the reservation, so no reader ever sees half a PNG; not QSaveFile, see
// gallery_files.cpp). On any failure the reservation is removed: nothing empty or partial remains, and the error
// says why ("the disk is full").
//
// A gallery folder that was deleted is made again, but only where the folder above it still exists: when that one
// is gone too, the drive was most likely removed or a folder moved, and making the whole path again would scatter
// images onto whatever file system now lies below (the system disk, under an empty mount point). That save fails
// and says so; the next one after the folder is back works.
//
// The measured stage times of an image are not in its PNG (two runs of the same request give the same bytes): they
// are kept beside it, in <gallery>/.timings/<file name>.json, a hidden folder the gallery never lists.
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

// Which folders a save may create: only the gallery folder itself (its parent must exist), or the whole path (the
// default gallery under the user's Pictures folder, which may itself not exist yet on a new system).
enum class MakeFolder { OnlyLast, WithParents };

// Makes `folder` when it is missing, as `make` allows; returns "" or the reason it cannot be used (a sentence part
// naming the folder, e.g. "the folder … is no longer there …").
QString make_gallery_folder(const QString& folder, MakeFolder make = MakeFolder::OnlyLast);

// Makes `folder` when missing (see make_gallery_folder), then writes `png` as <stem>.png (or <stem>-N.png).
SaveOutcome save_png_unique(const QString& folder, const QString& stem, const QByteArray& png,
                            MakeFolder make = MakeFolder::OnlyLast);
// Writes `png` to exactly `path` (a name the user chose in a file dialog; replacing a regular file is their
// decision, anything else there is refused; a link to a regular file is followed). On failure the file already at
// `path` is unchanged.
SaveOutcome save_png_as(const QString& path, const QByteArray& png);

// <folder of the image>/.timings/<image file name>.json
QString timings_sidecar_path(const QString& image_path);
// Writes the image's timings JSON beside it (atomically, as images; the hidden folder is made when missing). Returns "" or the
// reason it failed; on failure no older sidecar is left at that name (it would belong to another image).
QString write_timings_sidecar(const QString& image_path, const QByteArray& json);
// The sidecar's bytes; empty when there is none or it cannot be read.
QByteArray read_timings_sidecar(const QString& image_path);
// Removes the image's sidecar, if any (the image was deleted).
void remove_timings_sidecar(const QString& image_path);

enum class Removal { Trashed, Deleted, Failed };
// Moves the file to the trash; when the system has none and `allow_permanent`, deletes it.
Removal remove_image(const QString& path, bool allow_permanent, QString* error);

// Opens the file manager with the file selected where the platform allows it, else opens its folder.
void reveal_in_file_manager(const QString& path);

}  // namespace sdt::ui
