// diffusers' EulerDiscreteScheduler, value for value. See scheduler.hpp for the references.
//
// Precision notes (each was checked against the fixture tables, which this reproduces exactly):
// - betas: torch.linspace in float32 (step = (end - start) / (N - 1) in float, the first half counted up from
//   start, the second half down from end, each as one fused multiply-add: PyTorch's x86-64 build compiles
//   that loop with FMA contraction), then squared in float32 for `scaled_linear`.
// - alphas_cumprod: torch.cumprod on the CPU accumulates in double and rounds each prefix to float.
// - sigmas: sqrt((1 - a) / a) in float32; the inference sigmas are np.interp (float64) of those at the
//   timesteps, rounded to float32.
// - timesteps: numpy float64 arange / linspace / round-half-even, then float32.
// - Multiplications and additions are kept in separate statements where diffusers runs separate tensor ops,
//   so no compiler contraction into FMA can change a bit (C++ contracts only within one expression).
#include "pipeline/scheduler.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <system_error>

#include "sdt/error.hpp"

namespace sdt::pipeline {

namespace {

[[noreturn]] void bad_config(const std::string& field, const std::string& message) {
  throw Error(ErrorKind::BadModel, "scheduler_config.json: `" + field + "` " + message,
              "SD-Turbo uses EulerDiscreteScheduler with scaled_linear betas and trailing timestep spacing");
}

// The config holds floats, but diffusers reads these numbers from JSON as Python (double) floats, and
// sqrt(0.00085) differs from sqrt(double(0.00085f)). The shortest decimal that round-trips the float is
// what the JSON file said (configs write a few significant digits), so parse that decimal as a double.
double config_double(float value) {
  char text[64];
  const auto written = std::to_chars(text, text + sizeof text, value);
  double parsed = value;
  if (written.ec == std::errc()) std::from_chars(text, written.ptr, parsed);
  return parsed;
}

// torch.linspace(start, end, steps, dtype=float32) as PyTorch's CPU kernel computes it.
std::vector<float> torch_linspace_f32(float start, float end, int steps) {
  std::vector<float> out(static_cast<std::size_t>(steps));
  if (steps == 1) {
    out[0] = start;
    return out;
  }
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int halfway = steps / 2;
  for (int i = 0; i < steps; ++i) {
    out[static_cast<std::size_t>(i)] = i < halfway ? std::fma(step, static_cast<float>(i), start)
                                                   : std::fma(-step, static_cast<float>(steps - i - 1), end);
  }
  return out;
}

// np.arange(start, stop, step) for float64, as numpy fills it: the length is ceil((stop - start) / step), the
// second value is start + step, and the rest start + i * (second - start).
std::vector<double> numpy_arange(double start, double stop, double step) {
  const double count = std::ceil((stop - start) / step);
  std::vector<double> out;
  if (!(count > 0)) return out;
  out.resize(static_cast<std::size_t>(count));
  out[0] = start;
  if (out.size() == 1) return out;
  out[1] = start + step;
  const double delta = out[1] - start;
  for (std::size_t i = 2; i < out.size(); ++i) {
    const double offset = static_cast<double>(i) * delta;
    out[i] = start + offset;
  }
  return out;
}

// np.interp(x, arange(len(fp)), fp) for float64 x and float32 fp (numpy interpolates in float64).
double numpy_interp_index(double x, const std::vector<float>& fp) {
  const auto last = static_cast<double>(fp.size() - 1);
  if (std::isnan(x)) return x;
  if (x <= 0) return fp.front();
  if (x >= last) return fp.back();
  const auto j = static_cast<std::size_t>(std::floor(x));
  const double lo = fp[j];
  if (static_cast<double>(j) == x) return lo;
  const double hi = fp[j + 1];
  const double slope = hi - lo;  // over a unit interval
  const double offset = x - static_cast<double>(j);
  const double product = slope * offset;
  return product + lo;
}

}  // namespace

EulerDiscreteScheduler::EulerDiscreteScheduler(const io::SchedulerConfig& config) : config_(config) {
  const int n = config_.num_train_timesteps;
  if (n < 2 || n > 100000)
    bad_config("num_train_timesteps", "is " + std::to_string(n) + "; expected a count between 2 and 100000");
  if (!(config_.beta_start > 0) || !(config_.beta_end > config_.beta_start) || !(config_.beta_end < 1))
    bad_config("beta_start/beta_end", "are " + std::to_string(config_.beta_start) + " and " +
                                          std::to_string(config_.beta_end) +
                                          "; expected 0 < beta_start < beta_end < 1");
  if (config_.timestep_spacing != "trailing" && config_.timestep_spacing != "leading" &&
      config_.timestep_spacing != "linspace")
    bad_config("timestep_spacing", "is \"" + config_.timestep_spacing + "\"; expected trailing, leading or linspace");
  if (config_.interpolation_type != "linear")
    bad_config("interpolation_type", "is \"" + config_.interpolation_type + "\"; only \"linear\" is supported");
  if (config_.use_karras_sigmas) bad_config("use_karras_sigmas", "is true; Karras sigmas are not supported");
  if (config_.prediction_type != "epsilon" && config_.prediction_type != "v_prediction" &&
      config_.prediction_type != "sample" && config_.prediction_type != "original_sample")
    bad_config("prediction_type", "is \"" + config_.prediction_type + "\"; expected epsilon or v_prediction");

  const double beta_start = config_double(config_.beta_start);
  const double beta_end = config_double(config_.beta_end);
  if (config_.beta_schedule == "scaled_linear") {
    betas_ = torch_linspace_f32(static_cast<float>(std::sqrt(beta_start)), static_cast<float>(std::sqrt(beta_end)), n);
    for (float& beta : betas_) beta = beta * beta;
  } else if (config_.beta_schedule == "linear") {
    betas_ = torch_linspace_f32(static_cast<float>(beta_start), static_cast<float>(beta_end), n);
  } else {
    bad_config("beta_schedule", "is \"" + config_.beta_schedule + "\"; expected scaled_linear or linear");
  }

  alphas_cumprod_.resize(betas_.size());
  train_sigmas_.resize(betas_.size());
  double cumulative = 1.0;
  for (std::size_t i = 0; i < betas_.size(); ++i) {
    const float alpha = 1.0f - betas_[i];
    cumulative *= static_cast<double>(alpha);
    const float alpha_cumprod = static_cast<float>(cumulative);
    alphas_cumprod_[i] = alpha_cumprod;
    const float ratio = (1.0f - alpha_cumprod) / alpha_cumprod;
    train_sigmas_[i] = std::sqrt(ratio);
  }
}

std::vector<float> EulerDiscreteScheduler::timesteps_for(int steps) const {
  const int n_train = config_.num_train_timesteps;
  std::vector<float> timesteps;
  if (config_.timestep_spacing == "linspace") {
    // np.linspace(0, n_train - 1, steps, dtype=float32)[::-1]: i * step in float64, the last exactly stop
    const double stop = n_train - 1;
    for (int i = 0; i < steps; ++i) {
      double value = steps > 1 ? static_cast<double>(i) * (stop / (steps - 1)) : 0.0;
      if (steps > 1 && i == steps - 1) value = stop;
      timesteps.push_back(static_cast<float>(value));
    }
    std::reverse(timesteps.begin(), timesteps.end());
  } else if (config_.timestep_spacing == "leading") {
    const int ratio = n_train / steps;
    for (int i = steps - 1; i >= 0; --i) {
      const float t = static_cast<float>(static_cast<double>(i) * ratio);
      timesteps.push_back(t + static_cast<float>(config_.steps_offset));
    }
  } else {  // trailing
    // np.arange(n_train, 0, -n_train / steps).round() - 1. Floating-point arange can yield one value more
    // than `steps` (e.g. 62 for 61 steps, ending at timestep -1): diffusers does that too, so we do.
    const double ratio = static_cast<double>(n_train) / steps;
    for (double value : numpy_arange(n_train, 0, -ratio)) {
      const float t = static_cast<float>(std::nearbyint(value));  // round half to even, like np.round
      timesteps.push_back(t - 1.0f);
    }
  }
  return timesteps;
}

EulerSchedule EulerDiscreteScheduler::schedule(int steps) const {
  if (steps < 1 || steps > config_.num_train_timesteps)
    throw Error(ErrorKind::BadRequest, "scheduler: " + std::to_string(steps) +
                                           " inference steps requested; expected 1 to " +
                                           std::to_string(config_.num_train_timesteps));
  EulerSchedule schedule;
  schedule.timesteps = timesteps_for(steps);
  for (float t : schedule.timesteps)
    schedule.sigmas.push_back(static_cast<float>(numpy_interp_index(t, train_sigmas_)));
  schedule.sigmas.push_back(0.0f);  // final_sigmas_type "zero"
  const float max_sigma = *std::max_element(schedule.sigmas.begin(), schedule.sigmas.end());
  if (config_.timestep_spacing == "trailing" || config_.timestep_spacing == "linspace") {
    schedule.init_noise_sigma = max_sigma;
  } else {
    const float squared = max_sigma * max_sigma;
    schedule.init_noise_sigma = std::sqrt(squared + 1.0f);
  }
  return schedule;
}

Img2ImgStart img2img_start(int steps, double strength) {
  if (steps < 1) throw Error(ErrorKind::BadRequest, "img2img: steps is " + std::to_string(steps) + "; expected >= 1");
  if (!(strength > 0.0) || !(strength <= 1.0))
    throw Error(ErrorKind::BadRequest, "img2img: strength is " + std::to_string(strength) + "; expected (0, 1]",
                "1 keeps nothing of the init image, small values change it little");
  const int init_timestep = std::min(static_cast<int>(steps * strength), steps);
  Img2ImgStart start;
  start.begin_index = std::max(steps - init_timestep, 0);  // the Euler scheduler's order is 1
  start.steps_run = steps - start.begin_index;
  return start;
}

float model_input_divisor(float sigma) {
  const float squared = sigma * sigma;
  return std::sqrt(squared + 1.0f);
}

void scale_model_input(float* x, std::size_t n, float sigma) {
  const float divisor = model_input_divisor(sigma);
  for (std::size_t i = 0; i < n; ++i) x[i] = x[i] / divisor;
}

void euler_step(const float* model_output, float* sample, std::size_t n, float sigma, float sigma_next,
                const std::string& prediction_type) {
  const float dt = sigma_next - sigma;
  const float squared = sigma * sigma;
  const float squared_plus_one = squared + 1.0f;
  const float v_scale = -sigma / std::sqrt(squared_plus_one);
  for (std::size_t i = 0; i < n; ++i) {
    const float x = sample[i];
    float x0;
    if (prediction_type == "epsilon") {
      const float scaled = sigma * model_output[i];
      x0 = x - scaled;
    } else if (prediction_type == "v_prediction") {
      const float a = model_output[i] * v_scale;
      const float b = x / squared_plus_one;
      x0 = a + b;
    } else {
      x0 = model_output[i];
    }
    const float difference = x - x0;
    const float derivative = difference / sigma;
    const float change = derivative * dt;
    sample[i] = x + change;
  }
}

void add_noise(const float* original, const float* noise, float* out, std::size_t n, float sigma) {
  for (std::size_t i = 0; i < n; ++i) {
    const float scaled = noise[i] * sigma;
    out[i] = original[i] + scaled;
  }
}

}  // namespace sdt::pipeline
