// The one clock the actors time requests and steps with (monotonic), and milliseconds.
#pragma once

#include <chrono>

namespace tandem {

using clock_type = std::chrono::steady_clock;

inline double ms_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
inline double ms_since(clock_type::time_point t0) { return ms_between(t0, clock_type::now()); }

}  // namespace tandem
