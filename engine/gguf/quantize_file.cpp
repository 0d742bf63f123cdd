#include "engine/gguf/quantize_file.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "engine/gguf/quantize.h"

namespace tandem::gguf {
namespace {

constexpr uint32_t kQuantizationVersion = 2;  // ggml's GGML_QNT_VERSION

model_shape shape_of(const file& in) {
  model_shape s;
  const auto arch = in.get_string("general.architecture").value_or("llama");
  s.n_layer = static_cast<uint32_t>(in.get_int(arch + ".block_count").value_or(0));
  s.n_head = static_cast<uint32_t>(in.get_int(arch + ".attention.head_count").value_or(0));
  s.n_head_kv = static_cast<uint32_t>(in.get_int(arch + ".attention.head_count_kv").value_or(s.n_head));
  s.n_expert = static_cast<uint32_t>(in.get_int(arch + ".expert_count").value_or(0));
  return s;
}

// Rows [0, rows) of `t` into `to`, split over up to `threads` threads.
std::vector<std::byte> convert(const tensor_info& t, tensor_type to, unsigned threads) {
  const int64_t cols = t.ne[0], rows = t.n_rows();
  const size_t in_row = row_bytes(t.type, cols), out_row = row_bytes(to, cols);
  std::vector<std::byte> out(out_row * static_cast<size_t>(rows));
  auto work = [&](int64_t r0, int64_t r1) {
    std::vector<float> f(static_cast<size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_row(t.type, t.data + static_cast<size_t>(r) * in_row, cols, f.data());
      quantize_row(to, f.data(), cols, out.data() + static_cast<size_t>(r) * out_row);
    }
  };
  const int64_t n_threads = std::max<int64_t>(1, std::min<int64_t>(threads, rows / 16));
  if (n_threads == 1) {
    work(0, rows);
    return out;
  }
  std::vector<std::thread> pool;
  const int64_t per = (rows + n_threads - 1) / n_threads;
  for (int64_t i = 0; i < n_threads; ++i) {
    const int64_t r0 = i * per, r1 = std::min(rows, r0 + per);
    if (r0 < r1) pool.emplace_back(work, r0, r1);
  }
  for (auto& th : pool) th.join();
  return out;
}

}  // namespace

writer quantize_model(const file& in, const file_type& ft, const quantize_options& options) {
  std::vector<const tensor_info*> order;
  for (const auto& t : in.tensors()) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(),
                   [](const tensor_info* a, const tensor_info* b) { return llama_tensor_order(a->name, b->name); });
  std::vector<tensor_desc> descs;
  for (const auto* t : order) descs.push_back({t->name, t->n_dims, t->ne[0], t->type, t->ne[2]});
  const auto targets = plan_tensor_types(ft, descs, shape_of(in));

  writer out(in.alignment());
  for (const auto& [key, v] : in.metadata()) {
    if (key == "general.alignment" || key.rfind("split.", 0) == 0) continue;
    out.set(key, v);
  }
  out.set_u32("general.quantization_version", kQuantizationVersion);
  out.set_u32("general.file_type", static_cast<uint32_t>(ft.id));

  const unsigned threads = options.threads != 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  for (size_t i = 0; i < order.size(); ++i) {
    const tensor_info& t = *order[i];
    const tensor_type to = targets[i];
    if (options.on_tensor) options.on_tensor(t.name, t.type, to);
    std::vector<int64_t> shape(t.ne.begin(), t.ne.begin() + t.n_dims);
    if (to == t.type) {
      out.add_tensor(t.name, t.type, std::move(shape), std::vector<std::byte>(t.data, t.data + t.nbytes));
      continue;
    }
    const bool from_float = t.type == tensor_type::f32 || t.type == tensor_type::f16 || t.type == tensor_type::bf16;
    if (!from_float && !options.allow_requantize) {
      throw std::runtime_error("tensor " + t.name + " is " + std::string(traits_of(t.type).name) +
                               ": requantizing it to " + std::string(traits_of(to).name) +
                               " needs --allow-requantize (quality is lower than quantizing from F16/F32)");
    }
    out.add_tensor(t.name, to, std::move(shape), convert(t, to, threads));
  }
  return out;
}

}  // namespace tandem::gguf
