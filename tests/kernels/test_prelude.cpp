// kernels/common.cl, the prelude of every kernel program: its activation codes are those of sdt::nn::Act (the host
// passes the enum's value as the kernels' `act` argument), every program is built with it in front, and no family
// file defines again what the prelude holds.
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <utility>

#include "nn/ops.hpp"
#include "sdt_kernel_sources.hpp"

using namespace sdt;

TEST(KernelPrelude, ActivationCodesAreThoseOfNnAct) {
  const std::string prelude(kernels::source("common"));
  ASSERT_FALSE(prelude.empty());
  const std::pair<const char*, nn::Act> expected[] = {{"ACT_NONE", nn::Act::None},
                                                      {"ACT_SILU", nn::Act::SiLU},
                                                      {"ACT_GELU", nn::Act::GELU},
                                                      {"ACT_RELU", nn::Act::ReLU}};
  for (const auto& [name, act] : expected) {
    std::smatch m;
    const std::regex define("#define " + std::string(name) + " ([0-9]+)\n");
    ASSERT_TRUE(std::regex_search(prelude, m, define)) << name << " is not defined in kernels/common.cl";
    EXPECT_EQ(std::stoi(m[1]), static_cast<int>(act)) << name;
  }
  // Exactly these codes: an enumerator added on one side only is caught here.
  const std::regex any_define("#define ACT_[A-Z]+ ");
  EXPECT_EQ(std::distance(std::sregex_iterator(prelude.begin(), prelude.end(), any_define), std::sregex_iterator()),
            static_cast<std::ptrdiff_t>(std::size(expected)));
  EXPECT_EQ(static_cast<int>(nn::Act::ReLU) + 1, static_cast<int>(std::size(expected)))
      << "nn::Act gained a value: give it a code in kernels/common.cl and a case in apply_act";
}

TEST(KernelPrelude, EveryProgramStartsWithItAndDefinesNothingOfItAgain) {
  const std::string prelude(kernels::source("common"));
  int programs = 0;
  for (const std::string_view name : kernels::names()) {
    if (name == "common") continue;
    ++programs;
    const std::string source(kernels::source(name));
    const std::string line = "#line 1 \"" + std::string(name) + ".cl\"\n";
    ASSERT_EQ(source.compare(0, prelude.size(), prelude), 0) << name << ".cl is not built with the prelude";
    ASSERT_EQ(source.compare(prelude.size(), line.size(), line), 0) << name << ".cl: no #line after the prelude";
    const std::string own = source.substr(prelude.size() + line.size());
    for (const char* shared : {"#define ACT_", "apply_act(float", "#define LOAD_BIAS", "#define MMA_16x8x16",
                               "pack_half2(float", "#define SDT_PTX"})
      EXPECT_EQ(own.find(shared), std::string::npos)
          << name << ".cl defines again what kernels/common.cl holds: " << shared;
  }
  EXPECT_GE(programs, 7);
}
