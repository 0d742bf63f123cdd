// What bounds a one-token decode step's matmuls, per tiled weight type: the kernel or memory.
//
//   in cache  one matrix of 4096 columns and 128 rows per thread (each thread's share stays
//             in its L2), multiplied over and over: the kernel's own rate;
//   streamed  4096 x 4096 matrices, 384 MiB or more in all (well past the last-level cache),
//             multiplied one after another as a decode step walks the layers: what the
//             kernel reaches when the weights come from memory;
//   read      the streaming read bandwidth probe (read_bandwidth.h), taken right after.
//
// Rates are weight bytes read per second (the tiled bytes), medians of 7 timed batches.
// Streamed near read: memory bound, a faster kernel cannot help. In cache near streamed: the
// kernel is the bound. Prints a Markdown table.
//
// With --prompt N: an N-token step instead, in cache only, as multiply-adds per second (the
// rate a prompt step's matmuls reach; types without a tiled kernel in this CPU's table go
// through matmul's row and group kernels, as the model's do).
//
//   matmul_bench [--threads T] [--types q4_0,q8_0,q4_k,q6_k] [--prompt N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/gguf/quantize.h"
#include "engine/gguf/tensor_type.h"
#include "engine/kernels/dot_kernels.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/tiled_weights.h"
#include "engine/platform/thread_pool.h"
#include "engine/platform/zeroed_pages.h"
#include "median.h"
#include "read_bandwidth.h"

namespace {

using namespace tandem;
using namespace tandem::kernels;
using clock_type = std::chrono::steady_clock;

constexpr int64_t kCols = 4096;

// A tiled matrix in its own huge-page memory, as the model keeps them.
struct tiled_matrix {
  zeroed_pages memory;
  weight_view view;
};

// Copies of one matrix; their views' `data` points into `quantized` (moving the set keeps it valid).
struct matrix_set {
  std::vector<std::byte> quantized;
  std::vector<tiled_matrix> tiled;
};

// rows x kCols random normal weights quantized to `type`, tiled `copies` times.
matrix_set make_matrices(tensor_type type, int64_t rows, int copies) {
  std::vector<std::byte> raw(row_bytes(type, kCols) * rows);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 0.02f);
  std::vector<float> row(kCols);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = normal(rng);
    quantize_row(type, row.data(), kCols, raw.data() + r * row_bytes(type, kCols));
  }
  const weight_view plain(type, kCols, rows, raw.data());
  std::vector<tiled_matrix> out;
  for (int i = 0; i < copies; ++i) {
    tiled_matrix m{zeroed_pages(tiled_bytes(plain)), plain};
    if (i == 0) {
      tile_weight(plain, m.memory.as<std::byte>(), 0, rows / 16);
    } else {
      std::memcpy(m.memory.data(), out[0].memory.data(), m.memory.bytes());
    }
    // Tiled where a model would tile it for this CPU's table (dot_kernels::tiles).
    if (best_dot_kernels().tiles(type, kCols)) m.view.tiled = m.memory.as<std::byte>();
    out.push_back(std::move(m));
  }
  return {std::move(raw), std::move(out)};
}

// Median of 7 batches of `passes` passes, each pass multiplying n_tok tokens by every matrix
// once: GB/s of weights read, or with n_tok > 1 billions of multiply-adds per second.
double rate(const std::vector<tiled_matrix>& ms, int passes, int64_t n_tok, const float* x, float* y, thread_pool& pool,
            matmul_scratch& scratch) {
  double work = 0;
  for (const auto& m : ms) {
    work += n_tok == 1 ? static_cast<double>(m.memory.bytes()) : static_cast<double>(m.view.rows) * kCols * n_tok;
  }
  auto pass = [&] {
    for (const auto& m : ms) matmul(m.view, x, kCols, n_tok, y, m.view.rows, best_dot_kernels(), pool, scratch);
  };
  pass();  // warm: caches, the pool's threads, the scratch buffers
  std::vector<double> rates;
  for (int batch = 0; batch < 7; ++batch) {
    const auto t0 = clock_type::now();
    for (int p = 0; p < passes; ++p) pass();
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    rates.push_back(work * passes / s / 1e9);
  }
  return bench::median(rates);
}

// The comma-separated type names, each one with a tiled layout (as make_matrices needs); an
// empty list after a message on stderr if any is not.
std::vector<tensor_type> parse_types(const std::string& names) {
  std::vector<tensor_type> types;
  std::stringstream list(names);
  for (std::string name; std::getline(list, name, ',');) {
    const auto type = parse_tensor_type(name);
    if (!type || !tileable(weight_view(*type, kCols, 16, nullptr))) {
      std::fprintf(stderr, "matmul_bench: %s has no tiled layout\n", name.c_str());
      return {};
    }
    types.push_back(*type);
  }
  if (types.empty()) std::fprintf(stderr, "matmul_bench: no types given\n");
  return types;
}

// The --prompt table: kPromptRows rows per thread (a few MB: in the last-level cache, and
// enough rows that converting the activations is a small part, as in a model's matmuls),
// tiled where this CPU's table takes its tiled kernel for such steps.
constexpr int64_t kPromptRows = 1024;
int prompt_table(const std::vector<tensor_type>& types, int64_t n_tok, const std::string& isa, const float* x, float* y,
                 thread_pool& pool, matmul_scratch& scratch) {
  std::printf("kernels: %s, threads: %d, %lld-token steps, %lld columns, in cache\n\n", isa.c_str(), pool.size(),
              static_cast<long long>(n_tok), static_cast<long long>(kCols));
  std::printf("| type | path | GMAC/s |\n|---|---|---:|\n");
  for (const tensor_type type : types) {
    matrix_set set = make_matrices(type, kPromptRows * pool.size(), 1);
    const bool tiled = set.tiled[0].view.tiled != nullptr && best_dot_kernels().tiled_for_step(type, false, n_tok);
    const int passes = std::max<int>(1, static_cast<int>(256 / n_tok));
    const double gmac = rate(set.tiled, passes, n_tok, x, y, pool, scratch);
    std::printf("| %s | %s | %.1f |\n", ggml_type_name(static_cast<uint32_t>(type)).c_str(), tiled ? "tiled" : "rows",
                gmac);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  std::string types = "q4_0,q8_0,q4_k,q6_k";
  int64_t prompt = 0;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (i + 1 < argc && a == "--threads") {
      threads = std::atoi(argv[i + 1]);
    } else if (i + 1 < argc && a == "--types") {
      types = argv[i + 1];
    } else if (i + 1 < argc && a == "--prompt" && std::atoi(argv[i + 1]) > 1) {
      prompt = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: matmul_bench [--threads T] [--types q4_0,q8_0,q4_k,q6_k] [--prompt N > 1]\n");
      return 2;
    }
  }
  thread_pool pool(threads);
  matmul_scratch scratch;
  std::vector<float> x(kCols * std::max<int64_t>(prompt, 1)), y(kCols * std::max<int64_t>(prompt, 1));
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (auto& v : x) v = normal(rng);

  const std::vector<tensor_type> type_list = parse_types(types);
  if (type_list.empty()) return 2;
  const std::string isa(best_dot_kernels().isa);
  if (prompt > 0) return prompt_table(type_list, prompt, isa, x.data(), y.data(), pool, scratch);
  std::printf("kernels: %s, threads: %d, one-token steps, %lld columns\n\n", isa.c_str(), pool.size(),
              static_cast<long long>(kCols));
  std::printf("| type | bits/weight | in cache GB/s | streamed GB/s | read GB/s | streamed / read |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (const tensor_type type : type_list) {
    const matrix_set small = make_matrices(type, 128 * pool.size(), 1);
    const double in_cache = rate(small.tiled, 200, 1, x.data(), y.data(), pool, scratch);
    const size_t one = tiled_bytes(weight_view(type, kCols, kCols, nullptr));
    const int copies = static_cast<int>((size_t{384} << 20) / one + 1);
    const matrix_set big = make_matrices(type, kCols, copies);
    const double streamed = rate(big.tiled, 1, 1, x.data(), y.data(), pool, scratch);
    const double read = bench::read_bandwidth_gbs(pool.size());
    std::printf("| %s | %.2f | %.1f | %.1f | %.1f | %.0f%% |\n", ggml_type_name(static_cast<uint32_t>(type)).c_str(),
                8.0 * static_cast<double>(one) / (kCols * kCols), in_cache, streamed, read, 100 * streamed / read);
    std::fflush(stdout);
  }
  return 0;
}
