// The Euler discrete scheduler of diffusers (EulerDiscreteScheduler), for SD-Turbo: the noise levels
// (sigmas) and UNet timesteps for N steps, the input scaling, the Euler update, and the img2img start.
//
// Mirrors diffusers: schedulers/scheduling_euler_discrete.py (__init__, set_timesteps, scale_model_input,
// step, add_noise, init_noise_sigma) and pipelines/stable_diffusion/pipeline_stable_diffusion_img2img.py
// (get_timesteps). Every value is computed with diffusers' own precision choices (torch float32 tensors,
// torch's float64 cumprod accumulator, numpy float64 arange/interp) so the tables agree with it to the bit.
//
// What is not supported (rejected when the scheduler is built, naming the field): Karras / exponential / beta
// sigmas, `log_linear` interpolation, beta schedules other than `linear` and `scaled_linear`.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "io/model_config.hpp"

namespace sdt::pipeline {

// The schedule of one generation: N steps, descending noise.
struct EulerSchedule {
  std::vector<float> timesteps;  // [N] the UNet's timestep per step, e.g. {999} or {999, 499}
  std::vector<float> sigmas;     // [N + 1] the noise level before each step; sigmas[N] = 0
  float init_noise_sigma = 0;    // txt2img: latents = randn * init_noise_sigma

  int num_steps() const { return static_cast<int>(timesteps.size()); }
};

// img2img (diffusers get_timesteps): which steps of a full schedule run for a given strength.
struct Img2ImgStart {
  int begin_index = 0;  // first step run (diffusers' t_start * order, passed to set_begin_index)
  int steps_run = 0;    // steps actually run: N - begin_index (0 when strength is too small for one step)
};

class EulerDiscreteScheduler {
 public:
  // Validates the config (throws sdt::Error BadModel naming the field) and computes the training tables.
  explicit EulerDiscreteScheduler(const io::SchedulerConfig& config = {});

  const io::SchedulerConfig& config() const { return config_; }

  // diffusers set_timesteps(num_inference_steps); 1 <= steps <= num_train_timesteps (else BadRequest).
  EulerSchedule schedule(int num_inference_steps) const;

  // Training tables, [num_train_timesteps] each (float32, as diffusers keeps them).
  const std::vector<float>& betas() const { return betas_; }
  const std::vector<float>& alphas_cumprod() const { return alphas_cumprod_; }
  // sqrt((1 - alphas_cumprod) / alphas_cumprod), indexed by training timestep (ascending)
  const std::vector<float>& train_sigmas() const { return train_sigmas_; }

 private:
  std::vector<float> timesteps_for(int num_inference_steps) const;

  io::SchedulerConfig config_;
  std::vector<float> betas_;
  std::vector<float> alphas_cumprod_;
  std::vector<float> train_sigmas_;
};

// img2img: strength in (0, 1]. Pass it as a double as the user wrote it (0.7, not 0.7f): diffusers computes
// int(steps * strength) in double precision, and 0.7f * 10 truncates to 6 where 0.7 * 10 gives 7.
// Throws BadRequest for steps < 1 or strength outside (0, 1].
Img2ImgStart img2img_start(int num_inference_steps, double strength);

// The divisor of scale_model_input: sqrt(sigma^2 + 1) in float32. diffusers DIVIDES the latents by it; a
// kernel that multiplies by the reciprocal instead differs in the last bit of some values.
float model_input_divisor(float sigma);

// Host reference of scale_model_input: x[i] / sqrt(sigma^2 + 1). x: [n] fp32, in place.
void scale_model_input(float* x, std::size_t n, float sigma);

// Host reference of one Euler step (diffusers step() with s_churn = 0, so sigma_hat = sigma), in place on
// `sample`, with diffusers' float32 operation order:
//   x0 = sample - sigma * eps            (epsilon prediction)
//   derivative = (sample - x0) / sigma;  dt = sigma_next - sigma;  sample = sample + derivative * dt
// prediction_type "v_prediction" and "sample" are handled as diffusers does. eps, sample: [n] fp32.
void euler_step(const float* model_output, float* sample, std::size_t n, float sigma, float sigma_next,
                const std::string& prediction_type = "epsilon");

// diffusers add_noise for img2img: original + noise * sigma, with sigma = schedule.sigmas[begin_index].
void add_noise(const float* original, const float* noise, float* out, std::size_t n, float sigma);

}  // namespace sdt::pipeline
