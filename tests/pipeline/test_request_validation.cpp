// Requests the engine refuses, each with a message that says what is allowed (sdt::check_request needs no
// model or device; Engine::validate adds what depends on the model).
#include <gtest/gtest.h>

#include "engine_fixture.hpp"
#include "sdt/error.hpp"

namespace sdt::test {
namespace {

Request valid_request() {
  Request r;
  r.prompt = "a photo of a cat";
  r.width = 128;
  r.height = 192;
  r.steps = 2;
  return r;
}

Image image_of(int width, int height) {
  Image image;
  image.width = width;
  image.height = height;
  image.rgb.assign(static_cast<std::size_t>(width) * height * 3, 77);
  return image;
}

void expect_rejected(const Request& r, const std::string& expected_in_message) {
  try {
    check_request(r);
    ADD_FAILURE() << "accepted a request that should fail with \"" << expected_in_message << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadRequest) << e.message();
    EXPECT_NE(e.message().find(expected_in_message), std::string::npos) << e.message();
  }
}

TEST(RequestValidation, AcceptsSizesThatAreMultiplesOf64AndOneToFourSteps) {
  Request r = valid_request();
  for (int steps = 1; steps <= 4; ++steps) {
    r.steps = steps;
    EXPECT_NO_THROW(check_request(r));
  }
  r.width = 64;
  r.height = 2048;
  EXPECT_NO_THROW(check_request(r));
}

TEST(RequestValidation, RejectsSizesThatAreNotMultiplesOf64OrOutOfBounds) {
  for (int bad : {0, -64, 100, 63, 4096, 2112}) {
    Request r = valid_request();
    r.width = bad;
    expect_rejected(r, "width " + std::to_string(bad) + " is not allowed: width and height must be multiples of 64");
    r = valid_request();
    r.height = bad;
    expect_rejected(r, "height " + std::to_string(bad));
  }
}

TEST(RequestValidation, RejectsStepsOutsideOneToFour) {
  for (int bad : {0, -1, 5, 50}) {
    Request r = valid_request();
    r.steps = bad;
    expect_rejected(r, "runs 1 to 4 Euler steps");
  }
}

TEST(RequestValidation, RejectsStrengthOutsideTheHalfOpenUnitInterval) {
  for (double bad : {0.0, -0.5, 1.01, 7.0}) {
    Request r = valid_request();
    r.init_image = image_of(r.width, r.height);
    r.strength = bad;
    expect_rejected(r, "is outside (0, 1]");
  }
}

TEST(RequestValidation, RejectsStrengthTooSmallToRunAnyStep) {
  Request r = valid_request();
  r.steps = 2;
  r.strength = 0.4;  // int(2 · 0.4) = 0 steps in diffusers
  r.init_image = image_of(r.width, r.height);
  expect_rejected(r, "runs no denoising step");
  r.strength = 0.5;
  EXPECT_NO_THROW(check_request(r));
}

TEST(RequestValidation, RejectsAnInitImageOfAnotherSizeOrBroken) {
  Request r = valid_request();
  r.init_image = image_of(r.width, 64);
  expect_rejected(r, "the init image is 128×64 but the request is 128×192");
  r.init_image = Image{};
  expect_rejected(r, "the init image is empty");
  r.init_image = image_of(r.width, r.height);
  r.init_image->rgb.pop_back();
  expect_rejected(r, "bytes, expected");
}

TEST(RequestValidation, EngineRefusesToOpenForTheTinyDecoderWhenTheModelHasNoTaesd) {
  // The single file alone in a folder (a link to it): no taesd/ beside it.
  TempDir dir("sdt-test-no-taesd");
  const auto model = dir.path() / "model.safetensors";
  std::filesystem::create_symlink(std::filesystem::absolute(tiny_fixture_dir() / "model.ldm.safetensors"), model);
  EngineOptions o = fixture_engine_options();
  o.model = model.string();
  o.taesd = "";
  o.require_taesd = true;
  try {
    Engine engine(o);
    ADD_FAILURE() << "opened for the tiny decoder without TAESD";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadRequest) << e.message();
    EXPECT_NE(e.message().find("TAESD"), std::string::npos) << e.message();
    // The hint says what to do; the settings it names travel beside it, for each front end to name its controls.
    EXPECT_NE(e.hint().find("TAESD"), std::string::npos) << e.hint();
    EXPECT_EQ(e.hint().find("--"), std::string::npos) << "a CLI flag in an engine hint: " << e.hint();
    EXPECT_EQ(e.settings(), (std::vector<Setting>{Setting::Taesd, Setting::Decoder}));
  }
}

TEST(RequestValidation, EngineValidateRejectsBeforeRunningAnything) {
  Engine& engine = fixture_engine();
  const std::size_t cached_before = engine.impl().pipeline().prompt_cache().size();
  Request r = valid_request();
  r.prompt = "a prompt no other test uses";
  r.steps = 9;
  EXPECT_THROW(engine.generate(r), Error);
  EXPECT_EQ(engine.impl().pipeline().prompt_cache().size(), cached_before) << "the text encoder ran";
}

}  // namespace
}  // namespace sdt::test
