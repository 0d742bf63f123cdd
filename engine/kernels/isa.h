// The instruction sets the CPU kernels may use, read from the CPU once (cpuid) for every
// kernel family: the dot-product tables (dot_kernels.h, with the Q8_0 KV cache's kernels)
// and the sampler's row kernels (engine/sampling/row_kernels.h). Each level includes the
// ones before it:
//
//   level     needs                         dot-product table   row kernels
//   generic   -                             generic             generic
//   avx2      AVX2, FMA, F16C               avx2                avx2
//   avx512f   + AVX-512 F, BW, VL           avx2                avx512
//   avx512    + AVX-512 VNNI                avx512              avx512
//
// TANDEM_ISA=<level> caps the level the kernels run at (never above the CPU's); any other
// value, or none, leaves the CPU's. Every level gives the same bits, so the cap changes speed only.
#pragma once

#include <string_view>

namespace tandem::kernels {

enum class isa_level { generic, avx2, avx512f, avx512 };

std::string_view isa_name(isa_level level);

// The CPU features the levels need.
struct cpu_features {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512vnni = false;
};

// The highest level whose features, and those of every level below it, are all present.
isa_level level_of(const cpu_features& features);
// cpu narrowed by a TANDEM_ISA value: the named level where it is lower, else cpu.
isa_level capped_level(isa_level cpu, std::string_view forced);

// This CPU's level (level_of its features), read once.
isa_level cpu_isa();
// The level every kernel family runs at: cpu_isa() capped by TANDEM_ISA, read once.
isa_level kernel_isa();

}  // namespace tandem::kernels
