// build/bin/tandem: Tandem's command line.
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "tandem/version.h"

int main(int argc, char** argv) {
  CLI::App app{"Tandem: LLM inference server and embeddable runtime", "tandem"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tandem " TANDEM_VERSION_STRING);

  tandem::cli::register_info(app);
  tandem::cli::register_tokenize(app);
  tandem::cli::register_detokenize(app);
  tandem::cli::register_chat_template(app);
  tandem::cli::register_gen_model(app);
  tandem::cli::register_serve(app);
  tandem::cli::register_generate(app);
  tandem::cli::register_truncate_model(app);
  tandem::cli::register_quantize(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem: error: %s\n", e.what());
    return tandem::cli::kExitFailure;
  }
  return 0;
}
