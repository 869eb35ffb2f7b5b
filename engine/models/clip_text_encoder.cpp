#include "models/clip_text_encoder.hpp"

#include "base/log.hpp"
#include "nn/ops_internal.hpp"
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

// One recording of forward(): the ids it reads, the output it writes, the launches; valid for its context, T and the
// tuning epoch it was made under (a later epoch may choose other kernels).
struct ClipTextEncoder::Recorded {
  const cl::Context* ctx = nullptr;
  std::uint64_t epoch = 0;
  std::int64_t T = 0;
  cl::Buffer ids;
  nn::Tensor out;
  cl::CommandBuffer commands;
};

ClipTextEncoder::~ClipTextEncoder() = default;
ClipTextEncoder::ClipTextEncoder(ClipTextEncoder&&) noexcept = default;
ClipTextEncoder& ClipTextEncoder::operator=(ClipTextEncoder&&) noexcept = default;

template <typename Embed>
nn::Tensor ClipTextEncoder::forward(cl::Context& ctx, const Embed& embed) const {
  const cl::LaunchBoundScope launch_bound(ctx);
  nn::Tensor h = embed();  // [T, C]
  for (const auto& layer : layers_) h = layer(ctx, h);
  return final_layer_norm_(ctx, h);  // [T, C]
}

bool ClipTextEncoder::records(const cl::Context& ctx, std::int64_t T) const {
  // Not while planning (nothing runs), nor on the first images' deferred kernels, nor under a profile that times
  // each launch (a command buffer's launches have no events of their own).
  return !recording_failed_ && T > 0 && ctx.tuning().record_text_encoder() && ctx.command_buffers_supported() &&
         !ctx.planning() && !ctx.tuning().steady_path_deferred() && !(ctx.recording() && ctx.launch_events());
}

nn::Tensor ClipTextEncoder::replay(cl::Context& ctx, const std::vector<int>& ids) const {
  const auto T = static_cast<std::int64_t>(ids.size());
  if (!recorded_ || recorded_->ctx != &ctx || recorded_->epoch != ctx.tuning().epoch() || recorded_->T != T) {
    recorded_.reset();
    auto r = std::make_unique<Recorded>();
    r->ctx = &ctx;
    r->epoch = ctx.tuning().epoch();
    r->T = T;
    r->ids = ctx.persistent(static_cast<std::size_t>(T) * sizeof(int));
    ctx.begin_commands();
    try {
      r->out = forward(ctx, [&] { return nn::embed_tokens(ctx, r->ids, T, token_embedding_, position_embedding_); });
      r->commands = ctx.end_commands();
    } catch (const Error& e) {
      ctx.abandon_commands();
      recording_failed_ = true;
      log::get("engine")->warn("the text encoder's launches could not be recorded ({}); launching them one by one",
                               e.message());
      return {};
    }
    recorded_ = std::move(r);
  }
  nn::detail::upload_async(ctx, recorded_->ids, ids.data(), ids.size() * sizeof(int));
  ctx.enqueue_commands(recorded_->commands);
  // The recorded output is overwritten by the next prompt's run: the caller (the prompt cache) gets a copy.
  nn::Tensor result = nn::empty(ctx, recorded_->out.shape);
  ctx.copy(recorded_->out.buffer, result.buffer, result.bytes());
  return result;
}

nn::Tensor ClipTextEncoder::operator()(cl::Context& ctx, const std::vector<int>& ids) const {
  if (ids.empty() || static_cast<int>(ids.size()) > config_.max_positions)
    throw Error(ErrorKind::Internal, "text encoder: " + std::to_string(ids.size()) + " token ids, expected 1.." +
                                         std::to_string(config_.max_positions));
  for (int id : ids)
    if (id < 0 || id >= config_.vocab_size)
      throw Error(ErrorKind::Internal, "text encoder: token id " + std::to_string(id) + " outside the vocabulary of " +
                                           std::to_string(config_.vocab_size));
  if (records(ctx, static_cast<std::int64_t>(ids.size())))
    if (nn::Tensor out = replay(ctx, ids); out.defined()) return out;
  return forward(ctx, [&] { return nn::embed_tokens(ctx, ids, token_embedding_, position_embedding_); });
}

}  // namespace sdt::models
