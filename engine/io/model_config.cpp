// config.json parsing for each model part, mirroring the constructor arguments of transformers' CLIPTextConfig
// and diffusers' UNet2DConditionModel, AutoencoderKL, AutoencoderTiny and EulerDiscreteScheduler. Fields that
// would change the network into something the engine does not run (SDXL's added embeddings, LCM's guidance
// embedding, other block types, ...) are refused by name rather than ignored, so a wrong model never loads as a
// silently wrong picture.
#include "io/model_config.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "io/json_util.hpp"
#include "sdt/error.hpp"

namespace sdt::io {

namespace {

using nlohmann::json;

// Typed access to one config object, with messages naming the file and the field. It checks types only (an
// integer fits an int, a float is finite, a list holds what it should): every range and consistency rule is in
// validate(), once, so configs read from files, inferred from shapes or built in are held to the same rules.
class Fields {
 public:
  Fields(const json& object, const std::string& source) : object_(object), source_(source) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what, std::string hint = {}) const {
    throw Error(ErrorKind::BadModel, source_ + ": field '" + key + "' " + what, std::move(hint));
  }

  const json* find(const std::string& key) const {
    const auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  int integer(const json& v, const std::string& key) const {
    std::int64_t value = 0;
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
        fail(key, "is " + std::to_string(u) + ", too large");
      value = static_cast<std::int64_t>(u);
    } else if (v.is_number_integer()) {
      value = v.get<std::int64_t>();
    } else if (v.is_number_float() && std::isfinite(v.get<double>()) &&
               v.get<double>() == std::floor(v.get<double>()) && std::fabs(v.get<double>()) < 1e15) {
      value = static_cast<std::int64_t>(v.get<double>());  // "4.0" written by some tools
    } else {
      fail(key, std::string("is ") + json_type_phrase(v) + ", expected an integer");
    }
    if (value > std::numeric_limits<int>::max()) fail(key, "is " + std::to_string(value) + ", too large");
    if (value < std::numeric_limits<int>::min()) fail(key, "is " + std::to_string(value) + ", too small");
    return static_cast<int>(value);
  }

  int get_int(const std::string& key, int fallback) const {
    const json* v = find(key);
    return v ? integer(*v, key) : fallback;
  }

  float get_float(const std::string& key, float fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number()) fail(key, std::string("is ") + json_type_phrase(*v) + ", expected a number");
    const double d = v->get<double>();
    if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max())
      fail(key, "is " + printable(v->dump(), 40) + ", not a finite single-precision number");
    return static_cast<float>(d);
  }

  bool get_bool(const std::string& key, bool fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) fail(key, std::string("is ") + json_type_phrase(*v) + ", expected true or false");
    return v->get<bool>();
  }

  std::string get_string(const std::string& key, const std::string& fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_string()) fail(key, std::string("is ") + json_type_phrase(*v) + ", expected a string");
    return v->get<std::string>();
  }

  // A string that must be one of `allowed` (settings that validate() has no field for).
  std::string get_choice(const std::string& key, const std::string& fallback,
                         std::initializer_list<const char*> allowed) const {
    std::string value = get_string(key, fallback);
    for (const char* a : allowed)
      if (value == a) return value;
    fail(key, "is '" + printable(value, 60) + "'; supported: " + quoted_list(allowed));
  }

  // An int or a list of ints (diffusers accepts both for per-block settings); an int is repeated `n` times.
  std::vector<int> get_int_list(const std::string& key, const std::vector<int>& fallback, std::size_t n) const {
    const json* v = find(key);
    if (!v) return fallback;
    std::vector<int> out;
    if (v->is_array()) {
      for (const auto& item : *v) out.push_back(integer(item, key));
    } else {
      out.assign(n == 0 ? 1 : n, integer(*v, key));
    }
    return out;
  }

  std::vector<std::string> get_string_list(const std::string& key, const std::vector<std::string>& fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_array()) fail(key, "should be a list of names");
    std::vector<std::string> out;
    for (const auto& item : *v) {
      if (!item.is_string()) fail(key, std::string("holds ") + json_type_phrase(item) + ", expected block names");
      out.push_back(item.get<std::string>());
    }
    return out;
  }

  // Fields whose non-default values change the network into one the engine does not run.
  void require_absent(const std::string& key, const std::string& why) const {
    if (find(key)) fail(key, "is set (" + printable(find(key)->dump(), 60) + "): " + why);
  }
  void require_value(const std::string& key, const json& expected, const std::string& why) const {
    const json* v = find(key);
    if (v && *v != expected) fail(key, "is " + printable(v->dump(), 60) + ", expected " + expected.dump() + ": " + why);
  }

  static std::string quoted_list(std::initializer_list<const char*> allowed) {
    std::string list;
    for (const char* a : allowed) list += list.empty() ? std::string("'") + a + "'" : std::string(", '") + a + "'";
    return list;
  }

 private:
  const json& object_;
  const std::string& source_;
};

json parse_object(std::string_view text, const std::string& source) {
  json j = parse_json_document(text, source);
  if (!j.is_object())
    throw Error(ErrorKind::BadModel,
                source + ": the config is " + std::string(json_type_phrase(j)) + ", expected a JSON object");
  return j;
}

[[noreturn]] void invalid(const std::string& source, const std::string& what) {
  throw Error(ErrorKind::BadModel, source + ": " + what, "the config disagrees with itself; fix or re-download it");
}

void check_range(const std::string& source, const std::string& field, std::int64_t value, std::int64_t lo,
                 std::int64_t hi) {
  if (value < lo || value > hi)
    invalid(source, "field '" + field + "' is " + std::to_string(value) + ", outside the sensible range " +
                        std::to_string(lo) + " to " + std::to_string(hi));
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

void check_float_range(const std::string& source, const std::string& field, double value, double lo, double hi) {
  if (!(value >= lo && value <= hi))
    invalid(source, "field '" + field + "' is " + number(value) + ", outside " + number(lo) + " to " + number(hi));
}

// A name of a list field that must be one of `allowed`.
void check_names(const std::string& source, const std::string& field, const std::vector<std::string>& names,
                 std::initializer_list<const char*> allowed) {
  for (const auto& name : names) {
    bool known = false;
    for (const char* a : allowed) known = known || name == a;
    if (!known)
      throw Error(ErrorKind::BadModel, source + ": field '" + field + "' holds '" + printable(name, 60) +
                                           "'; supported: " + Fields::quoted_list(allowed));
  }
}

const char kNotSd2[] = "SD-Turbo (SD 2.x) does not use it and the engine does not implement it";

}  // namespace

TextEncoderConfig parse_text_encoder_config(std::string_view json_text, const std::string& source) {
  const json j = parse_object(json_text, source);
  const Fields f(j, source);
  TextEncoderConfig c;
  c.vocab_size = f.get_int("vocab_size", c.vocab_size);
  c.max_positions = f.get_int("max_position_embeddings", c.max_positions);
  c.hidden_size = f.get_int("hidden_size", c.hidden_size);
  c.intermediate_size = f.get_int("intermediate_size", c.intermediate_size);
  c.num_heads = f.get_int("num_attention_heads", c.num_heads);
  c.num_layers = f.get_int("num_hidden_layers", c.num_layers);
  c.layer_norm_eps = f.get_float("layer_norm_eps", c.layer_norm_eps);
  c.hidden_act = f.get_string("hidden_act", c.hidden_act);
  validate(c, source);
  return c;
}

UNetConfig parse_unet_config(std::string_view json_text, const std::string& source) {
  const json j = parse_object(json_text, source);
  const Fields f(j, source);
  if (const json* a = f.find("addition_embed_type"); a && a->is_string() && a->get<std::string>() == "text_time") {
    throw Error(ErrorKind::BadModel,
                source + ": this is SDXL; SD-Turbo (SD 2.x) is supported (addition_embed_type is 'text_time')",
                "use stabilityai/sd-turbo, not sdxl-turbo");
  }
  f.require_absent("addition_embed_type", kNotSd2);
  f.require_absent("class_embed_type", kNotSd2);
  f.require_absent("encoder_hid_dim", kNotSd2);
  f.require_absent("encoder_hid_dim_type", kNotSd2);
  f.require_absent("time_cond_proj_dim", "a guidance-embedding (LCM) UNet; " + std::string(kNotSd2));
  f.require_absent("time_embedding_dim", kNotSd2);
  f.require_absent("timestep_post_act", kNotSd2);
  f.require_absent("time_embedding_act_fn", kNotSd2);
  f.require_absent("cross_attention_norm", kNotSd2);
  f.require_absent("reverse_transformer_layers_per_block", kNotSd2);
  f.require_value("time_embedding_type", "positional", kNotSd2);
  f.require_value("act_fn", "silu", kNotSd2);
  f.require_value("conv_in_kernel", 3, kNotSd2);
  f.require_value("conv_out_kernel", 3, kNotSd2);
  f.require_value("resnet_time_scale_shift", "default", kNotSd2);
  f.require_value("only_cross_attention", false, kNotSd2);
  f.require_value("dual_cross_attention", false, kNotSd2);
  f.require_value("center_input_sample", false, kNotSd2);
  f.require_value("resnet_skip_time_act", false, kNotSd2);
  f.require_value("class_embeddings_concat", false, kNotSd2);
  f.require_value("attention_type", "default", kNotSd2);
  f.require_value("downsample_padding", 1, kNotSd2);
  if (const json* v = f.find("resnet_out_scale_factor"); v && !(v->is_number() && v->get<double>() == 1.0))
    f.fail("resnet_out_scale_factor", "is " + printable(v->dump(), 40) + ", expected 1: " + kNotSd2);
  if (const json* v = f.find("mid_block_scale_factor"); v && !(v->is_number() && v->get<double>() == 1.0))
    f.fail("mid_block_scale_factor", "is " + printable(v->dump(), 40) + ", expected 1: " + kNotSd2);

  UNetConfig c;
  c.in_channels = f.get_int("in_channels", c.in_channels);
  c.out_channels = f.get_int("out_channels", c.out_channels);
  c.block_out_channels = f.get_int_list("block_out_channels", c.block_out_channels, 0);
  const std::size_t n = c.block_out_channels.size();
  c.down_block_types = f.get_string_list("down_block_types", c.down_block_types);
  c.up_block_types = f.get_string_list("up_block_types", c.up_block_types);
  // diffusers takes one value per block; the engine runs one value for all blocks.
  const auto per_block_single = [&](const std::string& key, int fallback) {
    const auto values = f.get_int_list(key, {fallback}, 1);
    if (values.empty()) f.fail(key, "is an empty list");
    for (int v : values)
      if (v != values.front()) f.fail(key, "differs between blocks; the engine supports one value for all blocks");
    return values.front();
  };
  c.layers_per_block = per_block_single("layers_per_block", c.layers_per_block);
  c.transformer_layers_per_block = per_block_single("transformer_layers_per_block", c.transformer_layers_per_block);
  c.cross_attention_dim = per_block_single("cross_attention_dim", c.cross_attention_dim);
  // SD2 configs put the head COUNT in attention_head_dim (diffusers issue 2011); num_attention_heads wins.
  const char* heads_key = f.find("num_attention_heads") ? "num_attention_heads" : "attention_head_dim";
  c.num_heads = f.get_int_list(heads_key, std::vector<int>(n, 8), n);  // diffusers' default: 8
  c.norm_num_groups = f.get_int("norm_num_groups", c.norm_num_groups);
  c.norm_eps = f.get_float("norm_eps", c.norm_eps);
  c.use_linear_projection = f.get_bool("use_linear_projection", false);  // diffusers' default
  c.flip_sin_to_cos = f.get_bool("flip_sin_to_cos", true);
  c.freq_shift = f.get_float("freq_shift", 0);
  c.upcast_attention = f.get_bool("upcast_attention", false);
  c.mid_block_type = f.get_string("mid_block_type", c.mid_block_type);
  validate(c, source);
  return c;
}

VaeConfig parse_vae_config(std::string_view json_text, const std::string& source) {
  const json j = parse_object(json_text, source);
  const Fields f(j, source);
  if (const json* v = f.find("shift_factor"); v && !(v->is_number() && v->get<double>() == 0.0))
    f.fail("shift_factor", "is set: this VAE belongs to SD3 or FLUX; SD-Turbo (SD 2.x) is supported");
  f.require_absent("latents_mean", kNotSd2);
  f.require_absent("latents_std", kNotSd2);
  f.require_value("act_fn", "silu", kNotSd2);
  VaeConfig c;
  c.in_channels = f.get_int("in_channels", c.in_channels);
  c.out_channels = f.get_int("out_channels", c.out_channels);
  c.latent_channels = f.get_int("latent_channels", c.latent_channels);
  c.block_out_channels = f.get_int_list("block_out_channels", c.block_out_channels, 0);
  c.layers_per_block = f.get_int("layers_per_block", c.layers_per_block);
  c.norm_num_groups = f.get_int("norm_num_groups", c.norm_num_groups);
  c.scaling_factor = f.get_float("scaling_factor", c.scaling_factor);
  c.use_quant_conv = f.get_bool("use_quant_conv", true);
  c.use_post_quant_conv = f.get_bool("use_post_quant_conv", true);
  c.mid_block_add_attention = f.get_bool("mid_block_add_attention", true);
  // The block types are not kept (the engine has one kind of each): their rules are checked here, once.
  const auto down = f.get_string_list("down_block_types",
                                      std::vector<std::string>(c.block_out_channels.size(), "DownEncoderBlock2D"));
  const auto up =
      f.get_string_list("up_block_types", std::vector<std::string>(c.block_out_channels.size(), "UpDecoderBlock2D"));
  check_names(source, "down_block_types", down, {"DownEncoderBlock2D"});
  check_names(source, "up_block_types", up, {"UpDecoderBlock2D"});
  if (down.size() != c.block_out_channels.size() || up.size() != c.block_out_channels.size())
    invalid(source, "down_block_types and up_block_types need one entry per block_out_channels entry");
  validate(c, source);
  return c;
}

TaesdConfig parse_taesd_config(std::string_view json_text, const std::string& source) {
  const json j = parse_object(json_text, source);
  const Fields f(j, source);
  f.require_value("act_fn", "relu", "TAESD as published uses ReLU");
  f.require_value("upsample_fn", "nearest", "TAESD as published upsamples with nearest");
  f.require_value("upsampling_scaling_factor", 2, "TAESD as published upsamples by 2");
  if (const json* v = f.find("shift_factor"); v && !(v->is_number() && v->get<double>() == 0.0))
    f.fail("shift_factor", "is set: this TAESD belongs to SD3 or FLUX; SD-Turbo (SD 2.x) is supported");
  TaesdConfig c;
  c.in_channels = f.get_int("in_channels", c.in_channels);
  c.out_channels = f.get_int("out_channels", c.out_channels);
  c.latent_channels = f.get_int("latent_channels", c.latent_channels);
  const auto both = f.get_int_list("block_out_channels", c.encoder_block_out_channels, 0);
  c.encoder_block_out_channels = f.get_int_list("encoder_block_out_channels", both, 0);
  c.decoder_block_out_channels = f.get_int_list("decoder_block_out_channels", both, 0);
  c.num_encoder_blocks = f.get_int_list("num_encoder_blocks", c.num_encoder_blocks, 0);
  c.num_decoder_blocks = f.get_int_list("num_decoder_blocks", c.num_decoder_blocks, 0);
  c.latent_magnitude = f.get_float("latent_magnitude", c.latent_magnitude);
  c.latent_shift = f.get_float("latent_shift", c.latent_shift);
  validate(c, source);
  return c;
}

SchedulerConfig parse_scheduler_config(std::string_view json_text, const std::string& source) {
  const json j = parse_object(json_text, source);
  const Fields f(j, source);
  f.require_absent("trained_betas", "explicit beta tables are not supported");
  f.require_value("rescale_betas_zero_snr", false, "zero-terminal-SNR rescaling is not implemented");
  f.require_value("timestep_type", "discrete", "continuous timesteps are not implemented");
  f.require_value("use_exponential_sigmas", false, "not implemented");
  f.require_value("use_beta_sigmas", false, "not implemented");
  f.require_value("final_sigmas_type", "zero", "SD-Turbo steps to sigma 0");
  SchedulerConfig c;
  c.num_train_timesteps = f.get_int("num_train_timesteps", c.num_train_timesteps);
  c.beta_start = f.get_float("beta_start", c.beta_start);
  c.beta_end = f.get_float("beta_end", c.beta_end);
  c.beta_schedule = f.get_choice("beta_schedule", c.beta_schedule, {"scaled_linear", "linear"});
  const std::string prediction = f.get_string("prediction_type", c.prediction_type);
  if (prediction != "epsilon") {
    f.fail(
        "prediction_type", "is '" + printable(prediction, 40) + "': SD-Turbo predicts the noise ('epsilon')",
        prediction == "v_prediction" ? "this is a v-prediction model (like SD 2.x 768-v), which is not supported" : "");
  }
  c.prediction_type = prediction;
  c.timestep_spacing = f.get_choice("timestep_spacing", c.timestep_spacing, {"trailing", "leading", "linspace"});
  c.steps_offset = f.get_int("steps_offset", c.steps_offset);
  c.interpolation_type = f.get_choice("interpolation_type", c.interpolation_type, {"linear"});
  c.use_karras_sigmas = f.get_bool("use_karras_sigmas", c.use_karras_sigmas);
  validate(c, source);
  return c;
}

void validate(const TextEncoderConfig& c, const std::string& source) {
  // SD 1.x shares the folder layout; its CLIP ViT-L text encoder is the tell (quick_gelu, 768 wide).
  if (c.hidden_act == "quick_gelu") {
    throw Error(ErrorKind::BadModel,
                source + ": this is Stable Diffusion 1.x (CLIP ViT-L text encoder with quick_gelu, " +
                    std::to_string(c.hidden_size) + " wide); SD-Turbo (SD 2.x) is supported",
                "use stabilityai/sd-turbo");
  }
  if (c.hidden_act != "gelu")
    throw Error(ErrorKind::BadModel, source + ": field 'hidden_act' is '" + printable(c.hidden_act, 40) +
                                         "'; supported: 'gelu' (SD 2.x's exact GELU)");
  check_range(source, "vocab_size", c.vocab_size, 1, 1'000'000);
  check_range(source, "max_position_embeddings", c.max_positions, 1, 4096);
  check_range(source, "hidden_size", c.hidden_size, 1, 16384);
  check_range(source, "intermediate_size", c.intermediate_size, 1, 65536);
  check_range(source, "num_hidden_layers", c.num_layers, 1, 256);
  check_range(source, "num_attention_heads", c.num_heads, 1, 1024);
  check_float_range(source, "layer_norm_eps", c.layer_norm_eps, 1e-12, 0.1);
  if (c.hidden_size % c.num_heads != 0)
    invalid(source, "hidden_size " + std::to_string(c.hidden_size) + " is not divisible by num_attention_heads " +
                        std::to_string(c.num_heads));
}

void validate(const UNetConfig& c, const std::string& source) {
  const std::size_t n = c.block_out_channels.size();
  if (n < 1 || n > 8)
    invalid(source, "field 'block_out_channels' has " + std::to_string(n) + " entries, expected 1 to 8 blocks");
  check_names(source, "down_block_types", c.down_block_types, {"CrossAttnDownBlock2D", "DownBlock2D"});
  check_names(source, "up_block_types", c.up_block_types, {"CrossAttnUpBlock2D", "UpBlock2D"});
  if (c.mid_block_type != "UNetMidBlock2DCrossAttn")
    throw Error(ErrorKind::BadModel, source + ": field 'mid_block_type' is '" + printable(c.mid_block_type, 60) +
                                         "'; supported: 'UNetMidBlock2DCrossAttn'");
  check_range(source, "in_channels", c.in_channels, 1, 64);
  check_range(source, "out_channels", c.out_channels, 1, 64);
  check_range(source, "layers_per_block", c.layers_per_block, 1, 16);
  check_range(source, "transformer_layers_per_block", c.transformer_layers_per_block, 1, 16);
  check_range(source, "cross_attention_dim", c.cross_attention_dim, 1, 16384);
  check_range(source, "norm_num_groups", c.norm_num_groups, 1, 1024);
  check_float_range(source, "norm_eps", c.norm_eps, 1e-12, 0.1);
  check_float_range(source, "freq_shift", c.freq_shift, -1e4, 1e4);
  if (c.down_block_types.size() != n || c.up_block_types.size() != n || c.num_heads.size() != n) {
    invalid(source, "block_out_channels has " + std::to_string(n) + " entries but down_block_types has " +
                        std::to_string(c.down_block_types.size()) + ", up_block_types " +
                        std::to_string(c.up_block_types.size()) + " and the attention heads " +
                        std::to_string(c.num_heads.size()));
  }
  for (std::size_t i = 0; i < n; ++i) {
    const int ch = c.block_out_channels[i];
    check_range(source, "block_out_channels[" + std::to_string(i) + "]", ch, 1, 16384);
    if (ch % c.norm_num_groups != 0)
      invalid(source, "block_out_channels[" + std::to_string(i) + "] = " + std::to_string(ch) +
                          " is not divisible by norm_num_groups " + std::to_string(c.norm_num_groups));
    check_range(source, "attention heads[" + std::to_string(i) + "]", c.num_heads[i], 1, 1024);
    if (ch % c.num_heads[i] != 0)
      invalid(source, "block " + std::to_string(i) + " has " + std::to_string(ch) + " channels, not divisible by its " +
                          std::to_string(c.num_heads[i]) + " attention heads");
    const bool down_attn = c.down_block_types[i] == "CrossAttnDownBlock2D";
    const bool up_attn = c.up_block_types[n - 1 - i] == "CrossAttnUpBlock2D";
    if (down_attn != up_attn)
      invalid(source, "down block " + std::to_string(i) + " and its mirror, up block " + std::to_string(n - 1 - i) +
                          ", disagree about cross-attention");
  }
  if (static_cast<std::int64_t>(c.block_out_channels[0]) * 4 > 65536)
    invalid(source, "block_out_channels[0] is too large for the time embedding");
}

void validate(const VaeConfig& c, const std::string& source) {
  const std::size_t n = c.block_out_channels.size();
  if (n < 1 || n > 8)
    invalid(source, "field 'block_out_channels' has " + std::to_string(n) + " entries, expected 1 to 8 blocks");
  check_range(source, "in_channels", c.in_channels, 1, 64);
  check_range(source, "out_channels", c.out_channels, 1, 64);
  check_range(source, "latent_channels", c.latent_channels, 1, 64);
  check_range(source, "layers_per_block", c.layers_per_block, 1, 16);
  check_range(source, "norm_num_groups", c.norm_num_groups, 1, 1024);
  for (std::size_t i = 0; i < n; ++i) {
    check_range(source, "block_out_channels[" + std::to_string(i) + "]", c.block_out_channels[i], 1, 16384);
    if (c.block_out_channels[i] % c.norm_num_groups != 0)
      invalid(source, "block_out_channels[" + std::to_string(i) + "] = " + std::to_string(c.block_out_channels[i]) +
                          " is not divisible by norm_num_groups " + std::to_string(c.norm_num_groups));
  }
  check_float_range(source, "scaling_factor", c.scaling_factor, 1e-6, 1e6);
}

void validate(const TaesdConfig& c, const std::string& source) {
  check_range(source, "in_channels", c.in_channels, 1, 64);
  check_range(source, "out_channels", c.out_channels, 1, 64);
  check_range(source, "latent_channels", c.latent_channels, 1, 64);
  const auto check_lists = [&](const char* what, const std::vector<int>& channels, const std::vector<int>& blocks) {
    check_range(source, std::string("number of ") + what + " blocks", static_cast<std::int64_t>(channels.size()), 1, 8);
    if (blocks.size() != channels.size())
      invalid(source, std::string("num_") + what + "_blocks has " + std::to_string(blocks.size()) + " entries, " +
                          what + "_block_out_channels " + std::to_string(channels.size()));
    for (int ch : channels) check_range(source, std::string(what) + "_block_out_channels", ch, 1, 16384);
    for (int b : blocks) check_range(source, std::string("num_") + what + "_blocks", b, 0, 64);
  };
  check_lists("encoder", c.encoder_block_out_channels, c.num_encoder_blocks);
  check_lists("decoder", c.decoder_block_out_channels, c.num_decoder_blocks);
  check_float_range(source, "latent_magnitude", c.latent_magnitude, 1e-6, 1e6);
  check_float_range(source, "latent_shift", c.latent_shift, -1e6, 1e6);
  if (!c.has_encoder && !c.has_decoder) invalid(source, "neither an encoder nor a decoder");
}

void validate(const SchedulerConfig& c, const std::string& source) {
  check_range(source, "num_train_timesteps", c.num_train_timesteps, 2, 100000);
  check_float_range(source, "beta_start", c.beta_start, 1e-9, 0.999);
  check_float_range(source, "beta_end", c.beta_end, 1e-9, 0.999);
  if (!(c.beta_start < c.beta_end))
    invalid(source, "betas must satisfy 0 < beta_start < beta_end < 1 (beta_start " + std::to_string(c.beta_start) +
                        ", beta_end " + std::to_string(c.beta_end) + ")");
  check_range(source, "steps_offset", c.steps_offset, 0, c.num_train_timesteps - 1);
}

}  // namespace sdt::io
