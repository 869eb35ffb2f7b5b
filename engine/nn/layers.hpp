// All layer classes of engine/nn in one include, for the models.
#pragma once

#include "nn/attention.hpp"
#include "nn/conv2d.hpp"
#include "nn/feed_forward.hpp"
#include "nn/linear.hpp"
#include "nn/norm.hpp"
#include "nn/resample.hpp"
#include "nn/resnet_block.hpp"
#include "nn/transformer2d.hpp"
#include "nn/weight_scope.hpp"
