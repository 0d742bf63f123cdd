#include "engine/lora/adapter.h"

#include <cmath>
#include <map>
#include <optional>

#include "engine/gguf/identity.h"
#include "engine/gguf/quantize.h"

namespace tandem::lora {
namespace {

constexpr size_t kRoleSlots = 16;  // more than matrix_role has values

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// "output.weight" -> (-1, output); "blk.N.<role>.weight" -> (N, role); nullopt otherwise.
struct matrix_name {
  int32_t layer;
  matrix_role role;
};
std::optional<matrix_name> parse_matrix_name(const std::string& name, uint32_t n_layer) {
  if (name == "output.weight") return matrix_name{-1, matrix_role::output};
  if (name.rfind("blk.", 0) != 0 || !ends_with(name, ".weight")) return std::nullopt;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4 || dot - 4 > 6) return std::nullopt;
  int64_t layer = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    layer = layer * 10 + (name[i] - '0');
  }
  if (layer >= static_cast<int64_t>(n_layer)) return std::nullopt;
  const std::string role = name.substr(dot + 1, name.size() - dot - 1 - 7);
  for (const matrix_role r : {matrix_role::attn_q, matrix_role::attn_k, matrix_role::attn_v, matrix_role::attn_output,
                              matrix_role::ffn_gate, matrix_role::ffn_up, matrix_role::ffn_down}) {
    if (role == matrix_role_name(r)) return matrix_name{static_cast<int32_t>(layer), r};
  }
  return std::nullopt;
}

const kernels::weight_view* base_view(const model_weights& w, const matrix_name& m) {
  const kernels::weight_view* found = nullptr;
  for_each_matrix(w, [&](const const_matrix_ref& ref) {
    if (ref.layer == m.layer && ref.role == m.role && ref.slices == 1) found = &ref.view;
  });
  return found;
}

}  // namespace

bool hooked_role(matrix_role role) {
  switch (role) {
    case matrix_role::output:
    case matrix_role::attn_q:
    case matrix_role::attn_k:
    case matrix_role::attn_v:
    case matrix_role::attn_output:
    case matrix_role::ffn_gate:
    case matrix_role::ffn_up:
    case matrix_role::ffn_down:
      return true;
    default:
      return false;
  }
}

size_t slot_of(int32_t layer, matrix_role role) {
  return static_cast<size_t>(layer + 1) * kRoleSlots + static_cast<size_t>(role);
}

std::shared_ptr<const adapter> adapter::load(const std::filesystem::path& path, const model_config& base_config,
                                             const model_weights& base_weights, const kernels::dot_kernels& k) {
  try {
    return from_file(gguf::file::open(path), base_config, base_weights, k);
  } catch (const gguf::format_error& e) {
    throw gguf::format_error("LoRA adapter " + path.string() + ": " + e.what());
  }
}

std::shared_ptr<const adapter> adapter::from_file(gguf::file file, const model_config& base_config,
                                                  const model_weights& base_weights, const kernels::dot_kernels& k) {
  using gguf::format_error;
  const auto type = file.get_string("general.type").value_or("");
  if (type != "adapter") throw format_error("general.type is '" + type + "', expected 'adapter'");
  const auto kind = file.get_string("adapter.type").value_or("");
  if (kind != "lora") throw format_error("adapter.type is '" + kind + "', expected 'lora'");
  const auto arch = file.get_string("general.architecture").value_or("");
  if (arch != base_config.architecture) {
    throw format_error("the adapter is for architecture '" + arch + "', the base model is '" +
                       base_config.architecture + "'");
  }
  const double alpha = file.get_float("adapter.lora.alpha").value_or(0.0);
  if (!std::isfinite(alpha)) throw format_error("adapter.lora.alpha is not a finite number");

  // Pair every <name>.lora_a with its <name>.lora_b.
  struct pair {
    const gguf::tensor_info* a = nullptr;
    const gguf::tensor_info* b = nullptr;
  };
  std::map<std::string, pair> pairs;
  for (const auto& t : file.tensors()) {
    if (ends_with(t.name, ".lora_a")) {
      pairs[t.name.substr(0, t.name.size() - 7)].a = &t;
    } else if (ends_with(t.name, ".lora_b")) {
      pairs[t.name.substr(0, t.name.size() - 7)].b = &t;
    } else if (!ends_with(t.name, "_norm.weight")) {
      throw format_error("tensor '" + t.name + "' is neither a .lora_a nor a .lora_b");
    }
  }
  if (pairs.empty()) throw format_error("the adapter has no .lora_a/.lora_b tensors");

  std::shared_ptr<adapter> out(new adapter(std::move(file)));
  out->alpha_ = static_cast<float>(alpha);
  out->identity_ = gguf::model_identity(out->file_);
  out->index_.assign(slot_of(static_cast<int32_t>(base_config.n_layer), matrix_role::token_embd), -1);
  for (const auto& [name, p] : pairs) {
    if (p.a == nullptr || p.b == nullptr) {
      throw format_error("tensor '" + name + "' has a " + (p.a ? ".lora_a" : ".lora_b") + " but no " +
                         (p.a ? ".lora_b" : ".lora_a"));
    }
    const auto m = parse_matrix_name(name, base_config.n_layer);
    if (!m) {
      throw format_error("tensor '" + name +
                         "': not a matrix Tandem adapts (each layer's attn_q, attn_k, attn_v, attn_output, ffn_gate, "
                         "ffn_up, ffn_down, and output)");
    }
    const kernels::weight_view* w = base_view(base_weights, *m);
    if (w == nullptr || w->rows == 0) throw format_error("tensor '" + name + "' does not exist in the base model");
    if (m->role == matrix_role::output && w->data == base_weights.token_embd.data) {
      throw format_error("tensor '" + name + "': the base model's head is tied to token_embd");
    }
    const gguf::tensor_info& a = *p.a;
    const gguf::tensor_info& b = *p.b;
    const int64_t rank = b.ne[0];
    if (a.n_dims != 2 || b.n_dims != 2 || a.ne[0] != w->cols || b.ne[1] != w->rows || a.ne[1] != rank || rank < 1) {
      throw format_error("tensor '" + name + "': lora_a is [" + std::to_string(a.ne[0]) + ", " +
                         std::to_string(a.ne[1]) + "] and lora_b [" + std::to_string(b.ne[0]) + ", " +
                         std::to_string(b.ne[1]) + "]; the base matrix needs [" + std::to_string(w->cols) +
                         ", rank] and [rank, " + std::to_string(w->rows) + "]");
    }
    if (rank > std::min(w->rows, w->cols)) {
      throw format_error("tensor '" + name + "': rank " + std::to_string(rank) + " exceeds the matrix's shape");
    }
    for (const gguf::tensor_info* t : {&a, &b}) {
      if (k.in_order(t->type, false).row == nullptr) {
        throw format_error("tensor '" + t->name + "' has type " + std::string(traits_of(t->type).name) +
                           ", which has no CPU kernel");
      }
    }
    matrix_update u;
    u.a = kernels::weight_view(a.type, a.ne[0], a.ne[1], a.data);
    u.rank = rank;
    u.rows = b.ne[1];
    u.b = kernels::weight_view(b.type, b.ne[0], b.ne[1], b.data);
    u.b_type = b.type;
    u.alpha_scale = alpha != 0.0 ? static_cast<float>(alpha / static_cast<double>(rank)) : 1.0f;
    // An F16 B also transposed into floats (one-row steps sum its products in double, across
    // output rows): the row dequantized, then scattered into its column.
    if (b.type == tensor_type::f16) {
      u.bt.resize(static_cast<size_t>(rank * u.rows));
      std::vector<float> row(static_cast<size_t>(rank));
      const size_t rb = row_bytes(b.type, rank);
      for (int64_t r = 0; r < u.rows; ++r) {
        dequantize_row(b.type, b.data + static_cast<size_t>(r) * rb, rank, row.data());
        for (int64_t j = 0; j < rank; ++j) u.bt[static_cast<size_t>(j * u.rows + r)] = row[static_cast<size_t>(j)];
      }
    }
    out->max_rank_ = std::max(out->max_rank_, rank);
    out->index_[slot_of(m->layer, m->role)] = static_cast<int32_t>(out->updates_.size());
    out->updates_.push_back(std::move(u));
  }
  return out;
}

}  // namespace tandem::lora
