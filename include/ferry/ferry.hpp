// ferry/ferry.hpp — everything an application needs.
#pragma once

#include "ferry/device.hpp"
#include "ferry/device_info.hpp"
#include "ferry/dtype.hpp"
#include "ferry/error.hpp"
#include "ferry/log.hpp"
#include "ferry/memory.hpp"
#include "ferry/ops.hpp"
#include "ferry/random.hpp"
#include "ferry/registry.hpp"
#include "ferry/tensor.hpp"
#include "ferry/version.hpp"
