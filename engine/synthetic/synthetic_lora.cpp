#include "engine/synthetic/synthetic_lora.h"

#include <cmath>
#include <stdexcept>

#include "engine/synthetic/synthetic_weights.h"

namespace tandem {

gguf::writer make_synthetic_lora(const gguf::file& base, const synthetic_lora_spec& s) {
  const auto arch = base.get_string("general.architecture");
  if (!arch) throw std::invalid_argument("the base file has no general.architecture");
  if (s.rank == 0) throw std::invalid_argument("the rank must be positive");
  const auto n_layer = base.get_int(*arch + ".block_count").value_or(0);
  gguf::writer w;
  w.set_string("general.architecture", *arch);
  w.set_string("general.type", "adapter");
  w.set_string("general.name", s.name);
  w.set_string("adapter.type", "lora");
  w.set_f32("adapter.lora.alpha", s.alpha);
  const int64_t block = traits_of(s.type).block_size;
  const tensor_type b_type = s.rank % block == 0 ? s.type : tensor_type::f16;
  weight_maker m(s.seed);
  auto add = [&](const std::string& name) {
    const gguf::tensor_info* t = base.find_tensor(name);
    if (t == nullptr || t->n_dims != 2) throw std::invalid_argument("the base model has no matrix '" + name + "'");
    const int64_t cols = t->ne[0], rows = t->ne[1];
    if (cols % block != 0) throw std::invalid_argument(name + ": its width is not a whole number of blocks");
    w.add_tensor(name + ".lora_a", s.type, {cols, s.rank}, m.matrix(s.type, cols, s.rank, 1.0f / std::sqrt(float(cols))));
    w.add_tensor(name + ".lora_b", b_type, {s.rank, rows},
                 m.matrix(b_type, s.rank, rows, s.strength / std::sqrt(static_cast<float>(s.rank))));
  };
  for (int64_t l = 0; l < n_layer; ++l) {
    for (const auto& role : s.targets) {
      if (role != "output") add("blk." + std::to_string(l) + "." + role + ".weight");
    }
  }
  for (const auto& role : s.targets) {
    if (role == "output") add("output.weight");
  }
  return w;
}

}  // namespace tandem
