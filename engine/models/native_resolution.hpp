// The resolution SD-Turbo was trained at and that the app asks for by default: 512×512 images, 64×64 latents.
// Layers choose their convolution algorithm for the maps they see there (nn::ConvPlan); other sizes run the same
// layers, correctly, with the algorithm chosen for this one.
#pragma once

#include <cstdint>

namespace sdt::models {

inline constexpr std::int64_t kNativeLatentSide = 64;
inline constexpr std::int64_t kNativeImageSide = 8 * kNativeLatentSide;

}  // namespace sdt::models
