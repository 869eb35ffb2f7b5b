// The CLIP text encoder as SD 2.x and SD-Turbo use it: the OpenCLIP ViT-H text tower in transformers'
// CLIPTextModel form (models/clip/modeling_clip.py), returning last_hidden_state (the final layer norm applied).
// Pre-LN encoder layers with causal self-attention and an exact-GELU MLP. Member names follow the weights
// "text_encoder.text_model.…"; single-file checkpoints are renamed (and their unused last block dropped) by io.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "io/model_config.hpp"
#include "nn/layers.hpp"

namespace sdt::models {

// Its MLP's activation is exact GELU: io::validate refuses any other hidden_act (quick_gelu is SD 1.x's).
class ClipEncoderLayer {
 public:
  ClipEncoderLayer() = default;
  ClipEncoderLayer(const nn::WeightScope& scope, const io::TextEncoderConfig& config);

  // x: [T, C] → [T, C]
  nn::Tensor operator()(cl::Context& ctx, const nn::Tensor& x) const;

 private:
  int heads_ = 1;
  nn::LayerNorm layer_norm1_;
  nn::Linear self_attn_qkv_proj_;  // q_proj, k_proj and v_proj stacked: one product
  nn::Linear self_attn_out_proj_;
  nn::LayerNorm layer_norm2_;
  nn::Linear mlp_fc1_, mlp_fc2_;
};

class ClipTextEncoder {
 public:
  // scope: the "text_encoder." part of a model's weights.
  ClipTextEncoder(const nn::WeightScope& scope, const io::TextEncoderConfig& config);
  ~ClipTextEncoder();
  ClipTextEncoder(ClipTextEncoder&&) noexcept;
  ClipTextEncoder& operator=(ClipTextEncoder&&) noexcept;

  // ids: T ≤ max_positions token ids (77 from the tokenizer) → last_hidden_state [T, hidden]. Where the tuning
  // says so (TuningRow::record_text_encoder) and the driver offers command buffers, the launches after the ids'
  // upload are recorded once (per context, T and tuning epoch) and each call enqueues them as one command, then
  // copies their output into a tensor of its own: the same kernels and arguments, so the same bits.
  nn::Tensor operator()(cl::Context& ctx, const std::vector<int>& ids) const;

  const io::TextEncoderConfig& config() const { return config_; }

 private:
  io::TextEncoderConfig config_;
  nn::Tensor token_embedding_;     // [V, C]
  nn::Tensor position_embedding_;  // [P, C]
  std::vector<ClipEncoderLayer> layers_;
  nn::LayerNorm final_layer_norm_;

  // The launches from the embedding (`embed`: the [T, C] embedded tokens) to the final layer norm, as launch-bound
  // work (Context::launch_bound): many small launches whose stage waits on the host's enqueues.
  template <typename Embed>
  nn::Tensor forward(cl::Context& ctx, const Embed& embed) const;
  bool records(const cl::Context& ctx, std::int64_t T) const;
  nn::Tensor replay(cl::Context& ctx, const std::vector<int>& ids) const;
  struct Recorded;
  mutable std::unique_ptr<Recorded> recorded_;
  mutable bool recording_failed_ = false;  // a launch could not be recorded: launched one by one from then on
};

}  // namespace sdt::models
