// gpu_bench's GEMV section (gpu/bench/gemv_bench.cpp): launch variants timed per shape and
// type, the winners installed as this run's table and written as gemv_table.inc lines.
#pragma once

#include <string>

#include "gpu/device.h"

namespace tandem::gpu {

struct gemv_bench_options {
  std::string types = "bf16,f16,q8_0,q4_0,q4_1,q5_0,q4_k,q5_k,q6_k";
  std::string table_out;   // where the measured table's lines go (empty: nowhere)
  std::string torch_file;  // gpu/bench/torch_gemv.py's output, shown beside the BF16 rows
};

void run_gemv_bench(stream& st, const device_memory_info& mem, double copy_bw, const gemv_bench_options& o);

}  // namespace tandem::gpu
