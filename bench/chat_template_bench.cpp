// Time to render a 20-message conversation with a compiled chat template (the template is
// compiled once, as at load; each render builds the message values, runs the template and
// cuts the segments, as the server does per request).
//
//   chat_template_bench [--model PATH|default] [--template FILE]... [--iterations N]
//
// Renders with the model's own template and with each --template file (e.g. from
// $TANDEM_HOME/chat-templates); prints microseconds per render (median of 5 runs).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/chat/chat_template.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model_path.h"

namespace {

std::vector<tandem::chat_message> conversation() {
  std::vector<tandem::chat_message> msgs = {{"system", "You are a helpful assistant. Answer briefly."}};
  const char* questions[] = {"What is the capital of France?", "And of Italy?", "Which is larger?",
                             "How many people live there?", "What river runs through it?"};
  const char* answers[] = {"Paris.", "Rome.", "Paris has more inhabitants than Rome within its metro area.",
                           "About 2.1 million in the city proper.", "The Seine."};
  for (int i = 0; msgs.size() < 20; ++i) {
    msgs.push_back({"user", std::string(questions[i % 5]) + " (" + std::to_string(i) + ")"});
    if (msgs.size() < 20) msgs.push_back({"assistant", answers[i % 5]});
  }
  return msgs;
}

double micros_per_render(const tandem::chat_template& t, const std::vector<tandem::chat_message>& msgs, int n) {
  std::vector<double> runs;
  size_t sink = 0;
  for (int r = 0; r < 5; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) sink += t.render_segments(msgs, true).size();
    const std::chrono::duration<double, std::micro> d = std::chrono::steady_clock::now() - start;
    runs.push_back(d.count() / n);
  }
  if (sink == 0) std::fprintf(stderr, "empty renders\n");
  std::sort(runs.begin(), runs.end());
  return runs[2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "default";
  std::vector<std::string> files;
  int iterations = 2000;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--model") && i + 1 < argc) {
      model = argv[++i];
    } else if (!std::strcmp(argv[i], "--template") && i + 1 < argc) {
      files.emplace_back(argv[++i]);
    } else if (!std::strcmp(argv[i], "--iterations") && i + 1 < argc) {
      iterations = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: chat_template_bench [--model PATH|default] [--template FILE]... [--iterations N]\n");
      return 2;
    }
  }
  try {
    const auto msgs = conversation();
    const auto f = tandem::gguf::file::open(tandem::resolve_model_path(model));
    const auto own = tandem::chat_template::from_gguf(f);
    std::printf("chat_template_bench: %zu messages, %d renders x 5\n", msgs.size(), iterations);
    std::printf("  %-48s %8.1f us/render\n", "model's own template", micros_per_render(own, msgs, iterations));
    for (const auto& path : files) {
      try {
        const auto t = tandem::chat_template::from_file(path, "<s>", "</s>");
        const std::string name = path.substr(path.find_last_of('/') + 1);
        std::printf("  %-48s %8.1f us/render\n", name.c_str(), micros_per_render(t, msgs, iterations));
      } catch (const std::exception& e) {
        std::printf("  %-48s rejects the conversation: %s\n", path.c_str(), e.what());
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chat_template_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
