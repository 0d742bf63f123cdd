#include "engine/kernels/isa.h"

#include <cstdlib>

namespace tandem::kernels {

namespace {

constexpr isa_level kLevels[] = {isa_level::generic, isa_level::avx2, isa_level::avx512f, isa_level::avx512};

// Whether the features a level adds to the one below it are present.
bool adds(const cpu_features& f, isa_level level) {
  switch (level) {
    case isa_level::generic:
      return true;
    case isa_level::avx2:
      return f.avx2 && f.fma && f.f16c;
    case isa_level::avx512f:
      return f.avx512f && f.avx512bw && f.avx512vl;
    case isa_level::avx512:
      return f.avx512vnni;
  }
  return false;
}

cpu_features this_cpu() {
  cpu_features f;
#if defined(__x86_64__)
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.f16c = __builtin_cpu_supports("f16c");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
#endif
  return f;
}

}  // namespace

std::string_view isa_name(isa_level level) {
  switch (level) {
    case isa_level::generic:
      return "generic";
    case isa_level::avx2:
      return "avx2";
    case isa_level::avx512f:
      return "avx512f";
    case isa_level::avx512:
      return "avx512";
  }
  return "generic";
}

isa_level level_of(const cpu_features& features) {
  isa_level level = isa_level::generic;
  for (const isa_level next : kLevels) {
    if (!adds(features, next)) break;
    level = next;
  }
  return level;
}

isa_level capped_level(isa_level cpu, std::string_view forced) {
  for (const isa_level cap : kLevels) {
    if (forced == isa_name(cap)) return cap < cpu ? cap : cpu;
  }
  return cpu;
}

isa_level cpu_isa() {
  static const isa_level level = level_of(this_cpu());
  return level;
}

isa_level kernel_isa() {
  static const isa_level level = [] {
    const char* forced = std::getenv("TANDEM_ISA");
    return capped_level(cpu_isa(), forced != nullptr ? forced : "");
  }();
  return level;
}

}  // namespace tandem::kernels
