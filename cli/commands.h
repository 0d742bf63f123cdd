// Subcommands of build/bin/tandem. Each lives in its own cmd_<name>.cpp and registers
// itself on the root app; main.cpp calls the registrations in the order shown by --help.
#pragma once

#include <CLI/CLI.hpp>

namespace tandem::cli {

void register_info(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_detokenize(CLI::App& app);
void register_chat_template(CLI::App& app);
void register_gen_model(CLI::App& app);
void register_serve(CLI::App& app);
void register_generate(CLI::App& app);
void register_truncate_model(CLI::App& app);
void register_quantize(CLI::App& app);

// Exit codes: 0 ok, 1 runtime failure (bad file, missing model), 2 usage error (CLI11's own).
inline constexpr int kExitFailure = 1;

}  // namespace tandem::cli
