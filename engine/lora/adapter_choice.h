// Which LoRA adapter a request runs with, from what it says (plain C++; admission calls it
// once the caller's tenant is known, so only an authorised caller learns the adapters' names):
//
//   1. llama-server's "lora" field, [{"id": N, "scale": S}]: N indexes the server's adapters
//      (--lora, in order); an adapter not listed has scale 0. Tandem runs one adapter per
//      sequence, so at most one entry may have a nonzero scale; none nonzero: the base.
//   2. else a model name "<model>:NAME" whose NAME is an adapter (the part before ':' picks
//      the model); a ':NAME' naming none while the server has adapters is a 404 naming them
//      (a server without adapters takes any model name as its own, as before).
//   3. else the tenant's default adapter (tenant_config::lora), at its default scale.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tandem::lora {

struct adapter_option {
  std::string name;
  float scale = 1.0f;  // the scale a request naming it by name gets
};

struct adapter_choice {
  int32_t id = -1;  // -1: the base model
  float scale = 0.0f;
  uint16_t status = 200;  // 400 or 404 with an error
  std::string error;
  std::string param;  // the request field at fault
};

adapter_choice choose_adapter(std::span<const adapter_option> adapters, const std::string& model,
                              std::span<const int32_t> lora_ids, std::span<const float> lora_scales,
                              const std::string& tenant_default);

// "a, b, c" (or "none"): for error messages.
std::string adapter_list(std::span<const adapter_option> adapters);

// Whether `name` may name an adapter: 1 to 64 of [A-Za-z0-9._-] (no ':', which separates it
// from the model's name).
bool valid_adapter_name(const std::string& name);

}  // namespace tandem::lora
