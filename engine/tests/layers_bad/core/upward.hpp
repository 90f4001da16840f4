// A negative control for the layer check: core must not include pager.
#pragma once
#include "pager/pager.hpp"
