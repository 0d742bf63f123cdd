// Faults on purpose, for the tests that show the runtime survives them: TANDEM_FAULTS names
// points and the hit on which each fires, e.g.
//
//   TANDEM_FAULTS=device.step:3,streamer.tokens:1
//
// fault_point("device.step") is then true on its third call in this process, and only then.
// Without the variable every point is false (one load of a static and a branch).
#pragma once

#include <string_view>

namespace tandem {

bool fault_point(std::string_view point);

}  // namespace tandem
