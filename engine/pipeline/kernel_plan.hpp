// Which kernel programs a generation needs, known before anything runs: the models' forward code runs once on a
// planning context (cl::Context::begin_planning: stand-in tensors, nothing launched, nothing built), and every
// program it asks for is listed with its build options. The engine builds that list in parallel while the
// weights load, so the first generation on a new device or driver does not stop to compile, and says so meanwhile
// ("Preparing GPU kernels for <device>").
#pragma once

#include <vector>

#include "io/model_files.hpp"
#include "nn/tensor.hpp"
#include "runtime/program_cache.hpp"

namespace sdt::pipeline {

// The programs that a txt2img generation of width × height (decoded by the VAE and, when the model has one, by
// TAESD) runs on `ctx`'s device with weights stored as `storage`, in the order first used, each once; the weight
// conversion program first when `converting` (it is needed while the weights load). Other requests (img2img,
// other sizes) build what they need beyond this when first used.
std::vector<cl::ProgramRequest> plan_kernels(cl::Context& ctx, const io::ModelFiles& files, nn::DType storage,
                                             int width, int height, bool converting);

}  // namespace sdt::pipeline
