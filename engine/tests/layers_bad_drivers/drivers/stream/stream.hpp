// The header the negative control (drivers/scan/cross.hpp) includes.
#pragma once
