#include "engine/lora/adapter_choice.h"

#include <cmath>

namespace tandem::lora {

std::string adapter_list(std::span<const adapter_option> adapters) {
  if (adapters.empty()) return "none";
  std::string s;
  for (size_t i = 0; i < adapters.size(); ++i) {
    if (i > 0) s += ", ";
    s += adapters[i].name + " (id " + std::to_string(i) + ")";
  }
  return s;
}

bool valid_adapter_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

adapter_choice choose_adapter(std::span<const adapter_option> adapters, const std::string& model,
                              std::span<const int32_t> lora_ids, std::span<const float> lora_scales,
                              const std::string& tenant_default) {
  adapter_choice c;
  auto fail = [&](uint16_t status, std::string param, std::string error) {
    c = {};
    c.status = status;
    c.param = std::move(param);
    c.error = std::move(error) + "; this server's adapters: " + adapter_list(adapters);
    return c;
  };
  if (!lora_ids.empty()) {
    if (lora_ids.size() != lora_scales.size()) return fail(400, "lora", "ids and scales differ in number");
    for (size_t i = 0; i < lora_ids.size(); ++i) {
      const int32_t id = lora_ids[i];
      if (id < 0 || static_cast<size_t>(id) >= adapters.size()) {
        return fail(400, "lora", "there is no adapter with id " + std::to_string(id));
      }
      if (!std::isfinite(lora_scales[i])) return fail(400, "lora", "a scale must be a finite number");
      if (lora_scales[i] == 0.0f) continue;
      if (c.id >= 0 && c.id != id) {
        return fail(400, "lora", "more than one adapter with a nonzero scale (Tandem applies one per request)");
      }
      c.id = id;
      c.scale = lora_scales[i];
    }
    return c;
  }
  if (const size_t colon = model.rfind(':'); colon != std::string::npos && !adapters.empty()) {
    const std::string name = model.substr(colon + 1);
    for (size_t i = 0; i < adapters.size(); ++i) {
      if (adapters[i].name == name) {
        c.id = static_cast<int32_t>(i);
        c.scale = adapters[i].scale;
        return c;
      }
    }
    return fail(404, "model", "the model '" + model + "' names no adapter of this server");
  }
  if (!tenant_default.empty()) {
    for (size_t i = 0; i < adapters.size(); ++i) {
      if (adapters[i].name == tenant_default) {
        c.id = static_cast<int32_t>(i);
        c.scale = adapters[i].scale;
        return c;
      }
    }
    return fail(500, "", "the tenant's default adapter '" + tenant_default + "' is not loaded");
  }
  return c;
}

}  // namespace tandem::lora
