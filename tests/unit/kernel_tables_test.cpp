// The kernel tables' structure, on every machine (only pointers are read, no kernel runs): every
// table has a row kernel for every weight type in every order the generic table has, what
// matmul calls beside a row kernel comes with the kernels it falls back on, and one ISA level,
// detected once, picks the dot-product and the row kernels alike.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/isa.h"
#include "engine/sampling/row_kernels.h"

namespace tandem::kernels {
namespace {

constexpr isa_level kLevels[] = {isa_level::generic, isa_level::avx2, isa_level::avx512f, isa_level::avx512};

std::vector<const dot_kernels*> every_table() {
  return {&generic_dot_kernels(), &avx2_dot_kernels(), &avx512_dot_kernels()};
}

bool tiles_as_records(tensor_type type) {
  for (const tensor_type t : {tensor_type::q4_0, tensor_type::q4_1, tensor_type::q5_0, tensor_type::q5_1,
                              tensor_type::q8_0, tensor_type::q4_k, tensor_type::q6_k, tensor_type::mxfp4}) {
    if (t == type) return true;
  }
  return false;
}

TEST(KernelTables, EveryTableHasTheGenericTablesRowKernelsForEveryWeightType) {
  const dot_kernels& generic = generic_dot_kernels();
  for (const dot_kernels* table : every_table()) {
    for (const tensor_type type : kWeightTypes) {
      const type_kernels& k = table->of(type);
      const char* name = traits_of(type).name.data();
      EXPECT_NE(k.ordinary.row, nullptr) << table->isa << " " << name;
      EXPECT_EQ(k.large.row != nullptr, generic.of(type).large.row != nullptr) << table->isa << " " << name;
      EXPECT_EQ(k.large.row != nullptr, dot_kernels::large_order_tokens(type, 64) > 0)
          << table->isa << " " << name << ": a large-step order needs its kernels";
    }
    const type_kernels& q8_k = table->of(tensor_type::q8_k);
    EXPECT_EQ(q8_k.ordinary.row, nullptr) << table->isa << ": Q8_K is never a weight";
  }
}

// matmul hands rows left over from four-row calls, and tokens left over from packed groups,
// to the group and row kernels of the same order; a tiled type's larger steps may go to its
// group kernels on the GGUF rows.
TEST(KernelTables, WhatMatmulCallsComesWithWhatItFallsBackOn) {
  for (const dot_kernels* table : every_table()) {
    for (const tensor_type type : kWeightTypes) {
      const type_kernels& k = table->of(type);
      const char* name = traits_of(type).name.data();
      for (const order_kernels* order : {&k.ordinary, &k.large}) {
        if (order->group != nullptr || order->rows4 != nullptr || order->rows4x2 != nullptr ||
            order->tiled != nullptr) {
          EXPECT_NE(order->row, nullptr) << table->isa << " " << name;
        }
        if (order->rows4 != nullptr || order->rows4x2 != nullptr) {
          EXPECT_NE(order->group, nullptr) << table->isa << " " << name;
        }
        if (order->tiled != nullptr) {
          EXPECT_TRUE(tiles_as_records(type)) << table->isa << " " << name;
        }
      }
      if (k.large.tiled != nullptr) {
        EXPECT_NE(k.ordinary.tiled, nullptr) << table->isa << " " << name;
      }
      if (k.tiled_small_steps_only) {
        EXPECT_NE(k.ordinary.tiled, nullptr) << table->isa << " " << name;
        EXPECT_NE(k.ordinary.group, nullptr) << table->isa << " " << name << ": larger steps need the group kernel";
      }
      if (k.tiled_narrow_rows_only) {
        EXPECT_NE(k.ordinary.tiled, nullptr) << table->isa << " " << name;
      }
      if (k.packed_token_pairs) {
        EXPECT_EQ(activation_format_for(type), activation_format::q8_0) << table->isa << " " << name;
      }
    }
  }
}

TEST(KernelTables, EveryTableHasItsAttentionElementWiseAndConversionKernels) {
  for (const dot_kernels* table : every_table()) {
    EXPECT_NE(table->key_scores, nullptr) << table->isa;
    EXPECT_NE(table->weighted_values, nullptr) << table->isa;
    EXPECT_NE(table->sum16, nullptr) << table->isa;
    EXPECT_NE(table->q8_0_values, nullptr) << table->isa;
    EXPECT_NE(table->exp_n, nullptr) << table->isa;
    EXPECT_NE(table->swiglu, nullptr) << table->isa;
    EXPECT_NE(table->quantize_q8, nullptr) << table->isa;
    EXPECT_NE(table->to_f16, nullptr) << table->isa;
    EXPECT_EQ(table->key_scores_group == nullptr, table->weighted_values_group == nullptr) << table->isa;
  }
}

void row_kernel(int64_t, const void*, const void*, size_t, int, float*) {}
void tiled_kernel(int64_t, const std::byte*, const std::byte*, size_t, int, float*, int64_t, const std::byte*) {}

TEST(KernelTables, ATypeTableIsIndexedByTypeAndRefusesRepeats) {
  const type_rows rows[] = {{tensor_type::q8_0, row_kernel}, {tensor_type::q6_k, row_kernel, row_kernel}};
  const type_table t = make_type_table(rows, {{tensor_type::q8_0, {.ordinary = {.tiled = tiled_kernel}}}});
  const auto at = [&](tensor_type type) -> const type_kernels& { return t[static_cast<size_t>(type)]; };
  EXPECT_EQ(at(tensor_type::q8_0).ordinary.row, row_kernel);
  EXPECT_EQ(at(tensor_type::q8_0).ordinary.tiled, tiled_kernel) << "the others list keeps the rows list's kernels";
  EXPECT_EQ(at(tensor_type::q6_k).large.row, row_kernel);
  EXPECT_EQ(at(tensor_type::q4_0).ordinary.row, nullptr);

  const type_rows twice[] = {{tensor_type::q8_0, row_kernel}, {tensor_type::q8_0, row_kernel}};
  EXPECT_THROW(make_type_table(twice), std::logic_error);
  EXPECT_THROW(make_type_table(rows, {{tensor_type::q8_0, {}}, {tensor_type::q8_0, {}}}), std::logic_error);
  EXPECT_THROW(make_type_table(rows, {{tensor_type::q8_0, {.ordinary = {.row = row_kernel}}}}), std::logic_error);
}

// Each level needs its own features and every lower level's: a CPU missing one stops there.
TEST(Isa, TheLevelIsTheHighestWithEveryFeatureOfItAndBelow) {
  cpu_features f;
  EXPECT_EQ(level_of(f), isa_level::generic);
  f.avx2 = f.fma = true;
  EXPECT_EQ(level_of(f), isa_level::generic) << "AVX2 without F16C";
  f.f16c = true;
  EXPECT_EQ(level_of(f), isa_level::avx2);
  f.avx512f = f.avx512bw = true;
  EXPECT_EQ(level_of(f), isa_level::avx2) << "AVX-512 without VL";
  f.avx512vnni = true;
  EXPECT_EQ(level_of(f), isa_level::avx2) << "VNNI needs the level below it complete";
  f.avx512vl = true;
  EXPECT_EQ(level_of(f), isa_level::avx512);
  f.avx512vnni = false;
  EXPECT_EQ(level_of(f), isa_level::avx512f);
  f.avx2 = false;
  f.avx512vnni = true;
  EXPECT_EQ(level_of(f), isa_level::generic) << "AVX-512 without AVX2";
}

// TANDEM_ISA names a level to stay at or below; it never raises the CPU's, and any other
// value leaves it.
TEST(Isa, TandemIsaOnlyNarrows) {
  for (const isa_level cpu : kLevels) {
    EXPECT_EQ(capped_level(cpu, ""), cpu);
    EXPECT_EQ(capped_level(cpu, "sse4"), cpu);
    for (const isa_level cap : kLevels) {
      EXPECT_EQ(capped_level(cpu, isa_name(cap)), cap < cpu ? cap : cpu) << isa_name(cpu) << " " << isa_name(cap);
    }
  }
}

// One level picks every family's table: the dot products (with the Q8_0 KV cache's kernels)
// and the sampler's row kernels.
TEST(Isa, OneLevelPicksEveryFamilysTable) {
  EXPECT_EQ(dot_kernels_for(isa_level::generic).isa, "generic");
  EXPECT_EQ(dot_kernels_for(isa_level::avx2).isa, "avx2");
  EXPECT_EQ(dot_kernels_for(isa_level::avx512f).isa, "avx2") << "the AVX-512 table needs VNNI";
  EXPECT_EQ(dot_kernels_for(isa_level::avx512).isa, "avx512");
  EXPECT_EQ(avx512_dot_kernels().q8_0_scores, &q8_0_scores_avx512);
  EXPECT_EQ(sampling::row_kernels_for(isa_level::generic).isa, "generic");
  for (const isa_level level : kLevels) {
    if (level > cpu_isa()) break;
    const std::string_view want = level == isa_level::generic ? "generic"
                                  : level == isa_level::avx2  ? "avx2"
                                                              : "avx512";
    EXPECT_EQ(sampling::row_kernels_for(level).isa, want) << isa_name(level);
  }

  const char* forced = std::getenv("TANDEM_ISA");
  EXPECT_EQ(kernel_isa(), capped_level(cpu_isa(), forced != nullptr ? forced : ""));
  EXPECT_EQ(&best_dot_kernels(), &dot_kernels_for(kernel_isa()));
  EXPECT_EQ(&sampling::best_row_kernels(), &sampling::row_kernels_for(kernel_isa()));
}

}  // namespace
}  // namespace tandem::kernels
