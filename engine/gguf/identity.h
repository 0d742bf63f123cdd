// A model file's identity, for keys that must tell two models apart (the prefix cache's
// salt, engine/kv/cache_salt.h): a hash of the file's size, its whole header (metadata and
// tensor descriptions: name, architecture, shapes, quant types, tokenizer) and 16 windows of
// 4 KiB spread evenly over its tensor data (two fine-tunes of one base share every header
// byte, not their weights).
//
// It depends on the bytes only, not on the path or the file's times: a cluster's router and
// nodes, each with its own copy of the file, compute the same identity. It reads 64 KiB of
// weights at most (a router that never computes maps them, and faults in only those pages).
#pragma once

#include <cstdint>

#include "engine/gguf/gguf.h"

namespace tandem::gguf {

uint64_t model_identity(const file& f);

}  // namespace tandem::gguf
