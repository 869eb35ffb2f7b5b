// The embedded random models: "random:tiny" (the architecture of the golden fixtures, shared/fixtures
// sd-turbo-tiny: text 3 × 32 wide, UNet [32, 64, 64, 64], VAE [32, 64, 64, 64], full TAESD) and
// "random:sd-turbo" (stabilityai/sd-turbo's: text 23 × 1024, 16 heads, MLP 4096; UNet [320, 640, 1280, 1280]
// with [5, 10, 20, 20] heads and 1024-wide cross-attention; VAE [128, 256, 512, 512]; TAESD 64 wide). Sizes
// are written here, not read from files: the embedded model needs none.
//
// Weights follow PyTorch's default initialisation so activations stay finite through every layer: Linear and
// Conv2d weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming_uniform with a = sqrt(5)), norms 1 and
// 0, embeddings N(0, 0.02) as CLIP does. Each tensor has its own generator seeded from (seed, name), so
// tensors are generated in parallel and any one of them is reproducible alone. random:sd-turbo (1.3 G
// parameters) is generated directly in fp16 (2.6 GB instead of 5.2) on all cores.
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include "io/model_loading.hpp"
#include "base/log.hpp"
#include "sdt/error.hpp"

namespace sdt::io {

namespace detail {
namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::uint64_t name_seed(const std::string& name, std::uint64_t seed) {
  std::uint64_t h = 0xcbf29ce484222325ull ^ seed;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Fills `out` with spec.numel() values, stored by `store(index, value)` (fp32 or fp16).
template <typename Store>
void fill_values(const WeightSpec& spec, std::uint64_t seed, Store store) {
  const auto n = static_cast<std::size_t>(spec.numel());
  std::uint64_t state = name_seed(spec.name, seed);
  constexpr float k24 = 1.0f / 16777216.0f;
  switch (spec.init) {
    case WeightInit::Ones:
      for (std::size_t i = 0; i < n; ++i) store(i, 1.0f);
      break;
    case WeightInit::Zeros:
      for (std::size_t i = 0; i < n; ++i) store(i, 0.0f);
      break;
    case WeightInit::Uniform: {
      const float bound = 1.0f / std::sqrt(static_cast<float>(spec.fan_in));
      for (std::size_t i = 0; i < n; i += 2) {
        // Two 24-bit uniforms per 64-bit draw.
        const std::uint64_t r = splitmix64(state);
        store(i, (2 * static_cast<float>(r >> 40) * k24 - 1) * bound);
        if (i + 1 < n) store(i + 1, (2 * static_cast<float>((r >> 16) & 0xffffffu) * k24 - 1) * bound);
      }
      break;
    }
    case WeightInit::Embedding:
      for (std::size_t i = 0; i < n; i += 2) {
        // Box-Muller: two normals per pair of uniforms (u1 kept away from 0 for the log).
        const std::uint64_t r = splitmix64(state);
        const float u1 = static_cast<float>(r >> 40) * k24 + 0.5f * k24;
        const float u2 = static_cast<float>((r >> 16) & 0xffffffu) * k24;
        const float radius = std::sqrt(-2.0f * std::log(u1)) * 0.02f;
        store(i, radius * std::cos(6.28318530718f * u2));
        if (i + 1 < n) store(i + 1, radius * std::sin(6.28318530718f * u2));
      }
      break;
  }
}

void fill(const WeightSpec& spec, std::uint64_t seed, DType dtype, std::byte* out) {
  if (dtype == DType::F32) {
    fill_values(spec, seed, [out](std::size_t i, float v) { std::memcpy(out + 4 * i, &v, 4); });
  } else {
    fill_values(spec, seed, [out](std::size_t i, float v) {
      const std::uint16_t h = float_to_half(v);
      std::memcpy(out + 2 * i, &h, 2);
    });
  }
}

}  // namespace

ModelFiles random_configs(const std::string& name) {
  ModelFiles m;
  m.name = name;
  m.layout = "random weights";
  m.random_weights = true;
  m.has_vae_encoder = true;
  m.taesd = TaesdConfig{};
  if (name != "random:sd-turbo" && name != "random:tiny") {
    throw Error(ErrorKind::BadModel, "unknown random model '" + name + "'",
                "the random models are random:tiny and random:sd-turbo");
  }
  if (name == "random:tiny") {  // the config defaults are SD-Turbo's
    m.text_encoder.hidden_size = 32;
    m.text_encoder.intermediate_size = 64;
    m.text_encoder.num_heads = 4;
    m.text_encoder.num_layers = 3;
    m.unet.block_out_channels = {32, 64, 64, 64};
    m.unet.num_heads = {2, 4, 4, 4};
    m.unet.cross_attention_dim = 32;
    m.vae.block_out_channels = {32, 64, 64, 64};
  }
  // Built in, but held to the same rules as configs from files: the model code relies on them.
  validate(m.text_encoder, name);
  validate(m.unet, name);
  validate(m.vae, name);
  validate(*m.taesd, name);
  validate(m.scheduler, name);
  return m;
}

void generate_random_weights(ModelFiles& m, const std::vector<WeightSpec>& specs, std::uint64_t seed, DType dtype) {
  std::vector<std::vector<std::byte>> data(specs.size());
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  const auto work = [&] {
    try {
      for (std::size_t i; !failed && (i = next++) < specs.size();) {
        data[i].resize(static_cast<std::size_t>(specs[i].numel()) * element_size(dtype));
        fill(specs[i], seed, dtype, data[i].data());
      }
    } catch (const std::bad_alloc&) {
      failed = true;
    }
  };
  const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (failed) {
    throw Error(ErrorKind::OutOfMemory, "not enough host memory for the weights of " + m.name,
                "random:sd-turbo needs about 2.6 GB; use random:tiny");
  }
  for (std::size_t i = 0; i < specs.size(); ++i)
    m.weights.add_owned(specs[i].name, specs[i].name + " (random)", dtype, specs[i].shape, std::move(data[i]));
}

}  // namespace detail

ModelFiles random_model_configs(const std::string& model) {
  return detail::random_configs(model);
}

ModelFiles make_random_model(const Architecture& architecture, const std::string& model, std::uint64_t seed) {
  using namespace detail;
  ModelFiles m = random_configs(model);
  // fp32 for the tiny model (exact values for tests); fp16 for SD-Turbo's size (half the host memory).
  const DType dtype = model == "random:tiny" ? DType::F32 : DType::F16;
  const std::string source = "random (seed " + std::to_string(seed) + ")";
  const std::string kind = "random";
  const struct {
    const char* part;
    const char* prefix;
    std::vector<WeightSpec> specs;
  } parts[] = {{"text_encoder", kTextEncoderPrefix, architecture.text_encoder(m.text_encoder)},
               {"unet", kUNetPrefix, architecture.unet(m.unet)},
               {"vae", kVaePrefix, architecture.vae(m.vae, true)},
               {"taesd", kTaesdPrefix, architecture.taesd(*m.taesd)}};
  std::vector<WeightSpec> all;
  for (const auto& p : parts) all.insert(all.end(), p.specs.begin(), p.specs.end());
  generate_random_weights(m, all, seed, dtype);
  for (const auto& p : parts) m.parts.push_back(make_part_info(m.weights, p.part, p.prefix, source, kind, 0));
  m.hash = model_hash(m.weights);
  return m;
}

}  // namespace sdt::io
