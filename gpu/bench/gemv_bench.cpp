// gpu_bench's GEMV section: every launch variant of the decode / small-batch matrix kernels
// timed on the matrix shapes of Llama-3.2-1B, Llama-3-8B and Qwen2.5-7B (stacked q|k|v and
// gate|up as gpu_model builds them), in every weight type; the fastest variant of each
// (type, shape, token tile) becomes this run's table (set_measured_gemv_table) and is
// written out as lines of gpu/plan/gemv_table.inc.
//
// Timing: a CUDA graph of launches cycling through copies of the matrix (at least 512 MB in
// all, so no launch finds its weights in L2), replayed a few times; the median replay over
// the launches it holds. GB/s counts the weight bytes only.
#include "gpu/bench/gemv_bench.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/graph.h"
#include "gpu/kernels.h"

namespace tandem::gpu {
namespace {

struct gemv_shape {
  const char* model;
  const char* name;
  int32_t rows, cols;
};

std::vector<gemv_shape> shapes() {
  struct dims {
    const char* model;
    int32_t E, Q, KV, F, V;
  };
  std::vector<gemv_shape> out;
  for (const dims d :
       {dims{"Llama-3.2-1B", 2048, 2048, 512, 8192, 128256}, dims{"Llama-3-8B", 4096, 4096, 1024, 14336, 128256},
        dims{"Qwen2.5-7B", 3584, 3584, 512, 18944, 152064}}) {
    out.push_back({d.model, "q|k|v", d.Q + 2 * d.KV, d.E});
    out.push_back({d.model, "attn_output", d.E, d.Q});
    out.push_back({d.model, "gate|up", 2 * d.F, d.E});
    out.push_back({d.model, "ffn_down", d.E, d.F});
    out.push_back({d.model, "output", d.V, d.E});
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string o(s);
  for (char& c : o) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return o;
}

// torch's figures (gpu/bench/torch_gemv.py): "rows cols GB/s" per line.
std::map<std::pair<int32_t, int32_t>, double> read_torch(const std::string& path) {
  std::map<std::pair<int32_t, int32_t>, double> m;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    int32_t r = 0, c = 0;
    double g = 0;
    if (ls >> r >> c >> g) m[{r, c}] = g;
  }
  return m;
}

class timer {
 public:
  explicit timer(stream& st) : st_(st) {}
  // Seconds per launch of `enqueue_one(i)` (i cycles over the copies), from graph replays.
  template <class Fn>
  double per_launch(int launches, Fn&& enqueue_one) {
    cuda_graph g = cuda_graph::capture(st_.handle(), [&] {
      for (int i = 0; i < launches; ++i) enqueue_one(i);
    });
    g.launch(st_.handle());
    st_.synchronize();
    std::vector<double> t;
    for (int r = 0; r < 5; ++r) {
      event a(true), b(true);
      a.record(st_.handle());
      g.launch(st_.handle());
      b.record(st_.handle());
      b.synchronize();
      t.push_back(event::elapsed_ms(a, b) / 1e3 / launches);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }

 private:
  stream& st_;
};

}  // namespace

void run_gemv_bench(stream& st, const device_memory_info& mem, double copy_bw, const gemv_bench_options& o) {
  std::vector<tensor_type> types;
  for (size_t at = 0; at < o.types.size();) {
    const size_t comma = std::min(o.types.find(',', at), o.types.size());
    if (const auto t = parse_tensor_type(o.types.substr(at, comma - at)); t && device_supports(*t)) types.push_back(*t);
    at = comma + 1;
  }
  const auto torch = o.torch_file.empty() ? std::map<std::pair<int32_t, int32_t>, double>{} : read_torch(o.torch_file);

  // Activations for up to 8 tokens of the widest input, as floats and as q8 runs.
  const int32_t max_cols = 18944, max_tok = 8;
  const matrix_layout xl = layout_of(tensor_type::f32, max_tok, max_cols);
  device_buffer x(xl.bytes), xq(size_t{max_tok} * max_cols), xds(size_t{max_tok} * max_cols / 32 * 8);
  launch_random_weights(xl, x.data(), 99, st.handle());
  // Outputs for the largest product (8 tokens of the 152,064-row head).
  device_buffer y(size_t{max_tok} * 152064 * sizeof(float));
  timer tm(st);
  std::vector<gemv_table_entry> winners;

  std::printf(
      "\n### GEMV (decode and small batches)\n\nMeasured copy bandwidth %.0f GB/s. Batch 1: the fastest "
      "launch variant's weight bandwidth; batch 8: tokens x weights / time (how much a step of 8 costs over "
      "a step of 1 shows as 8 x batch-1 time / batch-8 time).\n\n",
      copy_bw / 1e9);
  std::printf(
      "| model | matrix | rows x cols | type | batch 1 GB/s | %% of copy | variant | batch-8 step / batch-1 step |"
      " torch bf16 GB/s |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const gemv_shape& sh : shapes()) {
    for (tensor_type type : types) {
      const matrix_layout l = layout_of(type, sh.rows, sh.cols);
      const size_t rotation = size_t{512} << 20;
      const int copies = static_cast<int>(std::clamp<size_t>((rotation + l.bytes - 1) / l.bytes, 1, 64));
      std::vector<device_buffer> w;
      for (int i = 0; i < copies; ++i) {
        w.emplace_back(l.bytes);
        launch_random_weights(l, w.back().data(), 1000 + static_cast<uint64_t>(i), st.handle());
      }
      launch_quantize_q8(x.as<float>(), max_tok, sh.cols, xq.as<int8_t>(), xds.as<float>(), st.handle());
      const gemv_activations acts{x.as<float>(), xq.as<int8_t>(), xds.as<float>()};
      gemv_outputs out;
      out.y[0] = y.as<float>(), out.end[0] = sh.rows;
      double best_time[4] = {0, 0, 0, 0};
      gemv_variant best[4];
      for (int k = 0; k < 4; ++k) {
        const int32_t n_tok = 1 << k;
        for (const gemv_variant v : gemv_variants()) {
          const int launches = std::max(copies, 8);
          const double t = tm.per_launch(launches, [&](int i) {
            launch_gemv(l, w[static_cast<size_t>(i % copies)].data(), acts, n_tok, out, v, st.handle());
          });
          if (best_time[k] == 0 || t < best_time[k]) best_time[k] = t, best[k] = v;
        }
        winners.push_back({type, sh.rows, sh.cols, n_tok, best[k]});
      }
      const double gbs = static_cast<double>(l.bytes) / best_time[0] / 1e9;
      const auto tq = torch.find({sh.rows, sh.cols});
      char torch_cell[32] = "-";
      if (type == tensor_type::bf16 && tq != torch.end())
        std::snprintf(torch_cell, sizeof torch_cell, "%.0f", tq->second);
      std::printf("| %s | %s | %d x %d | %s | %.0f | %.0f%% | %d/%d | %.2f | %s |\n", sh.model, sh.name, sh.rows,
                  sh.cols, lower(traits_of(type).name).c_str(), gbs, 100 * gbs * 1e9 / copy_bw, best[0].rows_per_warp,
                  best[0].warps_per_row, best_time[3] / best_time[0], torch_cell);
      std::fflush(stdout);
    }
  }
  (void)mem;
  set_measured_gemv_table(winners);
  if (!o.table_out.empty()) {
    std::ofstream f(o.table_out);
    f << "// Measured by gpu_bench --tune on this run's GPU; paste into gpu/plan/gemv_table.inc.\n";
    for (const auto& e : winners) f << gemv_table_line(e) << "\n";
  }
  std::printf("\nVariants: rows per warp / warps per row. %zu winners set for the rest of this run%s%s.\n",
              winners.size(), o.table_out.empty() ? "" : ", written to ", o.table_out.c_str());
}

}  // namespace tandem::gpu
