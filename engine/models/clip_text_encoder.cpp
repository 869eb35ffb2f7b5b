#include "models/clip_text_encoder.hpp"

#include "sdt/error.hpp"

namespace sdt::models {

// T tokens, C hidden width, H heads, F MLP width.

ClipEncoderLayer::ClipEncoderLayer(const nn::WeightScope& scope, const io::TextEncoderConfig& config)
    : heads_(config.num_heads) {
  const std::int64_t C = config.hidden_size, F = config.intermediate_size;
  layer_norm1_ = nn::LayerNorm(scope["layer_norm1"], C, config.layer_norm_eps);
  self_attn_qkv_proj_ = nn::Linear::stacked(scope["self_attn"], {"q_proj", "k_proj", "v_proj"}, C, C);
  self_attn_out_proj_ = nn::Linear(scope["self_attn"]["out_proj"], C, C);
  layer_norm2_ = nn::LayerNorm(scope["layer_norm2"], C, config.layer_norm_eps);
  mlp_fc1_ = nn::Linear(scope["mlp"]["fc1"], C, F);
  mlp_fc2_ = nn::Linear(scope["mlp"]["fc2"], F, C);
}

nn::Tensor ClipEncoderLayer::operator()(cl::Context& ctx, const nn::Tensor& x) const {
  // x: [T, C]
  nn::Tensor qkv = self_attn_qkv_proj_(ctx, x, layer_norm1_);  // [T, 3C]: q, k, v of the normalised x, one product
  nn::Tensor attended =
      nn::self_attention(ctx, qkv, heads_, /*causal=*/true, self_attn_qkv_proj_.weight().dtype);  // [T, C]
  nn::Tensor r = self_attn_out_proj_(ctx, attended, nn::Act::None, &x);                        // x + attn
  nn::Tensor m = mlp_fc1_(ctx, r, layer_norm2_, nn::Act::GELU);                                // [T, F]
  return mlp_fc2_(ctx, m, nn::Act::None, &r);                                                  // r + mlp
}

ClipTextEncoder::ClipTextEncoder(const nn::WeightScope& scope, const io::TextEncoderConfig& config) : config_(config) {
  const nn::WeightScope model = scope["text_model"];
  token_embedding_ = model["embeddings"]["token_embedding"].matrix("weight", {config.vocab_size, config.hidden_size},
                                                                   nn::Init::embedding());
  position_embedding_ = model["embeddings"]["position_embedding"].matrix(
      "weight", {config.max_positions, config.hidden_size}, nn::Init::embedding());
  for (int i = 0; i < config.num_layers; ++i) layers_.emplace_back(model["encoder"]["layers"][i], config);
  final_layer_norm_ = nn::LayerNorm(model["final_layer_norm"], config.hidden_size, config.layer_norm_eps);
}

nn::Tensor ClipTextEncoder::operator()(cl::Context& ctx, const std::vector<int>& ids) const {
  if (ids.empty() || static_cast<int>(ids.size()) > config_.max_positions)
    throw Error(ErrorKind::Internal, "text encoder: " + std::to_string(ids.size()) + " token ids, expected 1.." +
                                         std::to_string(config_.max_positions));
  for (int id : ids)
    if (id < 0 || id >= config_.vocab_size)
      throw Error(ErrorKind::Internal, "text encoder: token id " + std::to_string(id) + " outside the vocabulary of " +
                                           std::to_string(config_.vocab_size));
  nn::Tensor h = nn::embed_tokens(ctx, ids, token_embedding_, position_embedding_);  // [T, C]
  for (const auto& layer : layers_) h = layer(ctx, h);
  return final_layer_norm_(ctx, h);  // [T, C]
}

}  // namespace sdt::models
