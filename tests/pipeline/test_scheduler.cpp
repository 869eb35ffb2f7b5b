// EulerDiscreteScheduler against diffusers: the fixture tables for 1-4 steps, the one-step case chain
// (randn * init_noise_sigma -> scale_model_input -> Euler step), other spacings, img2img starts and
// rejected configs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "fixture_tensors.hpp"
#include "pipeline/rng.hpp"
#include "pipeline/scheduler.hpp"
#include "sdt/error.hpp"
#include "test_common.hpp"

namespace sdt::pipeline {
namespace {

using test::FixtureTensors;

constexpr double kRelTolerance = 1e-6;  // the fixtures' promise; measured: 0 (bit-exact)

double relative(double got, double expected) {
  return expected == 0 ? std::fabs(got) : std::fabs(got - expected) / std::fabs(expected);
}

TEST(EulerScheduler, MatchesTheFixtureTablesForOneToFourSteps) {
  const auto refs = test::fixture_refs();
  const EulerDiscreteScheduler scheduler;  // defaults = SD-Turbo = the fixture's scheduler_config.json
  ASSERT_EQ(refs["sched_tables"].size(), 4u);
  for (const auto& table : refs["sched_tables"]) {
    const int steps = table["steps"];
    const EulerSchedule schedule = scheduler.schedule(steps);
    ASSERT_EQ(schedule.timesteps.size(), table["timesteps"].size());
    ASSERT_EQ(schedule.sigmas.size(), table["sigmas"].size());
    double worst = 0;
    for (std::size_t i = 0; i < schedule.timesteps.size(); ++i)
      EXPECT_EQ(schedule.timesteps[i], table["timesteps"][i].get<double>()) << steps << " steps, [" << i << "]";
    for (std::size_t i = 0; i < schedule.sigmas.size(); ++i)
      worst = std::max(worst, relative(schedule.sigmas[i], table["sigmas"][i].get<double>()));
    worst = std::max(worst, relative(schedule.init_noise_sigma, table["init_noise_sigma"].get<double>()));
    std::printf("%d steps: max relative difference %.3g\n", steps, worst);
    EXPECT_LE(worst, kRelTolerance) << steps << " steps";
  }
}

TEST(EulerScheduler, OneStepIsTimestep999AtSigmaMax) {
  const EulerSchedule schedule = EulerDiscreteScheduler().schedule(1);
  EXPECT_EQ(schedule.timesteps, std::vector<float>{999.0f});
  EXPECT_NEAR(schedule.sigmas[0], 14.6146, 1e-4);
  EXPECT_EQ(schedule.sigmas[1], 0.0f);
  EXPECT_EQ(schedule.init_noise_sigma, schedule.sigmas[0]);  // trailing: sigma_max, not sqrt(sigma_max^2 + 1)
}

TEST(EulerScheduler, ReproducesTheFixtureCaseChainOnTheHost) {
  // latents_init = randn * init_noise_sigma; unet_in = latents_init / sqrt(sigma^2 + 1);
  // latents_final = Euler step to sigma 0 with the fixture's eps.
  const auto refs = test::fixture_refs();
  const EulerSchedule schedule = EulerDiscreteScheduler().schedule(1);
  int checked = 0;
  for (const auto& c : refs["cases"]) {
    if (c["steps"] != 1) continue;
    const std::string name = c["case"];
    const auto latents_ref = FixtureTensors::refs().f32(name + "_latents_init");
    TorchGenerator generator(c["seed"].get<std::uint64_t>());
    std::vector<float> latents = generator.randn(latents_ref.size());
    for (float& x : latents) x = x * schedule.init_noise_sigma;
    const auto init_diff = test::compare(latents, latents_ref);

    std::vector<float> unet_in = latents_ref;
    scale_model_input(unet_in.data(), unet_in.size(), schedule.sigmas[0]);
    const auto in_diff = test::compare(unet_in, FixtureTensors::refs().f32(name + "_unet_in"));

    std::vector<float> sample = latents_ref;
    const auto eps = FixtureTensors::refs().f32(name + "_eps");
    euler_step(eps.data(), sample.data(), sample.size(), schedule.sigmas[0], schedule.sigmas[1]);
    const auto step_diff = test::compare(sample, FixtureTensors::refs().f32(name + "_latents_final"));
    std::printf("%s: latents_init %s | unet_in %s | latents_final %s\n", name.c_str(),
                test::to_string(init_diff).c_str(), test::to_string(in_diff).c_str(),
                test::to_string(step_diff).c_str());
    EXPECT_EQ(init_diff.max_abs, 0) << name;
    EXPECT_EQ(in_diff.max_abs, 0) << name;
    EXPECT_EQ(step_diff.max_abs, 0) << name;
    ++checked;
  }
  EXPECT_GE(checked, 7);
}

TEST(EulerScheduler, ModelInputIsDividedNotMultipliedByTheReciprocal) {
  const float sigma = EulerDiscreteScheduler().schedule(1).sigmas[0];
  const float divisor = model_input_divisor(sigma);
  EXPECT_FLOAT_EQ(divisor, std::sqrt(sigma * sigma + 1.0f));
  std::vector<float> x = test::random_floats(4096, 11, -40.f, 40.f);
  std::vector<float> scaled = x;
  scale_model_input(scaled.data(), scaled.size(), sigma);
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(scaled[i], x[i] / divisor) << i;
}

TEST(EulerScheduler, LeadingSpacingMatchesStableDiffusion15) {
  // SD 1.5's scheduler: leading spacing with steps_offset 1; 50 steps are 981, 961, ..., 1.
  io::SchedulerConfig config;
  config.timestep_spacing = "leading";
  const EulerSchedule schedule = EulerDiscreteScheduler(config).schedule(50);
  ASSERT_EQ(schedule.timesteps.size(), 50u);
  EXPECT_EQ(schedule.timesteps.front(), 981.0f);
  EXPECT_EQ(schedule.timesteps[1], 961.0f);
  EXPECT_EQ(schedule.timesteps.back(), 1.0f);
  // leading: the initial noise also carries the "+1" of the input scaling
  EXPECT_FLOAT_EQ(schedule.init_noise_sigma, std::sqrt(schedule.sigmas[0] * schedule.sigmas[0] + 1.0f));
}

TEST(EulerScheduler, LinspaceSpacingInterpolatesBetweenTrainingSigmas) {
  io::SchedulerConfig config;
  config.timestep_spacing = "linspace";
  const EulerDiscreteScheduler scheduler(config);
  const EulerSchedule four = scheduler.schedule(4);
  EXPECT_EQ(four.timesteps, (std::vector<float>{999.0f, 666.0f, 333.0f, 0.0f}));
  EXPECT_EQ(four.sigmas[1], scheduler.train_sigmas()[666]);
  const EulerSchedule three = scheduler.schedule(3);
  EXPECT_EQ(three.timesteps[1], 499.5f);
  const double midpoint = (static_cast<double>(scheduler.train_sigmas()[499]) + scheduler.train_sigmas()[500]) / 2;
  EXPECT_EQ(three.sigmas[1], static_cast<float>(midpoint));
}

TEST(EulerScheduler, TrainingTablesAreConsistent) {
  const EulerDiscreteScheduler scheduler;
  ASSERT_EQ(scheduler.betas().size(), 1000u);
  EXPECT_FLOAT_EQ(scheduler.betas().front(), 0.00085f);
  EXPECT_FLOAT_EQ(scheduler.betas().back(), 0.012f);
  EXPECT_GT(scheduler.alphas_cumprod().front(), scheduler.alphas_cumprod().back());
  EXPECT_EQ(scheduler.train_sigmas()[999], scheduler.schedule(1).sigmas[0]);
}

TEST(EulerScheduler, Img2ImgStrengthChoosesTheStepsDiffusersRuns) {
  EXPECT_EQ(img2img_start(2, 0.5).begin_index, 1);  // SD-Turbo's recipe: 2 steps at 0.5 run the last one
  EXPECT_EQ(img2img_start(2, 0.5).steps_run, 1);
  EXPECT_EQ(img2img_start(4, 1.0).begin_index, 0);
  EXPECT_EQ(img2img_start(4, 0.6).steps_run, 2);    // int(2.4)
  EXPECT_EQ(img2img_start(1, 0.5).steps_run, 0);    // diffusers would refuse to run: nothing to do
  EXPECT_EQ(img2img_start(10, 0.7).steps_run, 7);   // 0.7 * 10 in double is 7.000000000000001
  EXPECT_EQ(img2img_start(10, 0.7f).steps_run, 6);  // why callers must pass the strength as double
  EXPECT_THROW(img2img_start(2, 0.0), Error);
  EXPECT_THROW(img2img_start(2, 1.5), Error);
  EXPECT_THROW(img2img_start(0, 0.5), Error);
}

TEST(EulerScheduler, AddNoiseScalesTheNoiseBySigma) {
  const std::vector<float> original = test::random_floats(64, 1);
  const std::vector<float> noise = test::random_floats(64, 2);
  std::vector<float> out(64, test::kPoison);
  add_noise(original.data(), noise.data(), out.data(), out.size(), 1.6128871f);
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], original[i] + noise[i] * 1.6128871f);
}

TEST(EulerScheduler, RejectsConfigsItCannotFollowNamingTheField) {
  auto message_of = [](const io::SchedulerConfig& config) -> std::string {
    try {
      EulerDiscreteScheduler scheduler(config);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadModel);
      return e.message();
    }
    return "no error";
  };
  io::SchedulerConfig config;
  config.use_karras_sigmas = true;
  EXPECT_NE(message_of(config).find("use_karras_sigmas"), std::string::npos);
  config = {};
  config.timestep_spacing = "sideways";
  EXPECT_NE(message_of(config).find("timestep_spacing"), std::string::npos);
  config = {};
  config.beta_schedule = "squaredcos_cap_v2";
  EXPECT_NE(message_of(config).find("beta_schedule"), std::string::npos);
  config = {};
  config.interpolation_type = "log_linear";
  EXPECT_NE(message_of(config).find("interpolation_type"), std::string::npos);
  config = {};
  config.beta_end = config.beta_start / 2;
  EXPECT_NE(message_of(config).find("beta_start/beta_end"), std::string::npos);
  config = {};
  config.num_train_timesteps = 0;
  EXPECT_NE(message_of(config).find("num_train_timesteps"), std::string::npos);
  EXPECT_THROW(EulerDiscreteScheduler().schedule(0), Error);
  EXPECT_THROW(EulerDiscreteScheduler().schedule(1001), Error);
}

}  // namespace
}  // namespace sdt::pipeline
