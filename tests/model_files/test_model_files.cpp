// Model discovery on the fixture layouts: the diffusers folder, the LDM and SGM single files and both TAESD
// layouts must give the same internal weights (names, shapes, bytes); configs, tokenizer and scheduler come
// from the right places; every layout check and cross-part check rejects what it should.
#include <gtest/gtest.h>

#include <cstring>

#include "io/mapped_file.hpp"
#include "io/model_files.hpp"
#include "io/weight_specs.hpp"
#include "io_test_helpers.hpp"
#include "models/architecture.hpp"
#include "sdt/error.hpp"
#include "test_files.hpp"

namespace sdt::test {
namespace {

namespace fs = std::filesystem;
using io::ModelFiles;

// Opening the fixtures costs a few ms each; share them across tests.
const ModelFiles& folder_model() {
  static const ModelFiles m = io::open_model(models::architecture(), (tiny_fixture_dir() / "model").string());
  return m;
}

// Expects open_model(model, options) to fail with a BadModel error containing every fragment.
void expect_open_error(const std::string& model, std::initializer_list<std::string> fragments,
                       io::OpenOptions options = {}) {
  try {
    io::open_model(models::architecture(), model, options);
    ADD_FAILURE() << model << " opened, but it should have been rejected";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadModel) << e.what();
    for (const auto& f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << "message: " << e.what();
  }
}

// Same internal names, shapes, dtypes and bytes.
void expect_same_weights(const io::WeightSet& a, const io::WeightSet& b, const std::string& prefix = {}) {
  std::vector<std::string> an, bn;
  for (const auto& n : a.names())
    if (n.rfind(prefix, 0) == 0) an.push_back(n);
  for (const auto& n : b.names())
    if (n.rfind(prefix, 0) == 0) bn.push_back(n);
  ASSERT_EQ(an, bn);
  ASSERT_FALSE(an.empty());
  int differing = 0;
  for (const auto& n : an) {
    const auto* x = a.find(n);
    const auto* y = b.find(n);
    ASSERT_EQ(x->shape, y->shape) << n;
    ASSERT_EQ(x->dtype, y->dtype) << n;
    ASSERT_EQ(x->bytes, y->bytes) << n;
    if (std::memcmp(x->data, y->data, x->bytes) != 0) {
      ADD_FAILURE() << n << " (" << x->describe() << " vs " << y->describe() << ") has different bytes";
      if (++differing > 5) return;
    }
  }
}

TEST(ModelFiles, OpensTheDiffusersFolderWithArchitectureFromItsConfigs) {
  const ModelFiles& m = folder_model();
  EXPECT_EQ(m.layout, "diffusers folder");
  EXPECT_EQ(m.text_encoder.hidden_size, 32);
  EXPECT_EQ(m.text_encoder.num_heads, 4);
  EXPECT_EQ(m.text_encoder.num_layers, 3);
  EXPECT_EQ(m.text_encoder.intermediate_size, 64);
  EXPECT_EQ(m.unet.block_out_channels, (std::vector<int>{32, 64, 64, 64}));
  EXPECT_EQ(m.unet.num_heads, (std::vector<int>{2, 4, 4, 4}));  // attention_head_dim holds head counts in SD2 configs
  EXPECT_EQ(m.unet.cross_attention_dim, 32);
  EXPECT_TRUE(m.unet.use_linear_projection);
  EXPECT_EQ(m.vae.block_out_channels, (std::vector<int>{32, 64, 64, 64}));
  EXPECT_TRUE(m.has_vae_encoder);
  EXPECT_EQ(m.scheduler.timestep_spacing, "trailing");
  EXPECT_EQ(m.vocab_json, tiny_fixture_dir() / "model" / "tokenizer" / "vocab.json");
  EXPECT_EQ(m.merges_txt, tiny_fixture_dir() / "model" / "tokenizer" / "merges.txt");
  ASSERT_TRUE(m.taesd.has_value()) << "the taesd/ folder beside the model is picked up";
  EXPECT_TRUE(m.taesd->has_encoder && m.taesd->has_decoder);
  EXPECT_EQ(m.hash.size(), 10u);
  EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
  ASSERT_EQ(m.parts.size(), 4u);
  EXPECT_EQ(m.parts[1].part, "unet");
  EXPECT_EQ(m.parts[1].format, "safetensors F32");
}

TEST(ModelFiles, EveryWeightTheConfigsImplyIsThereWithItsShape) {
  const ModelFiles& m = folder_model();
  std::vector<io::WeightSpec> specs = models::text_encoder_weights(m.text_encoder);
  for (const auto& list :
       {models::unet_weights(m.unet), models::vae_weights(m.vae, true), models::taesd_weights(*m.taesd)})
    specs.insert(specs.end(), list.begin(), list.end());
  for (const auto& s : specs) EXPECT_NO_THROW(m.weights.get(s.name, s.shape)) << s.name;
  EXPECT_EQ(specs.size(), m.weights.names().size());
  // The fixture files hold exactly these tensors (text 53-1 metadata, unet 685-1, vae 245-1, taesd 135-1).
  EXPECT_EQ(m.weights.names().size(), 52u + 684u + 244u + 134u);
  try {
    m.weights.get("unet.conv_in.weight", {32, 4, 3, 4});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("diffusion_pytorch_model.safetensors"), std::string::npos) << e.what();
  }
}

TEST(ModelFiles, LdmSingleFileMapsToTheFolderNamesAndBytes) {
  const ModelFiles ldm =
      io::open_model(models::architecture(), (tiny_fixture_dir() / "model.ldm.safetensors").string());
  EXPECT_EQ(ldm.layout, "single file (LDM)");
  expect_same_weights(ldm.weights, folder_model().weights);
  EXPECT_EQ(ldm.hash, folder_model().hash) << "the hash is over internal names: the same model in any layout";
  // SD 2 uses the penultimate text block: the poisoned last one, text_projection and logit_scale are skipped.
  EXPECT_EQ(ldm.text_encoder.num_layers, 3);
  EXPECT_FALSE(ldm.weights.has("text_encoder.text_model.encoder.layers.3.mlp.fc1.weight"));
  EXPECT_EQ(ldm.parts[0].unused_tensors, 14);
  // q/k/v are views into the fused in_proj tensor (no copies).
  const auto* q = ldm.weights.find("text_encoder.text_model.encoder.layers.0.self_attn.q_proj.weight");
  const auto* k = ldm.weights.find("text_encoder.text_model.encoder.layers.0.self_attn.k_proj.weight");
  ASSERT_TRUE(q && k && q->file);
  EXPECT_EQ(k->data, q->data + q->bytes);
  EXPECT_GE(q->data, q->file->data());
  // The VAE's 1×1-conv attention weights become linear [C, C] with the same bytes.
  EXPECT_EQ(ldm.weights.find("vae.decoder.mid_block.attentions.0.to_q.weight")->shape,
            (std::vector<std::int64_t>{64, 64}));
}

TEST(ModelFiles, SgmSingleFileMapsToTheFolderNamesAndBytes) {
  const ModelFiles sgm =
      io::open_model(models::architecture(), (tiny_fixture_dir() / "model.sgm.safetensors").string());
  EXPECT_EQ(sgm.layout, "single file (SGM)");
  expect_same_weights(sgm.weights, folder_model().weights);
  EXPECT_EQ(sgm.hash, folder_model().hash);
  EXPECT_TRUE(sgm.vocab_json.empty()) << "single files carry no tokenizer: the bundled one is used";
  EXPECT_EQ(sgm.scheduler.timestep_spacing, "trailing");
}

TEST(ModelFiles, SingleFileArchitectureComesFromShapesAndWarnsAboutUnreadableHeads) {
  const ModelFiles ldm =
      io::open_model(models::architecture(), (tiny_fixture_dir() / "model.ldm.safetensors").string());
  EXPECT_EQ(ldm.unet.block_out_channels, folder_model().unet.block_out_channels);
  EXPECT_EQ(ldm.unet.layers_per_block, 2);
  EXPECT_EQ(ldm.unet.down_block_types, folder_model().unet.down_block_types);
  EXPECT_EQ(ldm.unet.up_block_types, folder_model().unet.up_block_types);
  EXPECT_EQ(ldm.unet.cross_attention_dim, 32);
  EXPECT_EQ(ldm.vae.block_out_channels, folder_model().vae.block_out_channels);
  EXPECT_EQ(ldm.text_encoder.intermediate_size, 64);
  // 32 wide is not SD 2.x-sized: its head count is not in the weights, and the model says so.
  ASSERT_EQ(ldm.warnings.size(), 2u);
  EXPECT_NE(ldm.warnings[0].find("head"), std::string::npos) << ldm.warnings[0];
}

TEST(ModelFiles, SingleFileWithDiffusersConfigsGetsTheRightHeads) {
  io::OpenOptions options;
  options.config_dir = tiny_fixture_dir() / "model";
  const ModelFiles ldm =
      io::open_model(models::architecture(), (tiny_fixture_dir() / "model.ldm.safetensors").string(), options);
  EXPECT_EQ(ldm.text_encoder.num_heads, 4);
  EXPECT_EQ(ldm.unet.num_heads, (std::vector<int>{2, 4, 4, 4}));
  EXPECT_TRUE(ldm.warnings.empty());
  expect_same_weights(ldm.weights, folder_model().weights);
}

TEST(ModelFiles, ConfigsThatDisagreeWithASingleFileAreRejected) {
  TempDir dir("sdt-io-model");
  link_tree(tiny_fixture_dir() / "model", dir.path() / "config");
  auto text = read_file(dir.path() / "config" / "text_encoder" / "config.json");
  text.replace(text.find("\"num_hidden_layers\": 3"), 22, "\"num_hidden_layers\": 2");
  write_file(dir.path() / "config" / "text_encoder" / "config.json", text);
  io::OpenOptions options;
  options.config_dir = dir.path() / "config";
  expect_open_error((tiny_fixture_dir() / "model.ldm.safetensors").string(), {"num_hidden_layers", "text_encoder"},
                    options);
}

TEST(ModelFiles, TaesdOriginalFilesMatchTheAutoencoderTinyFolder) {
  const ModelFiles folder = io::open_taesd(models::architecture(), tiny_fixture_dir() / "taesd");
  const ModelFiles original = io::open_taesd(models::architecture(), tiny_fixture_dir() / "taesd_decoder.safetensors");
  expect_same_weights(original.weights, folder.weights);
  EXPECT_EQ(original.hash, folder.hash);
  ASSERT_TRUE(original.taesd && original.taesd->has_encoder) << "taesd_encoder.safetensors beside it is picked up";
  // The original decoder's index 0 is the weightless clamp: its "1.weight" is our layers.0.
  EXPECT_NE(original.weights.find("taesd.decoder.layers.0.weight")->describe().find("1.weight in "), std::string::npos);
  EXPECT_TRUE(io::looks_like_taesd(tiny_fixture_dir() / "taesd"));
  EXPECT_TRUE(io::looks_like_taesd(tiny_fixture_dir() / "taesd_decoder.safetensors"));
  EXPECT_FALSE(io::looks_like_taesd(tiny_fixture_dir() / "model"));
  EXPECT_FALSE(io::looks_like_taesd(tiny_fixture_dir() / "model.ldm.safetensors"));
}

TEST(ModelFiles, TaesdDecoderAloneHasNoEncoder) {
  TempDir dir("sdt-io-model");
  fs::copy_file(tiny_fixture_dir() / "taesd_decoder.safetensors", dir.path() / "taesd_decoder.safetensors");
  const ModelFiles m = io::open_taesd(models::architecture(), dir.path() / "taesd_decoder.safetensors");
  EXPECT_TRUE(m.taesd->has_decoder);
  EXPECT_FALSE(m.taesd->has_encoder);
  EXPECT_FALSE(m.weights.has("taesd.encoder.layers.0.weight"));
}

TEST(ModelFiles, ExplicitTaesdIsUsedAndATaesdIsNoModel) {
  io::OpenOptions options;
  options.taesd = (tiny_fixture_dir() / "taesd_decoder.safetensors").string();
  const ModelFiles m =
      io::open_model(models::architecture(), (tiny_fixture_dir() / "model.sgm.safetensors").string(), options);
  EXPECT_NE(m.parts.back().source.find("taesd_decoder.safetensors"), std::string::npos);
  expect_open_error((tiny_fixture_dir() / "taesd").string(), {"TAESD", "not a whole model"});
  expect_open_error((tiny_fixture_dir() / "taesd_encoder.safetensors").string(), {"TAESD"});
}

TEST(ModelFiles, ABrokenTaesdBesideTheModelIsIgnoredButAnExplicitOneFails) {
  TempDir dir("sdt-io-model");
  link_tree(tiny_fixture_dir() / "model", dir.path() / "m");
  write_file(dir.path() / "taesd_decoder.safetensors", "not a safetensors file at all");
  const ModelFiles m = io::open_model(models::architecture(), (dir.path() / "m").string());
  EXPECT_FALSE(m.taesd.has_value());
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find("ignoring the TAESD"), std::string::npos) << m.warnings[0];
  EXPECT_FALSE(m.weights.has("taesd.decoder.layers.0.weight"));
  io::OpenOptions options;
  options.taesd = (dir.path() / "taesd_decoder.safetensors").string();
  expect_open_error((dir.path() / "m").string(), {"taesd_decoder.safetensors"}, options);
}

TEST(ModelFiles, TaesdForAnotherLatentSpaceIsRejected) {
  TempDir dir("sdt-io-model");
  const auto path = dir.path() / "taesd3_decoder.safetensors";
  rewrite_safetensors(tiny_fixture_dir() / "taesd_decoder.safetensors", path, [](StTensor& t) {
    if (t.name == "1.weight") {
      t.shape = {64, 16, 3, 3};  // SD3/FLUX latents have 16 channels
      t.data.clear();
    }
    return true;
  });
  io::OpenOptions options;
  options.taesd = path.string();
  expect_open_error((tiny_fixture_dir() / "model").string(), {"16 latent channels", "4"}, options);
}

TEST(ModelFiles, PickleCheckpointsAreRefusedWithoutBeingRead) {
  TempDir dir("sdt-io-model");
  // Even a valid safetensors payload is refused under a pickle extension: the extension is the contract.
  write_file(dir.path() / "model.ckpt", make_safetensors({{"a", "F32", {1}, ""}}));
  expect_open_error((dir.path() / "model.ckpt").string(), {"model.ckpt", "pickle", "refused"});
  write_file(dir.path() / "model.pt", "\x80\x02}q\x00.");
  expect_open_error((dir.path() / "model.pt").string(), {"pickle"});
  write_file(dir.path() / "zip.safetensors", std::string("PK\x03\x04", 4) + std::string(64, 'x'));
  expect_open_error((dir.path() / "zip.safetensors").string(), {"zip", "pickle"});
  write_file(dir.path() / "raw.safetensors", std::string("\x80\x04\x95", 3) + std::string(64, 'x'));
  expect_open_error((dir.path() / "raw.safetensors").string(), {"pickle"});
  // A diffusers folder whose UNet exists only as a pickle.
  link_tree(tiny_fixture_dir() / "model", dir.path() / "folder");
  fs::remove(dir.path() / "folder" / "unet" / "diffusion_pytorch_model.safetensors");
  write_file(dir.path() / "folder" / "unet" / "diffusion_pytorch_model.bin", "PK\x03\x04");
  expect_open_error((dir.path() / "folder").string(), {"diffusion_pytorch_model.bin", "pickle"});
}

TEST(ModelFiles, CheckpointsOfOtherKindsSayWhatTheyAre) {
  TempDir dir("sdt-io-model");
  const auto check = [&](const std::string& file, std::vector<std::string> names,
                         std::initializer_list<std::string> fragments) {
    std::vector<StTensor> tensors;
    for (auto& n : names) tensors.push_back({n, "F32", {2}, ""});
    write_file(dir.path() / file, make_safetensors(tensors));
    expect_open_error((dir.path() / file).string(), fragments);
  };
  check("sdxl.safetensors",
        {"conditioner.embedders.0.transformer.text_model.x", "conditioner.embedders.1.model.ln_final.weight",
         "model.diffusion_model.label_emb.0.0.weight"},
        {"this is SDXL; SD-Turbo (SD 2.x) is supported"});
  check("sd15.safetensors",
        {"cond_stage_model.transformer.text_model.final_layer_norm.weight", "model.diffusion_model.out.2.bias"},
        {"Stable Diffusion 1.x", "SD-Turbo (SD 2.x) is supported"});
  check("lora.safetensors",
        {"lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight",
         "lora_unet_down_blocks_0_attentions_0_proj_in.alpha"},
        {"LoRA"});
  check("vae.safetensors",
        {"encoder.down.0.block.0.conv1.weight", "decoder.up.0.block.0.conv1.weight", "quant_conv.weight"},
        {"VAE alone"});
  check("unet_only.safetensors", {"conv_in.weight", "down_blocks.0.resnets.0.conv1.weight"},
        {"UNet weights file alone"});
  check("other.safetensors", {"backbone.layer1.weight", "head.fc.bias"}, {"not a Stable Diffusion checkpoint"});
  check("sd3.safetensors", {"model.diffusion_model.joint_blocks.0.x_block.attn.qkv.weight"}, {"Stable Diffusion 3"});
  check("notext.safetensors", {"model.diffusion_model.out.2.bias", "first_stage_model.decoder.conv_in.weight"},
        {"no text encoder"});
  expect_open_error((dir.path() / "missing.safetensors").string(), {"model not found"});
}

TEST(ModelFiles, MissingTensorIsNamedWithItsFile) {
  TempDir dir("sdt-io-model");
  const auto path = dir.path() / "pruned.safetensors";
  rewrite_safetensors(tiny_fixture_dir() / "model.ldm.safetensors", path,
                      [](StTensor& t) { return t.name != "model.diffusion_model.input_blocks.4.0.emb_layers.1.bias"; });
  expect_open_error(path.string(), {"pruned.safetensors", "model.diffusion_model.input_blocks.4.0.emb_layers.1.bias",
                                    "unet.down_blocks.1.resnets.0.time_emb_proj.bias"});
}

TEST(ModelFiles, TensorWithTheWrongShapeIsNamedWithBothShapes) {
  TempDir dir("sdt-io-model");
  const auto path = dir.path() / "reshaped.safetensors";
  rewrite_safetensors(tiny_fixture_dir() / "model.ldm.safetensors", path, [](StTensor& t) {
    if (t.name == "first_stage_model.decoder.up.1.block.0.conv1.bias") t.shape = {8, 8};
    return true;
  });
  expect_open_error(path.string(), {"first_stage_model.decoder.up.1.block.0.conv1.bias", "[8, 8]", "expected [64]"});
}

TEST(ModelFiles, FolderConfigsThatDisagreeWithTheWeightsNameFileAndField) {
  TempDir dir("sdt-io-model");
  const fs::path folder = dir.path() / "m";
  link_tree(tiny_fixture_dir() / "model", folder);
  const auto te_config = folder / "text_encoder" / "config.json";
  const std::string original = read_file(te_config);
  const auto edit = [&](const fs::path& path, const std::string& from, const std::string& to) {
    std::string text = read_file(path);
    ASSERT_NE(text.find(from), std::string::npos) << from;
    text.replace(text.find(from), from.size(), to);
    write_file(path, text);
  };
  edit(te_config, "\"intermediate_size\": 64", "\"intermediate_size\": 128");
  expect_open_error(folder.string(), {"mlp.fc1.weight", "[64, 32]", "expected [128, 32]", "config.json"});
  write_file(te_config, original);
  edit(te_config, "\"num_hidden_layers\": 3", "\"num_hidden_layers\": 2");
  expect_open_error(folder.string(), {"model.safetensors", "does not describe", "layers.2"});
  write_file(te_config, original);
  edit(folder / "unet" / "config.json", "\"cross_attention_dim\": 32", "\"cross_attention_dim\": 48");
  expect_open_error(folder.string(), {"unet", "cross_attention_dim is 48", "32 wide"});
}

TEST(ModelFiles, BrokenOrMissingConfigsNameTheFile) {
  TempDir dir("sdt-io-model");
  const fs::path folder = dir.path() / "m";
  link_tree(tiny_fixture_dir() / "model", folder);
  write_file(folder / "vae" / "config.json", "{\"block_out_channels\": [32, 64,");
  expect_open_error(folder.string(), {"vae", "config.json", "not valid JSON"});
  write_file(folder / "vae" / "config.json", "{\"block_out_channels\": [32, 64, 64, 1000000000]}");
  expect_open_error(folder.string(), {"vae", "block_out_channels", "1000000000"});
  fs::remove(folder / "vae" / "config.json");
  expect_open_error(folder.string(), {"vae", "config.json", "missing"});
}

TEST(ModelFiles, OtherFamiliesInDiffusersFoldersAreRecognised) {
  TempDir dir("sdt-io-model");
  const fs::path folder = dir.path() / "m";
  link_tree(tiny_fixture_dir() / "model", folder);
  const std::string index = read_file(folder / "model_index.json");
  write_file(
      folder / "model_index.json",
      index.substr(0, index.rfind('}')) + ", \"text_encoder_2\": [\"transformers\", \"CLIPTextModelWithProjection\"]}");
  expect_open_error(folder.string(), {"this is SDXL; SD-Turbo (SD 2.x) is supported"});
  write_file(folder / "model_index.json", index);
  std::string te = read_file(folder / "text_encoder" / "config.json");
  te.replace(te.find("\"gelu\""), 6, "\"quick_gelu\"");
  write_file(folder / "text_encoder" / "config.json", te);
  expect_open_error(folder.string(), {"Stable Diffusion 1.x"});
}

TEST(ModelFiles, Fp16VariantsAndMissingOptionalPartsAreAccepted) {
  TempDir dir("sdt-io-model");
  const fs::path folder = dir.path() / "m";
  link_tree(tiny_fixture_dir() / "model", folder);
  fs::rename(folder / "unet" / "diffusion_pytorch_model.safetensors",
             folder / "unet" / "diffusion_pytorch_model.fp16.safetensors");
  fs::remove_all(folder / "scheduler");
  fs::remove_all(folder / "tokenizer");
  const ModelFiles m = io::open_model(models::architecture(), folder.string());
  EXPECT_NE(m.parts[1].source.find("diffusion_pytorch_model.fp16.safetensors"), std::string::npos);
  EXPECT_EQ(m.scheduler.timestep_spacing, "trailing");  // SD-Turbo's defaults
  EXPECT_TRUE(m.vocab_json.empty());
  EXPECT_EQ(m.warnings.size(), 2u);
  EXPECT_FALSE(m.taesd.has_value()) << "no taesd beside a model in a fresh folder";
}

}  // namespace
}  // namespace sdt::test
