// A negative control for the layer check: one command's driver folder must not include
// another's (only drivers/common/ is shared).
#pragma once
#include "drivers/stream/stream.hpp"
