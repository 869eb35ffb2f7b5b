// Models the app can open without downloading anything: SD-Turbo downloaded earlier into the models folder (by the
// app or by `sdturbo --download-model`), or SD-Turbo in the Hugging Face cache (sdt/hf_cache.hpp), which other
// tools fill. On a first start, one of them opens instead of the random model.
#pragma once

#include <QString>

#include "ui/settings.hpp"

namespace sdt::ui {

// <models>/sd-turbo when it holds a finished download of the catalog's SD-Turbo, else "".
QString downloaded_sd_turbo(const QString& models_folder);
// "hf:stabilityai/sd-turbo" when the Hugging Face cache holds a complete snapshot of it, else "".
QString cached_sd_turbo();
// What a first start opens: nothing when a model (or the random one) was ever chosen, or is given on the command
// line; else a downloaded SD-Turbo, else the cached one, else "" (the random model).
QString model_to_adopt(const Settings& settings);

}  // namespace sdt::ui
