// Numbers in messages: the core's and the readers' alike.
#pragma once

#include <string>

namespace servesim {

// A number for a message: integers without a fraction (1000000000), others shortest round-trip
// ("2.5", "0.1"), and nan, inf, -inf.
std::string format_number(double x);

}  // namespace servesim
