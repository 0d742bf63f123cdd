#include "engine/model/model_truncation.h"

#include <stdexcept>
#include <string>

#include "engine/model/model_config.h"

namespace tandem {

gguf::writer truncate_layers(const gguf::file& f, uint32_t n_layers) {
  const auto cfg = read_model_config(f);
  if (n_layers == 0 || n_layers >= cfg.n_layer) {
    throw std::invalid_argument("--layers must be between 1 and " + std::to_string(cfg.n_layer - 1));
  }
  gguf::writer w(f.alignment());
  for (const auto& [key, v] : f.metadata()) {
    if (key == "general.alignment") continue;  // the writer sets it
    w.set(key, v);
  }
  w.set_u32(cfg.architecture + ".block_count", n_layers);
  for (const auto& t : f.tensors()) {
    if (t.name.rfind("blk.", 0) == 0) {
      const auto layer = std::stoul(t.name.substr(4, t.name.find('.', 4) - 4));
      if (layer >= n_layers) continue;
    }
    std::vector<int64_t> shape(t.ne.begin(), t.ne.begin() + t.n_dims);
    w.add_tensor(t.name, t.type, std::move(shape), std::vector<std::byte>(t.data, t.data + t.nbytes));
  }
  return w;
}

}  // namespace tandem
