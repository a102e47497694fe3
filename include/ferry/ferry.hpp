// ferry/ferry.hpp — everything an application needs.
#pragma once

#include "ferry/autograd.hpp"
#include "ferry/device.hpp"
#include "ferry/device_info.hpp"
#include "ferry/dtype.hpp"
#include "ferry/error.hpp"
#include "ferry/log.hpp"
#include "ferry/memory.hpp"
#include "ferry/nn.hpp"
#include "ferry/ops.hpp"
#include "ferry/optim.hpp"
#include "ferry/random.hpp"
#include "ferry/registry.hpp"
#include "ferry/safetensors.hpp"
#include "ferry/state_dict.hpp"
#include "ferry/tensor.hpp"
#include "ferry/version.hpp"
