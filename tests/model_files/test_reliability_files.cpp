// Model files beyond what test_safetensors.cpp and test_model_files.cpp build (RELIABILITY.md items 8, 12 and 13
// seen from a whole model): a weight of a dtype we cannot compute with, pickles under every name a user meets
// (TAESD's own .pth files, upper-case extensions), and a mapped file cut short while its views are in use.
#include <gtest/gtest.h>

#include <fstream>

#include "io/model_files.hpp"
#include "io/safetensors.hpp"
#include "io_test_helpers.hpp"
#include "models/architecture.hpp"
#include "sdt/error.hpp"
#include "test_files.hpp"

namespace sdt::test {
namespace {

namespace fs = std::filesystem;

std::string open_error(const std::string& model, const io::OpenOptions& options = {}) {
  try {
    io::open_model(models::architecture(), model, options);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadModel) << e.what();
    return e.what();
  }
  ADD_FAILURE() << model << " opened, but it should have been rejected";
  return {};
}

TEST(ModelFilesReliability, WeightOfAnUnsupportedDtypeIsNamedWithItsFileAndDtype) {
  TempDir dir("sdt-io-dtype");
  const fs::path folder = dir.path() / "m";
  link_tree(tiny_fixture_dir() / "model", folder);
  const fs::path unet = folder / "unet" / "diffusion_pytorch_model.safetensors";
  fs::remove(unet);  // a link to the fixture: replaced by an edited copy, never written through
  rewrite_safetensors(tiny_fixture_dir() / "model" / "unet" / "diffusion_pytorch_model.safetensors", unet,
                      [](StTensor& t) {
                        if (t.name == "conv_in.weight") {
                          t.dtype = "F64";
                          t.data.clear();  // filled with seeded bytes of the F64 size
                        }
                        return true;
                      });
  const std::string message = open_error(folder.string());
  EXPECT_NE(message.find("conv_in.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("F64"), std::string::npos) << message;
  EXPECT_NE(message.find("diffusion_pytorch_model.safetensors"), std::string::npos) << message;
}

TEST(ModelFilesReliability, PicklesAreRefusedUnderEveryNameIncludingTaesdPth) {
  TempDir dir("sdt-io-pickles");
  const std::string pickle_bytes("\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94.", 14);
  for (const char* name : {"MODEL.CKPT", "weights.Pth", "model.pkl", "model.pickle", "model.bin"}) {
    write_file(dir.path() / name, pickle_bytes);
    const std::string message = open_error((dir.path() / name).string());
    EXPECT_NE(message.find("pickle"), std::string::npos) << name << ": " << message;
    EXPECT_NE(message.find("refused"), std::string::npos) << name << ": " << message;
  }
  // The original TAESD ships as taesd_decoder.pth: refused as --taesd, with the model itself fine.
  write_file(dir.path() / "taesd_decoder.pth", pickle_bytes);
  io::OpenOptions options;
  options.taesd = (dir.path() / "taesd_decoder.pth").string();
  const std::string message = open_error((tiny_fixture_dir() / "model").string(), options);
  EXPECT_NE(message.find("taesd_decoder.pth"), std::string::npos) << message;
  EXPECT_NE(message.find("pickle"), std::string::npos) << message;
  // GGUF, another format that is not ours, is named as such.
  write_file(dir.path() / "model.safetensors", std::string("GGUF\x03\x00\x00\x00", 8) + std::string(64, 'x'));
  EXPECT_NE(open_error((dir.path() / "model.safetensors").string()).find("GGUF"), std::string::npos);
}

TEST(ModelFilesReliability, OpenModelTruncatedWhileMappedFailsOnTheNextReadWithoutSigbus) {
  TempDir dir("sdt-io-live");
  const fs::path folder = dir.path() / "m";
  link_tree(tiny_fixture_dir() / "model", folder);
  const fs::path vae = folder / "vae" / "diffusion_pytorch_model.safetensors";
  fs::remove(vae);
  fs::copy_file(tiny_fixture_dir() / "model" / "vae" / "diffusion_pytorch_model.safetensors", vae);
  const io::ModelFiles model = io::open_model(models::architecture(), folder.string());
  const io::TensorView* view = model.weights.find("vae.decoder.conv_out.weight");
  ASSERT_NE(view, nullptr);
  const std::vector<float> before = view->to_f32();
  fs::resize_file(vae, 4096);  // every tensor past the first page now lies beyond the end of the file
  try {
    (void)view->to_f32();
    ADD_FAILURE() << "a read of a truncated mapping succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Io);
    EXPECT_NE(e.message().find(vae.string()), std::string::npos) << e.message();
    EXPECT_NE(e.hint().find("reopen the model"), std::string::npos) << e.hint();
  }
  // Opening again reports the file as incomplete, naming it.
  const std::string message = open_error(folder.string());
  EXPECT_NE(message.find("diffusion_pytorch_model.safetensors"), std::string::npos) << message;
  EXPECT_FALSE(before.empty());
}

}  // namespace
}  // namespace sdt::test
