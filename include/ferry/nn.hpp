// ferry/nn.hpp — the model graph: nn::Module, the layers and containers, the
// losses, their functional forms and parameter initialisation.
#pragma once

#include "ferry/nn/activation.hpp"
#include "ferry/nn/attention.hpp"
#include "ferry/nn/container.hpp"
#include "ferry/nn/conv.hpp"
#include "ferry/nn/functional.hpp"
#include "ferry/nn/init.hpp"
#include "ferry/nn/layers.hpp"
#include "ferry/nn/loss.hpp"
#include "ferry/nn/module.hpp"
#include "ferry/nn/normalization.hpp"
#include "ferry/nn/padding.hpp"
#include "ferry/nn/pooling.hpp"
#include "ferry/nn/rnn.hpp"
#include "ferry/nn/transformer.hpp"
#include "ferry/nn/utils.hpp"
